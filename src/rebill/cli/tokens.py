"""`rebill tokens create | list | revoke`."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Optional

import typer
from rich.table import Table

from rebill.clock import SystemClock
from rebill.domain.store import service as store_service
from rebill.domain.store.model import SCOPES
from rebill.errors import NotFound, ValidationFailed

from .common import MAX_ID, DatabaseOption, csv, err, fail, open_database, print_table, store_named

app = typer.Typer(name="tokens", help="Manage API tokens.", no_args_is_help=True)


@app.command("create")
def tokens_create(
    store: str = typer.Option(..., "--store", help="Store name"),
    scopes: Optional[list[str]] = typer.Option(
        None, "--scopes", help="Comma-separated scopes; given several times, all of them count"),
    all_scopes: bool = typer.Option(False, "--all-scopes", help="Every scope"),
    name: str = typer.Option("api", "--name", help="Token name"),
    contact_email: Optional[str] = typer.Option(None, "--contact-email"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Create a token and print it alone on stdout."""
    # Every `--scopes` counts (found by an audit: given twice, the first list was dropped).
    named = None if scopes is None else csv(",".join(scopes))
    if all_scopes == (named is not None):
        # Both: an operator who meant a narrow token would get every scope (found by an audit).
        raise typer.BadParameter("give either --scopes a,b,c or --all-scopes")
    if named is not None and not named:
        # A token of no scope reaches nothing but `GET /` (found by an audit: `--scopes ''` made one).
        raise typer.BadParameter("name at least one scope, or give --all-scopes")
    db = open_database(database, migrate=True)
    try:
        with db.write() as conn:
            found = store_named(conn, store)
            raw = store_service.create_token(conn, SystemClock().now(), store=found,
                                             scopes=None if all_scopes else named, name=name,
                                             contact_email=contact_email)
    except ValidationFailed as exc:
        fail(exc)
    # Plain stdout, not rich: nothing may wrap or colour the token a script captures.
    sys.stdout.write(raw + "\n")


@app.command("list")
def tokens_list(
    store: str = typer.Option(..., "--store", help="Store name"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """List a store's tokens, revoked ones included (only a token's prefix is kept to show)."""
    db = open_database(database)
    with db.read() as conn:
        found = store_service.list_tokens(conn, store_named(conn, store))
    table = Table()
    table.add_column("id", no_wrap=True)
    table.add_column("name")
    table.add_column("prefix", no_wrap=True)  # what the operator matches against a token in hand
    table.add_column("scopes", overflow="fold")
    table.add_column("created (UTC)")
    table.add_column("revoked (UTC)")
    for token in found:
        table.add_row(str(token.id), token.name, token.token_prefix, scopes_text(token.scopes),
                      _when(token.created_at), _when(token.revoked_at) if token.revoked_at else "")
    print_table(table)


@app.command("revoke")
def tokens_revoke(
    token_id: int = typer.Argument(..., metavar="ID", min=1, max=MAX_ID, help="The token's id (see tokens list)"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Revoke a token: requests with it answer 401 (in a running server from its next request on).
    Revoking a revoked token changes nothing."""
    db = open_database(database)
    try:
        with db.write() as conn:
            token, already = store_service.revoke_token(conn, SystemClock().now(), token_id)
    except NotFound as exc:
        err.print(f"[red]{exc.errors}[/red]")
        raise typer.Exit(2) from None
    assert token.revoked_at is not None
    if already:
        err.print(f"token {token.id} ({token.name}) was already revoked at {_when(token.revoked_at)} UTC")
    else:
        err.print(f"[green]revoked token[/green] {token.id} ({token.name}, {token.token_prefix}...)")


# All 22 scopes joined are 370 characters: a table cell says "every scope" instead, and a long
# list shows the scopes that fit and how many more there are.
SCOPES_WIDTH = 48


def scopes_text(scopes: list[str]) -> str:
    if set(scopes) >= set(SCOPES):
        return f"every scope ({len(scopes)})"
    text = ", ".join(scopes)
    if len(text) <= SCOPES_WIDTH:
        return text
    shown: list[str] = []
    for scope in scopes:
        if len(", ".join([*shown, scope])) > SCOPES_WIDTH - len(" +99 more"):
            break
        shown.append(scope)
    return f"{', '.join(shown)} +{len(scopes) - len(shown)} more"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
