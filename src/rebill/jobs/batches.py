"""Async batches as a background job (decisions §7.7, issue 15; design guide, "Background work"):
a kind of the job runner of `rebill serve` that finds submitted batches in the database, runs
one batch per store at a time, and records every task's result with the task's own change.

For each batch it holds (domain/batch/work.py has the statements):

1. claim the next chunk of tasks (they show `processing`), renewing the batch's lease;
2. in one transaction: run each task through its endpoint's handler (api/tasks.py), each in a
   SAVEPOINT so that a failing task rolls back alone; then record every task's result and the
   batch's counters; COMMIT. A task's change and its `success` are written together: a worker
   that dies mid-chunk leaves its tasks `processing` with nothing done, and whoever takes the
   batch over (once the lease expires) runs them again. No task runs twice.

Throughput (docs/performance.md): many tasks share one transaction and one flush of their
events; the tasks of a type whose use case ends with a replan it does not read (one-time items)
leave it to the end of the chunk, which replans the chunk's addresses once (``Unit.replans``).
A store with webhooks gets each task's events flushed with it, so that a payload renders the
resource as that task left it. If anything beyond one task fails, the chunk rolls back whole
and the batch goes on more carefully: replans at once, then one task per chunk, and a task
that still cannot commit is recorded as failed (500) on its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import DBAPIError, IntegrityError

from rebill import failpoints
from rebill.api import tasks
from rebill.api.call import Services
from rebill.api.versions import VERSIONS
from rebill.db.engine import retryable, unavailable
from rebill.domain.batch import work
from rebill.domain.batch.model import FAILED, SUCCESS, AsyncBatch
from rebill.domain.event import outbox
from rebill.domain.schedule.reconcile import replan
from rebill.domain.store import clock as store_clock
from rebill.domain.store import repository as stores
from rebill.domain.store.model import Store
from rebill.domain.unit import Unit
from rebill.domain.webhook import repository as webhooks
from rebill.errors import Forbidden, ServiceError, Unauthorized
from rebill.observability import record

from .workers import worker_name

logger = logging.getLogger("rebill.batches")
# A task whose transaction PostgreSQL gave up on for a concurrent one's sake runs again, as a
# request's handler does (api/routing.py).
RETRIES = 4
INTERNAL = {"errors": ServiceError.default}
# Careful levels of a batch whose chunk failed as a whole.
AT_ONCE, ONE_BY_ONE = 1, 2
# Seconds a chunk leaves the SQLite write lock to the requests that wanted it meanwhile.
REQUESTS_FIRST = 0.025


class BatchRunner:
    """Runs due batches; ``run_due`` is the job (in a worker thread of `rebill serve`'s job
    runner, or called by tests and the benchmark)."""

    def __init__(self, services: Services, *, real_now: Callable[[], datetime] | None = None,
                 lease: timedelta = timedelta(seconds=30), chunk: int = 200, chunk_seconds: float = 0.2,
                 worker: str | None = None, stop: Callable[[], bool] | None = None,
                 starts_per_look: int | None = None) -> None:
        self.services, self.db = services, services.db
        self.real_now = real_now or services.clock.now
        self.lease, self.chunk, self.chunk_seconds = lease, chunk, chunk_seconds
        self.worker = worker or worker_name()
        # Asked between chunks: a runner told to stop gives its batches back (jobs/scheduler.py).
        self.stop = stop or (lambda: False)
        # How many waiting batches one look may start (None: the next of every store). The job
        # runner starts one a look (a look a second while it runs batches), so that the runners
        # of several workers each take some instead of the first one to look taking them all.
        self.starts_per_look = starts_per_look
        self._careful: dict[int, int] = {}

    # Claims -----------------------------------------------------------------------

    def claim(self) -> list[int]:
        """Takes over running batches whose worker's lease ran out (or that this worker holds
        already), and starts the next submitted batch of each store that runs none; returns the
        batches now held."""
        now = self.real_now()
        until = now + self.lease
        with self.db.read() as conn:
            abandoned, waiting = work.abandoned(conn, now, self.worker), work.waiting(conn)
        held: list[int] = []
        for batch_id in abandoned:
            with self.db.write() as conn:
                if work.take_over(conn, batch_id, self.worker, until, now):
                    held.append(batch_id)
        started = 0
        for batch_id, store_id in waiting:
            if self.starts_per_look is not None and started >= self.starts_per_look:
                break
            try:
                with self.db.write() as conn:
                    store = stores.get(conn, store_id)
                    if store is not None and work.start(conn, batch_id, self.worker, until,
                                                        store_clock.clock_for(store, self.real_now)()):
                        held.append(batch_id)
                        started += 1
            except IntegrityError:
                pass  # another worker started a batch of this store meanwhile: this one waits its turn
        return held

    # The job ----------------------------------------------------------------------

    def run_due(self) -> int:
        """Runs every due batch to its end, a chunk of each in turn (one batch per store),
        looking for newly due ones every second; returns how many tasks ran."""
        ran = 0
        held = [] if self.stop() else self.claim()
        looked = time.monotonic()
        while held:
            if self.stop():
                self._release(held)
                break
            for batch_id in list(held):
                count, more = self.step(batch_id)
                ran += count
                if not more:
                    held.remove(batch_id)
                    self._careful.pop(batch_id, None)
            if not held or time.monotonic() - looked > 1.0:
                held += [b for b in self.claim() if b not in held]
                looked = time.monotonic()
        return ran

    def _release(self, held: list[int]) -> None:
        """Gives the held batches up between chunks: another worker takes each over at once
        (its next chunk claims the tasks still open), not once the lease has run out."""
        with self.db.write() as conn:
            for batch_id in held:
                work.release(conn, batch_id, self.worker)
        self._careful.clear()

    def step(self, batch_id: int) -> tuple[int, bool]:
        """Runs the batch's next chunk; (tasks run, whether the batch goes on)."""
        careful = self._careful.get(batch_id, 0)
        size = 1 if careful >= ONE_BY_ONE else self.chunk
        with self.db.write() as conn:
            batch = work.get(conn, batch_id)
            if batch is None or not work.renew(conn, batch_id, self.worker, self.real_now() + self.lease):
                return 0, False  # deleted with its store, or another worker holds it now
            store = stores.get(conn, batch.store_id)
            assert store is not None  # the batch goes with its store
            at = store_clock.clock_for(store, self.real_now)()
            refused = self._refused(conn, batch, store)
            if refused is not None:
                self._refuse_rest(conn, batch, store, at, refused)
                return 0, False
            task_ids = work.claim_tasks(conn, batch_id, size, at)
            if not task_ids:
                self._close(conn, batch, store, at)
                return 0, False
        failpoints.hit("batch.after_claim")
        try:
            began = time.monotonic()
            ran = self._run(batch_id, task_ids, careful)
            self._let_requests_write(began)
            return ran, True
        except Exception as exc:
            if unavailable(exc):
                # The database's failure, not the tasks' (a restart, or the session of a
                # process frozen past REBILL_IDLE_TRANSACTION_SECONDS ended): nothing of the
                # chunk committed; the job's next look runs it again, at the same pace.
                raise
            if careful >= ONE_BY_ONE:
                logger.exception("async batch %d: task %d could not be recorded; it fails", batch_id, task_ids[0])
                self._record_failure(batch_id, task_ids[0])
                return 1, True
            logger.exception("async batch %d: a chunk failed as a whole; going on more carefully", batch_id)
            self._careful[batch_id] = careful + 1
            return 0, True

    def _let_requests_write(self, since: float) -> None:
        """SQLite: requests that found the write lock taken while the chunk ran try again after
        a pause of up to 20 ms (db/loop_writer.py); the next chunk waits that long for them,
        so that a long batch cannot keep them out until they give up the event loop."""
        writer = self.db.loop_writer
        if writer is not None and writer.refused_at >= since:
            time.sleep(REQUESTS_FIRST)

    # A chunk ----------------------------------------------------------------------

    def _run(self, batch_id: int, task_ids: list[int], careful: int) -> int:
        started = time.monotonic()
        with self.db.write() as conn:
            batch = work.get(conn, batch_id)
            if batch is None or not work.renew(conn, batch_id, self.worker, self.real_now() + self.lease):
                return 0
            store = stores.get(conn, batch.store_id)
            assert store is not None
            at = store_clock.clock_for(store, self.real_now)()
            version = VERSIONS[batch.version]
            kind = tasks.of(batch.version, batch.batch_type)
            # A store with webhooks gets each task's events rendered as that task left them.
            each = bool(webhooks.enabled(conn, store.id))
            # The addresses to replan at the chunk's end, with each as a task locked and read it
            # (a replan_later kind changes no address): the replan reads none of them again.
            later: dict[int, Any] | None = {} if kind.replan_later and not careful else None
            raw = conn.connection.dbapi_connection
            results: list[tuple[int, str, Any]] = []
            for task_id, body in work.bodies(conn, task_ids):
                mine: dict[int, Any] | None = {} if later is not None else None
                buffer = outbox.buffer(conn)  # a flush takes the list away: this task's own
                mark = len(buffer)
                status, output = 500, INTERNAL
                handed_on = False
                for attempt in range(1, RETRIES + 1):
                    raw.execute("SAVEPOINT task")
                    try:
                        call = tasks.TaskCall(version, store, self.services, conn, at, batch.token_id, dict(body),
                                              {}, mine)
                        status, output = tasks.run(kind, call)
                        if status < 300 and each:
                            outbox.flush(conn)
                    except Exception as exc:  # noqa: BLE001 - the endpoint would answer 500
                        status, output = 500, INTERNAL
                        given_up = isinstance(exc, DBAPIError) and retryable(exc)
                        # The chunk's earlier tasks hold their locks (addresses, in task order)
                        # to its commit: a deadlock with one of them comes back at every try in
                        # this transaction. The chunk ends before this task, which runs first
                        # in the next one, with no lock held.
                        handed_on = given_up and bool(results)
                        again = given_up and not handed_on and attempt < RETRIES
                        if not again and not handed_on:
                            logger.exception("async batch %d: task %d failed unexpectedly", batch_id, task_id)
                    else:
                        again = False
                    if status >= 300:
                        raw.execute("ROLLBACK TO task")
                        del buffer[mark:]
                        if mine is not None:
                            mine.clear()
                    raw.execute("RELEASE task")
                    if not again:
                        break
                    time.sleep(0.005 * attempt)
                if handed_on:
                    break  # it and the rest of the chunk's claimed tasks go with the next one
                if later is not None and mine:
                    for address_id, address in mine.items():  # an address read wins over none
                        later[address_id] = address or later.get(address_id)
                results.append((task_id, SUCCESS if status < 300 else FAILED,
                                {"status_code": status, "output": output}))
                if time.monotonic() - started > self.chunk_seconds:
                    break  # the rest of the chunk's claimed tasks go with the next one
            if later:
                replan(Unit(conn, store, at, origin="batch", token_id=batch.token_id), list(later),
                       locked={i: a for i, a in later.items() if a is not None})
            outbox.flush(conn)
            work.record(conn, batch_id, results, at)
            if work.finished(conn, batch_id):
                self._close(conn, batch, store, at)
            failpoints.hit("batch.before_commit")
        record.batch_tasks(batch_id, store.id, results, time.monotonic() - started)  # issue 18: committed
        return len(results)

    def _close(self, conn: Any, batch: AsyncBatch, store: Store, at: datetime, status: str = "completed") -> None:
        """NOTE: decisions §7.7 item 9, a batch whose tasks have all run is completed, even
        when some failed; `async_batch/processed` goes to the event log."""
        work.close(conn, batch.id, at, status)
        unit = Unit(conn, store, at, origin="batch", token_id=batch.token_id)
        unit.record("async_batch/processed", batch.id, {"id": batch.id, "status": status})
        outbox.flush(conn)

    @staticmethod
    def _refused(conn: Any, batch: AsyncBatch, store: Store) -> ServiceError | None:
        """What the edge would now answer the batch's requests before any of them ran: its store
        uninstalled (403), or its token revoked (401; found by an audit: a revoked token's batch,
        waiting for its turn, still ran its tasks, a leaked token's writes among them). Looked
        at before each chunk, so a batch stops within a chunk of the revocation."""
        if not store.installed:
            return Forbidden("The store is not installed")
        if batch.token_id is not None:
            token = stores.token_record(conn, batch.token_id)
            if token is None or token.revoked_at is not None:
                return Unauthorized()
        return None

    def _refuse_rest(self, conn: Any, batch: AsyncBatch, store: Store, at: datetime, error: ServiceError) -> None:
        """What is left of the batch answers as the edge would, and the batch is `failed`."""
        refused = {"status_code": error.status, "output": {"errors": error.errors}}
        left = work.claim_tasks(conn, batch.id, 1_000_000, at)
        work.record(conn, batch.id, [(task_id, FAILED, refused) for task_id in left], at)
        self._close(conn, batch, store, at, FAILED)

    def _record_failure(self, batch_id: int, task_id: int) -> None:
        with self.db.write() as conn:
            batch = work.get(conn, batch_id)
            if batch is None or not work.renew(conn, batch_id, self.worker, self.real_now() + self.lease):
                return
            store = stores.get(conn, batch.store_id)
            assert store is not None
            at = store_clock.clock_for(store, self.real_now)()
            failure = [(task_id, FAILED, {"status_code": 500, "output": INTERNAL})]
            work.record(conn, batch_id, failure, at)
            if work.finished(conn, batch_id):
                self._close(conn, batch, store, at)
        record.batch_tasks(batch_id, store.id, failure, 0.0)
