"""Customers in the database. Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, exists, func, or_, select, update

from rebill.db.among import among, among_bound
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import charges, customers, orders, payment_methods, purchase_items

from ..charge.model import ERROR
from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, count, fetch_page
from ..payment_method.model import USABLE
from ..text_keys import text_key, text_keys
from .model import Customer

# NOTE: decisions §6.12, a customer has a valid payment method while one is `valid` or
# `unvalidated`, and is in dunning while one of its charges is in error.
_has_valid_payment_method = (
    exists()
    # OR rather than IN: prepared statements (db/prepared.py) take no expanding parameters.
    .where(payment_methods.c.customer_id == customers.c.id, or_(*(payment_methods.c.status == s for s in USABLE)))
    .label("has_valid_payment_method")
)
_in_dunning = (
    exists()
    .where(charges.c.customer_id == customers.c.id, charges.c.status == ERROR)
    .label("has_payment_method_in_dunning")
)
# The default method (one per customer, migration 0005) shows the processor fields and the
# reason a customer has no valid method: one join, never a query per row.
_default = payment_methods.alias("default_method")


def _subscriptions(*conditions: Any) -> Any:
    return (select(func.count()).select_from(purchase_items)
            .where(purchase_items.c.customer_id == customers.c.id, purchase_items.c.kind == "subscription",
                   *conditions).scalar_subquery())


# NOTE: docs/api-choices.md (Billing), a customer's orders_count counts its processed orders.
_orders_count = (select(func.count()).select_from(orders)
                 .where(orders.c.customer_id == customers.c.id, orders.c.status == "success")
                 .scalar_subquery().label("orders_count"))
_derived = (
    _has_valid_payment_method,
    _subscriptions(purchase_items.c.status == "active").label("subscriptions_active_count"),
    _subscriptions().label("subscriptions_total_count"),
    _in_dunning,
    _default.c.processor_name.label("default_method_processor"),
    _default.c.processor_customer_token.label("default_method_customer_token"),
    _default.c.processor_payment_method_token.label("default_method_payment_token"),
    _default.c.status.label("default_method_status"),
    _default.c.status_reason.label("default_method_status_reason"),
    _orders_count,
)
_select = (select(*columns_for(Customer, [*customers.c, *_derived]))
           .select_from(customers.outerjoin(_default, and_(_default.c.customer_id == customers.c.id,
                                                           _default.c.is_default.is_(True)))))

FILTERS: dict[str, Filter] = {
    **time_window(customers),
    "email": lambda v: customers.c.email_key.in_(text_keys(v)),
    "hash": lambda v: customers.c.hash == v,
    "external_customer_id": lambda v: customers.c.external_customer_id == v,
    "status": lambda v: customers.c.status == v,
}


_by_id = Prepared(_select.where(customers.c.id == bindparam("id"), customers.c.store_id == bindparam("store_id")))


def get(conn: Connection, store_id: int, customer_id: int) -> Customer | None:
    row = _by_id.one(conn, id=customer_id, store_id=store_id)
    return Customer(*row) if row else None


def locked(conn: Connection, store_id: int, customer_id: int) -> Customer | None:
    """The customer read under its row's update lock (PostgreSQL `FOR NO KEY UPDATE`: new
    children's key share locks pass), so that writers of its own fields or status queue and
    each reads what the one before wrote. SQLite serializes writers anyway."""
    stmt = _select.where(customers.c.id == customer_id, customers.c.store_id == store_id)
    row = conn.execute(stmt.with_for_update(key_share=True, of=customers)).first()
    return Customer(*row) if row else None


def exists_in_store(conn: Connection, store_id: int, customer_id: int, *, lock: str | None = None) -> bool:
    """``lock="share"`` keeps the customer from being deleted until the unit ends (a new
    child row is on its way); ``lock="update"`` keeps new children away (the customer is
    being deleted); ``lock="change"`` queues the writers of its own row (its status) and lets
    new children's key share locks pass (`FOR NO KEY UPDATE`). PostgreSQL row locks; SQLite
    serializes writers anyway and ignores them."""
    stmt = select(customers.c.id).where(customers.c.id == customer_id, customers.c.store_id == store_id)
    if lock is not None:
        stmt = stmt.with_for_update(read=lock == "share", key_share=lock == "change")
    return conn.execute(stmt).first() is not None


def many(conn: Connection, store_id: int, ids: list[int]) -> dict[int, Customer]:
    if not ids:
        return {}
    stmt = _select.where(customers.c.store_id == store_id, among(customers.c.id, set(ids)))
    return {row.id: Customer(*row) for row in conn.execute(stmt)}


_email_key_holder = Prepared(select(customers.c.id).where(
    customers.c.store_id == bindparam("store_id"), customers.c.email_key == bindparam("email_key"),
    customers.c.id != bindparam("other_than")))


def id_by_email(conn: Connection, store_id: int, email: str, *, other_than: int = 0) -> int | None:
    """The store's customer with this email (compared as the unique key compares it: text_keys,
    one statement a key, and most e-mails have one), if any. Prepared: it runs on every create.
    Ids start at 1, so ``other_than`` 0 excludes nobody."""
    for key in text_keys(email):
        found = _email_key_holder.one(conn, store_id=store_id, email_key=key, other_than=other_than)
        if found is not None:
            return int(found[0])
    return None


def email_taken(conn: Connection, store_id: int, email: str, *, other_than: int | None = None) -> bool:
    return id_by_email(conn, store_id, email, other_than=other_than or 0) is not None


def insert_customer(conn: Connection, values: dict[str, Any]) -> int:
    values = {**values, "email_key": text_key(values["email"])}
    return insert_row(conn, customers, values)


def update_customer(conn: Connection, store_id: int, customer_id: int, values: dict[str, Any]) -> None:
    if "email" in values:
        values = {**values, "email_key": text_key(values["email"])}
    conn.execute(update(customers).where(customers.c.id == customer_id, customers.c.store_id == store_id)
                 .values(**values))


def delete_customer(conn: Connection, store_id: int, customer_id: int) -> None:
    conn.execute(delete(customers).where(customers.c.id == customer_id, customers.c.store_id == store_id))


def _filtered(store_id: int, filters: dict[str, Any]) -> Any:
    return where(_select.where(customers.c.store_id == store_id), FILTERS, filters)


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    return fetch_page(conn, _filtered(store_id, query.filters), customers, query, Customer)


def count_where(conn: Connection, store_id: int, filters: dict[str, Any]) -> int:
    return count(conn, where(select(customers.c.id).where(customers.c.store_id == store_id), FILTERS, filters))


_billing = Prepared(select(customers.c.id, customers.c.billing_address).where(
    customers.c.id == bindparam("id"), customers.c.store_id == bindparam("store_id")))
_billing_many = Prepared(select(customers.c.id, customers.c.billing_address).where(
    customers.c.store_id == bindparam("store_id"), among_bound(customers.c.id, "ids")))


def billing_addresses(conn: Connection, store_id: int, ids: list[int]) -> dict[int, Any]:
    """The 2021-01 billing address document of each customer (a charge's billing address)."""
    ids = list(set(ids))
    if len(ids) == 1:
        row = _billing.one(conn, id=ids[0], store_id=store_id)
        return {row[0]: row[1]} if row else {}
    if not ids:
        return {}
    return {row[0]: row[1] for row in _billing_many.all(conn, store_id=store_id, ids=sorted(ids))}
