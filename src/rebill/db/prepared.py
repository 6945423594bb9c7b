"""Prepared statements for the hot paths: single-row reads and inserts.

SQLAlchemy builds and type-checks each statement once; building a new statement per
request and hashing it for the compiled cache cost about 200 µs, more than the query. A
prepared statement is compiled once per dialect and executed on the unit's own DBAPI
connection (inside its transaction), with SQLAlchemy's own bind and result processors,
so types behave exactly as on the general path (docs/performance.md has the figures).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from operator import itemgetter
from typing import Any

from sqlalchemy import JSON, Boolean, Connection, Integer, String, Table, insert, literal_column
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable, visitors
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.util import await_

# Constants written into a statement's text: words and numbers, nothing a driver's parameter
# style or a quote could read otherwise.
_PLAIN = re.compile(r"[A-Za-z0-9_. -]*")

_MISSING = object()  # no value processed yet (None is a value)


def _inlined(stmt: Executable, dialect: Any) -> Executable:
    """``stmt`` with its constant values (a status word, a type name, a number, a flag: fixed by
    the code, never a caller's value) written into its SQL instead of bound on every call: a
    customer read binds seven, and binding cost it about 3 % (docs/performance.md, the eleventh
    session). A value whose type has no literal form in the dialect stays a parameter."""
    def constant(element: Any) -> Any:
        if not isinstance(element, BindParameter) or element.required or element.callable is not None \
                or element.expanding or element.value is None:
            return None
        value = element.value
        if isinstance(value, bool):
            kind: Any = Boolean
        elif isinstance(value, int):
            kind = Integer
        elif isinstance(value, str) and _PLAIN.fullmatch(value):
            kind = String
        else:
            return None
        if not isinstance(element.type, kind):
            return None
        render = element.type.literal_processor(dialect)
        return None if render is None else literal_column(render(value), type_=element.type)
    return visitors.replacement_traverse(stmt, {}, constant)


def _asyncpg_fetch(conn: Connection, sql: str, args: list[Any], *, one: bool) -> Any:
    """The API's reads on PostgreSQL (db/read_lanes.py: one connection per read, autocommit):
    straight on asyncpg's connection, whose own statement cache prepares each text once. The
    adapter's cursor would take a lock, rebuild the result's description and match the status
    text with a regular expression on every call: a fifth of a read's time (docs/performance.md).
    asyncpg's errors become SQLAlchemy's, as through the adapter's cursor."""
    adapted = conn.connection.dbapi_connection
    dbapi = conn.dialect.loaded_dbapi
    try:
        try:
            if one:
                return await_(adapted._connection.fetchrow(sql, *args))
            return await_(adapted._connection.fetch(sql, *args))
        except Exception as error:
            adapted._handle_exception(error)  # raises the adapter's DBAPI error of its kind
            raise
    except dbapi.Error as exc:
        raise DBAPIError.instance(sql, None, exc, dbapi.Error) from exc


# SQLAlchemy's default storage format of a date on SQLite, which ``date.isoformat`` writes too.
_SQLITE_DATE = "%(year)04d-%(month)02d-%(day)02d"


def _quicker(kind: Any, dialect: Any, standard: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """SQLAlchemy's bind processor of ``kind``, or on SQLite an equal and quicker one for the
    types a write binds many of (a charge row binds about 11 JSON values, a purchase item 8
    flags and 4 dates): 0.2-0.7 µs a value less (docs/performance.md, the twenty-first session).
    Only the common value types take the short way; anything else (None, a value SQLAlchemy
    refuses) goes to its own processor, which answers as before."""
    if dialect.name != "sqlite":
        return standard
    impl = kind.dialect_impl(dialect)
    if isinstance(impl, sqlite.DATE) and impl._storage_format == _SQLITE_DATE:
        def day(value: Any) -> Any:
            return value.isoformat() if type(value) is date else standard(value)
        return day
    if isinstance(impl, Boolean):
        def flag(value: Any) -> Any:  # SQLite has no boolean: SQLAlchemy binds 1 and 0
            return 1 if value is True else 0 if value is False else standard(value)
        return flag
    if isinstance(impl, JSON) and dialect._json_serializer is not None:
        serialize = dialect._json_serializer

        def document(value: Any) -> Any:
            return serialize(value) if type(value) is dict or type(value) is list else standard(value)
        return document
    return standard


class _Compiled:
    __slots__ = ("sql", "fixed", "slots", "results", "_many")

    def __init__(self, stmt: Executable, dialect: Any, column_keys: list[str] | None = None) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=column_keys)
        self.sql = compiled.string
        binds = {name: _quicker(compiled.binds[name].type, dialect, process)
                 for name, process in compiled._bind_processors.items()}
        # Literal values of the statement are fixed: bound and processed once. The caller's
        # parameters are the binds without a value; each call fills their slots.
        values = compiled.construct_params(_check=False)
        mine = {name for name, bind in compiled.binds.items()
                if bind.required or (bind.value is None and bind.callable is None)}
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
        names = [name for _slot, name, _process in self.slots]
        # itemgetter of one name answers the value, not a 1-tuple, and of none is an error.
        get = itemgetter(*names) if len(names) > 1 else lambda row: tuple(row[name] for name in names)
        dense = isinstance(self.fixed, list) and len(self.fixed) == len(self.slots) \
            and all(slot == i for i, (slot, _name, _process) in enumerate(self.slots))
        self._many = (get, dense, [(slot, process) for slot, _name, process in self.slots if process is not None])

    def arguments(self, params: dict[str, Any]) -> Any:
        args = self.fixed.copy()
        for slot, name, process in self.slots:
            args[slot] = params[name] if process is None else process(params[name])
        return args

    def first(self, conn: Connection, params: dict[str, Any]) -> list[Any] | None:
        """The first row's values in column order, decoded, or None."""
        # On the event loop (Database.read_on_loop) no transaction is open yet: a lone
        # statement is its own consistent snapshot in SQLite, so it needs no BEGIN/ROLLBACK.
        if conn.dialect.driver == "asyncpg":
            row = _asyncpg_fetch(conn, self.sql, self.arguments(params), one=True)
            return None if row is None else self._decode(row)
        dbapi = conn.dialect.loaded_dbapi
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.execute(self.sql, self.arguments(params))
            row = cursor.fetchone()
        except dbapi.Error as exc:
            # Callers catch SQLAlchemy's exception classes (IntegrityError, ...), as on the
            # general path. A dropped connection fails its reset on return to the pool, which
            # then discards it (tests/unit/test_prepared.py).
            raise DBAPIError.instance(self.sql, None, exc, dbapi.Error) from exc
        finally:
            cursor.close()
        if row is None:
            return None
        return self._decode(row)

    def _decode(self, row: Any) -> list[Any]:
        values = list(row)
        for index, process in self.results:
            values[index] = process(values[index])
        return values

    def execute(self, conn: Connection, params: dict[str, Any], *, fetch: bool) -> tuple[list[list[Any]], int]:
        """Every row, decoded (``fetch``), and the row count."""
        if fetch and conn.dialect.driver == "asyncpg":  # a read on a read connection
            rows = _asyncpg_fetch(conn, self.sql, self.arguments(params), one=False)
            return [self._decode(row) for row in rows], len(rows)
        dbapi = conn.dialect.loaded_dbapi
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.execute(self.sql, self.arguments(params))
            rows = cursor.fetchall() if fetch else []
            count = cursor.rowcount
        except dbapi.Error as exc:
            raise DBAPIError.instance(self.sql, None, exc, dbapi.Error) from exc
        finally:
            cursor.close()
        return [self._decode(row) for row in rows], count

    def arguments_many(self, rows: list[dict[str, Any]]) -> list[Any]:
        """``arguments`` of each row, built a column at a time: the caller's values of a row in
        one ``itemgetter`` call (into a list as it is, when the statement's parameters are
        exactly the caller's, as in an INSERT on SQLite), then each column that has a processor
        processed down the rows, a value equal by identity to the row above's (one ``now`` in
        every row's timestamps, a None) processed once. A 43-column charge row cost a Python
        step per column and row before (docs/performance.md, the fifteenth session)."""
        if len(rows) < 2:
            return [self.arguments(row) for row in rows]
        get, dense, processed = self._many
        if dense:
            out = [list(get(row)) for row in rows]
        else:
            out = []
            for row in rows:
                args = self.fixed.copy()
                for (slot, _name, _process), value in zip(self.slots, get(row)):
                    args[slot] = value
                out.append(args)
        for slot, process in processed:
            last, done = _MISSING, None
            for args in out:
                value = args[slot]
                if value is not last:
                    last, done = value, process(value)
                args[slot] = done
        return out

    def execute_many(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """One ``executemany`` on the driver: the batch paths of the billing run, where
        SQLAlchemy's per-row parameter handling cost about 20 µs a row."""
        dbapi = conn.dialect.loaded_dbapi
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.executemany(self.sql, self.arguments_many(rows))
        except dbapi.Error as exc:
            raise DBAPIError.instance(self.sql, None, exc, dbapi.Error) from exc
        finally:
            cursor.close()


class Prepared:
    """A statement whose caller's parameters are ``bindparam``s without a value: a SELECT
    read with ``one`` or ``all``, or an UPDATE or DELETE run with ``run``."""

    def __init__(self, stmt: Executable) -> None:
        self.stmt = stmt
        # By driver, not by database: psycopg and asyncpg (the API's reads on PostgreSQL,
        # db/read_lanes.py) bind parameters differently (%(name)s against $1).
        self._by_dialect: dict[str, _Compiled] = {}

    def _compile(self, dialect: Any) -> _Compiled:
        compiled = self._by_dialect[dialect.driver] = _Compiled(_inlined(self.stmt, dialect), dialect)
        return compiled

    def one(self, conn: Connection, **params: Any) -> list[Any] | None:
        """The first row's values in the statement's column order, decoded, or None."""
        compiled = self._by_dialect.get(conn.dialect.driver) or self._compile(conn.dialect)
        return compiled.first(conn, params)

    def all(self, conn: Connection, **params: Any) -> list[list[Any]]:
        """Every row's values in the statement's column order, decoded."""
        compiled = self._by_dialect.get(conn.dialect.driver) or self._compile(conn.dialect)
        return compiled.execute(conn, params, fetch=True)[0]

    def run(self, conn: Connection, **params: Any) -> int:
        """An UPDATE or DELETE; returns the number of rows it touched."""
        compiled = self._by_dialect.get(conn.dialect.driver) or self._compile(conn.dialect)
        return compiled.execute(conn, params, fetch=False)[1]

    def run_many(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """An UPDATE, DELETE or INSERT once per row of ``rows``, in one ``executemany``."""
        if rows:
            compiled = self._by_dialect.get(conn.dialect.driver) or self._compile(conn.dialect)
            compiled.execute_many(conn, rows)


class PreparedInsert:
    """``INSERT ... RETURNING id`` for one table, compiled once per dialect and set of columns.

    It runs beside SQLAlchemy's execution, so it cannot apply Python-side column defaults;
    a table that has any is refused rather than silently written without them."""

    def __init__(self, table: Table) -> None:
        with_defaults = [c.name for c in table.columns if c.default is not None or c.onupdate is not None]
        if with_defaults:
            raise TypeError(f"{table.name}: columns with Python-side defaults {with_defaults}")
        # Tables keyed otherwise (charge_items, order_items) are only inserted with run_many.
        self.stmt = insert(table).returning(table.c.id) if "id" in table.c else None
        self.plain = insert(table)
        self._by_columns: dict[tuple[str, ...], _Compiled] = {}

    def run_many(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Rows with the same keys in one ``executemany``, without ids (no RETURNING)."""
        if not rows:
            return
        key = ("many", conn.dialect.driver, *rows[0])
        compiled = self._by_columns.get(key)
        if compiled is None:
            compiled = self._by_columns[key] = _Compiled(self.plain, conn.dialect, column_keys=list(rows[0]))
        compiled.execute_many(conn, rows)

    def run(self, conn: Connection, values: dict[str, Any]) -> int:
        key = (conn.dialect.driver, *values)
        compiled = self._by_columns.get(key)
        if compiled is None:
            assert self.stmt is not None, "a table without an id column has no id to return"
            compiled = self._by_columns[key] = _Compiled(self.stmt, conn.dialect, column_keys=list(values))
        row = compiled.first(conn, values)
        assert row is not None  # RETURNING always answers
        return int(row[0])
