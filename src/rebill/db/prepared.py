"""Prepared statements for the hot single-row reads.

SQLAlchemy builds and type-checks each statement once; building a new statement per
request and hashing it for the compiled cache cost about 200 µs, more than the query. A
``Prepared`` statement is compiled once per dialect and executed on the unit's own DBAPI
connection (inside its transaction), with SQLAlchemy's own bind and result processors,
so types behave exactly as on the general path (docs/performance.md has the figures).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection
from sqlalchemy.sql import Select


class _Compiled:
    __slots__ = ("sql", "positions", "defaults", "binds", "results")

    def __init__(self, stmt: Select[Any], dialect: Any) -> None:
        compiled = stmt.compile(dialect=dialect)
        self.sql = compiled.string
        self.positions = compiled.positiontup  # None for named-parameter drivers (psycopg)
        # Literal values of the statement are fixed: work them out once.
        self.defaults = compiled.construct_params(_check=False)
        self.binds = compiled._bind_processors
        processors = [c[3]._cached_result_processor(dialect, None) for c in compiled._result_columns]
        self.results = [(i, p) for i, p in enumerate(processors) if p is not None]


class Prepared:
    def __init__(self, stmt: Select[Any]) -> None:
        self.stmt = stmt
        self._by_dialect: dict[str, _Compiled] = {}

    def _compiled(self, conn: Connection) -> _Compiled:
        name = conn.dialect.name
        found = self._by_dialect.get(name)
        if found is None:
            found = self._by_dialect[name] = _Compiled(self.stmt, conn.dialect)
        return found

    def _execute(self, conn: Connection, params: dict[str, Any]) -> tuple[_Compiled, Any]:
        compiled = self._compiled(conn)
        values = {**compiled.defaults, **params}
        for name, process in compiled.binds.items():
            values[name] = process(values[name])
        # On the event loop (Database.read_on_loop) no transaction is open yet: a lone
        # statement is its own consistent snapshot in SQLite, so it needs no BEGIN/ROLLBACK.
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute(compiled.sql, values if compiled.positions is None else [values[p] for p in compiled.positions])
        return compiled, cursor

    def one(self, conn: Connection, **params: Any) -> list[Any] | None:
        """The first row's values in the statement's column order, decoded, or None."""
        compiled, cursor = self._execute(conn, params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        if row is None:
            return None
        values = list(row)
        for index, process in compiled.results:
            values[index] = process(values[index])
        return values
