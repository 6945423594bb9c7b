"""What every command shares: the consoles, the ``--database`` option, opening the database
the settings name, finding a store by name, a unit of work for a change, and printing a
refusal."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import typer
from alembic.util.exc import CommandError
from rich.console import Console
from rich.table import Table
from sqlalchemy import Connection
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from rebill.db.engine import Database, FolderUnusable, normalize_url, unavailable
from rebill.db.migrate import upgrade
from rebill.domain.store import repository as stores_repo
from rebill.domain.store.model import Store
from rebill.errors import ValidationFailed
from rebill.settings import Settings, shown_url

if TYPE_CHECKING:
    from rebill.domain.unit import Unit

# Messages and progress go to stderr, results to stdout: `tokens create` can be captured alone.
# Messages are one line each, never folded at 80 columns (a script matches them whole; found by
# an audit).
err = Console(stderr=True, soft_wrap=True)
out = Console()
DatabaseOption: Optional[str] = typer.Option(
    None, "--database", help="Database URL (default: $REBILL_DATABASE_URL or ./var/rebill.db)")

# Ids are 64-bit (BIGINT): a larger number names nothing, and is refused as the option's value
# (exit 2) before any query (found by an audit: the drivers' overflow was a traceback).
MAX_ID = 2**63 - 1


def settings_for(database: str | None, *, existing: bool = False, not_read: tuple[str, ...] = ()) -> Settings:
    """The settings (``--database`` first), their database URL one Rebill can use (exit 2 in one
    line otherwise: found by an audit, `serve`, `worker`, `bill` and `migrate` printed a
    traceback); ``existing``: a SQLite file that is not there is refused (exit 1) rather than
    made empty; ``not_read``: variables that do not apply to the command (left unread, so
    unchecked: a deployment's one environment file serves every kind of process)."""
    try:
        env = {name: value for name, value in os.environ.items() if name not in not_read}
        settings = Settings.from_env(env).with_(database_url=database)
    except ValueError as exc:  # a bad REBILL_* setting: every command stops naming it (exit 2)
        raise typer.BadParameter(str(exc)) from None
    parsed = _parsed(settings.database_url)
    if existing and parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).exists():
        err.print(f"[red]no database at {parsed.database}[/red]: run `rebill migrate` (or `rebill serve`) first",
                  soft_wrap=True)
        raise typer.Exit(1)
    return settings


def open_database(database: str | None, *, migrate: bool = False) -> Database:
    """The database of the settings; ``migrate`` brings its schema up to date first, for the
    commands that may be the first to touch a new database. The others refuse a SQLite file
    that is not there."""
    url = settings_for(database, existing=not migrate).database_url
    if migrate:
        upgrade(url)
    return Database.from_url(url)


SUPPORTED = "sqlite:///PATH or postgresql://USER@HOST:PORT/NAME"


def _parsed(url: str) -> URL:
    try:
        parsed = make_url(normalize_url(url))
        parsed.port  # noqa: B018 - read here: a port that is no number raised later, as a traceback
    except (ArgumentError, ValueError):
        parsed = None
    # An in-memory SQLite database is no store: each connection would see its own empty one
    # (found by an audit: `sqlite:///:memory:` was a traceback).
    # PostgreSQL through its psycopg driver only (found by an audit: `postgresql+asyncpg://`
    # passed here and failed later as a traceback; the API's own asyncpg reads are Rebill's).
    if parsed is None or parsed.get_backend_name() not in ("sqlite", "postgresql") or (
            parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg") or (
            parsed.get_backend_name() == "sqlite" and (not parsed.database or parsed.database == ":memory:")):
        err.print(f"[red]not a database URL Rebill can use[/red]: {shown_url(url)!r} (use {SUPPORTED})",
                  soft_wrap=True)
        raise typer.Exit(2)
    return parsed


def database_problem(exc: BaseException) -> str | None:
    """One line for an error of the database a command could not use (found by an audit: each
    was a traceback), or None for any other error, which keeps its traceback."""
    if isinstance(exc, CommandError):  # Alembic: a revision it does not know (a newer Rebill's)
        return f"cannot migrate: {exc}"
    if isinstance(exc, FolderUnusable):
        return str(exc)
    if isinstance(exc, (ArgumentError, NoSuchModuleError)):
        return f"not a database URL Rebill can use (use {SUPPORTED})"
    if isinstance(exc, DBAPIError):
        said = (str(exc.orig or exc).strip().splitlines() or [type(exc).__name__])[0]
        if "no such table" in said or (getattr(exc.orig, "sqlstate", None) == "42P01"):
            return f"the database has no tables yet ({said}): run `rebill migrate` first"
        # An older schema: a table without a column this version reads (found by an audit: a
        # PostgreSQL database left at an older revision gave a 190-line traceback).
        if "no such column" in said or (getattr(exc.orig, "sqlstate", None) == "42703"):
            return f"the database's schema is older than this version's ({said}): run `rebill migrate`"
        # A file that is no SQLite database (or a damaged one) too (found by an audit).
        if unavailable(exc) or isinstance(exc, OperationalError) or "file is not a database" in said \
                or "database disk image is malformed" in said:
            return f"cannot use the database: {said}"
    return None


# The widest line a table piped elsewhere may take (rich lays out up to this, then stops).
WIDE = 1000


def print_line(text: str) -> None:
    """One line of a command's output on stdout, whole: never folded at a terminal's or a pipe's
    width (found by an audit: `schedule check` split each difference across 80-column lines that
    grep could not match), with no markup or highlighting taken from the data in it."""
    out.print(text, soft_wrap=True, markup=False, highlight=False)


def print_table(table: Table) -> None:
    """A table on stdout: fitted to a terminal's width, and at its natural width anywhere else
    (a pipe, a file), where folding it into 80 columns would split each row across lines that
    grep cannot match."""
    (out if out.is_terminal else Console(width=WIDE, highlight=False)).print(table)


def stores_named(conn: Connection, name: str | None) -> list[Store]:
    """The store called ``name``, or every store when it is None; exit 2 when there is none."""
    if name is None:
        return stores_repo.all_stores(conn)
    return [store_named(conn, name)]


def store_named(conn: Connection, name: str) -> Store:
    found = stores_repo.by_name(conn, name.strip())  # names are stored trimmed
    if found is None:
        err.print(f"[red]no store named {name!r}[/red]")
        raise typer.Exit(2)
    return found


def fail(exc: ValidationFailed) -> NoReturn:
    """Print a refusal field by field, as the API would name them (a nested one by its path:
    `tax_rates.0.rate`), and exit 2."""
    for field, messages in _flat(exc.errors if isinstance(exc.errors, dict) else {"error": [exc.errors]}):
        err.print(f"[red]{field}[/red]: {'; '.join(messages)}")
    raise typer.Exit(2)


def _flat(errors: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, list[str]]]:
    for name, said in errors.items():
        if isinstance(said, dict):
            yield from _flat(said, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", [str(m) for m in (said if isinstance(said, list) else [said])]


def either(yes: bool, no: bool, yes_flag: str, no_flag: str) -> bool | None:
    """A setting given by one of two opposite flags: True, False, or None when neither. Both is
    refused (found by an audit: the last one won, so `--installed --uninstalled` uninstalled a
    store, exit 0)."""
    if yes and no:
        raise typer.BadParameter(f"give one of {yes_flag} and {no_flag}, not both")
    return True if yes else False if no else None


def csv(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def date_option(value: str | None, option: str) -> date | None:
    """The date an option names (YYYY-MM-DD), None when it was not given; exit 2 otherwise."""
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        err.print(f"[red]{option} must be a date (YYYY-MM-DD), not {value!r}[/red]")
        raise typer.Exit(2) from None


def datetime_option(value: str, option: str) -> datetime:
    """The moment an option names (YYYY-MM-DD or an ISO datetime; UTC unless it says otherwise);
    exit 2 otherwise."""
    try:
        found = datetime.fromisoformat(value)
        # In UTC, as it is compared: an offset at the calendar's ends leaves it (found by an
        # audit: 9999-12-31T23:59-14:00 overflowed in the query, a traceback).
        return found.replace(tzinfo=UTC) if found.tzinfo is None else found.astimezone(UTC)
    except (ValueError, OverflowError):
        err.print(f"[red]{option} must be a date or a datetime (YYYY-MM-DD[THH:MM[:SS][+HH:MM]]), not {value!r}[/red]")
        raise typer.Exit(2) from None


@contextmanager
def unit_for(db: Database, store_id: int) -> Iterator["Unit"]:
    """A write unit of work for a change the operator asks for: in the store's time (a sandbox
    store's test clock, so that what it schedules falls due on that clock), its events
    recorded as the command line's (origin ``cli``)."""
    from rebill.clock import SystemClock
    from rebill.domain.store import clock as store_clock
    from rebill.domain.unit import Unit
    with db.write() as conn:
        store = stores_repo.get(conn, store_id)
        assert store is not None, "callers found the store's id in this database"
        with Unit(conn, store, store_clock.clock_for(store, SystemClock().now), origin="cli") as unit:
            yield unit
