"""Bundle variants and bundle selections in the database. Every statement is scoped to one store
(decisions §1.1); a page of either loads its children (collections, items) in one more
statement, never one per row."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, delete, select, true, update

from rebill.db.among import among, unindexed
from rebill.db.rows import columns_for
from rebill.db.statements import insert_all, insert_row
from rebill.models import (
    bundle_selection_items,
    bundle_selections,
    bundle_variant_collections,
    bundle_variants,
    collections,
    purchase_items,
)

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, fetch_page
from ..subscription.model import ACTIVE
from .model import BundleCollection, BundleSelection, BundleVariant, SelectionItem

_variant_select = select(*columns_for(BundleVariant, bundle_variants.c, leave_out=("collections",)))
_range_select = select(*columns_for(BundleCollection, bundle_variant_collections.c))
_selection_select = select(*columns_for(BundleSelection, bundle_selections.c, leave_out=("items",)))
_item_select = select(*columns_for(SelectionItem, bundle_selection_items.c))


def _with_items(column: Any, values: list[str]) -> Any:
    """Selections holding an item whose ``column`` is one of ``values``."""
    return bundle_selections.c.id.in_(select(bundle_selection_items.c.bundle_selection_id).where(
        bundle_selection_items.c.store_id == bundle_selections.c.store_id, column.in_(values)))


VARIANT_FILTERS: dict[str, Filter] = {
    **time_window(bundle_variants),
    "external_product_id": lambda v: bundle_variants.c.external_product_id == v,
    "external_variant_id": lambda v: bundle_variants.c.external_variant_id == v,
}
SELECTION_FILTERS: dict[str, Filter] = {
    "purchase_item_ids": lambda v: bundle_selections.c.purchase_item_id.in_(v),
    "bundle_variant_ids": lambda v: bundle_selections.c.bundle_variant_id.in_(v),
    "item_external_product_ids": lambda v: _with_items(bundle_selection_items.c.external_product_id, v),
    "item_external_variant_ids": lambda v: _with_items(bundle_selection_items.c.external_variant_id, v),
    # NOTE: spec 01, `active_purchase_items=true` leaves out the selections of items no longer
    # active (cancelled or expired subscriptions, processed one-time items); false filters nothing.
    "active_purchase_items": lambda v: bundle_selections.c.purchase_item_id.in_(
        select(purchase_items.c.id).where(purchase_items.c.status == ACTIVE)) if v else true(),
}


# Bundle variants ----------------------------------------------------------------------------

def _ranges(conn: Connection, variants: list[BundleVariant]) -> list[BundleVariant]:
    """Each variant with its collections, in the order they were given: one statement."""
    if variants:
        found: dict[int, list[BundleCollection]] = {v.id: [] for v in variants}
        stmt = _range_select.where(among(bundle_variant_collections.c.bundle_variant_id, found))
        for row in conn.execute(stmt.order_by(bundle_variant_collections.c.id)):
            found[row.bundle_variant_id].append(BundleCollection(*row))
        for variant in variants:
            variant.collections = found[variant.id]
    return variants


def variant(conn: Connection, store_id: int, variant_id: int, *, lock: bool = False) -> BundleVariant | None:
    """``lock``: an update lock until the unit ends, the variant being changed or deleted
    (PostgreSQL; SQLite serializes writers)."""
    stmt = _variant_select.where(bundle_variants.c.id == variant_id, bundle_variants.c.store_id == store_id)
    row = conn.execute(stmt.with_for_update() if lock else stmt).first()
    return _ranges(conn, [BundleVariant(*row)])[0] if row else None


def variant_of(conn: Connection, store_id: int, external_product_id: str | None,
               external_variant_id: str | None, *, lock: bool = False) -> BundleVariant | None:
    """The bundle a catalog variant is, if it is one; ``lock``: a key share lock until the unit
    ends, so that the bundle is not deleted under a selection being made for it."""
    if external_product_id is None or external_variant_id is None:
        return None
    stmt = _variant_select.where(bundle_variants.c.store_id == store_id,
                                 bundle_variants.c.external_product_id == external_product_id,
                                 bundle_variants.c.external_variant_id == external_variant_id)
    if lock:
        stmt = stmt.with_for_update(key_share=True, read=True)
    row = conn.execute(stmt).first()
    return _ranges(conn, [BundleVariant(*row)])[0] if row else None


def variants_of_items(conn: Connection, store_id: int, keys: Iterable[tuple[str | None, str | None]]
                      ) -> dict[tuple[str, str], BundleVariant]:
    """(external product id, external variant id) -> its bundle, for those that are bundles."""
    wanted = {(p, v) for p, v in keys if p is not None and v is not None}
    if not wanted:
        return {}
    stmt = _variant_select.where(bundle_variants.c.store_id == store_id,
                                 bundle_variants.c.external_variant_id.in_({v for _, v in wanted}))
    found = [BundleVariant(*row) for row in conn.execute(stmt)]
    return {(v.external_product_id, v.external_variant_id): v
            for v in _ranges(conn, found) if (v.external_product_id, v.external_variant_id) in wanted}


def variant_page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_variant_select.where(bundle_variants.c.store_id == store_id), VARIANT_FILTERS, query.filters)
    result = fetch_page(conn, stmt, bundle_variants, query, BundleVariant)
    _ranges(conn, result.rows)
    return result


def variant_taken(conn: Connection, store_id: int, external_product_id: str, external_variant_id: str) -> int | None:
    """The id of the bundle that catalog variant already is, if any."""
    stmt = select(bundle_variants.c.id).where(bundle_variants.c.store_id == store_id,
                                              bundle_variants.c.external_product_id == external_product_id,
                                              bundle_variants.c.external_variant_id == external_variant_id)
    return conn.execute(stmt).scalar()


def insert_variant(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, bundle_variants, values)


def update_variant(conn: Connection, store_id: int, variant_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(bundle_variants).where(bundle_variants.c.id == variant_id,
                                               bundle_variants.c.store_id == store_id).values(**values))


def set_ranges(conn: Connection, store_id: int, variant_id: int, ranges: list[dict[str, Any]]) -> None:
    """The variant's collections become ``ranges`` ({collection_id, min_quantity, max_quantity})."""
    conn.execute(delete(bundle_variant_collections).where(bundle_variant_collections.c.store_id == store_id,
                                                          bundle_variant_collections.c.bundle_variant_id == variant_id))
    insert_all(conn, bundle_variant_collections, [{"store_id": store_id, "bundle_variant_id": variant_id, **r}
                                                  for r in ranges])


def delete_variant(conn: Connection, store_id: int, variant_id: int) -> None:
    conn.execute(delete(bundle_variant_collections).where(bundle_variant_collections.c.store_id == store_id,
                                                          bundle_variant_collections.c.bundle_variant_id == variant_id))
    conn.execute(delete(bundle_variants).where(bundle_variants.c.id == variant_id,
                                               bundle_variants.c.store_id == store_id))


def lock_collections(conn: Connection, store_id: int, collection_ids: Iterable[int]) -> set[int]:
    """Which of ``collection_ids`` are the store's collections, each held with a key share lock
    until the unit ends (PostgreSQL): a collection delete takes its update lock first, so a
    bundle never names a collection deleted meanwhile, nor a delete misses a new bundle."""
    wanted = sorted(set(collection_ids))
    if not wanted:
        return set()
    stmt = (select(collections.c.id).where(collections.c.store_id == store_id, collections.c.id.in_(wanted))
            .order_by(collections.c.id).with_for_update(key_share=True, read=True))
    return set(conn.execute(stmt).scalars())


def variants_naming(conn: Connection, store_id: int, collection_id: int) -> list[int]:
    """The bundle variants whose contents may come from the collection."""
    stmt = select(bundle_variant_collections.c.bundle_variant_id).where(
        bundle_variant_collections.c.store_id == store_id, bundle_variant_collections.c.collection_id == collection_id)
    return sorted(conn.execute(stmt).scalars())


def selections_of_variant(conn: Connection, store_id: int, variant_id: int) -> list[int]:
    stmt = select(bundle_selections.c.id).where(bundle_selections.c.store_id == store_id,
                                                bundle_selections.c.bundle_variant_id == variant_id)
    return sorted(conn.execute(stmt).scalars())


# Bundle selections --------------------------------------------------------------------------

def _items(conn: Connection, selections: list[BundleSelection]) -> list[BundleSelection]:
    """Each selection with its items, in the order they were chosen: one statement."""
    if selections:
        found: dict[int, list[SelectionItem]] = {s.id: [] for s in selections}
        stmt = _item_select.where(among(bundle_selection_items.c.bundle_selection_id, found))
        for row in conn.execute(stmt.order_by(bundle_selection_items.c.id)):
            found[row.bundle_selection_id].append(SelectionItem(*row))
        for selection in selections:
            selection.items = found[selection.id]
    return selections


def selection(conn: Connection, store_id: int, selection_id: int, *, lock: bool = False) -> BundleSelection | None:
    stmt = _selection_select.where(bundle_selections.c.id == selection_id, bundle_selections.c.store_id == store_id)
    row = conn.execute(stmt.with_for_update() if lock else stmt).first()
    return _items(conn, [BundleSelection(*row)])[0] if row else None


def selection_page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_selection_select.where(bundle_selections.c.store_id == store_id), SELECTION_FILTERS, query.filters)
    result = fetch_page(conn, stmt, bundle_selections, query, BundleSelection)
    _items(conn, result.rows)
    return result


def selections_of_items(conn: Connection, store_id: int, purchase_item_ids: Iterable[int]
                        ) -> dict[int, BundleSelection]:
    """purchase item id -> its selection with its items, for those that have one."""
    wanted = sorted(set(purchase_item_ids))
    if not wanted:
        return {}
    stmt = _selection_select.where(unindexed(bundle_selections.c.store_id) == store_id,
                                   among(bundle_selections.c.purchase_item_id, wanted))
    found = _items(conn, [BundleSelection(*row) for row in conn.execute(stmt)])
    return {s.purchase_item_id: s for s in found}


def selection_of_item(conn: Connection, store_id: int, purchase_item_id: int) -> int | None:
    stmt = select(bundle_selections.c.id).where(bundle_selections.c.store_id == store_id,
                                                bundle_selections.c.purchase_item_id == purchase_item_id)
    return conn.execute(stmt).scalar()


def insert_selection(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, bundle_selections, values)


def update_selection(conn: Connection, store_id: int, selection_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(bundle_selections).where(bundle_selections.c.id == selection_id,
                                                 bundle_selections.c.store_id == store_id).values(**values))


def delete_selection(conn: Connection, store_id: int, selection_id: int) -> None:
    conn.execute(delete(bundle_selection_items).where(bundle_selection_items.c.store_id == store_id,
                                                      bundle_selection_items.c.bundle_selection_id == selection_id))
    conn.execute(delete(bundle_selections).where(bundle_selections.c.id == selection_id,
                                                 bundle_selections.c.store_id == store_id))


def insert_items(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        insert_all(conn, bundle_selection_items, rows)


def update_item(conn: Connection, item_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(bundle_selection_items).where(bundle_selection_items.c.id == item_id).values(**values))


def delete_items(conn: Connection, store_id: int, item_ids: Iterable[int]) -> None:
    wanted = sorted(set(item_ids))
    if wanted:
        conn.execute(delete(bundle_selection_items).where(bundle_selection_items.c.store_id == store_id,
                                                          bundle_selection_items.c.id.in_(wanted)))
