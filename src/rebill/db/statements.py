"""Statement helpers shared by the repositories."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Insert, Table, insert


@lru_cache(maxsize=None)
def _insert_returning_id(table: Table) -> Insert:
    return insert(table).returning(table.c.id)


def insert_row(conn: Connection, table: Table, values: dict[str, Any]) -> int:
    """Insert one row and return its id.

    The statement is built once per table and the values travel as execution parameters:
    ``insert(table).values(**values)`` coerces every value into a new bind parameter and
    hashes the result, which cost most of a create request.
    """
    return int(conn.execute(_insert_returning_id(table), values).scalar_one())
