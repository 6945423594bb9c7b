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

from sqlalchemy import delete, select

from rebill.db.engine import Database
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
    """Deletes the events created more than ``days`` before ``now`` (real time); returns how
    many went."""
    before = cutoff(now, days)
    if before is None:
        return 0
    old = events.c.created_at < before
    removed, after = 0, 0
    while True:
        # No index on `created_at`: each batch starts past the last one's ids (the primary
        # key), so that a run reads the table about once, never again the rows it deleted
        # (PostgreSQL keeps them until its vacuum); the last, short batch reads the rest and
        # ends the run. Once an hour, that costs less than an index every event written pays.
        batch = select(events.c.id).where(events.c.id > after, old).order_by(events.c.id).limit(PURGE_BATCH)
        with db.write() as conn:
            gone = conn.execute(delete(events).where(events.c.id.in_(batch.scalar_subquery()), old)
                                .returning(events.c.id)).scalars().all()
        removed += len(gone)
        if len(gone) < PURGE_BATCH:
            return removed
        after = max(gone)
