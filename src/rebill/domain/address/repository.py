"""Addresses in the database, read with their discount in the same query."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, delete, exists, select, update

from rebill.db.among import among, among_bound, unindexed
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import addresses, discounts, purchase_items

from ..discount.model import code_keys, value_text
from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, count, fetch_page
from .model import Address, DiscountRef

_select = select(
    *columns_for(Address, addresses.c, leave_out=("discount",)),
    discounts.c.code.label("discount_code"),
    discounts.c.value.label("discount_value"),
    discounts.c.discount_type.label("discount_type"),
).select_from(addresses.outerjoin(discounts, discounts.c.id == addresses.c.discount_id))


def _active(wanted: bool) -> Any:
    """NOTE: spec 01 Addresses list, an address is active while it has an active subscription."""
    condition = exists().where(purchase_items.c.address_id == addresses.c.id,
                               purchase_items.c.kind == "subscription", purchase_items.c.status == "active")
    return condition if wanted else ~condition


FILTERS: dict[str, Filter] = {
    **time_window(addresses),
    "customer_id": lambda v: addresses.c.customer_id == v,
    "discount_id": lambda v: addresses.c.discount_id == v,
    # A plain IN: the list query already joins discounts, so a correlated EXISTS would not do.
    # NOTE: decisions §7.5, codes match case-insensitively (as the discounts' own filter does).
    "discount_code": lambda v: addresses.c.discount_id.in_(select(discounts.c.id)
                                                           .where(discounts.c.code_key.in_(code_keys(v)))),
    "is_active": _active,
}


_by_id = Prepared(_select.where(addresses.c.id == bindparam("id"), addresses.c.store_id == bindparam("store_id")))
# The address's row lock and its values in one statement (``locked``); ``OF addresses``: the
# discount is on the nullable side of the join, which PostgreSQL does not lock.
_by_id_locked = Prepared(_select.where(addresses.c.id == bindparam("id"), addresses.c.store_id == bindparam("store_id"))
                         .with_for_update(of=addresses))
# Many at once (a replan of several addresses: an async batch's chunk); locks in id order.
_many = Prepared(_select.where(addresses.c.store_id == bindparam("store_id"), among_bound(addresses.c.id, "ids")))
_many_locked = Prepared(_select.where(addresses.c.store_id == bindparam("store_id"), among_bound(addresses.c.id, "ids"))
                        .order_by(addresses.c.id).with_for_update(of=addresses))


def to_address(*row: Any) -> Address:
    """A row of ``_select``: the address's columns in field order, then its discount's."""
    address = Address(*row[:-3])
    code = row[-3]
    if address.discount_id is not None and code is not None:
        value, kind = row[-2], row[-1]
        address.discount = DiscountRef(id=address.discount_id, code=code, value_type=kind,
                                       value=value_text(kind, value, address.presentment_currency))
    return address


def get(conn: Connection, store_id: int, address_id: int) -> Address | None:
    row = _by_id.one(conn, id=address_id, store_id=store_id)
    return to_address(*row) if row else None


def locked(conn: Connection, store_id: int, address_id: int) -> Address | None:
    """``get`` holding the address's row lock until the unit ends, as ``lock`` takes it."""
    row = _by_id_locked.one(conn, id=address_id, store_id=store_id)
    return to_address(*row) if row else None


def of_customers(conn: Connection, store_id: int, customer_ids: list[int]) -> list[Address]:
    if not customer_ids:
        return []
    stmt = _select.where(unindexed(addresses.c.store_id) == store_id, among(addresses.c.customer_id, set(customer_ids)))
    return [to_address(*r) for r in conn.execute(stmt.order_by(addresses.c.id))]


def of_payment_methods(conn: Connection, store_id: int, payment_method_ids: list[int]) -> list[Address]:
    """The addresses that name one of the payment methods by `payment_method_id`."""
    if not payment_method_ids:
        return []
    stmt = _select.where(unindexed(addresses.c.store_id) == store_id,
                         among(addresses.c.payment_method_id, set(payment_method_ids)))
    return [to_address(*r) for r in conn.execute(stmt.order_by(addresses.c.id))]


def delete_of_customer(conn: Connection, store_id: int, customer_id: int) -> list[int]:
    """Delete a customer's addresses; returns the ids actually deleted."""
    stmt = (delete(addresses).where(addresses.c.store_id == store_id, addresses.c.customer_id == customer_id)
            .returning(addresses.c.id))
    return sorted(conn.execute(stmt).scalars())


def insert_address(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, addresses, values)


def update_address(conn: Connection, store_id: int, address_id: int, lock_version: int,
                   values: dict[str, Any]) -> bool:
    """False when another write changed the address since it was read (decisions §4.6)."""
    result = conn.execute(
        update(addresses)
        .where(addresses.c.id == address_id, addresses.c.store_id == store_id,
               addresses.c.lock_version == lock_version)
        .values(**values, lock_version=lock_version + 1)
    )
    return result.rowcount == 1


def delete_address(conn: Connection, store_id: int, address_id: int, lock_version: int) -> bool:
    result = conn.execute(delete(addresses).where(addresses.c.id == address_id, addresses.c.store_id == store_id,
                                                  addresses.c.lock_version == lock_version))
    return result.rowcount == 1


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_select.where(addresses.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, addresses, query, to_address)


def count_where(conn: Connection, store_id: int, filters: dict[str, Any]) -> int:
    return count(conn, where(select(addresses.c.id).where(addresses.c.store_id == store_id), FILTERS, filters))


def many(conn: Connection, store_id: int, ids: list[int], *, lock: bool = False) -> dict[int, Address]:
    """``lock``: read holding their row locks, taken in id order as ``lock`` takes them (one
    statement where a replan took two: 3 % of an async batch's time on SQLite)."""
    if not ids:
        return {}
    if len(ids) == 1:
        found = (locked if lock else get)(conn, store_id, ids[0])
        return {found.id: found} if found is not None else {}
    rows = (_many_locked if lock else _many).all(conn, store_id=store_id, ids=sorted(set(ids)))
    return {row[0]: to_address(*row) for row in rows}


def ids_of_store(conn: Connection, store_id: int) -> list[int]:
    return list(conn.execute(select(addresses.c.id).where(addresses.c.store_id == store_id)
                             .order_by(addresses.c.id)).scalars())


def lock(conn: Connection, store_id: int, ids: list[int], *, skip_locked: bool = False) -> list[int]:
    """Row locks on these addresses until the unit ends, taken in id order (no deadlock
    between two writers): every write that replans an address's charges holds its lock, so two
    plans of one address never interleave (PostgreSQL; SQLite serializes writers anyway).
    Returns the ids that exist in the store. With ``skip_locked`` (a billing run beside
    others, domain/billing/run.py) it waits for none: the addresses another transaction holds
    are left out of the answer."""
    ids = list(dict.fromkeys(ids))
    if skip_locked and ids:
        return list(conn.execute(select(addresses.c.id).where(addresses.c.store_id == store_id,
                                                              among(addresses.c.id, ids))
                                 .order_by(addresses.c.id).with_for_update(skip_locked=True)).scalars())
    if len(ids) == 1:
        return ids if _lock_one.one(conn, id=ids[0], store_id=store_id) is not None else []
    if not ids:
        return []
    stmt = (select(addresses.c.id).where(addresses.c.store_id == store_id, among(addresses.c.id, ids))
            .order_by(addresses.c.id).with_for_update())
    return list(conn.execute(stmt).scalars())


# Prepared: a replan of one address (a write of one of its purchase items) locks it alone.
_lock_one = Prepared(select(addresses.c.id).where(addresses.c.id == bindparam("id"),
                                                  addresses.c.store_id == bindparam("store_id")).with_for_update())


def ids_of_customer(conn: Connection, store_id: int, customer_id: int) -> list[int]:
    return list(conn.execute(select(addresses.c.id).where(addresses.c.store_id == store_id,
                                                          addresses.c.customer_id == customer_id)).scalars())
