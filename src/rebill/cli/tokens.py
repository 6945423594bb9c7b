"""`rebill tokens create`."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from rebill.clock import SystemClock
from rebill.domain.store import service as store_service
from rebill.errors import ValidationFailed

from .common import DatabaseOption, csv, fail, open_database, store_named

app = typer.Typer(help="Manage API tokens.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tokens")


@app.command("create")
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
    db = open_database(database, migrate=True)
    try:
        with db.write() as conn:
            found = store_named(conn, store)
            raw = store_service.create_token(conn, SystemClock().now(), store=found,
                                             scopes=None if all_scopes else csv(scopes), name=name,
                                             contact_email=contact_email)
    except ValidationFailed as exc:
        fail(exc)
    # Plain stdout, not rich: nothing may wrap or colour the token a script captures.
    sys.stdout.write(raw + "\n")
