"""`rebill serve`: migrate, make the first store on an empty database, run uvicorn."""

from __future__ import annotations

import logging
import signal
from typing import Optional
from urllib.parse import urlsplit

import typer

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.store import repository as stores_repo
from rebill.domain.store import service as store_service
from rebill.observability import logs
from rebill.observability.logs import logging_config
from rebill.observability.metrics import prepare_directory, remove_directory, run_directory
from rebill.settings import RateLimit, shown_url
from rebill.settings import background_jobs as parse_background_jobs
from rebill.settings import log_format as parse_log_format

from .common import DatabaseOption, err, out, settings_for


def register(app: typer.Typer) -> None:
    app.command()(serve)


def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on"),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on"),
    database: Optional[str] = DatabaseOption,
    rate_limit: Optional[str] = typer.Option(None, "--rate-limit", help="BURST/PER_SECOND, e.g. 40/2, or off"),
    workers: int = typer.Option(1, min=1, help="Worker processes"),
    log_format: Optional[str] = typer.Option(
        None, "--log-format", help="text or json: one JSON object a line (default: $REBILL_LOG_FORMAT or text)"),
    jobs: Optional[str] = typer.Option(
        None, "--jobs", help="Background jobs: auto (one process of the deployment, none while a `rebill worker` "
        "runs), on (every process), off (none: workers run them) (default: $REBILL_BACKGROUND_JOBS or auto)"),
) -> None:
    """Migrate, then serve the API. On an empty database, create store 'default' and print a token."""
    import os

    import uvicorn

    from rebill.http.protocol import HttpProtocol

    try:
        settings = settings_for(database)
        if rate_limit is not None:
            settings = settings.with_(rate_limit=RateLimit.parse(rate_limit))
        if log_format is not None:
            settings = settings.with_(log_format=parse_log_format(log_format))
        if jobs is not None:
            settings = settings.with_(background_jobs=parse_background_jobs(jobs))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    # Issue 18: logs in the chosen format in every process (uvicorn applies log_config in each
    # worker it starts); the processes' figures meet in one directory, made empty before any of
    # them starts (observability/metrics.py). JSON: every line of this process is one too.
    json_logs = settings.log_format == "json"
    if json_logs:
        logs.configure("json", requests=settings.request_lines)
    log = logging.getLogger("rebill.serve")
    metrics_dir = None
    if settings.metrics:
        try:
            metrics_dir = prepare_directory(run_directory(f"serve-{port}", settings.metrics_dir))
        except OSError as exc:  # found by an audit: a traceback, where a bad setting is one line
            raise typer.BadParameter(f"REBILL_METRICS_DIR: cannot use {settings.metrics_dir}: "
                                     f"{exc.strerror or exc}") from None
    upgrade(settings.database_url)
    db = Database.from_url(settings.database_url)
    with db.write() as conn:
        if not stores_repo.all_stores(conn):
            now = SystemClock().now()
            store = store_service.create_store(conn, now, name="default")
            raw = store_service.create_token(conn, now, store=store, name="default")
            if json_logs:
                log.info("created store 'default'; its API token is on standard output, shown once")
            else:
                err.print("[bold]Created store 'default'. Its API token (shown once):[/bold]")
            out.print(raw, soft_wrap=True)
    db.dispose()
    # Workers are separate processes: pass settings through the environment.
    os.environ["REBILL_DATABASE_URL"] = settings.database_url
    rl = settings.rate_limit
    os.environ["REBILL_RATE_LIMIT"] = f"{rl.burst}/{rl.per_second:g}" if rl.enabled else "off"
    os.environ["REBILL_LOG_FORMAT"] = settings.log_format
    os.environ["REBILL_BACKGROUND_JOBS"] = settings.background_jobs
    if json_logs:
        log.info("serving on http://%s:%d", host, port, extra={"workers": workers, "metrics_dir": metrics_dir})
    else:
        err.print(f"Serving on http://{host}:{port} ({shown_url(settings.database_url)})"
                  + (f"; GET /metrics on (files in {metrics_dir})" if metrics_dir else ""))
    # Issue 18: the operator learns at start whether the rate limit is shared (docs/operations.md, "Redis").
    parts = urlsplit(settings.redis_url or "")
    where = parts.netloc.rpartition("@")[2] + parts.path  # the host, port and db: never a password
    line = ("Rate limits off" if not rl.enabled else
            f"Rate limits shared through Redis ({where})" if settings.redis_url else
            f"Rate limits are per process (no REBILL_REDIS_URL): each of the {workers} process(es) counts its own")
    if json_logs:
        log.info(line)
    else:
        err.print(line, soft_wrap=True)  # one line, whatever the terminal's width
    if metrics_dir is not None:
        # uvicorn stops gracefully on SIGTERM, then sends it to itself again with the handler
        # it found in place: the default one would end the process before the `finally` below
        # (found by an audit: a single process left its metrics directory behind).
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        # Rebill writes its own line per request (observability/logs.py): uvicorn's access log stays off.
        # httptools' protocol with the error shape for a request it cannot parse (http/protocol.py).
        uvicorn.run("rebill.asgi:app", host=host, port=port, workers=workers, log_level="info",
                    access_log=False, log_config=logging_config(settings.log_format, requests=settings.request_lines),
                    http=HttpProtocol, timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
                    # No WebSocket endpoint: an upgrade request is an HTTP request like any other,
                    # answered by the edge in the error shape (found by an audit: uvicorn took it
                    # and answered a plain-text 403 with no request id).
                    ws="none")
    finally:
        if metrics_dir is not None:
            remove_directory(metrics_dir)


# With --workers, uvicorn's supervisor kills an API process that has not answered its ping in
# this long, and every request in flight there is cut (found by the soak on an overloaded
# machine: a process whose answer took 5 s was killed mid-load, two requests lost their
# answers). uvicorn's 5 s confuses a busy process with a hung one; a hung one still goes.
WORKER_HEALTHCHECK_SECONDS = 60


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # what a shell reports for a process SIGTERM ended
