"""`rebill stores create | update | list | rates | secret | notices | processor`."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from rebill.clock import SystemClock
from rebill.domain.store import clock as store_clock
from rebill.domain.store import repository as stores_repo
from rebill.domain.store import service as store_service
from rebill.errors import ValidationFailed

from .common import (
    DatabaseOption,
    csv,
    either,
    err,
    fail,
    open_database,
    out,
    print_table,
    settings_for,
    store_named,
    unit_for,
)

app = typer.Typer(name="stores", help="Manage stores (tenants).", no_args_is_help=True)

EMAIL_HELP = "The store's contact e-mail (GET /store `email`, GET /shop `shop_email`)"
PHONE_HELP = "The store's phone (GET /store `phone`, GET /shop `shop_phone`)"
LOGO_HELP = "An http(s) address of the logo checkouts show (`checkout_logo_url`)"
TIMEZONE_HELP = ("The store's IANA time zone (America/New_York): its midnight starts its day, when charges fall "
                 "due and what is in the past")


@app.command("create")
def stores_create(
    name: str,
    currency: str = typer.Option("USD", help="Store currency"),
    ships_to: str = typer.Option("US", "--ships-to", help="Comma-separated country codes"),
    presentment_currencies: Optional[str] = typer.Option(None, "--presentment-currencies",
                                                         help="Comma-separated extra currencies"),
    plan_tier: str = typer.Option("standard", "--plan-tier", help="standard, premium_a or premium_b"),
    checkout_platform: str = typer.Option("custom", "--checkout-platform"),
    default_version: str = typer.Option("2021-01", "--default-version"),
    sandbox: bool = typer.Option(False, "--sandbox", help="A sandbox store, with a test clock (the default)"),
    live: bool = typer.Option(False, "--no-sandbox", help="A live store"),
    email: str = typer.Option("", "--email", help=EMAIL_HELP),
    phone: str = typer.Option("", "--phone", help=PHONE_HELP),
    checkout_logo_url: str = typer.Option("", "--checkout-logo-url", help=LOGO_HELP),
    timezone: str = typer.Option("UTC", "--timezone", help=TIMEZONE_HELP),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Create a store."""
    sandbox = either(sandbox, live, "--sandbox", "--no-sandbox") is not False
    db = open_database(database, migrate=True)
    try:
        with db.write() as conn:
            store = store_service.create_store(
                conn, SystemClock().now(), name=name, currency=currency, ships_to=csv(ships_to),
                presentment_currencies=csv(presentment_currencies), plan_tier=plan_tier,
                checkout_platform=checkout_platform, default_api_version=default_version, sandbox=sandbox,
                email=email, phone=phone, checkout_logo_url=checkout_logo_url, timezone=timezone.strip())
    except ValidationFailed as exc:
        fail(exc)
    err.print(f"[green]created store[/green] {store.name} (id {store.id})")


@app.command("update")
def stores_update(
    name: str,
    email: Optional[str] = typer.Option(None, "--email", help=EMAIL_HELP + "; '' clears it"),
    phone: Optional[str] = typer.Option(None, "--phone", help=PHONE_HELP + "; '' clears it"),
    checkout_logo_url: Optional[str] = typer.Option(None, "--checkout-logo-url", help=LOGO_HELP + "; '' clears it"),
    timezone: Optional[str] = typer.Option(None, "--timezone", help=TIMEZONE_HELP),
    plan_tier: Optional[str] = typer.Option(None, "--plan-tier", help="standard, premium_a or premium_b "
                                            "(decisions §6.6: processing and bundles need a tier)"),
    install: bool = typer.Option(False, "--installed", help="Installed again"),
    uninstall: bool = typer.Option(False, "--uninstalled",
                                   help="An uninstalled store answers 403 to every token (decisions §1.3)"),
    first_retry_days: Optional[int] = typer.Option(None, "--first-retry-days",
                                                   help="Days from a charge's first failure to its retry (1-365)"),
    retry_every_days: Optional[int] = typer.Option(None, "--retry-every-days",
                                                   help="Days between the later retries (1-365)"),
    max_attempts: Optional[int] = typer.Option(None, "--max-attempts", help="Attempts in all, the first one "
                                               "included (1-50)"),
    on_max_retries: Optional[str] = typer.Option(None, "--on-max-retries", help="When the last attempt fails: "
                                                 "cancel_subscriptions, do_nothing or "
                                                 "cancel_subscriptions_and_customer"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Change a store's contact settings, time zone, plan tier, installation and dunning
    settings (decisions §1.3, §6.4; GET /store, GET /shop); what is not given stays."""
    installed = either(install, uninstall, "--installed", "--uninstalled")
    dunning = {key: value for key, value in (("first_retry_days", first_retry_days),
                                             ("retry_every_days", retry_every_days), ("max_attempts", max_attempts),
                                             ("on_max_retries", on_max_retries)) if value is not None}
    if all(v is None for v in (email, phone, checkout_logo_url, timezone, plan_tier, installed)) and not dunning:
        err.print("[red]nothing to change[/red]: give --email, --phone, --checkout-logo-url, --timezone, "
                  "--plan-tier, --installed/--uninstalled or a dunning setting", soft_wrap=True)
        raise typer.Exit(2)
    db = open_database(database)
    with db.read() as conn:
        found = store_named(conn, name)
    try:
        with unit_for(db, found.id) as unit:
            before = unit.store
            after = store_service.update_settings(unit.conn, _now(before), before, email=email, phone=phone,
                                                  checkout_logo_url=checkout_logo_url, timezone=timezone,
                                                  plan_tier=plan_tier, installed=installed, dunning=dunning)
            changed = [n for n in (*store_service.SETTINGS, "timezone", "plan_tier", "installed", "dunning")
                       if getattr(before, n) != getattr(after, n)]
            if changed:
                # Every change has its event (decisions §8.1; found by an audit: none), origin `cli`.
                unit.record("store/updated", after.id, changed=changed)
    except ValidationFailed as exc:
        fail(exc)
    err.print(f"[green]updated[/green] {', '.join(changed)} of {name}" if changed else f"{name}: nothing changed")


@app.command("list")
def stores_list(database: Optional[str] = DatabaseOption) -> None:
    """List stores."""
    db = open_database(database)
    table = Table("id", "name", "currency", "ships to", "tier", "platform", "version", "sandbox", "installed")
    with db.read() as conn:
        for s in stores_repo.all_stores(conn):
            table.add_row(str(s.id), s.name, s.currency, ",".join(s.ships_to), s.plan_tier, s.checkout_platform,
                          s.default_api_version, str(s.sandbox), str(s.installed))
    print_table(table)


def _now(store: Any) -> datetime:
    """The store's own time (decisions §6.12: a sandbox store's clock stamps what it writes; found
    by an audit: the commands stamped charges of a moved store with real time)."""
    return store_clock.clock_for(store, SystemClock().now)()


def _rate(text: str, names: tuple[str, ...], required: int) -> dict[str, str]:
    """The parts of a rate, the first ``required`` of them required (a shipping rate's price
    alone applies to every country; found by an audit: `--shipping-rate 3.00` was refused)."""
    parts = text.split(":")
    if len(parts) < required or len(parts) > len(names):
        raise typer.BadParameter(f"{text!r}: expected {':'.join(names)} (at least {':'.join(names[:required])})")
    return dict(zip(names, parts))


@app.command("rates")
def stores_rates(
    name: str,
    shipping_rate: Optional[list[str]] = typer.Option(
        None, "--shipping-rate", help="PRICE[:COUNTRIES[:CODE[:TITLE[:CURRENCY]]]], e.g. 5.00:US,CA:std:Standard, "
                                      "or 500:US:std:Standard:JPY for charges in yen only (repeatable)"),
    tax_rate: Optional[list[str]] = typer.Option(
        None, "--tax-rate", help="COUNTRY:RATE[:PROVINCE[:TITLE]], e.g. US:0.0725:CA:CA tax (repeatable)"),
    clear_shipping: bool = typer.Option(False, "--clear-shipping", help="Remove every shipping rate"),
    clear_tax: bool = typer.Option(False, "--clear-tax", help="Remove every tax rate"),
    included: bool = typer.Option(False, "--taxes-included", help="Prices include their taxes"),
    added: bool = typer.Option(False, "--taxes-added", help="Taxes are added to prices"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Set a store's shipping and tax rates (decisions §5.9); its queued charges follow at once."""
    from rebill.domain.store.rates import update_rates
    taxes_included = either(included, added, "--taxes-included", "--taxes-added")
    shipping = [] if clear_shipping else None
    if shipping_rate:
        shipping = []
        for text in shipping_rate:
            rate = _rate(text, ("price", "country_codes", "code", "title", "currency"), 1)
            shipping.append({**rate, "country_codes": csv(rate.get("country_codes")) or []})
    tax = [] if clear_tax else None
    if tax_rate:
        tax = [_rate(text, ("country_code", "rate", "province", "title"), 2) for text in tax_rate]
    if shipping is None and tax is None and taxes_included is None:
        # Found by an audit: it said "updated" and changed nothing.
        raise typer.BadParameter("give --shipping-rate, --tax-rate, --clear-shipping, --clear-tax, "
                                 "--taxes-included or --taxes-added")
    db = open_database(database)
    try:
        with db.write() as conn:
            store = store_named(conn, name)
            update_rates(conn, _now(store), store, shipping_rates=shipping, tax_rates=tax,  # type: ignore
                         taxes_included=taxes_included)
    except ValidationFailed as exc:
        fail(exc)
    err.print(f"[green]updated rates of[/green] {name}; its queued charges were regenerated")


@app.command("secret")
def stores_secret(
    name: str,
    rotate: bool = typer.Option(False, "--rotate", help="Make a new secret; the old one keeps signing for 24 hours"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Print the store's webhook client secret (Standard Webhooks form, whsec_...) alone on
    stdout; --rotate makes a new one first and prints it."""
    db = open_database(database)
    with db.write() if rotate else db.read() as conn:
        store = store_named(conn, name)
        if rotate:
            # Real time, not the store's clock: the 24 hours are the receivers' (found by an
            # audit: a store whose clock was ahead kept its old secret signing for months).
            store = store_service.rotate_client_secret(conn, SystemClock().now(), store)
    if rotate:
        err.print(f"[green]rotated the client secret of[/green] {name}; the previous one signs too for 24 hours")
    # Plain stdout, not rich: nothing may wrap or colour the secret a script captures.
    sys.stdout.write(store.client_secret + "\n")


@app.command("notices")
def stores_notices(
    name: str,
    days: Optional[int] = typer.Option(None, "--days", help="Days ahead of a charge or prepaid order to send "
                                       "charge/upcoming and order/upcoming (0 to 60; 0: none)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Print the store's upcoming-notice days; --days N sets them first."""
    db = open_database(database)
    try:
        with db.write() if days is not None else db.read() as conn:
            store = store_named(conn, name)
            if days is not None:
                store = store_service.set_upcoming_notice_days(conn, _now(store), store, days)
    except ValidationFailed as exc:
        fail(exc)
    out.print(str(store.upcoming_notice_days), highlight=False)


def _secret_from(path: Optional[Path], option: str) -> Optional[str]:
    """A secret read from its file (never from the command line, where ps and the shell's
    history would keep it); exit 2 when the file cannot be read."""
    if path is None:
        return None
    try:
        return path.read_text().strip()
    except OSError as exc:
        err.print(f"[red]{option}[/red]: cannot read {path}: {exc.strerror}")
        raise typer.Exit(2) from None


def _unreadable_keys(conn: Any, store_id: int, vault: Any) -> str | None:
    """Why the store's Stripe keys cannot be decrypted with this REBILL_SECRET_KEY, or None."""
    from rebill.domain.payment import processors
    from rebill.domain.payment.vault import VaultError
    try:
        processors.stripe_account(conn, store_id, vault)
    except VaultError as exc:
        return str(exc)
    return None


@app.command("processor")
def stores_processor(
    name: str,
    stripe: bool = typer.Option(False, "--stripe", help="Pay the store's charges through Stripe"),
    sandbox: bool = typer.Option(False, "--sandbox", help="Pay them through the sandbox gateway again"),
    secret_key_file: Optional[Path] = typer.Option(None, "--secret-key-file",
                                                   help="A file holding the Stripe secret key (sk_...)"),
    webhook_secret_file: Optional[Path] = typer.Option(
        None, "--webhook-secret-file", help="A file holding the signing secret of the store's Stripe webhook "
        "endpoint (whsec_...)"),
    authorize_only: bool = typer.Option(False, "--authorize-only", help="Authorize charges; capture them "
                                        "through POST /charges/{id}/capture_payment"),
    api_base: Optional[str] = typer.Option(None, "--api-base", help="Another Stripe API host (tests, proxies)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Show or choose the store's payment processor (issue 16). Keys are read from files, kept
    encrypted with REBILL_SECRET_KEY and never shown."""
    from rebill.domain.payment import processors
    from rebill.domain.payment.vault import Vault, VaultError
    if stripe and sandbox:
        err.print("[red]--stripe and --sandbox[/red]: give one of them")
        raise typer.Exit(2)
    if stripe and secret_key_file is None:
        err.print("[red]--secret-key-file[/red]: is required with --stripe")
        raise typer.Exit(2)
    if not stripe and (secret_key_file or webhook_secret_file or authorize_only or api_base):
        err.print("[red]--secret-key-file, --webhook-secret-file, --authorize-only and --api-base[/red] go with "
                  "--stripe")
        raise typer.Exit(2)
    settings = settings_for(database)
    try:
        vault = Vault(settings.secret_key)
    except VaultError as exc:
        err.print(f"[red]REBILL_SECRET_KEY[/red]: {exc}")
        raise typer.Exit(2) from None
    db = open_database(database)
    unreadable: str | None = None
    try:
        with db.write() if (stripe or sandbox) else db.read() as conn:
            store = store_named(conn, name)
            now = _now(store)
            if sandbox:
                chosen = processors.choose_sandbox(conn, store, now)
            elif stripe:
                chosen = processors.choose_stripe(
                    conn, store, now, vault, secret_key=_secret_from(secret_key_file, "--secret-key-file") or "",
                    webhook_secret=_secret_from(webhook_secret_file, "--webhook-secret-file"),
                    authorize_only=authorize_only, api_base=api_base)
            else:
                chosen = processors.settings(conn, store.id)
                unreadable = _unreadable_keys(conn, store.id, vault)
    except ValidationFailed as exc:
        fail(exc)
    if chosen.processor == processors.SANDBOX:
        out.print(f"{name}: sandbox", highlight=False, soft_wrap=True)
        return
    details = [f"{chosen.key_mode} key", "webhook secret set" if chosen.has_webhook_secret else "no webhook secret",
               "authorize only" if chosen.authorize_only else "capture at once"]
    if chosen.api_base:
        details.append(f"API at {chosen.api_base}")
    out.print(f"{name}: stripe ({', '.join(details)})", highlight=False, soft_wrap=True)
    # Where Stripe sends the store's events (the Dashboard's endpoint URL is this server's
    # address followed by it): docs/operations.md, Going live with Stripe.
    out.print(f"webhook endpoint: {chosen.endpoint_path}", highlight=False, soft_wrap=True)
    if not (stripe or sandbox) and unreadable:
        # Found by an audit: the keys were shown as set while the server could not read them
        # (its payments waited, claimed); exit 1, so a check script notices.
        err.print(f"[red]the keys cannot be read[/red]: {unreadable}", soft_wrap=True)
        raise typer.Exit(1)
