"""The background jobs of `rebill serve`: APScheduler's asyncio scheduler, embedded in the
server's event loop, started and stopped with the ASGI lifespan (docs/dependencies.md).

- every ``regenerate_every`` seconds: the deferred regenerations whose window has passed
  (decisions §5.3, jobs/regenerate.py);
- every ``bill_every`` seconds: the billing run of every store (decisions §6.5);
- every ``purge_every`` seconds: the idempotency keys past their 24 hours go (decisions §9.2), and
  the ids of processor events applied more than 30 days ago;
- all the time: webhook deliveries (jobs/deliver.py), a loop of its own on the event loop,
  woken by every write that queues one and polling twice a second besides.
- every ``batch_every`` seconds, and at once when this process accepts a batch's processing:
  the submitted async batches, one per store at a time (jobs/batches.py).

The jobs only say "look now": the database says what is due, each job is safe to run twice
and from several processes (claims, domain/billing/claim.py), so a missed or doubled tick
delays nothing and pays nothing twice. Each job runs in a worker thread, one at a time
(``max_instances=1``), and ticks missed while one ran are merged (``coalesce``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from starlette.concurrency import run_in_threadpool

from rebill.api import idempotency
from rebill.clock import Clock
from rebill.db.engine import Database
from rebill.domain.batch import service as batches
from rebill.domain.billing import inbound
from rebill.domain.billing import run as billing
from rebill.domain.payment.gateway import Gateway
from rebill.domain.store import clock as store_clock
from rebill.domain.store import repository as stores
from rebill.observability import record
from rebill.settings import Settings

from .batches import BatchRunner
from .deliver import DeliveryRunner
from .regenerate import run_due

logger = logging.getLogger("rebill.jobs")
# A tick that finds the previous run of its job still going is skipped on purpose
# (max_instances=1); APScheduler would warn about each one.
logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)


def bill_every_store(db: Database, gateway: Gateway, clock: Clock, stale_after: timedelta) -> int:
    """One billing run over every store, each on its own clock; returns the charges processed."""
    began = time.monotonic()
    with db.read() as conn:
        found = stores.all_stores(conn)
    processed = 0
    for store in found:
        summary = billing.run_store(db, gateway, store, store_clock.clock_for(store, clock.now), stale_after=stale_after)
        record.billing_store(store.id, summary)  # issue 18: its figures and log line
        processed += summary.processed
    record.billing_run(time.monotonic() - began)
    return processed


class Jobs:
    """ASGI wrapper that runs the scheduler while the server lives and passes every other
    scope on."""

    def __init__(self, app: Any, db: Database, clock: Clock, gateway: Gateway, settings: Settings) -> None:
        self.app, self.db, self.clock, self.gateway, self.settings = app, db, clock, gateway, settings
        self.scheduler: AsyncIOScheduler | None = None
        self.deliveries: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def _start(self) -> None:
        scheduler = self.scheduler = AsyncIOScheduler(job_defaults={"max_instances": 1, "coalesce": True,
                                                                    "misfire_grace_time": None})
        stale = timedelta(seconds=self.settings.claim_stale_seconds)
        if self.settings.regenerate_every > 0:
            scheduler.add_job(self._run, "interval", seconds=self.settings.regenerate_every, id="regenerate",
                              args=("deferred regeneration", run_due, self.db, self.clock))
        if self.settings.bill_every > 0:
            scheduler.add_job(self._run, "interval", seconds=self.settings.bill_every, id="bill",
                              args=("billing run", bill_every_store, self.db, self.gateway, self.clock, stale))
        if self.settings.purge_every > 0:
            scheduler.add_job(self._run, "interval", seconds=self.settings.purge_every, id="purge",
                              args=("idempotency purge", self._purge))
        if self.settings.batch_every > 0:
            batch_runner = BatchRunner(self.app.services, lease=timedelta(seconds=self.settings.batch_lease_seconds))
            scheduler.add_job(self._run, "interval", seconds=self.settings.batch_every, id="batches",
                              args=("async batches", batch_runner.run_due))
            self._loop = asyncio.get_running_loop()
            batches.on_submitted(self._batch_submitted)
        scheduler.start()
        if self.settings.deliver_webhooks:
            runner = DeliveryRunner(self.db, self.clock.now,
                                    lease=timedelta(seconds=self.settings.delivery_lease_seconds))
            self.deliveries = asyncio.ensure_future(runner.run())

    def _batch_submitted(self) -> None:
        """A batch was submitted (from any thread): the batch job looks now, not at its next tick."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._look_for_batches)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _look_for_batches(self) -> None:
        job = self.scheduler.get_job("batches") if self.scheduler is not None else None
        if job is not None:
            job.modify(next_run_time=datetime.now(timezone.utc))

    def _purge(self) -> int:
        # Real time, never a store's test clock (decisions §6.12); the processor events' ids
        # past their 30 days too (domain/billing/inbound.py).
        return idempotency.purge_expired(self.db, self.clock.now()) + inbound.purge(self.db, self.clock.now())

    @staticmethod
    async def _run(name: str, job: Any, *args: Any) -> None:
        run, result, ok = record.start_job(name), None, True  # issue 18: counted and logged
        try:
            result = await run_in_threadpool(job, *args)
        except Exception:  # the next tick tries again; the database says what is still due
            ok = False
            logger.exception("%s failed", name)
        record.finish_job(run, result, ok)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def watch() -> Any:
            message = await receive()
            if message["type"] == "lifespan.startup" and self.scheduler is None:
                self._start()
            elif message["type"] == "lifespan.shutdown" and self.scheduler is not None:
                self.scheduler.shutdown(wait=False)
                self.scheduler = None
                self._loop = None  # a batch submitted later wakes nothing here
                if self.deliveries is not None:
                    self.deliveries.cancel()
                    self.deliveries = None
            return message
        await self.app(scope, watch, send)
