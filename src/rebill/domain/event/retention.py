"""How long events are kept (``REBILL_EVENT_RETENTION_DAYS``; docs/webhooks.md, "Retention"):
the purge job of `rebill serve` or `rebill worker` (jobs/scheduler.py) deletes the events
created more than that many days ago, a batch per transaction. 0, the default, keeps them
forever: `GET /events` is part of the API, so forgetting them is the operator's choice.

Deliveries and payloads name their event without a foreign key: a pending delivery keeps its
payload, so deleting its event never stops it going out (domain/webhook/retention.py).

The age is real time against ``created_at``, which is in the store's time: a sandbox store
whose test clock moved ahead keeps its events until real time passes their cutoff (decisions
§6.12, a test clock never moves real waiting)."""

from __future__ import annotations

from datetime import datetime, timedelta

from rebill.db.engine import Database
from rebill.db.purge import delete_old
from rebill.models import events

PURGE_BATCH = 5000


def cutoff(now: datetime, days: float) -> datetime | None:
    """The moment before which rows are old; None when nothing is (0 days, or more days than
    the calendar holds)."""
    if days <= 0:
        return None
    try:
        return now - timedelta(days=days)
    except OverflowError:
        return None


def purge(db: Database, now: datetime, days: float) -> int:
    """Deletes the events created more than ``days`` before ``now`` (real time), a batch per
    transaction (db/purge.py); returns how many went."""
    before = cutoff(now, days)
    if before is None:
        return 0
    return delete_old(db, events, events.c.created_at < before, batch=PURGE_BATCH)
