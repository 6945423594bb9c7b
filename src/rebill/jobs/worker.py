"""`rebill worker`: a process that runs the background jobs and serves no request (issue 18,
docs/operations.md "Background jobs").

It runs the job runner of `rebill serve` (jobs/scheduler.py) as it is, without the API: billing
runs, deferred regenerations, the purge, webhook deliveries and async batches, ``concurrency``
billing runs and batch runners side by side, its first ticks at once. Several workers on one
database split the work through the same claims and leases that make every job safe to run
twice. While it runs it holds the workers mark (jobs/leader.py), which tells the API processes
in ``auto`` mode to leave the jobs to it.

It never migrates: it waits until the database's schema is the one it knows (`rebill migrate`
or a starting `rebill serve` applies migrations), so that workers started with a new version
beside the API wait for its migration instead of racing it.

SIGTERM or SIGINT stops it cleanly: no new tick, each running job finishes the batch it holds
(a billing batch paid and recorded, a chunk of batch tasks committed, deliveries in flight
answered and recorded; claimed deliveries not yet sent and held batches are given back at
once) within ``REBILL_JOBS_STOP_SECONDS``, then it exits 0. A second signal exits at once; so
does SIGKILL: what it held is taken over by the other workers once its claims go stale.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import make_url
from starlette.concurrency import run_in_threadpool

from rebill.app import build_services
from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import alembic_config
from rebill.observability.metrics import serve_worker
from rebill.settings import Settings

from .failures import log_failure
from .leader import CHECK_SECONDS, Locks, locks_for
from .scheduler import Jobs

logger = logging.getLogger("rebill.jobs")
# How often a worker looks again at a schema that is not yet the one it knows.
SCHEMA_SECONDS = 2.0


def schema_current(db: Database, url: str) -> bool:
    """Whether the database's migrations are exactly this version's heads. A SQLite file that is
    not there is not opened (which would make it): the worker waits for `rebill migrate` to
    make it, and a mistyped path leaves nothing behind (found by an audit)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and not Path(parsed.database).exists():
        return False
    heads = set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
    with db.engine.connect() as conn:
        return set(MigrationContext.configure(conn).get_current_heads()) == heads


async def run(settings: Settings, *, concurrency: int = 1,
              started: Callable[[], None] | None = None) -> int:
    """Runs the jobs until SIGTERM or SIGINT; returns the exit status."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def on_signal(number: int) -> None:
        if stopping.is_set():
            logger.warning("worker %d: %s again, exiting at once", os.getpid(), signal.Signals(number).name)
            os._exit(1)
        logger.info("worker %d: %s, stopping (finishing the batches it holds)", os.getpid(),
                    signal.Signals(number).name)
        stopping.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, on_signal, number)

    db = Database.from_url(settings.database_url, echo=settings.echo_sql,
                            idle_transaction_seconds=settings.idle_transaction_seconds)
    try:
        said = False
        while not await run_in_threadpool(schema_current, db, settings.database_url):
            if not said:
                logger.warning("worker %d: the database's schema is not this version's; waiting for "
                               "`rebill migrate` (or a starting `rebill serve`) to migrate it", os.getpid())
                said = True
            try:
                await asyncio.wait_for(stopping.wait(), SCHEMA_SECONDS)
                return 0
            except asyncio.TimeoutError:
                pass
        clock = SystemClock()
        # Its own figures on REBILL_WORKER_METRICS_ADDRESS when REBILL_METRICS is on.
        stop_metrics = serve_worker(settings, db, clock)
        services = build_services(settings, db, clock)
        jobs = Jobs(None, db, clock, services.gateway, settings.with_(background_jobs="on"), services=services,
                    concurrency=concurrency, role="worker")
        locks = locks_for(db, "worker", settings.idle_transaction_seconds)
        # Marked before the jobs start: an API process that ran them stops within a check.
        await run_in_threadpool(locks.mark_worker)
        marking = asyncio.ensure_future(_keep_marked(locks))
        await jobs.open()
        if started is not None:
            started()
        await stopping.wait()
        await jobs.close()
        marking.cancel()
        await asyncio.gather(marking, return_exceptions=True)
        await run_in_threadpool(locks.close)
        if stop_metrics is not None:
            stop_metrics()
        logger.info("worker %d: stopped", os.getpid())
        return 0
    finally:
        db.dispose()


async def _keep_marked(locks: Locks) -> None:
    """Keeps the workers mark (taken again after a lost connection) while the worker runs."""
    while True:
        await asyncio.sleep(CHECK_SECONDS)
        try:
            await run_in_threadpool(locks.mark_worker)
        except Exception as exc:  # the next check tries again
            log_failure(logger, "worker: keeping the workers mark", exc)
