"""`rebill worker`: the background jobs in a process of their own (jobs/worker.py)."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer

from rebill import heap
from rebill.settings import log_format as parse_log_format

from .common import DatabaseOption, settings_for


def register(app: typer.Typer) -> None:
    app.command()(worker)


def worker(
    concurrency: int = typer.Option(1, "--concurrency", min=1, max=64,
                                    help="Billing runs and batch runners side by side in this process"),
    database: Optional[str] = DatabaseOption,
    log_format: Optional[str] = typer.Option(
        None, "--log-format", help="text or json: one JSON object a line (default: $REBILL_LOG_FORMAT or text)"),
) -> None:
    """Run the background jobs (billing runs, webhook deliveries, async batches, deferred
    regenerations, purges) until SIGTERM or SIGINT, serving no request. Start any number, on
    any host, beside `rebill serve` processes that then run none (REBILL_BACKGROUND_JOBS)."""
    from rebill.jobs import worker as jobs_worker
    from rebill.observability import logs
    from rebill.observability.metrics import AddressUnavailable

    try:
        # A worker always runs the jobs: REBILL_BACKGROUND_JOBS is the API processes' (found by
        # an audit: a value for them stopped the worker, and its start line named it).
        settings = settings_for(database, not_read=("REBILL_BACKGROUND_JOBS",))
        if log_format is not None:
            settings = settings.with_(log_format=parse_log_format(log_format))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    logs.configure(settings.log_format, requests=False)
    heap.freeze()  # what the process built lives as long as it (heap.py)
    try:
        code = asyncio.run(jobs_worker.run(settings, concurrency=concurrency))
    except AddressUnavailable as exc:
        raise typer.BadParameter(str(exc)) from None
    raise typer.Exit(code)
