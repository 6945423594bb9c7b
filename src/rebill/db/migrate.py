"""Run Alembic migrations programmatically (``rebill migrate``, ``rebill serve``, tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

from .engine import normalize_url

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


@contextmanager
def foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite: migrations run with foreign keys off, as SQLite's own ALTER TABLE procedure
    asks. A batch migration rebuilds a table by dropping it, and with foreign keys on the
    drop would delete (cascade into) every child row. Afterwards every reference must still
    hold. Other databases: nothing to do."""
    if connection.dialect.name != "sqlite":
        yield
        return
    raw = connection.connection.dbapi_connection  # outside any transaction: the pragma applies
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
        broken = raw.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"the migration left rows whose parent is gone: {broken[:5]}")
    finally:
        raw.execute("PRAGMA foreign_keys=ON")
