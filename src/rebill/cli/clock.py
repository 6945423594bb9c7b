"""`rebill clock advance`: a sandbox store's test clock."""

from __future__ import annotations

from typing import Optional

import typer

from rebill import heap
from rebill.clock import SystemClock

from .common import DatabaseOption, date_option, err, fail, open_database, print_line, settings_for, store_named

app = typer.Typer(name="clock", help="A sandbox store's test clock.", no_args_is_help=True)


@app.command("advance")
def clock_advance(
    store: str = typer.Option(..., "--store", help="Store name (a sandbox store)"),
    days: Optional[int] = typer.Option(None, "--days", help="Move N x 24 hours forward (N >= 1)"),
    to: Optional[str] = typer.Option(None, "--to", help="Move to YYYY-MM-DD, keeping the time of day"),
    hours: Optional[int] = typer.Option(None, "--hours", help="Move N x 1 hour forward (N >= 1), to watch "
                                        "a webhook retry schedule step by step"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Move a sandbox store's clock forward (one of --days, --to, --hours).

    The advance walks day by day (--days, --to) or hour by hour (--hours): at each stop, the
    billing due by then runs, and the webhook deliveries due by then are tried once (decisions
    §6.11, §6.12), as the API's advance does. A retry schedule of minutes or hours is followed
    only hour by hour (docs/webhooks.md). Other stores keep the real time."""
    from rich.progress import Progress

    from rebill.domain.billing import travel
    from rebill.domain.payment.processors import gateway_for
    from rebill.errors import ServiceError, ValidationFailed
    from rebill.jobs.deliver import drain_now
    target = date_option(to, "--to")
    db = open_database(database)
    clock = SystemClock()
    settings = settings_for(database)
    gateway = gateway_for(db, clock.now, secret_key=settings.secret_key, timeout=settings.stripe_timeout_seconds)
    with db.read() as conn:
        found = store_named(conn, store)
    heap.freeze()  # a long run (heap.py)
    try:
        # No progress display off a terminal: a transient one leaves an empty line behind.
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("advancing", total=None)
            now, summary = travel.advance(db, gateway, clock.now, found.id,
                                          days=days, to=target, hours=hours,
                                          deliver=lambda moved: drain_now(
                                              db, clock.now, store_id=moved.id,
                                              private_policy=settings.webhook_private_addresses),
                                          progress=lambda day: progress.update(task, description=str(day)))
    except ValidationFailed as exc:
        fail(exc)  # e.g. two of --days, --to and --hours: each one named
    except ServiceError as exc:
        err.print(f"[red]{exc.errors}[/red]")
        raise typer.Exit(2) from None
    print_line(f"{found.name}: now {now.isoformat()}; processed {summary.processed}, "
               f"paid {summary.paid}, pending {summary.pending}, failed {summary.failed}")
