"""`rebill webhooks list | deliveries | replay | enable`: webhook subscriptions and their
delivery log (Rebill's extension, issue 14). Webhooks and deliveries are named by their ids,
which are unique across stores; a change runs in its store's unit of work, as the command line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Optional

import typer
from rich.table import Table
from sqlalchemy import Connection

from rebill.errors import NotFound, ValidationFailed

from .common import (
    MAX_ID,
    DatabaseOption,
    datetime_option,
    err,
    fail,
    open_database,
    out,
    print_table,
    store_named,
    unit_for,
)

app = typer.Typer(name="webhooks", help="Webhook subscriptions and their delivery log.", no_args_is_help=True)

# Characters of a receiver's answer and of an error a table cell shows (the log keeps 512).
ANSWER_WIDTH = 40
ERROR_WIDTH = 60


@app.command("list")
def webhooks_list(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """List webhooks: id, address, topic, API version, enabled or disabled since when."""
    from rebill.domain.webhook import log
    db = open_database(database)
    with db.read() as conn:
        found = log.webhooks_of(conn, store_named(conn, store).id if store else None)
        names = _store_names(conn)
    table = _table("id", *(() if store else ("store",)), "address", "topic", "version", "status")
    for hook in found:
        status = f"disabled since {_when(hook.disabled_at)}" if hook.disabled_at else "enabled"
        table.add_row(str(hook.id), *(() if store else (names[hook.store_id],)), hook.address, hook.topic,
                      hook.api_version, status)
    print_table(table)


@app.command("deliveries")
def webhooks_deliveries(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    failed: bool = typer.Option(False, "--failed", help="Only those whose last attempt failed "
                                "(given up, or waiting for a retry)"),
    webhook: Optional[int] = typer.Option(None, "--webhook", min=1, max=MAX_ID, help="Only the deliveries of webhook ID"),
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_ID, help="The newest N deliveries"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """The delivery log as a table, newest first.

    Each delivery with its latest attempt: status code, error, latency and the first bytes of
    the answer. Times are the store's (UTC)."""
    from rebill.domain.webhook import log
    db = open_database(database)
    with db.read() as conn:
        store_id = store_named(conn, store).id if store else None
        lines = log.log_lines(conn, store_id=store_id, webhook_id=webhook, failing=failed, limit=limit)
        names = _store_names(conn)
    table = _table("id", *(() if store else ("store",)), "created (UTC)", "webhook", "address", "topic", "object",
                   "status", "attempts", "code", "error", "latency", "answer")
    for delivery, address, last in lines:
        table.add_row(
            str(delivery.id), *(() if store else (names[delivery.store_id],)), _when(delivery.created_at),
            str(delivery.webhook_id), address, delivery.topic, f"{delivery.resource} {delivery.resource_id}",
            delivery.status, str(delivery.attempts), _text(delivery.last_status_code),
            _clip(delivery.last_error, ERROR_WIDTH), f"{last.latency_ms} ms" if last else "",
            _clip(last.response if last else None, ANSWER_WIDTH))
    print_table(table)


@app.command("replay")
def webhooks_replay(
    delivery_id: Optional[int] = typer.Argument(None, metavar="DELIVERY_ID", min=1, max=MAX_ID,
                                                help="The delivery to send again"),
    failed_since: Optional[str] = typer.Option(None, "--failed-since", help="Every failed delivery created since "
                                               "YYYY-MM-DD[THH:MM] (UTC unless it says otherwise)"),
    store: Optional[str] = typer.Option(None, "--store", help="With --failed-since: one store (default: every store)"),
    webhook: Optional[int] = typer.Option(None, "--webhook", min=1, max=MAX_ID,
                                          help="With --failed-since: one webhook's deliveries"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Send a delivery again, or every failed one since a time.

    The same body and webhook-id, as a new series of attempts. A disabled webhook's deliveries
    are not replayed (one named answers why, exit 2; --failed-since passes over them): run
    `webhooks enable` first, then replay them."""
    if delivery_id is not None and failed_since is not None:
        raise typer.BadParameter("give a DELIVERY_ID or --failed-since, not both")
    if delivery_id is None and failed_since is None:
        raise typer.BadParameter("give a DELIVERY_ID or --failed-since")
    if delivery_id is not None and (store or webhook is not None):
        raise typer.BadParameter("--store and --webhook go with --failed-since")
    if delivery_id is not None:
        _replay_one(database, delivery_id)
    else:
        assert failed_since is not None
        _replay_failed(database, datetime_option(failed_since, "--failed-since"), store, webhook)


@app.command("enable")
def webhooks_enable(
    webhook_id: int = typer.Argument(..., metavar="ID", min=1, max=MAX_ID, help="The webhook's id (see webhooks list)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Enable a disabled webhook.

    It receives new events again and its pending deliveries go out at once. Enabling an
    enabled webhook changes nothing."""
    from rebill.domain.webhook import log, service
    db = open_database(database)
    with db.read() as conn:
        store_id = _owner(log.store_id_of(conn, "webhook", webhook_id), f"no webhook with id {webhook_id}")
    with unit_for(db, store_id) as unit:
        was = service.get(unit, webhook_id).disabled_at
        service.enable(unit, webhook_id)
    err.print(f"[green]enabled webhook[/green] {webhook_id}" if was else f"webhook {webhook_id} was enabled already")


def _replay_one(database: str | None, delivery_id: int) -> None:
    from rebill.domain.webhook import log
    db = open_database(database)
    with db.read() as conn:
        store_id = _owner(log.store_id_of(conn, "delivery", delivery_id), f"no delivery with id {delivery_id}")
    try:
        with unit_for(db, store_id) as unit:
            delivery = log.replay(unit, delivery_id)
    except ValidationFailed as exc:
        fail(exc)
    out.print(f"delivery {delivery.id} ({delivery.topic}) goes out again with webhook-id {delivery.message_id}",
              highlight=False)


def _replay_failed(database: str | None, since: datetime, store: str | None, webhook: int | None) -> None:
    from rebill.domain.webhook import log
    db = open_database(database)
    with db.read() as conn:
        if store is not None:
            store_ids = [store_named(conn, store).id]
        elif webhook is not None:  # the webhook's own store
            store_ids = [_owner(log.store_id_of(conn, "webhook", webhook), f"no webhook with id {webhook}")]
        else:
            store_ids = list(_store_names(conn))
    replayed = 0
    try:
        for store_id in store_ids:
            with unit_for(db, store_id) as unit:
                replayed += len(log.replay_failed(unit, since, webhook))
    except NotFound:  # --webhook of another store than --store
        err.print(f"[red]no webhook with id {webhook} in store {store!r}[/red]")
        raise typer.Exit(2) from None
    except ValidationFailed as exc:
        fail(exc)
    out.print(f"{replayed} failed deliveries since {since.isoformat()} go out again", highlight=False)


def _owner(store_id: int | None, missing: str) -> int:
    if store_id is None:
        err.print(f"[red]{missing}[/red]")
        raise typer.Exit(2)
    return store_id


def _store_names(conn: Connection) -> dict[int, str]:
    from rebill.domain.store import repository as stores_repo
    return {s.id: s.name for s in stores_repo.all_stores(conn)}


def _table(*columns: str) -> Table:
    table = Table()
    for column in columns:
        # Ids, codes and times are what an operator copies: never folded across lines.
        wide = column in ("address", "error", "answer")
        table.add_column(column, overflow="fold", no_wrap=not wide)
    return table


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _clip(text: str | None, width: int) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())  # one line: an answer's newlines would break the table
    return flat if len(flat) <= width else flat[:width - 1] + "…"
