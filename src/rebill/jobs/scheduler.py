"""The background jobs of `rebill serve`: APScheduler's asyncio scheduler, embedded in the
server's event loop, started and stopped with the ASGI lifespan (docs/dependencies.md).

- every ``regenerate_every`` seconds: the deferred regenerations whose window has passed
  (decisions §5.3, jobs/regenerate.py);
- every ``bill_every`` seconds: the billing run of every store (decisions §6.5);
- every ``purge_every`` seconds: the idempotency keys past their 24 hours go (decisions §9.2),
  the ids of processor events applied more than 30 days ago, webhook deliveries finished more
  than ``delivery_retention_days`` ago with their attempts and payloads, and, when
  ``event_retention_days`` says so, old events (domain/webhook/retention.py,
  domain/event/retention.py);
- all the time: webhook deliveries (jobs/deliver.py), a loop of its own on the event loop,
  woken by every write that queues one and polling twice a second besides.
- every ``batch_every`` seconds, and at once when this process accepts a batch's processing:
  the submitted async batches, one per store at a time (jobs/batches.py).

The jobs only say "look now": the database says what is due, each job is safe to run twice
and from several processes (claims, domain/billing/claim.py), so a missed or doubled tick
delays nothing and pays nothing twice. Each job runs in a worker thread, one at a time
(``max_instances=1``), and ticks missed while one ran are merged (``coalesce``).

Which processes run them (issue 18, ``REBILL_BACKGROUND_JOBS``): ``on``, this one; ``off``,
none; ``auto``, the one process of the deployment that holds the jobs lock while no `rebill
worker` runs (jobs/leader.py), checked every second, so that another takes over when it stops.
`rebill worker` runs the same runner without the API (jobs/worker.py), with ``concurrency``
billing runs and batch runners side by side, which split the work through their claims.
Stopping (a lifespan's end, SIGTERM to a worker) lets every running job finish the batch it
holds within ``jobs_stop_seconds``: billing runs and batch runners are asked to stop between
batches, unsent deliveries are released to other workers.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from starlette.concurrency import run_in_threadpool

from rebill.api import idempotency
from rebill.clock import Clock
from rebill.db.engine import Database, unavailable
from rebill.domain.batch import service as batches
from rebill.domain.billing import inbound
from rebill.domain.billing import run as billing
from rebill.domain.event import retention as event_retention
from rebill.domain.payment.gateway import Gateway
from rebill.domain.store import clock as store_clock
from rebill.domain.store import repository as stores
from rebill.domain.webhook import retention as delivery_retention
from rebill.observability import record
from rebill.settings import Settings

from .batches import BatchRunner
from .deliver import DeliveryRunner
from .failures import StoresFailed, busy, log_failure
from .leader import CHECK_SECONDS, Locks, locks_for
from .regenerate import run_due

logger = logging.getLogger("rebill.jobs")
# A tick that finds the previous run of its job still going is skipped on purpose
# (max_instances=1); APScheduler would warn about each one.
logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)


def bill_every_store(db: Database, gateway: Gateway, clock: Clock, stale_after: timedelta,
                     stop: Callable[[], bool] | None = None) -> int:
    """One billing run over every store, each on its own clock; returns the charges processed.
    ``stop`` is asked before each store and each batch (billing/run.py)."""
    began = time.monotonic()
    with db.read() as conn:
        found = stores.all_stores(conn)
    processed = 0
    failed: list[int] = []
    busy = True  # whether every failure was the database's, busy or away
    for store in found:
        if stop is not None and stop():
            break
        try:
            summary = billing.run_store(db, gateway, store, store_clock.clock_for(store, clock.now),
                                        stale_after=stale_after, stop=stop)
        except Exception as exc:
            # One store's failure must not keep the stores after it from being billed: it is
            # logged here, and the run ends failed once every other store had its turn.
            log_failure(logger, f"billing run: store {store.id}", exc)
            failed.append(store.id)
            busy = busy and unavailable(exc)
            continue
        record.billing_store(store.id, summary)  # issue 18: its figures and log line
        processed += summary.processed
    record.billing_run(time.monotonic() - began)
    if failed:
        raise StoresFailed(failed, processed, busy)
    return processed


class Jobs:
    """The job runner: an ASGI wrapper that runs the scheduler while the server lives (as
    ``REBILL_BACKGROUND_JOBS`` says) and passes every other scope on; `rebill worker` drives
    it without a server (``start``, ``stop``)."""

    def __init__(self, app: Any, db: Database, clock: Clock, gateway: Gateway, settings: Settings, *,
                 services: Any = None, concurrency: int = 1, role: str = "serve") -> None:
        self.app, self.db, self.clock, self.gateway, self.settings = app, db, clock, gateway, settings
        self.services = services if services is not None else app.services
        self.concurrency, self.role = max(1, concurrency), role
        self.scheduler: AsyncIOScheduler | None = None
        self.deliveries: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._running: set[asyncio.Task[Any]] = set()
        self._locks: Locks | None = None
        self._leading: asyncio.Task[None] | None = None
        self._said = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    # Which process runs them ---------------------------------------------------------

    async def open(self) -> None:
        """The process starts: runs the jobs, or not, or as the deployment's leader decides."""
        mode = self.settings.background_jobs
        if mode == "off":
            self._say(f"background jobs: off in process {os.getpid()} (REBILL_BACKGROUND_JOBS=off)")
        elif mode == "on":
            # A worker runs them whatever the setting says (it is the API processes').
            said = "" if self.role == "worker" else "REBILL_BACKGROUND_JOBS=on, "
            self._say(f"background jobs: process {os.getpid()} runs them ({self.role}, {said}"
                      f"concurrency {self.concurrency})")
            self.start()
        else:
            self._locks = locks_for(self.db, self.role, self.settings.idle_transaction_seconds)
            await self._check()
            self._leading = asyncio.ensure_future(self._keep_checking())

    async def close(self) -> None:
        """The process stops: no more ticks, running jobs finish their batch, locks go."""
        leading, self._leading = self._leading, None
        if leading is not None:
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
        await self.stop()
        locks, self._locks = self._locks, None
        if locks is not None:
            await run_in_threadpool(locks.close)

    async def _keep_checking(self) -> None:
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self._check()
            except Exception as exc:  # the next check tries again
                log_failure(logger, "background jobs: checking the jobs lock", exc)

    async def _check(self) -> None:
        """``auto``: run the jobs while this process holds the jobs lock and no worker runs."""
        assert self._locks is not None
        leads, workers = await run_in_threadpool(self._look, self._locks)
        if leads and not workers:
            if self.scheduler is None:
                self._say(f"background jobs: process {os.getpid()} runs them (it holds the deployment's jobs lock)")
                self.start()
            return
        if self.scheduler is not None:
            await self.stop()
        self._say(f"background jobs: process {os.getpid()} leaves them to `rebill worker` processes" if workers
                  else f"background jobs: process {os.getpid()} stands by (another process holds the jobs lock)")

    @staticmethod
    def _look(locks: Locks) -> tuple[bool, bool]:
        leads = locks.lead()
        return leads, leads and locks.workers_alive()

    def _say(self, line: str) -> None:
        """Logs what this process does about the jobs, once per change."""
        if line != self._said:
            self._said = line
            logger.info(line)

    # Running them ----------------------------------------------------------------------

    def start(self) -> None:
        """Starts every job (on the running event loop)."""
        if self.scheduler is not None:
            return
        self._stopping = stopping = threading.Event()
        stop = stopping.is_set
        scheduler = self.scheduler = AsyncIOScheduler(job_defaults={"max_instances": 1, "coalesce": True,
                                                                    "misfire_grace_time": None})
        stale = timedelta(seconds=self.settings.claim_stale_seconds)
        # A worker's first ticks come at once: one started on a due day bills now, not in a minute.
        first = {"next_run_time": datetime.now(timezone.utc)} if self.role == "worker" else {}
        if self.settings.regenerate_every > 0:
            scheduler.add_job(self._run, "interval", **first, seconds=self.settings.regenerate_every, id="regenerate",
                              args=("deferred regeneration", run_due, self.db, self.clock))
        # Runs side by side split the due charges and batches between them (their claims).
        for n in range(self.concurrency if self.settings.bill_every > 0 else 0):
            scheduler.add_job(self._run, "interval", **first, seconds=self.settings.bill_every, id=_numbered("bill", n),
                              args=("billing run", bill_every_store, self.db, self.gateway, self.clock, stale, stop))
        if self.settings.purge_every > 0:
            scheduler.add_job(self._run, "interval", **first, seconds=self.settings.purge_every, id="purge",
                              args=("idempotency purge", self._purge))
        if self.settings.batch_every > 0:
            for n in range(self.concurrency):
                batch_runner = BatchRunner(self.services, lease=timedelta(seconds=self.settings.batch_lease_seconds),
                                           stop=stop, starts_per_look=1)
                scheduler.add_job(self._run, "interval", **first, seconds=self.settings.batch_every,
                                  id=_numbered("batches", n), args=("async batches", batch_runner.run_due))
            self._loop = asyncio.get_running_loop()
            batches.on_submitted(self._batch_submitted)
        scheduler.start()
        if self.settings.deliver_webhooks:
            runner = DeliveryRunner(self.db, self.clock.now,
                                    lease=timedelta(seconds=self.settings.delivery_lease_seconds),
                                    private_policy=self.settings.webhook_private_addresses)
            self.deliveries = asyncio.ensure_future(runner.run())

    def _batch_submitted(self) -> None:
        """A batch was submitted (from any thread): the batch job looks now, not at its next tick."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            # In a context of its own: a callback runs in the context it is scheduled from,
            # here the submitting request's (its token as the source of changes, its
            # Idempotency-Key), and the jobs this wakes would inherit it, for every store.
            loop.call_soon_threadsafe(self._look_for_batches, context=contextvars.Context())
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _look_for_batches(self) -> None:
        for n in range(self.concurrency):
            job = self.scheduler.get_job(_numbered("batches", n)) if self.scheduler is not None else None
            if job is not None:
                job.modify(next_run_time=datetime.now(timezone.utc))

    async def stop(self) -> None:
        """Stops the jobs: no new tick; billing runs and batch runners finish the batch they
        hold (they are asked between batches); unsent deliveries are released. Waits for
        them up to ``jobs_stop_seconds``; what is still running then keeps its claims, which
        other workers take over once they lapse."""
        scheduler, self.scheduler = self.scheduler, None
        if scheduler is None:
            return
        self._stopping.set()
        self._loop = None  # a batch submitted later wakes nothing here
        scheduler.shutdown(wait=False)
        deliveries, self.deliveries = self.deliveries, None
        if deliveries is not None:
            deliveries.cancel()  # its runner releases what it claimed and did not send
        pending = [*self._running, *([deliveries] if deliveries is not None else [])]
        if pending:
            _, left = await asyncio.wait(pending, timeout=self.settings.jobs_stop_seconds)
            if left:
                logger.warning("background jobs: %d job(s) still running after %g s; their claims lapse and other "
                               "workers take them over", len(left), self.settings.jobs_stop_seconds)

    def _purge(self) -> int:
        # Real time, never a store's test clock (decisions §6.12); the processor events' ids
        # past their 30 days too (domain/billing/inbound.py), finished webhook deliveries and
        # events past their settings' days. Still counted as the `idempotency purge` job, the
        # name its metrics have always had.
        now, settings = self.clock.now(), self.settings
        return (idempotency.purge_expired(self.db, now) + inbound.purge(self.db, now)
                + delivery_retention.purge(self.db, now, settings.delivery_retention_days)
                + event_retention.purge(self.db, now, settings.event_retention_days))

    async def _run(self, name: str, job: Any, *args: Any) -> None:
        run = record.start_job(name)  # issue 18: counted and logged
        # The job's thread, known to stop(), which waits for it. The scheduler's shutdown cancels
        # this coroutine; the thread is not cancelled by that: it finishes the batch it holds
        # (the stop flag asks it between batches) and gives back what it claimed, and stop()
        # waits for it (found by an audit: the shutdown's cancel ended the wait at once, the
        # process exited mid-chunk and the batch stayed claimed until its lease ran out).
        thread = asyncio.ensure_future(run_in_threadpool(job, *args))
        self._running.add(thread)
        thread.add_done_callback(self._running.discard)
        thread.add_done_callback(lambda done: self._finished(name, run, done))
        try:
            await asyncio.shield(thread)
        except asyncio.CancelledError:
            pass  # stopping: the thread goes on, and is waited for by stop()
        except Exception:  # told by _finished; the next tick tries again
            pass

    @staticmethod
    def _finished(name: str, run: Any, done: asyncio.Future[Any]) -> None:
        if done.cancelled():
            record.finish_job(run, None, False)
            return
        failed = done.exception()
        if failed is not None:  # the next tick tries again; the database says what is still due
            log_failure(logger, name, failed)
        # A database busy or away was told in one warning line: no error line of the run beside
        # it (found by an audit: each blip logged an ERROR too, which alerts key on).
        record.finish_job(run, None if failed is not None else done.result(), failed is None,
                          told=failed is not None and busy(failed))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def watch() -> Any:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.open()
            elif message["type"] == "lifespan.shutdown":
                await self.close()
            return message
        await self.app(scope, watch, send)


def _numbered(name: str, n: int) -> str:
    """The id of a job's ``n``-th copy (0: its plain name)."""
    return name if n == 0 else f"{name}-{n + 1}"
