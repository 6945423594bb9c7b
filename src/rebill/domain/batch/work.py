"""The batch job's statements (design guide, "Background work"): find the batches that are due,
claim one per store with a lease, claim its next tasks, record what they did.

A batch is claimed, not its tasks one by one: one worker runs a batch, its tasks in id order,
and renews its lease with every chunk of tasks. Claimed tasks show `processing`; a chunk's
tasks are recorded in the transaction that made their changes, so a worker that dies leaves
them `processing` with nothing done, and whoever takes the batch over runs them again. Leases
are in real time (a sandbox store's test clock does not move them); the batch's own times are
the store's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, exists, null, or_, select, text, update
from sqlalchemy.orm import aliased

from rebill.db.among import among_bound
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.models import async_batch_tasks, async_batches

from .model import COMPLETED, NOT_STARTED, PENDING, PROCESSING, AsyncBatch

b, t = async_batches, async_batch_tasks
# Written out, not bound: SQLite uses a partial index only for a WHERE that spells its condition.
OPEN = text(f"async_batch_tasks.status IN ('{PENDING}', '{PROCESSING}')")
RUNNING = text(f"async_batches.status = '{PROCESSING}'")
WAITING = text(f"async_batches.status = '{NOT_STARTED}' AND async_batches.submitted_at IS NOT NULL")
_other = aliased(b)

_get = Prepared(select(*columns_for(AsyncBatch, b.c)).where(b.c.id == bindparam("id")))
_abandoned = select(b.c.id).where(RUNNING, or_(
    b.c.claimed_until.is_(None), b.c.claimed_until < bindparam("now"), b.c.claimed_by == bindparam("worker")))
# The first submitted batch of each store that runs none: the others wait their turn.
_waiting = select(b.c.id, b.c.store_id).where(
    WAITING, ~exists().where(_other.c.store_id == b.c.store_id, _other.c.status == PROCESSING),
).order_by(b.c.submitted_at, b.c.submitted_seq, b.c.id).limit(bindparam("limit"))
_take_over = Prepared(update(b).where(
    b.c.id == bindparam("id"), b.c.status == PROCESSING,
    or_(b.c.claimed_until.is_(None), b.c.claimed_until < bindparam("now"), b.c.claimed_by == bindparam("worker")),
).values(claimed_by=bindparam("worker"), claimed_until=bindparam("until")))
_start = Prepared(update(b).where(b.c.id == bindparam("id"), b.c.status == NOT_STARTED,
                                  b.c.submitted_at.is_not(None))
                  .values(status=PROCESSING, claimed_by=bindparam("worker"), claimed_until=bindparam("until"),
                          updated_at=bindparam("now")))
# Also what keeps a second worker out while a chunk runs: on PostgreSQL this row stays locked
# until the chunk commits, and a take-over then finds the lease renewed.
_renew = Prepared(update(b).where(b.c.id == bindparam("id"), b.c.status == PROCESSING,
                                  b.c.claimed_by == bindparam("worker"))
                  .values(claimed_until=bindparam("until")))
_release = Prepared(update(b).where(b.c.id == bindparam("id"), b.c.status == PROCESSING,
                                    b.c.claimed_by == bindparam("worker")).values(claimed_until=null()))
_next = Prepared(select(t.c.id).where(t.c.batch_id == bindparam("batch_id"), OPEN)
                 .order_by(t.c.id).limit(bindparam("limit")))
_claim = Prepared(update(t).where(t.c.id == bindparam("task_id"), t.c.status == PENDING)
                  .values(status=PROCESSING, updated_at=bindparam("now")))
_bodies = Prepared(select(t.c.id, t.c.body).where(among_bound(t.c.id, "ids")).order_by(t.c.id))
_result = Prepared(update(t).where(t.c.id == bindparam("task_id"))
                   .values(status=bindparam("status"), result=bindparam("result"), updated_at=bindparam("now")))
_counted = Prepared(update(b).where(b.c.id == bindparam("id")).values(
    success_task_count=b.c.success_task_count + bindparam("succeeded"),
    fail_task_count=b.c.fail_task_count + bindparam("failed"), updated_at=bindparam("now")))
_left = Prepared(select(t.c.id).where(t.c.batch_id == bindparam("batch_id"), OPEN).limit(1))
_close = Prepared(update(b).where(b.c.id == bindparam("id")).values(
    status=bindparam("status"), closed_at=bindparam("now"), updated_at=bindparam("now"), claimed_by=null(),
    claimed_until=null()))


def get(conn: Connection, batch_id: int) -> AsyncBatch | None:
    row = _get.one(conn, id=batch_id)
    return AsyncBatch(*row) if row else None


def abandoned(conn: Connection, real_now: datetime, worker: str) -> list[int]:
    """Running batches whose worker's lease ran out (it died, or a restart lost it), and this
    worker's own (a job that stopped halfway)."""
    return list(conn.execute(_abandoned, {"now": real_now, "worker": worker}).scalars())


def waiting(conn: Connection, limit: int = 100) -> list[tuple[int, int]]:
    """(batch, store) of the next submitted batch of stores that run none."""
    found: dict[int, int] = {}
    for batch_id, store_id in conn.execute(_waiting, {"limit": limit}):
        found.setdefault(store_id, batch_id)
    return [(batch_id, store_id) for store_id, batch_id in found.items()]


def take_over(conn: Connection, batch_id: int, worker: str, until: datetime, real_now: datetime) -> bool:
    return _take_over.run(conn, id=batch_id, now=real_now, worker=worker, until=until) == 1


def start(conn: Connection, batch_id: int, worker: str, until: datetime, now: datetime) -> bool:
    """`not_started` -> `processing` under this worker's lease. A store that already runs a
    batch refuses it (a unique index, `ix_async_batches_processing`: IntegrityError)."""
    return _start.run(conn, id=batch_id, worker=worker, until=until, now=now) == 1


def renew(conn: Connection, batch_id: int, worker: str, until: datetime) -> bool:
    """Whether this worker still holds the batch (and now for ``until`` more)."""
    return _renew.run(conn, id=batch_id, worker=worker, until=until) == 1


def release(conn: Connection, batch_id: int, worker: str) -> bool:
    """This worker gives the batch up between chunks (it stops): the lease ends now, so that
    another worker's next look takes the batch over (``abandoned``: no lease)."""
    return _release.run(conn, id=batch_id, worker=worker) == 1


def claim_tasks(conn: Connection, batch_id: int, limit: int, now: datetime) -> list[int]:
    """The next ``limit`` tasks still to run, in id order, marked `processing`."""
    ids = [row[0] for row in _next.all(conn, batch_id=batch_id, limit=limit)]
    _claim.run_many(conn, [{"task_id": i, "now": now} for i in ids])
    return ids


def bodies(conn: Connection, task_ids: list[int]) -> list[tuple[int, dict[str, Any]]]:
    return [(row[0], row[1]) for row in _bodies.all(conn, ids=task_ids)]


def record(conn: Connection, batch_id: int, results: list[tuple[int, str, dict[str, Any]]], now: datetime) -> None:
    """Each task's status and result, and the batch's counters, in the caller's transaction."""
    _result.run_many(conn, [{"task_id": i, "status": s, "result": r, "now": now} for i, s, r in results])
    failed = sum(1 for _, status, _ in results if status != "success")
    _counted.run(conn, id=batch_id, succeeded=len(results) - failed, failed=failed, now=now)


def finished(conn: Connection, batch_id: int) -> bool:
    return _left.one(conn, batch_id=batch_id) is None


def close(conn: Connection, batch_id: int, now: datetime, status: str = COMPLETED) -> None:
    _close.run(conn, id=batch_id, status=status, now=now)
