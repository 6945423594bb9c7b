"""Products and plans in the database. Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import Connection, bindparam, delete, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import plans, products

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, fetch_page
from .model import Plan, Product, Variant

_product_select = select(*columns_for(Product, products.c, leave_out=("plans",)))
_VARIANTS = Product.__struct_fields__.index("variants")
_plan_select = select(*columns_for(Plan, plans.c))
# NOTE: the order in which a product's plans are shown and derived from (2021-01 view).
_plan_order = (plans.c.sort_order, plans.c.id)

PRODUCT_FILTERS: dict[str, Filter] = {
    **time_window(products),
    "external_product_ids": lambda v: products.c.external_product_id.in_(v),
}
PLAN_FILTERS: dict[str, Filter] = {
    **time_window(plans),
    "external_product_id": lambda v: plans.c.external_product_id == v,
    "type": lambda v: plans.c.type == v,
}


def variants_of(stored: list[dict[str, Any]]) -> list[Variant]:
    return msgspec.convert(stored, list[Variant])


def stored_variants(variants: list[Variant]) -> list[dict[str, Any]]:
    """The JSON document: prices as exact decimal strings, never floats."""
    return msgspec.to_builtins(variants)  # type: ignore[no-any-return]


def to_product(*row: Any) -> Product:
    values = list(row)
    values[_VARIANTS] = variants_of(values[_VARIANTS])
    return Product(*values)


# Products --------------------------------------------------------------------------------

# Prepared: subscriptions and one-time items read a product by its external id on every write.
_product_by_external = Prepared(_product_select.where(
    products.c.store_id == bindparam("store_id"), products.c.external_product_id == bindparam("external_id")))
_product_by_id = Prepared(_product_select.where(
    products.c.id == bindparam("id"), products.c.store_id == bindparam("store_id")))


def product_by_external_id(conn: Connection, store_id: int, external_product_id: str, *,
                           lock: str | None = None) -> Product | None:
    """``lock="share"`` keeps the product from being deleted until the unit ends (plans are
    being written for it); ``lock="update"`` also keeps other writers of the product waiting
    (it may be changed). PostgreSQL row locks; SQLite serializes writers and ignores them."""
    if lock is not None:
        stmt = _product_select.where(products.c.store_id == store_id,
                                     products.c.external_product_id == external_product_id)
        found = conn.execute(stmt.with_for_update(read=lock == "share")).first()
        return to_product(*found) if found else None
    row = _product_by_external.one(conn, store_id=store_id, external_id=external_product_id)
    return to_product(*row) if row else None


def product_by_id(conn: Connection, store_id: int, product_id: int) -> Product | None:
    row = _product_by_id.one(conn, id=product_id, store_id=store_id)
    return to_product(*row) if row else None


def lock_product(conn: Connection, store_id: int, product_id: int) -> bool:
    """An update lock: plans for the product wait until the unit ends (it is being deleted)."""
    stmt = (select(products.c.id).where(products.c.id == product_id, products.c.store_id == store_id)
            .with_for_update())
    return conn.execute(stmt).first() is not None


def external_id_taken(conn: Connection, store_id: int, external_product_id: str) -> bool:
    stmt = select(products.c.id).where(products.c.store_id == store_id,
                                       products.c.external_product_id == external_product_id)
    return conn.execute(stmt).first() is not None


def insert_product(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, products, values)


def touch_products(conn: Connection, store_id: int, product_ids: list[int], now: Any) -> None:
    """The products' `updated_at`: their plans changed (a 2021-01 product shows them)."""
    if product_ids:
        conn.execute(update(products).where(products.c.store_id == store_id, products.c.id.in_(product_ids))
                     .values(updated_at=now))


def update_product(conn: Connection, store_id: int, product_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(products).where(products.c.id == product_id, products.c.store_id == store_id)
                 .values(**values))


def delete_product(conn: Connection, store_id: int, product_id: int) -> None:
    conn.execute(delete(products).where(products.c.id == product_id, products.c.store_id == store_id))


def product_page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_product_select.where(products.c.store_id == store_id), PRODUCT_FILTERS, query.filters)
    return fetch_page(conn, stmt, products, query, to_product)


# Plans -----------------------------------------------------------------------------------

_plan_by_id = Prepared(_plan_select.where(plans.c.id == bindparam("id"), plans.c.store_id == bindparam("store_id")))


def plan(conn: Connection, store_id: int, plan_id: int) -> Plan | None:
    row = _plan_by_id.one(conn, id=plan_id, store_id=store_id)
    return Plan(*row) if row else None


def plans_by_id(conn: Connection, store_id: int, plan_ids: list[int]) -> dict[int, Plan]:
    if not plan_ids:
        return {}
    stmt = _plan_select.where(plans.c.store_id == store_id, plans.c.id.in_(set(plan_ids)))
    return {row.id: Plan(*row) for row in conn.execute(stmt)}


def plans_of_products(conn: Connection, store_id: int, product_ids: list[int]) -> dict[int, list[Plan]]:
    """Each product's plans in their order (sort_order, then id): one query for a page."""
    found: dict[int, list[Plan]] = {product_id: [] for product_id in product_ids}
    if not product_ids:
        return found
    stmt = _plan_select.where(plans.c.store_id == store_id, plans.c.product_id.in_(set(product_ids)))
    for row in conn.execute(stmt.order_by(*_plan_order)):
        found[row.product_id].append(Plan(*row))
    return found


def insert_plan(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, plans, values)


def update_plan(conn: Connection, store_id: int, plan_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(plans).where(plans.c.id == plan_id, plans.c.store_id == store_id).values(**values))


def delete_plans(conn: Connection, store_id: int, plan_ids: list[int]) -> list[int]:
    """Returns the ids actually deleted, in order."""
    if not plan_ids:
        return []
    stmt = (delete(plans).where(plans.c.store_id == store_id, plans.c.id.in_(set(plan_ids)))
            .returning(plans.c.id))
    return sorted(conn.execute(stmt).scalars())


def delete_plans_of_product(conn: Connection, store_id: int, product_id: int) -> list[int]:
    stmt = (delete(plans).where(plans.c.store_id == store_id, plans.c.product_id == product_id)
            .returning(plans.c.id))
    return sorted(conn.execute(stmt).scalars())


def plan_page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_plan_select.where(plans.c.store_id == store_id), PLAN_FILTERS, query.filters)
    return fetch_page(conn, stmt, plans, query, Plan)
