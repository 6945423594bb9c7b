"""Collections and their products in the database. Every statement is scoped to one store
(decisions §1.1).

Besides the collection endpoints, two other parts of the domain read memberships here:
discounts for a collection (``external_product_ids_of``) and bundle variants, whose items
must come from their collections (``contains``, ``external_product_ids_of``, ``existing``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_all, insert_row
from rebill.models import collection_products, collections, products

from ..filters import Filter, where
from ..listing import ListQuery, PageResult, fetch_page
from .model import Collection, CollectionProduct

_select = select(*columns_for(Collection, collections.c))
_by_id = Prepared(_select.where(collections.c.id == bindparam("id"), collections.c.store_id == bindparam("store_id")))
_member_select = select(*columns_for(CollectionProduct, collection_products.c))

FILTERS: dict[str, Filter] = {
    "title": lambda v: collections.c.title == v,
}
MEMBER_FILTERS: dict[str, Filter] = {
    "collection_id": lambda v: collection_products.c.collection_id == v,
}


# Collections ------------------------------------------------------------------------------

def get(conn: Connection, store_id: int, collection_id: int, *, lock: bool = False) -> Collection | None:
    """``lock``: an update lock until the unit ends (the collection or its products change)."""
    if lock:
        stmt = _select.where(collections.c.id == collection_id, collections.c.store_id == store_id)
        found = conn.execute(stmt.with_for_update()).first()
        return Collection(*found) if found else None
    row = _by_id.one(conn, id=collection_id, store_id=store_id)
    return Collection(*row) if row else None


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_select.where(collections.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, collections, query, Collection)


def insert_collection(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, collections, values)


def update_collection(conn: Connection, store_id: int, collection_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(collections).where(collections.c.id == collection_id, collections.c.store_id == store_id)
                 .values(**values))


def touch(conn: Connection, store_id: int, collection_ids: Iterable[int], now: datetime) -> None:
    """Their products changed: a new `updated_at`."""
    wanted = sorted(set(collection_ids))
    if wanted:
        conn.execute(update(collections).where(collections.c.store_id == store_id, collections.c.id.in_(wanted))
                     .values(updated_at=now))


def delete_collection(conn: Connection, store_id: int, collection_id: int) -> None:
    conn.execute(delete(collection_products).where(collection_products.c.store_id == store_id,
                                                   collection_products.c.collection_id == collection_id))
    conn.execute(delete(collections).where(collections.c.id == collection_id, collections.c.store_id == store_id))


def existing(conn: Connection, store_id: int, collection_ids: Iterable[int]) -> set[int]:
    """Which of ``collection_ids`` are collections of the store."""
    wanted = set(collection_ids)
    if not wanted:
        return set()
    stmt = select(collections.c.id).where(collections.c.store_id == store_id, collections.c.id.in_(wanted))
    return set(conn.execute(stmt).scalars())


# Products in collections ------------------------------------------------------------------

def catalog_products(conn: Connection, store_id: int, external_ids: list[str]) -> dict[str, int]:
    """external id -> catalog product id of those in the store's catalog, each held with a key
    share lock until the unit ends (PostgreSQL), so that no product leaves the catalog while it
    joins a collection: a product delete takes the product's update lock first."""
    if not external_ids:
        return {}
    stmt = (select(products.c.external_product_id, products.c.id)
            .where(products.c.store_id == store_id, products.c.external_product_id.in_(set(external_ids)))
            .order_by(products.c.id).with_for_update(key_share=True, read=True))
    return {external_id: product_id for external_id, product_id in conn.execute(stmt)}


def members(conn: Connection, store_id: int, collection_id: int, product_ids: Iterable[int]) -> dict[int, CollectionProduct]:
    """product id -> its row in the collection, for those of ``product_ids`` that are in it."""
    wanted = set(product_ids)
    if not wanted:
        return {}
    stmt = _member_select.where(collection_products.c.store_id == store_id,
                                collection_products.c.collection_id == collection_id,
                                collection_products.c.product_id.in_(wanted))
    return {row.product_id: CollectionProduct(*row) for row in conn.execute(stmt)}


def add_members(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        insert_all(conn, collection_products, rows)


def remove_members(conn: Connection, store_id: int, collection_id: int, external_ids: Iterable[str]) -> int:
    """Rows removed."""
    wanted = set(external_ids)
    if not wanted:
        return 0
    result = conn.execute(delete(collection_products).where(
        collection_products.c.store_id == store_id, collection_products.c.collection_id == collection_id,
        collection_products.c.external_product_id.in_(wanted)))
    return int(result.rowcount)


def remove_product(conn: Connection, store_id: int, product_id: int) -> list[int]:
    """Takes the product out of every collection; returns those collections' ids."""
    stmt = (delete(collection_products).where(collection_products.c.store_id == store_id,
                                              collection_products.c.product_id == product_id)
            .returning(collection_products.c.collection_id))
    return sorted(set(conn.execute(stmt).scalars()))


def member_page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_member_select.where(collection_products.c.store_id == store_id), MEMBER_FILTERS, query.filters)
    return fetch_page(conn, stmt, collection_products, query, CollectionProduct)


def collections_of_products(conn: Connection, store_id: int, product_ids: Iterable[int]) -> dict[int, list[Collection]]:
    """product id -> the collections it is in, by collection id: one statement for a page of
    products (`include=collections`)."""
    wanted = set(product_ids)
    found: dict[int, list[Collection]] = {product_id: [] for product_id in wanted}
    if not wanted:
        return found
    stmt = (select(collection_products.c.product_id, *columns_for(Collection, collections.c))
            .join(collections, collections.c.id == collection_products.c.collection_id)
            .where(collection_products.c.store_id == store_id, collection_products.c.product_id.in_(wanted))
            .order_by(collections.c.id))
    for product_id, *row in conn.execute(stmt):
        found[product_id].append(Collection(*row))
    return found


def external_product_ids_of(conn: Connection, store_id: int, collection_ids: Iterable[int]
                            ) -> dict[int, frozenset[str]]:
    """collection id -> the external ids of its products (empty for an unknown collection or
    another store's), in one statement."""
    wanted = set(collection_ids)
    found: dict[int, set[str]] = {collection_id: set() for collection_id in wanted}
    if wanted:
        stmt = select(collection_products.c.collection_id, collection_products.c.external_product_id).where(
            collection_products.c.store_id == store_id, collection_products.c.collection_id.in_(wanted))
        for collection_id, external_id in conn.execute(stmt):
            found[collection_id].add(external_id)
    return {collection_id: frozenset(ids) for collection_id, ids in found.items()}


def contains(conn: Connection, store_id: int, collection_id: int, external_product_id: str) -> bool:
    """Whether the product (by its external id) is in the store's collection."""
    stmt = select(collection_products.c.id).where(
        collection_products.c.store_id == store_id, collection_products.c.collection_id == collection_id,
        collection_products.c.external_product_id == external_product_id).limit(1)
    return conn.execute(stmt).first() is not None
