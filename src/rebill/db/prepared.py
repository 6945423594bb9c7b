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
    __slots__ = ("sql", "fixed", "slots", "results")

    def __init__(self, stmt: Select[Any], dialect: Any) -> None:
        compiled = stmt.compile(dialect=dialect)
        self.sql = compiled.string
        binds = compiled._bind_processors
        # Literal values of the statement are fixed: bound and processed once. The caller's
        # parameters are the binds without a value; each call fills their slots.
        values = compiled.construct_params(_check=False)
        mine = {name for name, bind in compiled.binds.items() if bind.value is None and bind.callable is None}
        for name, process in binds.items():
            if name not in mine:
                values[name] = process(values[name])
        positions = compiled.positiontup  # None for named-parameter drivers (psycopg)
        if positions is None:
            self.fixed: list[Any] | dict[str, Any] = values
            self.slots = [(name, name, binds.get(name)) for name in mine]
        else:
            self.fixed = [values[name] for name in positions]
            self.slots = [(i, name, binds.get(name)) for i, name in enumerate(positions) if name in mine]
        processors = [c[3]._cached_result_processor(dialect, None) for c in compiled._result_columns]
        self.results = [(i, p) for i, p in enumerate(processors) if p is not None]

    def arguments(self, params: dict[str, Any]) -> Any:
        args = self.fixed.copy()
        for slot, name, process in self.slots:
            args[slot] = params[name] if process is None else process(params[name])
        return args


class Prepared:
    def __init__(self, stmt: Select[Any]) -> None:
        self.stmt = stmt
        self._by_dialect: dict[str, _Compiled] = {}

    def _compile(self, dialect: Any) -> _Compiled:
        compiled = self._by_dialect[dialect.name] = _Compiled(self.stmt, dialect)
        return compiled

    def one(self, conn: Connection, **params: Any) -> list[Any] | None:
        """The first row's values in the statement's column order, decoded, or None."""
        compiled = self._by_dialect.get(conn.dialect.name) or self._compile(conn.dialect)
        # On the event loop (Database.read_on_loop) no transaction is open yet: a lone
        # statement is its own consistent snapshot in SQLite, so it needs no BEGIN/ROLLBACK.
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.execute(compiled.sql, compiled.arguments(params))
            row = cursor.fetchone()
        finally:
            cursor.close()
        if row is None:
            return None
        values = list(row)
        for index, process in compiled.results:
            values[index] = process(values[index])
        return values
