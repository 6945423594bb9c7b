"""Orders in storage (models.orders). The billing run writes them; the orders API reads them.
Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from rebill.db import statements
from rebill.db.among import among
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.models import addresses, charges, customers, order_items, orders
from rebill.models.base import UtcDateTime
from rebill.models.order import order_numbers

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, count, fetch_page
from .model import NOT_PROCESSED, Order

_joined = (
    charges.c.status.label("charge_status"),
    charges.c.payment_processor.label("payment_processor"),
    charges.c.external_transaction_id.label("transaction_id"),
    customers.c.email.label("customer_email"),
    customers.c.hash.label("customer_hash"),
    customers.c.external_customer_id.label("customer_external_id"),
    customers.c.first_name.label("customer_first_name"),
    customers.c.last_name.label("customer_last_name"),
    customers.c.phone.label("customer_phone"),
    customers.c.accepts_marketing.label("customer_accepts_marketing"),
    addresses.c.id.is_not(None).label("address_exists"),
)
# Outer joins: an order outlives its address and customer (money history is kept), and a
# clone has no charge.
_select = (select(*columns_for(Order, [*orders.c, *_joined]))
           .select_from(orders.outerjoin(charges, charges.c.id == orders.c.charge_id)
                        .outerjoin(customers, customers.c.id == orders.c.customer_id)
                        .outerjoin(addresses, addresses.c.id == orders.c.address_id)))
PROCESSED_SORT = "processed_sort"
_processed_sort = func.coalesce(orders.c.processed_at, literal(NOT_PROCESSED, UtcDateTime())).label(PROCESSED_SORT)


def _items(column: Any) -> Any:
    return select(order_items.c.order_id).where(column)


FILTERS: dict[str, Filter] = {
    **time_window(orders),
    "address_id": lambda v: orders.c.address_id == v,
    "customer_id": lambda v: orders.c.customer_id == v,
    "charge_id": lambda v: orders.c.charge_id == v,
    "status": lambda v: orders.c.status.in_(v),
    "scheduled_at_min": lambda v: orders.c.scheduled_at >= v,
    "scheduled_at_max": lambda v: orders.c.scheduled_at <= v,
    "processed_at_min": lambda v: orders.c.processed_at >= v,
    "processed_at_max": lambda v: orders.c.processed_at <= v,
    "external_order_id": lambda v: orders.c.external_order_id == v,
    "external_customer_id": lambda v: orders.c.customer_id.in_(
        select(customers.c.id).where(customers.c.external_customer_id == v)),
    "purchase_item_id": lambda v: orders.c.id.in_(_items(order_items.c.purchase_item_id == v)),
    "purchase_item_ids": lambda v: orders.c.id.in_(_items(order_items.c.purchase_item_id.in_(v))),
}

_by_id = Prepared(_select.where(orders.c.id == bindparam("id"), orders.c.store_id == bindparam("store_id")))


def get(conn: Connection, store_id: int, order_id: int, *, lock: bool = False) -> Order | None:
    if lock:
        # PostgreSQL: the order's row is held until the write ends (SQLite serializes writers).
        stmt = select(orders.c.id).where(orders.c.id == order_id, orders.c.store_id == store_id)
        if conn.execute(stmt.with_for_update()).first() is None:
            return None
    row = _by_id.one(conn, id=order_id, store_id=store_id)
    return Order(*row) if row is not None else None


def _filtered(store_id: int, filters: dict[str, Any]) -> Any:
    return where(_select.where(orders.c.store_id == store_id), FILTERS, filters)


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = _filtered(store_id, query.filters)
    if query.sort != PROCESSED_SORT:
        return fetch_page(conn, stmt, orders, query, Order)
    # `processed_at` is null until an order is processed: the keyset runs on a value that
    # never is (model.NOT_PROCESSED), carried by a subquery column of that name.
    inner = stmt.add_columns(_processed_sort).subquery("o")
    return fetch_page(conn, select(inner), inner, query, lambda *row: Order(*row[:-1]))  # type: ignore[arg-type]


def count_where(conn: Connection, store_id: int, filters: dict[str, Any]) -> int:
    return count(conn, where(select(orders.c.id).where(orders.c.store_id == store_id), FILTERS, filters))


def lock_of_charge(conn: Connection, store_id: int, charge_id: int) -> None:
    """PostgreSQL: holds every order of a charge, in id order, until the write ends."""
    stmt = (select(orders.c.id).where(orders.c.store_id == store_id, orders.c.charge_id == charge_id)
            .order_by(orders.c.id).with_for_update())
    conn.execute(stmt).all()


def later_queued(conn: Connection, store_id: int, order: Order) -> list[Order]:
    """The queued orders of ``order``'s charge that come after it: by date, then by sequence
    and id (found by an audit: by sequence alone, once a date had moved, a delay moved an
    order dated before the delayed one and left one dated after it)."""
    if order.charge_id is None:
        return []
    when, sequence = orders.c.scheduled_at, orders.c.sequence
    stmt = _select.where(orders.c.store_id == store_id, orders.c.charge_id == order.charge_id,
                         orders.c.status == "queued", orders.c.id != order.id,
                         (when > order.scheduled_at)
                         | ((when == order.scheduled_at)
                            & ((sequence > order.sequence) | ((sequence == order.sequence) & (orders.c.id > order.id)))))
    return [Order(*row) for row in conn.execute(stmt.order_by(when, sequence, orders.c.id))]


def item_ids_of(conn: Connection, order_ids: list[int]) -> dict[int, list[int]]:
    """The purchase items each order holds, in one statement for a page of orders."""
    found: dict[int, list[int]] = {order_id: [] for order_id in order_ids}
    if not order_ids:
        return found
    stmt = (select(order_items.c.order_id, order_items.c.purchase_item_id)
            .where(among(order_items.c.order_id, set(order_ids))).order_by(order_items.c.purchase_item_id))
    for order_id, item_id in conn.execute(stmt):
        found[order_id].append(item_id)
    return found


def update_order(conn: Connection, store_id: int, order_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(orders).where(orders.c.id == order_id, orders.c.store_id == store_id).values(**values))


def delete_order(conn: Connection, store_id: int, order_id: int) -> None:
    conn.execute(delete(order_items).where(order_items.c.order_id == order_id))
    conn.execute(delete(orders).where(orders.c.id == order_id, orders.c.store_id == store_id))


# Writes of the billing run (domain/billing/outcome.py) and of clones ---------------------------

def _numbers_upsert(insert: Any) -> Prepared:
    stmt = insert(order_numbers).values(store_id=bindparam("store_id"), last_number=bindparam("count"))
    return Prepared(stmt.on_conflict_do_update(
        index_elements=[order_numbers.c.store_id],
        set_={"last_number": order_numbers.c.last_number + stmt.excluded.last_number},
    ).returning(order_numbers.c.last_number))


# One statement a dialect: each has its own ON CONFLICT construct (the same SQL on both).
_take = {"sqlite": _numbers_upsert(sqlite_insert), "postgresql": _numbers_upsert(postgresql_insert)}


_NUMBER = Prepared(update(orders).where(orders.c.id == bindparam("_id")).values(number=bindparam("_number")))


def number(conn: Connection, store_id: int, order_ids: list[int]) -> None:
    """Gives orders inserted with ``numbered=False`` in this transaction the store's next
    numbers, in the order they were made (id order); nothing may read their numbers before."""
    if not order_ids:
        return
    ids = sorted(order_ids)
    last = take_numbers(conn, store_id, len(ids))
    _NUMBER.run_many(conn, [{"_id": i, "_number": n} for i, n in zip(ids, range(last - len(ids) + 1, last + 1))])


def take_numbers(conn: Connection, store_id: int, count: int) -> int:
    """Moves the store's order counter ``count`` forward and returns its new last number. On
    PostgreSQL the counter's row stays locked until the transaction ends, so two transactions
    making orders for one store number them one after the other, never alike; a rollback gives
    its numbers back with the rest of its work."""
    row = _take[conn.dialect.name].one(conn, store_id=store_id, count=count)
    assert row is not None  # RETURNING always answers
    return int(row[0])


def insert_many(conn: Connection, rows: list[dict[str, Any]], item_ids: list[list[int]], *,
                numbered: bool = True) -> list[int]:
    """Inserts ``rows`` (all with the same keys, all of one store) and each one's purchase
    items; their ids in order. Each row gets the store's next order number here (any
    ``number`` it carries, a clone's source's, is replaced): every order is made through this
    function, so no order goes without one. With ``numbered=False`` (a billing run's batch)
    they get provisional numbers instead, negative and unique (their charge's id and their
    sequence), and the caller gives them theirs with ``number`` before its transaction ends:
    the store's counter is then locked for the end of the transaction only, not the whole of it
    (issue 18: workers billing one store would otherwise record their batches one at a time)."""
    if not rows:
        return []
    if numbered:
        last = take_numbers(conn, rows[0]["store_id"], len(rows))
        rows = [{**row, "number": n} for row, n in zip(rows, range(last - len(rows) + 1, last + 1))]
    else:
        rows = [{**row, "number": -((row["charge_id"] << 16) + row["sequence"])} for row in rows]
    ids = statements.insert_many(conn, orders, rows)
    statements.insert_all(conn, order_items, [
        {"order_id": order_id, "purchase_item_id": item_id, "store_id": rows[0]["store_id"]}
        for order_id, items in zip(ids, item_ids) for item_id in items])
    return ids


def of_charge(conn: Connection, store_id: int, charge_id: int) -> list[Any]:
    stmt = select(orders).where(orders.c.store_id == store_id, orders.c.charge_id == charge_id)
    return list(conn.execute(stmt.order_by(orders.c.id)))


def row_of(conn: Connection, store_id: int, order_id: int) -> dict[str, Any] | None:
    """The stored columns of one order, as ``insert_many`` takes them (a clone copies them)."""
    found = conn.execute(select(orders).where(orders.c.id == order_id, orders.c.store_id == store_id)).mappings()
    row = found.first()
    return dict(row) if row is not None else None


def queued_between(conn: Connection, store_id: int, customer_id: int, first: date, last: date) -> list[Order]:
    """A customer's queued orders dated ``first`` to ``last``, by date and id: deliveries already
    made (a prepaid charge's later orders, clones), which the billing run sends on their date
    (billing/sweep.py)."""
    stmt = _select.where(orders.c.store_id == store_id, orders.c.customer_id == customer_id,
                         orders.c.status == "queued", orders.c.scheduled_at >= first, orders.c.scheduled_at <= last)
    return [Order(*row) for row in conn.execute(stmt.order_by(orders.c.scheduled_at, orders.c.id))]
