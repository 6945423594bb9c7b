"""Metafields in the database. Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, or_, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import metafields

from ..filters import Filter, where
from ..listing import ListQuery, PageResult, count, fetch_page
from .model import Metafield

_select = select(*columns_for(Metafield, metafields.c))
_by_id = Prepared(_select.where(metafields.c.id == bindparam("id"), metafields.c.store_id == bindparam("store_id")))

FILTERS: dict[str, Filter] = {
    "owner_resource": lambda v: metafields.c.owner_resource == v,
    "owner_id": lambda v: metafields.c.owner_id == v,
    "namespace": lambda v: metafields.c.namespace == v,
}


def get(conn: Connection, store_id: int, metafield_id: int, *, lock: bool = False) -> Metafield | None:
    if lock:
        stmt = _select.where(metafields.c.id == metafield_id, metafields.c.store_id == store_id)
        found = conn.execute(stmt.with_for_update()).first()
        return Metafield(*found) if found else None
    row = _by_id.one(conn, id=metafield_id, store_id=store_id)
    return Metafield(*row) if row else None


def _owner(store_id: int, resource: str, owner_id: int) -> Any:
    return and_(metafields.c.store_id == store_id, metafields.c.owner_resource == resource,
                metafields.c.owner_id == owner_id)


def count_of_owner(conn: Connection, store_id: int, resource: str, owner_id: int) -> int:
    stmt = select(func.count()).select_from(metafields).where(_owner(store_id, resource, owner_id))
    return int(conn.execute(stmt).scalar_one())


def taken(conn: Connection, store_id: int, resource: str, owner_id: int, namespace: str, key: str,
          *, other_than: int | None = None) -> bool:
    stmt = select(metafields.c.id).where(_owner(store_id, resource, owner_id), metafields.c.namespace == namespace,
                                         metafields.c.key == key)
    if other_than is not None:
        stmt = stmt.where(metafields.c.id != other_than)
    return conn.execute(stmt.limit(1)).first() is not None


def of_owners(conn: Connection, store_id: int, resource: str, owner_ids: list[int]) -> list[Metafield]:
    """The metafields of a page of owners, in one statement (includes)."""
    if not owner_ids:
        return []
    stmt = _select.where(metafields.c.store_id == store_id, metafields.c.owner_resource == resource,
                         metafields.c.owner_id.in_(set(owner_ids)))
    return [Metafield(*row) for row in conn.execute(stmt.order_by(metafields.c.id))]


def insert_metafield(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, metafields, values)


def update_metafield(conn: Connection, store_id: int, metafield_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(metafields).where(metafields.c.id == metafield_id, metafields.c.store_id == store_id)
                 .values(**values))


def delete_metafield(conn: Connection, store_id: int, metafield_id: int) -> None:
    conn.execute(delete(metafields).where(metafields.c.id == metafield_id, metafields.c.store_id == store_id))


def delete_of_owners(conn: Connection, store_id: int, owners: dict[str, list[int]]) -> list[tuple[int, str, int]]:
    """Delete the metafields of every (resource, ids) in ``owners`` in one statement; returns
    (id, owner resource, owner id) of each row deleted, by id."""
    wanted = [and_(metafields.c.owner_resource == resource, metafields.c.owner_id.in_(sorted(set(ids))))
              for resource, ids in owners.items() if ids]
    if not wanted:
        return []
    stmt = (delete(metafields).where(metafields.c.store_id == store_id, or_(*wanted))
            .returning(metafields.c.id, metafields.c.owner_resource, metafields.c.owner_id))
    return sorted((row.id, row.owner_resource, row.owner_id) for row in conn.execute(stmt))


def _filtered(store_id: int, filters: dict[str, Any]) -> Any:
    return where(_select.where(metafields.c.store_id == store_id), FILTERS, filters)


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    return fetch_page(conn, _filtered(store_id, query.filters), metafields, query, Metafield)


def count_where(conn: Connection, store_id: int, filters: dict[str, Any]) -> int:
    return count(conn, _filtered(store_id, filters))
