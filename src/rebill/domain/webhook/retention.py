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
from typing import Any

from sqlalchemy import Connection, delete, exists

from rebill.db.engine import Database
from rebill.db.purge import delete_old
from rebill.models import webhook_deliveries, webhook_payloads

from ..event.retention import cutoff
from .model import PENDING

PURGE_BATCH = 5000


def purge(db: Database, now: datetime, days: float) -> int:
    """Deletes the deliveries finished and unchanged for ``days`` before ``now`` (real time),
    their attempts and the payloads no delivery names any more; returns how many deliveries
    went. A delivery a replay made pending meanwhile stays (db/purge.py)."""
    before = cutoff(now, days)
    if before is None:
        return 0
    d, p = webhook_deliveries, webhook_payloads

    def payloads(conn: Connection, gone: Any) -> None:
        unused = ~exists().where(d.c.payload_id == p.c.id)  # ix_webhook_deliveries_payload
        conn.execute(delete(p).where(p.c.id.in_(sorted({row.payload_id for row in gone})), unused))
    return delete_old(db, d, (d.c.status != PENDING) & (d.c.updated_at < before), batch=PURGE_BATCH,
                      returning=[d.c.payload_id], then=payloads)
