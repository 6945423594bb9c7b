"""Moving a sandbox store's test clock (decisions §6.11, §6.12): forward only, a day at a
time, running the billing run after each step, so everything that falls due inside the
advance happens in order, as if the time had really passed."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime, timedelta

from sqlalchemy import update

from rebill.db.engine import Database
from rebill.errors import Forbidden, NotFound, ValidationFailed
from rebill.models import stores

from ..payment.gateway import Gateway
from ..store import clock as store_clock
from ..store import repository as store_repo
from ..store.model import Store
from ..unit import zone
from . import run

DAY = timedelta(days=1)


def advance(db: Database, gateway: Gateway, real_now: Callable[[], datetime], store_id: int, *,
            days: int | None = None, to: date | None = None,
            progress: Callable[[date], None] | None = None) -> tuple[datetime, run.Summary]:
    """Moves the store's clock by ``days`` x 24 h, or to ``to`` at the same time of day;
    returns the store's new "now" and what the billing runs on the way did."""
    store = _store(db, store_id)
    if not store.sandbox:
        raise Forbidden("Only a sandbox store can move its clock")
    now = real_now() + store_clock.offset(store)
    target = _target(store, now, days, to)
    summary = run.Summary()
    while now < target:
        now = min(now + DAY, target)
        store = _set(db, store, now, real_now)
        run.run_store(db, gateway, store, store_clock.clock_for(store, real_now), summary=summary)
        if progress is not None:
            progress(now.astimezone(zone(store.timezone)).date())
    return now, summary


def _target(store: Store, now: datetime, days: int | None, to: date | None) -> datetime:
    if (days is None) == (to is None):
        raise ValidationFailed.field("days", "give either days or to")
    if days is not None:
        if isinstance(days, bool) or not isinstance(days, int) or days < 1:
            raise ValidationFailed.field("days", "must be a whole number of days, at least 1")
        if days > 36_500:
            raise ValidationFailed.field("days", "must be at most 36500")
        return now + days * DAY
    local = now.astimezone(zone(store.timezone))
    assert to is not None
    if to <= local.date():
        raise ValidationFailed.field("to", f"must be after the store's today ({local.date().isoformat()})")
    if (to - local.date()).days > 36_500:
        raise ValidationFailed.field("to", "must be at most 36500 days ahead")
    # NOTE: decisions §6.12, `to` keeps the time of day.
    return datetime.combine(to, local.timetz()).astimezone(now.tzinfo)


def _set(db: Database, store: Store, now: datetime, real_now: Callable[[], datetime]) -> Store:
    seconds = math.ceil((now - real_now()).total_seconds())
    with db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == store.id, stores.c.clock_offset_seconds < seconds)
                     .values(clock_offset_seconds=seconds))
        fresh = store_repo.get(conn, store.id)
    store_clock.moved(store, seconds)
    assert fresh is not None
    return fresh


def _store(db: Database, store_id: int) -> Store:
    with db.read() as conn:
        store = store_repo.get(conn, store_id)
    if store is None:
        raise NotFound()
    return store
