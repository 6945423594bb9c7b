"""One paging mechanism for every list (decisions §3): filters, sort, page numbers and
keyset cursors.

A list request becomes a :class:`ListQuery`. :func:`fetch_page` runs it with keyset
conditions (sort value, then id to break ties, since many rows share an ``updated_at``
second) and returns the rows plus the positions the next and previous cursors start from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Select, Table, and_, func, or_, select


@dataclass(frozen=True)
class Position:
    """Where a cursor resumes: the sort value and id of a boundary row."""

    value: Any
    id: int
    backwards: bool = False


@dataclass(frozen=True)
class ListQuery:
    filters: dict[str, Any] = field(default_factory=dict)
    sort: str = "id"
    descending: bool = True
    limit: int = 50
    page: int = 1
    position: Position | None = None
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class PageResult:
    rows: list[Any]  # domain objects, built by the repository's ``build``
    next: Position | None
    previous: Position | None


def _keyset(sort_col: Any, id_col: Any, position: Position, descending: bool) -> Any:
    """Rows strictly after ``position`` in the order (sort, id) ``descending``."""
    if sort_col is id_col:
        return id_col < position.id if descending else id_col > position.id
    if descending:
        return or_(sort_col < position.value, and_(sort_col == position.value, id_col < position.id))
    return or_(sort_col > position.value, and_(sort_col == position.value, id_col > position.id))


def fetch_page(conn: Connection, stmt: Select[Any], table: Table, query: ListQuery,
               build: Callable[..., Any]) -> PageResult:
    """``build`` makes a domain object of one row (a positional struct or a function of the
    row); the object must carry the sort field and ``id`` under their column names."""
    sort_col = table.c[query.sort]
    id_col = table.c.id
    if query.sort == "id":
        sort_col = id_col
    position = query.position
    backwards = bool(position and position.backwards)
    # Reading backwards walks the order reversed from the cursor, then flips the rows.
    descending = query.descending != backwards
    if position is not None:
        stmt = stmt.where(_keyset(sort_col, id_col, position, descending))
    order = (sort_col.desc(), id_col.desc()) if descending else (sort_col.asc(), id_col.asc())
    stmt = stmt.order_by(*order) if sort_col is not id_col else stmt.order_by(order[0])
    stmt = stmt.limit(query.limit + 1)
    if position is None and query.page > 1:
        stmt = stmt.offset((query.page - 1) * query.limit)
    rows = [build(*row) for row in conn.execute(stmt).all()]
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    if backwards:
        rows.reverse()
    if not rows:
        if position is None:
            return PageResult(rows, None, None)
        # Every row past the cursor was deleted since: the way back still leads to the page it
        # came from, its boundary row included (found by an audit: both cursors were null, and a
        # client that had walked backwards could not return). Ids are integers, so the boundary
        # moved by one id toward the way back lets exactly that row through the strict keyset.
        toward = 1 if query.descending == backwards else -1
        back = Position(position.value, position.id + toward, not backwards)
        return PageResult(rows, next=back if backwards else None, previous=None if backwards else back)

    def at(row: Any, backwards: bool) -> Position:
        return Position(getattr(row, query.sort), row.id, backwards)

    came_from_before = position is not None and not backwards or (position is None and query.page > 1)
    has_next = more if not backwards else True
    has_previous = more if backwards else came_from_before
    return PageResult(
        rows,
        next=at(rows[-1], False) if has_next else None,
        previous=at(rows[0], True) if has_previous else None,
    )


def count(conn: Connection, stmt: Select[Any]) -> int:
    return int(conn.execute(select(func.count()).select_from(stmt.subquery())).scalar_one())
