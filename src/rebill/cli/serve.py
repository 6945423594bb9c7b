"""`rebill serve`: migrate, make the first store on an empty database, run uvicorn."""

from __future__ import annotations

from typing import Optional

import typer

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.store import repository as stores_repo
from rebill.domain.store import service as store_service
from rebill.settings import RateLimit

from .common import DatabaseOption, err, out, settings_for


def register(app: typer.Typer) -> None:
    app.command()(serve)


def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on"),
    port: int = typer.Option(8000, help="Port to listen on"),
    database: Optional[str] = DatabaseOption,
    rate_limit: Optional[str] = typer.Option(None, "--rate-limit", help="BURST/PER_SECOND, e.g. 40/2, or off"),
    workers: int = typer.Option(1, help="Worker processes"),
) -> None:
    """Migrate, then serve the API. On an empty database, create store 'default' and print a token."""
    import os

    import uvicorn

    settings = settings_for(database)
    if rate_limit is not None:
        try:
            settings = settings.with_(rate_limit=RateLimit.parse(rate_limit))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    upgrade(settings.database_url)
    db = Database.from_url(settings.database_url)
    with db.write() as conn:
        if not stores_repo.all_stores(conn):
            now = SystemClock().now()
            store = store_service.create_store(conn, now, name="default")
            raw = store_service.create_token(conn, now, store=store, name="default")
            err.print("[bold]Created store 'default'. Its API token (shown once):[/bold]")
            out.print(raw, soft_wrap=True)
    db.dispose()
    # Workers are separate processes: pass settings through the environment.
    os.environ["REBILL_DATABASE_URL"] = settings.database_url
    rl = settings.rate_limit
    os.environ["REBILL_RATE_LIMIT"] = f"{rl.burst}/{rl.per_second:g}" if rl.enabled else "off"
    err.print(f"Serving on http://{host}:{port} ({settings.database_url})")
    uvicorn.run("rebill.asgi:app", host=host, port=port, workers=workers, log_level="info",
                access_log=False)
