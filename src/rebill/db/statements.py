"""Statement helpers shared by the repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table

from .prepared import PreparedInsert

_inserts: dict[str, PreparedInsert] = {}


def insert_row(conn: Connection, table: Table, values: dict[str, Any]) -> int:
    """Insert one row and return its id.

    Prepared once per table and set of columns (``db/prepared.py``). Building
    ``insert(table).values(**values)`` per call coerced every value into a new bind parameter
    and hashed the result, which cost most of a create request; executing a constant
    statement through SQLAlchemy still cost about 100 µs of its machinery per insert.
    """
    prepared = _inserts.get(table.name)
    if prepared is None:
        prepared = _inserts[table.name] = PreparedInsert(table)
    return prepared.run(conn, values)
