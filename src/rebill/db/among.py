"""``among(column, ids)``: ``column IN (ids)`` for a list of integer ids, bound as one parameter.

SQLAlchemy's ``column.in_(ids)`` binds every id on its own: at each execution it renders one
placeholder per id and processes each value, about 7,000 instructions an id in Python (a batch
of 500 ids: 9.5 million instructions a statement, against 5.9 million for the same statement
with one parameter; docs/performance.md, the fifteenth session). The billing run and the
replan ask such questions of a whole batch two dozen times a batch. Here the list is one
parameter: a JSON array read by ``json_each`` on SQLite, an array compared with ``= ANY`` on
PostgreSQL; both use the column's index as the IN list did.

For ids only (the values go through ``int``); other lists (status words, code keys) keep
``in_``, whose lists are short.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import BigInteger, Boolean, String, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator


class _Ids(TypeDecorator[list[int]]):
    """A list of ids: a JSON array's text on SQLite, a ``bigint[]`` on PostgreSQL."""

    impl = String
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(BigInteger))
        return dialect.type_descriptor(String())

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        ids = list(map(int, value))  # ids only: anything else is refused here
        if dialect.name == "postgresql":
            return ids
        return "[" + ",".join(map(str, ids)) + "]"


class _Among(ColumnElement[bool]):
    inherit_cache = True
    type = Boolean()
    # A comparison: no "= 1" added where a database has no boolean type (SQLite), which would
    # keep SQLite from using the column's index.
    _is_implicitly_boolean = True
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement),
                           ("ids", InternalTraversal.dp_clauseelement)]

    def __init__(self, column: ColumnElement[Any], ids: BindParameter[Any]) -> None:
        self.column = column
        self.ids = ids


def among(column: ColumnElement[Any], ids: Iterable[int]) -> ColumnElement[bool]:
    """``column IN (ids)``, the ids bound as one parameter; one id is a plain equality (a
    request's single address or item: ``json_each`` cost a subscription create 4 % more
    instructions than the one-value IN list it replaced, docs/performance.md)."""
    wanted = [i for i in ids if i is not None]  # a None matches nothing, as in an IN list
    if len(wanted) == 1:
        return column == int(wanted[0])
    return _Among(column, bindparam(None, wanted, type_=_Ids(), unique=True))


def among_bound(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    """``among`` in a prepared statement (db/prepared.py): the ids are its parameter ``name``,
    a list given at each call. For the reads a replan or a batch makes once for many
    addresses (an async batch's chunk), where building the statement per call through
    SQLAlchemy cost more than running it (docs/performance.md, the eighteenth session)."""
    return _Among(column, bindparam(name, type_=_Ids(), required=True))


@compiles(_Among)
def _json_each(element: _Among, compiler: Any, **kw: Any) -> str:
    return f"{compiler.process(element.column, **kw)} IN (SELECT value FROM json_each({compiler.process(element.ids, **kw)}))"


@compiles(_Among, "postgresql")
def _any(element: _Among, compiler: Any, **kw: Any) -> str:
    return f"{compiler.process(element.column, **kw)} = ANY(CAST({compiler.process(element.ids, **kw)} AS BIGINT[]))"


class _Unindexed(ColumnElement[Any]):
    inherit_cache = True
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement)]

    def __init__(self, column: ColumnElement[Any]) -> None:
        self.column = column
        self.type = column.type


def unindexed(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """``column`` for a comparison SQLite must not answer from the column's index: ``+column``
    there (SQLite's documented way to keep a term out of the index choice), the column itself
    elsewhere. For a store's column beside ``among`` on an indexed id column: SQLite, which has
    no statistics, took the store's index (one equality) over the ids' (an IN list) and walked
    every row of the store, 100,000 subscriptions a batch on the billing day (found by a review
    of ``among``: the same plan as ``in_``)."""
    return _Unindexed(column)


@compiles(_Unindexed)
def _plain(element: _Unindexed, compiler: Any, **kw: Any) -> str:
    return compiler.process(element.column, **kw)


@compiles(_Unindexed, "sqlite")
def _plus(element: _Unindexed, compiler: Any, **kw: Any) -> str:
    return "+" + compiler.process(element.column, **kw)
