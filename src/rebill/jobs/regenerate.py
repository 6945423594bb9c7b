"""Run the deferred regenerations whose 5-second window has passed (decisions §5.3).

Safe to run at any time and from several processes: the rows say what is due, and a replan
of an address whose charges already agree changes nothing."""

from __future__ import annotations

from collections import defaultdict

from rebill.clock import Clock
from rebill.db.engine import Database
from rebill.domain.schedule import pending
from rebill.domain.schedule.reconcile import replan
from rebill.domain.store import clock as store_clock
from rebill.domain.store import repository as stores
from rebill.domain.unit import Unit


def run_due(db: Database, clock: Clock, *, store_id: int | None = None) -> int:
    """Replans every address whose deferred regeneration is due; returns how many. The window
    is real time (store/clock.py); what the replan writes is stamped with the store's clock
    (decisions §6.12: found by an audit, a sandbox store's regenerated charges and their
    `charge/updated` events carried the real date, before the charge's own creation)."""
    now = clock.now()
    with db.write() as conn:
        due: dict[int, list[int]] = defaultdict(list)
        for owner, address_id in pending.due(conn, now, store_id=store_id):
            due[owner].append(address_id)
        for owner, address_ids in due.items():
            store = stores.get(conn, owner)
            if store is not None:
                replan(Unit(conn, store, store_clock.clock_for(store, lambda: now)), address_ids)
    return sum(len(ids) for ids in due.values())
