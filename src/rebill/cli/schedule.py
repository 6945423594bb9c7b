"""`rebill schedule regenerate | check`: the queued charges against their plan."""

from __future__ import annotations

from typing import Optional

import typer

from rebill import heap
from rebill.clock import SystemClock

from .common import DatabaseOption, err, open_database, print_line, stores_named

app = typer.Typer(name="schedule", help="The schedule of queued charges.", no_args_is_help=True)

SCHEDULE_TABLES = ("charges", "charge_items", "purchase_items", "skips", "events")


@app.command("regenerate")
def schedule_regenerate(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Replan the queued and skipped charges of every address (of one store, or all), with a
    progress bar. Safe at any time: charges that already agree are left as they are."""
    from rich.progress import Progress

    from rebill.domain.address import repository as address_repo
    from rebill.domain.schedule.reconcile import BATCH, replan
    from rebill.domain.store import clock as store_clock
    from rebill.domain.unit import Unit
    db = open_database(database)
    with db.read() as conn:
        plan = [(s, address_repo.ids_of_store(conn, s.id)) for s in stores_named(conn, store)]
    total = sum(len(ids) for _, ids in plan)
    heap.freeze()  # a long run (heap.py)
    with Progress(console=err) as progress:
        task = progress.add_task("regenerating", total=total)
        for found, ids in plan:
            # A sandbox store's charges are replanned on its own clock (decisions §6.12).
            now = store_clock.clock_for(found, SystemClock().now)()
            for start in range(0, len(ids), BATCH * 4):
                with db.write() as conn:
                    replan(Unit(conn, found, now, origin="cli"), ids[start:start + BATCH * 4])
                progress.advance(task, len(ids[start:start + BATCH * 4]))
    db.analyze(*SCHEDULE_TABLES)
    err.print(f"[green]regenerated[/green] the charges of {total} addresses")


@app.command("check")
def schedule_check(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Compare the stored queued charges with a plan made from scratch; exit 1 on a difference."""
    from rebill.domain.address import repository as address_repo
    from rebill.domain.schedule.audit import differences
    from rebill.domain.store import clock as store_clock
    from rebill.domain.unit import Unit
    db = open_database(database)
    found_any = False
    with db.read() as conn:
        for found in stores_named(conn, store):
            ids = address_repo.ids_of_store(conn, found.id)
            now = store_clock.clock_for(found, SystemClock().now)()
            for start in range(0, len(ids), 500):
                for line in differences(Unit(conn, found, now), ids[start:start + 500]):
                    found_any = True
                    print_line(f"{found.name}: {line}")
    if found_any:
        raise typer.Exit(1)
    err.print("[green]the schedule agrees with its plan[/green]")
