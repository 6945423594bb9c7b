"""`rebill bill`: the billing run on demand."""

from __future__ import annotations

from typing import Optional

import typer

from rebill import heap
from rebill.clock import SystemClock
from rebill.db.engine import Database

from .common import DatabaseOption, date_option, err, print_table, settings_for, stores_named


def register(app: typer.Typer) -> None:
    app.command("bill")(bill)


def bill(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    until: Optional[str] = typer.Option(None, "--until", help="Charges dated on or before YYYY-MM-DD "
                                        "(default and latest: the store's today)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Process every due charge: queued charges whose date has come and charges in error whose
    retry date has (decisions §6.5, §6.12). Failed payments are an outcome, not an error: the
    command exits 0 unless it could not run."""
    from datetime import timedelta

    from rich.progress import Progress
    from rich.table import Table

    from rebill.domain.billing import run as billing
    from rebill.domain.payment.processors import gateway_for
    from rebill.domain.store import clock as store_clock
    last = date_option(until, "--until")
    # Never makes a database: a mistyped path is refused (found by an audit: it made the file).
    settings = settings_for(database, existing=True)
    db = Database.from_url(settings.database_url)
    clock = SystemClock()
    gateway = gateway_for(db, clock.now, secret_key=settings.secret_key, timeout=settings.stripe_timeout_seconds)
    stale = timedelta(seconds=settings.claim_stale_seconds)
    with db.read() as conn:
        found = stores_named(conn, store)
    due = {s.id: billing.count_due(db, s, store_clock.clock_for(s, clock.now)(), last) for s in found}
    summary = billing.Summary()
    heap.freeze()  # a long run: what the process built is not walked by every full collection (heap.py)
    with Progress(console=err) as progress:
        task = progress.add_task("billing", total=sum(due.values()))
        for each in found:
            billing.run_store(db, gateway, each, store_clock.clock_for(each, clock.now),
                              until=last, summary=summary, progress=lambda n: progress.advance(task, n),
                              stale_after=stale)
    table = Table(title="billing run")
    for column in ("processed", "paid", "pending", "failed", "of which closed", "retried"):
        table.add_column(column, justify="right")
    table.add_row(*(str(v) for v in (summary.processed, summary.paid, summary.pending, summary.failed,
                                      summary.closed, summary.retried)))
    print_table(table)
    if summary.amounts:
        amounts = Table(title="paid, per currency")
        amounts.add_column("currency")
        amounts.add_column("amount", justify="right")
        for currency, amount in sorted(summary.amounts.items()):
            amounts.add_row(currency, str(amount))
        print_table(amounts)
