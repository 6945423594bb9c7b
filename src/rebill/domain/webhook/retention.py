"""How long finished webhook deliveries are kept (``REBILL_DELIVERY_RETENTION_DAYS``, 30 days;
docs/webhooks.md, "Retention"): without it the delivery log grows with every event, attempt
and body forever (a 25-minute load test left 950 MB).

The purge job of `rebill serve` or `rebill worker` (jobs/scheduler.py) deletes the deliveries
that succeeded or failed and have not changed for that many days, with their attempts (the
foreign key cascades, on SQLite too: the engine turns foreign keys on), then their payloads
once no delivery names them: one payload serves the deliveries of one event's fan-out, so it
stays while any of them is kept. A pending delivery is never deleted, however old: it still
has to go out (a disabled webhook's waits to be enabled).

Safe beside a replay, which sets a finished delivery back to pending in place (log.py): the
conditions are in the DELETE's own WHERE, so PostgreSQL checks them again on a row changed
meanwhile (READ COMMITTED) and leaves a replayed delivery, and its payload with it, alone; a
replay that comes after the delete finds no delivery (404).

The age is real time against ``updated_at``, which is in the store's time: a sandbox store
whose test clock moved ahead keeps its deliveries until real time passes their cutoff
(decisions §6.12, a test clock never moves real waiting)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, exists, select

from rebill.db.engine import Database
from rebill.models import webhook_deliveries, webhook_payloads

from ..event.retention import cutoff
from .model import PENDING

PURGE_BATCH = 5000


def purge(db: Database, now: datetime, days: float) -> int:
    """Deletes the deliveries finished and unchanged for ``days`` before ``now`` (real time),
    their attempts and the payloads no delivery names any more; returns how many deliveries
    went."""
    before = cutoff(now, days)
    if before is None:
        return 0
    d, p = webhook_deliveries, webhook_payloads
    old = (d.c.status != PENDING) & (d.c.updated_at < before)
    unused = ~exists().where(d.c.payload_id == p.c.id)  # ix_webhook_deliveries_payload
    removed, after = 0, 0
    while True:
        # No index for the look (one on `updated_at` of finished deliveries would cost every
        # delivery's last write, the hot path, for a read once an hour): each batch starts past
        # the last one's ids (the primary key), so that a run reads the table about once and
        # never again the rows it deleted (PostgreSQL keeps them until its vacuum); the last,
        # short batch reads the rest and ends the run. A row a replay changed meanwhile is left
        # out of its batch, which may end the run early: the next one takes the rest.
        batch = select(d.c.id).where(d.c.id > after, old).order_by(d.c.id).limit(PURGE_BATCH)
        with db.write() as conn:
            gone = conn.execute(delete(d).where(d.c.id.in_(batch.scalar_subquery()), old)
                                .returning(d.c.id, d.c.payload_id)).all()
            payload_ids = sorted({row.payload_id for row in gone})
            if payload_ids:
                conn.execute(delete(p).where(p.c.id.in_(payload_ids), unused))
        removed += len(gone)
        if len(gone) < PURGE_BATCH:
            return removed
        after = max(row.id for row in gone)
