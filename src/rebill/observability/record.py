"""The hooks the jobs call, one line each at their call sites (jobs/scheduler.py, jobs/deliver.py,
jobs/batches.py): each counts into this process's figures when metrics are on (``metrics.py``)
and writes the job's log line (``logs.py``). A hook is called after the transaction that made
its figures has committed, so a rolled-back chunk or batch of outcomes counts nothing.
"""

from __future__ import annotations

import contextvars
import logging
import time
from dataclasses import dataclass, field
from random import getrandbits
from typing import Any

from . import metrics
from .logs import jobs_log

# The run a billing run's per-store lines belong to (set in the job's task, copied into the
# worker thread it runs in).
_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar("rebill_job_run", default=None)


@dataclass
class Run:
    job: str
    job_id: str = field(default_factory=lambda: "%016x" % getrandbits(64))
    began: float = field(default_factory=time.monotonic)


def start_job(name: str) -> Run:
    """Marks the start of a job's run in the current task; ``finish_job`` ends it."""
    run = Run(name.replace(" ", "_"))
    _RUN.set(run)
    return run


def finish_job(run: Run, result: Any, ok: bool, *, told: bool = False) -> None:
    """Counts the run (``rebill_jobs``, ``rebill_job_duration_seconds``) and writes its line when
    it failed or did something (``result``: what the job returned, a count or a summary);
    ``told``: its failure was told already (the database busy or away, a warning line)."""
    seconds = time.monotonic() - run.began
    figures = metrics.current()
    if figures is not None:
        figures.job(run.job, seconds, ok)
    if not told and (not ok or result or run.job == "billing_run"):
        level = logging.INFO if ok else logging.ERROR
        if jobs_log.isEnabledFor(level):
            jobs_log.log(level, "%s %s in %.1f ms", run.job, "done" if ok else "failed", seconds * 1000, extra={
                "job": run.job, "job_id": run.job_id, "store_id": None, "result": "ok" if ok else "error",
                "duration_ms": round(seconds * 1000, 3), "count": result if isinstance(result, int) else None})
    _RUN.set(None)


def refused_job(run: Run) -> None:
    """A run a request started that never began its work (the request was refused): neither
    counted nor logged, as a refusal is no failed job."""
    _RUN.set(None)


def billing_store(store_id: int, summary: Any) -> None:
    """A store's part of a billing run (``domain/billing/run.Summary``): counted, and a line
    when it processed charges."""
    figures = metrics.current()
    if figures is not None:
        figures.charges_of(summary)
    if summary.processed and jobs_log.isEnabledFor(logging.INFO):
        run = _RUN.get()
        jobs_log.info("billing run: store %s processed %d charges", store_id, summary.processed, extra={
            "job": "billing_run", "job_id": run.job_id if run else None, "store_id": store_id, "result": "ok",
            "duration_ms": round((time.monotonic() - run.began) * 1000, 3) if run else None,
            "processed": summary.processed, "paid": summary.paid, "pending": summary.pending,
            "failed": summary.failed, "retried": summary.retried, "closed": summary.closed})


def billing_run(seconds: float) -> None:
    figures = metrics.current()
    if figures is not None:
        figures.billing_runs.observe(seconds)


def delivery_attempts(done: list[tuple[Any, Any]], seconds: float) -> None:
    """Attempts whose outcomes were just recorded (``jobs/deliver.py``): (outgoing, outcome) pairs."""
    succeeded = sum(1 for _, outcome in done if outcome.succeeded)
    failed = len(done) - succeeded
    figures = metrics.current()
    if figures is not None:
        figures.delivery_attempts(succeeded, failed)
    if done and jobs_log.isEnabledFor(logging.INFO):
        stores = {outgoing.store_id for outgoing, _ in done}
        jobs_log.info("webhook deliveries: %d attempts recorded, %d failed", len(done), failed, extra={
            "job": "webhook_deliveries", "job_id": "%016x" % getrandbits(64),
            "store_id": next(iter(stores)) if len(stores) == 1 else None, "result": "ok",
            "duration_ms": round(seconds * 1000, 3), "attempts": len(done), "succeeded": succeeded, "failed": failed})


def batch_tasks(batch_id: int, store_id: int, results: list[tuple[int, str, Any]], seconds: float) -> None:
    """A chunk of an async batch's tasks, committed (``jobs/batches.py``): (task id, status, result)."""
    succeeded = sum(1 for _, status, _ in results if status == "success")
    failed = len(results) - succeeded
    figures = metrics.current()
    if figures is not None:
        figures.batch_tasks(succeeded, failed)
    if results and jobs_log.isEnabledFor(logging.INFO):
        run = _RUN.get()
        jobs_log.info("async batch %d: %d tasks run, %d failed", batch_id, len(results), failed, extra={
            "job": "async_batches", "job_id": run.job_id if run else None, "store_id": store_id, "result": "ok",
            "duration_ms": round(seconds * 1000, 3), "batch_id": batch_id, "tasks": len(results),
            "succeeded": succeeded, "failed": failed})
