"""Statement helpers shared by the repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, insert

from .prepared import PreparedInsert

_inserts: dict[str, PreparedInsert] = {}


def _prepared(table: Table) -> PreparedInsert:
    prepared = _inserts.get(table.name)
    if prepared is None:
        prepared = _inserts[table.name] = PreparedInsert(table)
    return prepared


def insert_all(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (all with the same keys) in one ``executemany`` on the driver."""
    _prepared(table).run_many(conn, rows)


def insert_row(conn: Connection, table: Table, values: dict[str, Any]) -> int:
    """Insert one row and return its id.

    Prepared once per table and set of columns (``db/prepared.py``). Building
    ``insert(table).values(**values)`` per call coerced every value into a new bind parameter
    and hashed the result, which cost most of a create request; executing a constant
    statement through SQLAlchemy still cost about 100 µs of its machinery per insert.
    """
    return _prepared(table).run(conn, values)


def insert_many(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> list[int]:
    """Insert ``rows`` (all with the same keys) in one ``executemany`` and return their ids in
    order.

    SQLAlchemy cannot promise the order of ``RETURNING`` rows on SQLite, so there it runs one
    INSERT per row (about 0.1 ms each: most of a billing batch's time). Rebill's SQLite tables
    use AUTOINCREMENT and every write holds the database's write lock (``BEGIN IMMEDIATE``):
    the rows of one ``executemany`` get consecutive ids ending at ``last_insert_rowid()``.
    PostgreSQL returns them in order in batches."""
    if not rows:
        return []
    if conn.dialect.name != "sqlite":
        result = conn.execute(insert(table).returning(table.c.id, sort_by_parameter_order=True), rows)
        return [row[0] for row in result]
    if not table.dialect_options["sqlite"]["autoincrement"]:
        raise TypeError(f"{table.name}: consecutive ids need AUTOINCREMENT on SQLite")
    insert_all(conn, table, rows)
    # On the driver: through SQLAlchemy's exec_driver_sql this cost 7-11 % of a subscription
    # create (three event inserts). sqlite3's cursor.lastrowid is not set by executemany.
    last = conn.connection.dbapi_connection.execute("SELECT last_insert_rowid()").fetchone()[0]
    assert isinstance(last, int)
    return list(range(last - len(rows) + 1, last + 1))
