"""The ``rebill`` command line: serve, migrate, stores and tokens."""

from __future__ import annotations

import sys
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.store import repository as stores_repo
from rebill.domain.store import service as store_service
from rebill.errors import ValidationFailed
from rebill.settings import RateLimit, Settings

app = typer.Typer(help="Rebill: self-hostable subscription billing (API 2021-01 and 2021-11).",
                  no_args_is_help=True)
stores_app = typer.Typer(help="Manage stores (tenants).", no_args_is_help=True)
tokens_app = typer.Typer(help="Manage API tokens.", no_args_is_help=True)
app.add_typer(stores_app, name="stores")
app.add_typer(tokens_app, name="tokens")
schedule_app = typer.Typer(help="The schedule of queued charges.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")
clock_app = typer.Typer(help="A sandbox store's test clock.", no_args_is_help=True)
app.add_typer(clock_app, name="clock")

err = Console(stderr=True)
out = Console()
DatabaseOption = typer.Option(None, "--database", help="Database URL (default: $REBILL_DATABASE_URL or ./var/rebill.db)")


def _settings(database: str | None) -> Settings:
    return Settings.from_env().with_(database_url=database)


def _fail(exc: ValidationFailed) -> None:
    for field, messages in (exc.errors.items() if isinstance(exc.errors, dict) else [("error", [exc.errors])]):
        err.print(f"[red]{field}[/red]: {'; '.join(messages)}")
    raise typer.Exit(2)


def _csv(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


@app.command()
def migrate(database: Optional[str] = DatabaseOption) -> None:
    """Apply database migrations."""
    settings = _settings(database)
    upgrade(settings.database_url)
    err.print(f"[green]migrated[/green] {settings.database_url}")


@app.command()
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

    settings = _settings(database)
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


@stores_app.command("create")
def stores_create(
    name: str,
    currency: str = typer.Option("USD", help="Store currency"),
    ships_to: str = typer.Option("US", "--ships-to", help="Comma-separated country codes"),
    presentment_currencies: Optional[str] = typer.Option(None, "--presentment-currencies",
                                                         help="Comma-separated extra currencies"),
    plan_tier: str = typer.Option("standard", "--plan-tier", help="standard, premium_a or premium_b"),
    checkout_platform: str = typer.Option("custom", "--checkout-platform"),
    default_version: str = typer.Option("2021-01", "--default-version"),
    sandbox: bool = typer.Option(True, "--sandbox/--no-sandbox"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Create a store."""
    settings = _settings(database)
    upgrade(settings.database_url)
    db = Database.from_url(settings.database_url)
    try:
        with db.write() as conn:
            store = store_service.create_store(
                conn, SystemClock().now(), name=name, currency=currency, ships_to=_csv(ships_to),
                presentment_currencies=_csv(presentment_currencies), plan_tier=plan_tier,
                checkout_platform=checkout_platform, default_api_version=default_version, sandbox=sandbox)
    except ValidationFailed as exc:
        _fail(exc)
    err.print(f"[green]created store[/green] {store.name} (id {store.id})")


@stores_app.command("list")
def stores_list(database: Optional[str] = DatabaseOption) -> None:
    """List stores."""
    db = Database.from_url(_settings(database).database_url)
    table = Table("id", "name", "currency", "ships to", "tier", "platform", "version", "sandbox", "installed")
    with db.read() as conn:
        for s in stores_repo.all_stores(conn):
            table.add_row(str(s.id), s.name, s.currency, ",".join(s.ships_to), s.plan_tier, s.checkout_platform,
                          s.default_api_version, str(s.sandbox), str(s.installed))
    out.print(table)


@tokens_app.command("create")
def tokens_create(
    store: str = typer.Option(..., "--store", help="Store name"),
    scopes: Optional[str] = typer.Option(None, "--scopes", help="Comma-separated scopes"),
    all_scopes: bool = typer.Option(False, "--all-scopes", help="Every scope"),
    name: str = typer.Option("api", "--name", help="Token name"),
    contact_email: Optional[str] = typer.Option(None, "--contact-email"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Create a token and print it alone on stdout."""
    if not all_scopes and scopes is None:
        raise typer.BadParameter("give --scopes a,b,c or --all-scopes")
    settings = _settings(database)
    upgrade(settings.database_url)
    db = Database.from_url(settings.database_url)
    try:
        with db.write() as conn:
            found = stores_repo.by_name(conn, store)
            if found is None:
                err.print(f"[red]no store named {store!r}[/red]")
                raise typer.Exit(2)
            raw = store_service.create_token(conn, SystemClock().now(), store=found,
                                             scopes=None if all_scopes else _csv(scopes), name=name,
                                             contact_email=contact_email)
    except ValidationFailed as exc:
        _fail(exc)
    sys.stdout.write(raw + "\n")


def _stores(conn: object, name: str | None) -> list[object]:
    if name is None:
        return stores_repo.all_stores(conn)  # type: ignore[arg-type]
    found = stores_repo.by_name(conn, name)  # type: ignore[arg-type]
    if found is None:
        err.print(f"[red]no store named {name!r}[/red]")
        raise typer.Exit(2)
    return [found]


def _rate(text: str, names: tuple[str, ...]) -> dict[str, str]:
    parts = text.split(":")
    if len(parts) < 2 or len(parts) > len(names):
        raise typer.BadParameter(f"{text!r}: expected {':'.join(names)}")
    return dict(zip(names, parts))


@stores_app.command("rates")
def stores_rates(
    name: str,
    shipping_rate: Optional[list[str]] = typer.Option(
        None, "--shipping-rate", help="PRICE[:COUNTRIES[:CODE[:TITLE]]], e.g. 5.00:US,CA:std:Standard (repeatable)"),
    tax_rate: Optional[list[str]] = typer.Option(
        None, "--tax-rate", help="COUNTRY:RATE[:PROVINCE[:TITLE]], e.g. US:0.0725:CA:CA tax (repeatable)"),
    clear_shipping: bool = typer.Option(False, "--clear-shipping", help="Remove every shipping rate"),
    clear_tax: bool = typer.Option(False, "--clear-tax", help="Remove every tax rate"),
    taxes_included: Optional[bool] = typer.Option(None, "--taxes-included/--taxes-added"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Set a store's shipping and tax rates (decisions §5.9); its queued charges follow at once."""
    from rebill.domain.store.rates import update_rates
    shipping = [] if clear_shipping else None
    if shipping_rate:
        shipping = []
        for text in shipping_rate:
            rate = _rate(text, ("price", "country_codes", "code", "title"))
            shipping.append({**rate, "country_codes": _csv(rate.get("country_codes")) or []})
    tax = [] if clear_tax else None
    if tax_rate:
        tax = [_rate(text, ("country_code", "rate", "province", "title")) for text in tax_rate]
    db = Database.from_url(_settings(database).database_url)
    try:
        with db.write() as conn:
            store = _stores(conn, name)[0]
            update_rates(conn, SystemClock().now(), store, shipping_rates=shipping, tax_rates=tax,  # type: ignore
                         taxes_included=taxes_included)
    except ValidationFailed as exc:
        _fail(exc)
    err.print(f"[green]updated rates of[/green] {name}; its queued charges were regenerated")


SCHEDULE_TABLES = ("charges", "charge_items", "purchase_items", "skips", "events")


@schedule_app.command("regenerate")
def schedule_regenerate(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Replan the queued and skipped charges of every address (of one store, or all), with a
    progress bar. Safe at any time: charges that already agree are left as they are."""
    from rich.progress import Progress

    from rebill.domain.address import repository as address_repo
    from rebill.domain.schedule.reconcile import BATCH, replan
    from rebill.domain.unit import Unit
    db = Database.from_url(_settings(database).database_url)
    now = SystemClock().now()
    with db.read() as conn:
        plan = [(s, address_repo.ids_of_store(conn, s.id)) for s in _stores(conn, store)]  # type: ignore
    total = sum(len(ids) for _, ids in plan)
    with Progress(console=err) as progress:
        task = progress.add_task("regenerating", total=total)
        for found, ids in plan:
            for start in range(0, len(ids), BATCH * 4):
                with db.write() as conn:
                    replan(Unit(conn, found, now), ids[start:start + BATCH * 4])  # type: ignore[arg-type]
                progress.advance(task, len(ids[start:start + BATCH * 4]))
    db.analyze(*SCHEDULE_TABLES)
    err.print(f"[green]regenerated[/green] the charges of {total} addresses")


@schedule_app.command("check")
def schedule_check(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Compare the stored queued charges with a plan made from scratch; exit 1 on a difference."""
    from rebill.domain.address import repository as address_repo
    from rebill.domain.schedule.audit import differences
    from rebill.domain.unit import Unit
    db = Database.from_url(_settings(database).database_url)
    found_any = False
    with db.read() as conn:
        for found in _stores(conn, store):
            ids = address_repo.ids_of_store(conn, found.id)  # type: ignore[attr-defined]
            for start in range(0, len(ids), 500):
                for line in differences(Unit(conn, found, SystemClock().now()), ids[start:start + 500]):  # type: ignore
                    found_any = True
                    out.print(f"{found.name}: {line}")  # type: ignore[attr-defined]
    if found_any:
        raise typer.Exit(1)
    err.print("[green]the schedule agrees with its plan[/green]")


@app.command("bill")
def bill(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    until: Optional[str] = typer.Option(None, "--until", help="Charges dated on or before YYYY-MM-DD "
                                        "(default and latest: the store's today)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Process every due charge: queued charges whose date has come and charges in error whose
    retry date has (decisions §6.5, §6.12). Failed payments are an outcome, not an error: the
    command exits 0 unless it could not run."""
    from datetime import date, timedelta

    from rich.progress import Progress
    from rich.table import Table

    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.domain.store import clock as store_clock
    try:
        last = date.fromisoformat(until) if until else None
    except ValueError:
        err.print(f"[red]--until must be a date (YYYY-MM-DD), not {until!r}[/red]")
        raise typer.Exit(2) from None
    settings = _settings(database)
    db = Database.from_url(settings.database_url)
    clock = SystemClock()
    gateway = SandboxGateway(db, clock.now)
    stale = timedelta(seconds=settings.claim_stale_seconds)
    with db.read() as conn:
        found = _stores(conn, store)
    due = {s.id: billing.count_due(db, s, store_clock.clock_for(s, clock.now)(), last) for s in found}  # type: ignore[attr-defined]
    summary = billing.Summary()
    with Progress(console=err) as progress:
        task = progress.add_task("billing", total=sum(due.values()))
        for each in found:
            billing.run_store(db, gateway, each, store_clock.clock_for(each, clock.now),  # type: ignore
                              until=last, summary=summary, progress=lambda n: progress.advance(task, n),
                              stale_after=stale)
    table = Table(title="billing run")
    for column in ("processed", "paid", "pending", "failed", "of which closed", "retried"):
        table.add_column(column, justify="right")
    table.add_row(*(str(v) for v in (summary.processed, summary.paid, summary.pending, summary.failed,
                                      summary.closed, summary.retried)))
    out.print(table)
    if summary.amounts:
        amounts = Table(title="paid, per currency")
        amounts.add_column("currency")
        amounts.add_column("amount", justify="right")
        for currency, amount in sorted(summary.amounts.items()):
            amounts.add_row(currency, str(amount))
        out.print(amounts)


@clock_app.command("advance")
def clock_advance(
    store: str = typer.Option(..., "--store", help="Store name (a sandbox store)"),
    days: Optional[int] = typer.Option(None, "--days", help="Move N x 24 hours forward (N >= 1)"),
    to: Optional[str] = typer.Option(None, "--to", help="Move to YYYY-MM-DD, keeping the time of day"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Move a sandbox store's clock forward, day by day, running every billing that falls due
    on the way (decisions §6.11, §6.12). Other stores keep the real time."""
    from datetime import date

    from rich.progress import Progress

    from rebill.domain.billing import travel
    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.errors import ServiceError
    try:
        target = date.fromisoformat(to) if to else None
    except ValueError:
        err.print(f"[red]--to must be a date (YYYY-MM-DD), not {to!r}[/red]")
        raise typer.Exit(2) from None
    db = Database.from_url(_settings(database).database_url)
    clock = SystemClock()
    with db.read() as conn:
        [found] = _stores(conn, store)
    try:
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("advancing", total=None)
            now, summary = travel.advance(db, SandboxGateway(db, clock.now), clock.now, found.id,  # type: ignore
                                          days=days, to=target,
                                          progress=lambda day: progress.update(task, description=str(day)))
    except ServiceError as exc:
        err.print(f"[red]{exc.errors}[/red]")
        raise typer.Exit(2) from None
    out.print(f"{found.name}: now {now.isoformat()}; processed {summary.processed}, "  # type: ignore[attr-defined]
              f"paid {summary.paid}, pending {summary.pending}, failed {summary.failed}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
