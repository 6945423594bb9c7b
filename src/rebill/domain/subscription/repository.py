"""Purchase items (subscriptions and one-time items) and their skips in the database."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import Connection, bindparam, delete, exists, func, insert, or_, select, update

from rebill.db.among import among, among_bound, unindexed
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import charge_items, charges, customers, purchase_items, skips

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, count, fetch_page
from .model import ACTIVE, SUBSCRIPTION, PurchaseItem

_has_queued = (
    exists().where(charge_items.c.purchase_item_id == purchase_items.c.id,
                   charges.c.id == charge_items.c.charge_id, charges.c.status == "queued")
    .label("has_queued_charges")
)
_select = (select(*columns_for(PurchaseItem, [*purchase_items.c, _has_queued,
                                             customers.c.email.label("customer_email")]))
           .select_from(purchase_items.join(customers, customers.c.id == purchase_items.c.customer_id)))
_plain = select(*columns_for(PurchaseItem, purchase_items.c, leave_out=("has_queued_charges", "customer_email")))

FILTERS: dict[str, Filter] = {
    **time_window(purchase_items),
    "address_id": lambda v: purchase_items.c.address_id == v,
    "address_ids": lambda v: purchase_items.c.address_id.in_(v),
    "customer_id": lambda v: purchase_items.c.customer_id == v,
    "external_product_id": lambda v: purchase_items.c.external_product_id == v,
    "external_variant_id": lambda v: purchase_items.c.external_variant_id == v,
    "status": lambda v: purchase_items.c.status == v,
    "is_cancelled": lambda v: (purchase_items.c.status == "cancelled") if v else (purchase_items.c.status != "cancelled"),
}

_by_id = Prepared(_select.where(purchase_items.c.id == bindparam("id"), purchase_items.c.store_id == bindparam("store_id"),
                                purchase_items.c.kind == bindparam("kind")))


def get(conn: Connection, store_id: int, kind: str, item_id: int) -> PurchaseItem | None:
    row = _by_id.one(conn, id=item_id, store_id=store_id, kind=kind)
    return PurchaseItem(*row) if row else None


# What ``_select`` reads beyond an item's own columns: its customer's e-mail and whether a
# queued charge holds it.
_derived = Prepared(select(customers.c.email, exists().where(
    charge_items.c.purchase_item_id == bindparam("id"), charges.c.id == charge_items.c.charge_id,
    charges.c.status == "queued")).where(customers.c.id == bindparam("customer_id")))
_COLUMNS = [name for name in PurchaseItem.__struct_fields__ if name not in ("has_queued_charges", "customer_email")]


def inserted(conn: Connection, item_id: int, values: dict[str, Any]) -> PurchaseItem:
    """The item just inserted with ``values``, as ``get`` reads it, without reading its 44
    columns back: each holds the value written (tests/scenarios/test_schedule_writes.py
    compares the two); only what ``get`` derives is read."""
    row = _derived.one(conn, id=item_id, customer_id=values["customer_id"])
    assert row is not None  # the customer of the address the item was inserted on
    return PurchaseItem(*[item_id if name == "id" else values[name] for name in _COLUMNS],
                        has_queued_charges=bool(row[1]), customer_email=row[0])


def many(conn: Connection, store_id: int, ids: list[int], kind: str | None = None) -> dict[int, PurchaseItem]:
    if not ids:
        return {}
    stmt = _select.where(purchase_items.c.store_id == store_id, among(purchase_items.c.id, set(ids)))
    if kind is not None:
        stmt = stmt.where(purchase_items.c.kind == kind)
    return {row.id: PurchaseItem(*row) for row in conn.execute(stmt)}


def of(conn: Connection, store_id: int, kind: str, *, address_ids: list[int] | None = None,
       customer_ids: list[int] | None = None) -> list[PurchaseItem]:
    # By the ids' index, not the store's (db/among.py `unindexed`), whichever ids are given.
    by_ids = address_ids is not None or customer_ids is not None
    stmt = _select.where((unindexed(purchase_items.c.store_id) if by_ids else purchase_items.c.store_id) == store_id,
                         purchase_items.c.kind == kind)
    if address_ids is not None:
        stmt = stmt.where(among(purchase_items.c.address_id, set(address_ids)))
    if customer_ids is not None:
        stmt = stmt.where(among(purchase_items.c.customer_id, set(customer_ids)))
    return [PurchaseItem(*row) for row in conn.execute(stmt.order_by(purchase_items.c.id))]


def active_subscriptions_of(conn: Connection, store_id: int, customer_id: int, *, lock: bool = False) -> list[PurchaseItem]:
    """The customer's active subscriptions, by id; ``lock``: their rows locked for update."""
    stmt = _plain.where(purchase_items.c.store_id == store_id, purchase_items.c.customer_id == customer_id,
                        purchase_items.c.kind == SUBSCRIPTION, purchase_items.c.status == ACTIVE)
    stmt = stmt.order_by(purchase_items.c.id)
    return [PurchaseItem(*row) for row in conn.execute(stmt.with_for_update() if lock else stmt)]


# By address alone: the caller holds the address's lock, so it is the store's; with store_id
# too, SQLite (without statistics) walks the store's index instead of the address's.
_for_one_plan = Prepared(_plain.where(
    purchase_items.c.address_id == bindparam("address_id"),
    or_(purchase_items.c.status == ACTIVE, purchase_items.c.id.in_(
        select(skips.c.purchase_item_id).where(skips.c.address_id == bindparam("address_id")))))
    .order_by(purchase_items.c.id))
_for_many_plan = Prepared(_plain.where(
    unindexed(purchase_items.c.store_id) == bindparam("store_id"), among_bound(purchase_items.c.address_id, "ids"),
    or_(purchase_items.c.status == ACTIVE, purchase_items.c.id.in_(
        select(skips.c.purchase_item_id).where(among_bound(skips.c.address_id, "ids")))))
    .order_by(purchase_items.c.id))
_skips_of_many = Prepared(select(skips.c.address_id, skips.c.purchase_item_id, skips.c.date)
                          .where(among_bound(skips.c.address_id, "ids"))
                          .order_by(skips.c.date, skips.c.purchase_item_id))
_skips_of_one = Prepared(select(skips.c.address_id, skips.c.purchase_item_id, skips.c.date)
                         .where(skips.c.address_id == bindparam("address_id"))
                         .order_by(skips.c.date, skips.c.purchase_item_id))
# By customer alone (ids are unique across stores) for the same reason as ``_for_one_plan``.
_active_of_customer = Prepared(select(func.count()).select_from(purchase_items).where(
    purchase_items.c.customer_id == bindparam("customer_id"),
    purchase_items.c.kind == "subscription", purchase_items.c.status == ACTIVE))


def for_plan(conn: Connection, store_id: int, address_ids: list[int]) -> list[PurchaseItem]:
    """What the plan of these addresses needs: their active items and every item with a skip."""
    if len(address_ids) == 1:  # prepared: one address is every subscription write
        return [PurchaseItem(*row) for row in _for_one_plan.all(conn, address_id=address_ids[0])]
    rows = _for_many_plan.all(conn, store_id=store_id, ids=sorted(set(address_ids)))
    return [PurchaseItem(*row) for row in rows]


def skips_of(conn: Connection, address_ids: list[int]) -> list[tuple[int, int, date]]:
    """(address id, item id, date) of every skip on these addresses."""
    if len(address_ids) == 1:
        return [(r[0], r[1], r[2]) for r in _skips_of_one.all(conn, address_id=address_ids[0])]
    return [(r[0], r[1], r[2]) for r in _skips_of_many.all(conn, ids=sorted(set(address_ids)))]


def skipped_dates(conn: Connection, item_id: int) -> list[date]:
    return list(conn.execute(select(skips.c.date).where(skips.c.purchase_item_id == item_id)
                             .order_by(skips.c.date)).scalars())


def skipped_on(conn: Connection, item_ids: list[int], when: date) -> list[int]:
    """Which of these items have skipped ``when``, in id order (one statement)."""
    if not item_ids:
        return []
    return list(conn.execute(select(skips.c.purchase_item_id).where(
        among(skips.c.purchase_item_id, item_ids), skips.c.date == when).order_by(skips.c.purchase_item_id)).scalars())


def charged_since(conn: Connection, item_ids: list[int], when: date) -> list[tuple[int, date]]:
    """Which of these items were last charged for ``when`` or a later date, with that date, in
    id order (one statement)."""
    if not item_ids:
        return []
    return [(row.id, row.last_charge_date) for row in conn.execute(
        select(purchase_items.c.id, purchase_items.c.last_charge_date).where(
            among(purchase_items.c.id, item_ids), purchase_items.c.last_charge_date >= when)
        .order_by(purchase_items.c.id))]


def add_skip(conn: Connection, store_id: int, address_id: int, item_id: int, when: date) -> None:
    conn.execute(insert(skips).values(store_id=store_id, address_id=address_id, purchase_item_id=item_id, date=when))


def remove_skip(conn: Connection, item_id: int, when: date) -> bool:
    return conn.execute(delete(skips).where(skips.c.purchase_item_id == item_id, skips.c.date == when)).rowcount == 1


def remove_skips(conn: Connection, item_id: int, *, from_date: date | None = None) -> None:
    remove_skips_of(conn, [item_id], from_date=from_date)


def remove_skips_of(conn: Connection, item_ids: list[int], *, from_date: date | None = None) -> None:
    stmt = delete(skips).where(among(skips.c.purchase_item_id, item_ids))
    if from_date is not None:
        stmt = stmt.where(skips.c.date >= from_date)
    conn.execute(stmt)


def move_skips(conn: Connection, item_id: int, address_id: int) -> None:
    conn.execute(update(skips).where(skips.c.purchase_item_id == item_id).values(address_id=address_id))


def insert_item(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, purchase_items, values)


def update_item(conn: Connection, store_id: int, item_id: int, lock_version: int, values: dict[str, Any]) -> bool:
    """False when another write changed the item since it was read (decisions §4.6)."""
    result = conn.execute(
        update(purchase_items)
        .where(purchase_items.c.id == item_id, purchase_items.c.store_id == store_id,
               purchase_items.c.lock_version == lock_version)
        .values(**values, lock_version=lock_version + 1))
    return result.rowcount == 1


def delete_item(conn: Connection, store_id: int, item_id: int) -> None:
    conn.execute(delete(purchase_items).where(purchase_items.c.id == item_id, purchase_items.c.store_id == store_id))


def active_count(conn: Connection, store_id: int, *, customer_id: int | None = None,
                 address_id: int | None = None) -> int:
    if customer_id is not None and address_id is None:
        row = _active_of_customer.one(conn, customer_id=customer_id)
        return int(row[0]) if row else 0
    stmt = select(purchase_items.c.id).where(purchase_items.c.store_id == store_id,
                                             purchase_items.c.kind == "subscription",
                                             purchase_items.c.status == ACTIVE)
    if customer_id is not None:
        stmt = stmt.where(purchase_items.c.customer_id == customer_id)
    if address_id is not None:
        stmt = stmt.where(purchase_items.c.address_id == address_id)
    return count(conn, stmt)


def _filtered(store_id: int, kind: str, filters: dict[str, Any]) -> Any:
    return where(_select.where(purchase_items.c.store_id == store_id, purchase_items.c.kind == kind), FILTERS, filters)


def page(conn: Connection, store_id: int, kind: str, query: ListQuery) -> PageResult:
    return fetch_page(conn, _filtered(store_id, kind, query.filters), purchase_items, query, PurchaseItem)


def count_where(conn: Connection, store_id: int, kind: str, filters: dict[str, Any]) -> int:
    stmt = select(purchase_items.c.id).where(purchase_items.c.store_id == store_id, purchase_items.c.kind == kind)
    return count(conn, where(stmt, FILTERS, filters))


