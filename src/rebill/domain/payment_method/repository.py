"""Payment methods in the database. Every statement is scoped to one store (decisions §1.1).

`get`, `of_customers` and `many` are the look-ups other aggregates use (addresses, the
delivery schedule, includes, charge processing); they return :class:`PaymentMethod`s."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, select, update

from rebill.db.among import among, unindexed
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import addresses, payment_methods

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, fetch_page
from .model import PaymentMethod

_select = select(*columns_for(PaymentMethod, payment_methods.c))
_by_id = Prepared(_select.where(payment_methods.c.id == bindparam("id"),
                                payment_methods.c.store_id == bindparam("store_id")))

FILTERS: dict[str, Filter] = {
    **time_window(payment_methods),
    "customer_id": lambda v: payment_methods.c.customer_id == v,
    "payment_type": lambda v: payment_methods.c.payment_type == v,
    "status": lambda v: payment_methods.c.status == v,
}


def get(conn: Connection, store_id: int, payment_method_id: int, *, lock: str | None = None) -> PaymentMethod | None:
    """``lock="update"`` holds the row until the unit ends (it is being changed or deleted);
    ``lock="reference"`` keeps it from being deleted while a new reference to it is written
    (PostgreSQL ``FOR KEY SHARE``, which is also what the foreign key check takes, so the two
    never deadlock). SQLite serializes writers anyway and ignores both."""
    if lock is None:
        row = _by_id.one(conn, id=payment_method_id, store_id=store_id)
        return PaymentMethod(*row) if row else None
    stmt = _select.where(payment_methods.c.id == payment_method_id, payment_methods.c.store_id == store_id)
    stmt = stmt.with_for_update(read=lock == "reference", key_share=lock == "reference")
    found = conn.execute(stmt).first()
    return PaymentMethod(*found) if found else None


def of_customers(conn: Connection, store_id: int, customer_ids: list[int]) -> list[PaymentMethod]:
    if not customer_ids:
        return []
    stmt = _select.where(unindexed(payment_methods.c.store_id) == store_id,
                         among(payment_methods.c.customer_id, set(customer_ids)))
    return [PaymentMethod(*row) for row in conn.execute(stmt.order_by(payment_methods.c.id))]


def of_customers_named_by(conn: Connection, store_id: int, customer_ids: list[int],
                          address_ids: list[int]) -> tuple[list[PaymentMethod], dict[int, int]]:
    """The methods of the customers, and which of them each of ``address_ids`` names (address id
    -> method id), in one statement for a page (decisions §3.8)."""
    if not customer_ids:
        return [], {}
    named = and_(addresses.c.payment_method_id == payment_methods.c.id, among(addresses.c.id, set(address_ids)))
    stmt = (_select.add_columns(addresses.c.id).select_from(payment_methods.outerjoin(addresses, named))
            .where(unindexed(payment_methods.c.store_id) == store_id,
                   among(payment_methods.c.customer_id, set(customer_ids))))
    methods: dict[int, PaymentMethod] = {}
    chosen: dict[int, int] = {}
    for *row, address_id in conn.execute(stmt.order_by(payment_methods.c.id)):
        method = methods.setdefault(row[0], PaymentMethod(*row))
        if address_id is not None:
            chosen[address_id] = method.id
    return list(methods.values()), chosen


def many(conn: Connection, store_id: int, ids: list[int]) -> dict[int, PaymentMethod]:
    if not ids:
        return {}
    stmt = _select.where(payment_methods.c.store_id == store_id, among(payment_methods.c.id, set(ids)))
    return {row.id: PaymentMethod(*row) for row in conn.execute(stmt)}


def insert_payment_method(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, payment_methods, values)


def update_payment_method(conn: Connection, store_id: int, payment_method_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(payment_methods).where(payment_methods.c.id == payment_method_id,
                                               payment_methods.c.store_id == store_id).values(**values))


def delete_payment_method(conn: Connection, store_id: int, payment_method_id: int) -> None:
    conn.execute(delete(payment_methods).where(payment_methods.c.id == payment_method_id,
                                               payment_methods.c.store_id == store_id))


def clear_default(conn: Connection, store_id: int, customer_id: int, now: datetime) -> None:
    """The customer's default method stops being the default (another one is about to be)."""
    conn.execute(update(payment_methods)
                 .where(payment_methods.c.store_id == store_id, payment_methods.c.customer_id == customer_id,
                        payment_methods.c.is_default.is_(True))
                 .values(is_default=False, updated_at=now))


def oldest_of_customer(conn: Connection, store_id: int, customer_id: int) -> int | None:
    stmt = (select(payment_methods.c.id)
            .where(payment_methods.c.store_id == store_id, payment_methods.c.customer_id == customer_id)
            .order_by(payment_methods.c.created_at, payment_methods.c.id).limit(1))
    return conn.execute(stmt).scalar()


def has_any(conn: Connection, store_id: int, customer_id: int) -> bool:
    stmt = select(payment_methods.c.id).where(payment_methods.c.store_id == store_id,
                                              payment_methods.c.customer_id == customer_id).limit(1)
    return conn.execute(stmt).first() is not None


def addresses_using(conn: Connection, store_id: int, payment_method_id: int) -> list[int]:
    """The ids of the addresses that name the method by `payment_method_id`."""
    stmt = select(addresses.c.id).where(addresses.c.store_id == store_id,
                                        addresses.c.payment_method_id == payment_method_id)
    return sorted(conn.execute(stmt).scalars())


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_select.where(payment_methods.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, payment_methods, query, PaymentMethod)
