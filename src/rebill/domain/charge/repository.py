"""Charges in the database. Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, case, delete, func, insert, or_, select, update

from rebill.db import statements
from rebill.db.among import among, among_bound
from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import charge_items, charges, customers, deleted_discounts, discounts, orders

from ..discount.model import code_keys
from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, count, fetch_page
from .model import OPEN, PENDING, PROCESSED, Charge, OpenCharge

_customer_columns = (
    customers.c.email.label("customer_email"),
    customers.c.hash.label("customer_hash"),
    customers.c.external_customer_id.label("customer_external_id"),
    customers.c.first_name.label("customer_first_name"),
    customers.c.last_name.label("customer_last_name"),
)
_select = (select(*columns_for(Charge, [*charges.c, *_customer_columns], leave_out=("shipments_count",)))
           .select_from(charges.outerjoin(customers, customers.c.id == charges.c.customer_id)))
# NOTE: spec 02 Charge `shipments_count`, "successfully processed child orders": only a paid
# charge has any, so the others skip the count (CASE runs the subquery only when needed).
_shipments = case(
    # Comparisons, not IN: the statement is prepared (an IN list is expanded per call).
    (or_(*(charges.c.status == status for status in PROCESSED)),
     select(func.count()).select_from(orders)
     .where(orders.c.store_id == charges.c.store_id, orders.c.charge_id == charges.c.id, orders.c.status == "success")
     .scalar_subquery()),
    else_=0).label("shipments_count")
# What the API answers with: the charge and its count of processed orders.
_shown = _select.add_columns(_shipments)
VISIBLE_DAYS = 90


def visible(now: datetime) -> Any:
    """NOTE: decisions §6.9, a processed charge more than 90 x 24 h old is out of sight in
    every get, list and count. Built into every read here, so the rule needs no caller."""
    return or_(charges.c.processed_at.is_(None), charges.c.status.not_in(PROCESSED),
               charges.c.processed_at >= now - timedelta(days=VISIBLE_DAYS))


def _items(column: Any) -> Any:
    return select(charge_items.c.charge_id).where(column)


def _with_code(code: str) -> Any:
    """Charges of the discount that has this code now, and processed charges of a deleted
    discount that had it (decisions §7.5: they keep their discount lines; found by an audit: the
    filter by id found them, the filter by code did not), as the codes are matched: by their key
    (discount.model.code_keys), the deleted discount's kept in ``deleted_discounts`` (found by an
    audit: lower-casing the charge line's code in SQL matched other codes on PostgreSQL than on
    SQLite outside ASCII, `οδος` and `İSTANBUL`)."""
    keys, gone = code_keys(code), deleted_discounts
    return or_(charges.c.discount_id.in_(select(discounts.c.id).where(discounts.c.code_key.in_(keys))),
               charges.c.discount_id.in_(select(gone.c.id).where(gone.c.code_key.in_(keys))))


FILTERS: dict[str, Filter] = {
    **time_window(charges),
    "address_id": lambda v: charges.c.address_id == v,
    "customer_id": lambda v: charges.c.customer_id == v,
    "status": lambda v: charges.c.status.in_(v),
    "scheduled_at": lambda v: charges.c.scheduled_at == v,
    "scheduled_at_min": lambda v: charges.c.scheduled_at >= v,
    "scheduled_at_max": lambda v: charges.c.scheduled_at <= v,
    "processed_at_min": lambda v: charges.c.processed_at >= v,
    "processed_at_max": lambda v: charges.c.processed_at <= v,
    "discount_id": lambda v: charges.c.discount_id == v,
    # NOTE: decisions §7.5, codes match case-insensitively and without the spaces around them
    # (as the addresses' and the discounts' own filters do, docs/api-choices.md).
    "discount_code": lambda v: _with_code(v.strip()),
    "purchase_item_id": lambda v: charges.c.id.in_(_items(charge_items.c.purchase_item_id == v)),
    "purchase_item_ids": lambda v: charges.c.id.in_(_items(charge_items.c.purchase_item_id.in_(v))),
    "external_order_id": lambda v: charges.c.external_order_id == v,
}

_by_id = Prepared(_shown.where(charges.c.id == bindparam("id"), charges.c.store_id == bindparam("store_id")))


def _first_holding(conn: Connection, store_id: int, item_id: int, condition: Any) -> int | None:
    """The first charge holding this purchase item that meets ``condition``."""
    stmt = (select(charges.c.id).join(charge_items, charge_items.c.charge_id == charges.c.id)
            .where(charge_items.c.purchase_item_id == item_id, charges.c.store_id == store_id, condition)
            .order_by(charges.c.id).limit(1))
    return conn.execute(stmt).scalar()


def being_paid(conn: Connection, store_id: int, item_id: int) -> bool:
    """Whether a charge holding this purchase item is claimed right now (by a billing run, a
    capture or a refund)."""
    return _first_holding(conn, store_id, item_id, charges.c.claimed_by.is_not(None)) is not None


def authorized_holding(conn: Connection, store_id: int, item_id: int) -> int | None:
    """The charge holding this purchase item that is authorized and waits for its capture
    (`pending`), if one does: its order is made at the capture, its money is the authorized one."""
    return _first_holding(conn, store_id, item_id, charges.c.status == PENDING)


def get(conn: Connection, store_id: int, charge_id: int, now: datetime | None) -> Charge | None:
    """The charge as a GET shows it at ``now`` (none once processed more than 90 days before,
    decisions §6.9), or whatever its age with ``now`` None (a webhook's payload)."""
    row = _by_id.one(conn, id=charge_id, store_id=store_id)
    if row is None:
        return None
    charge = Charge(*row)
    processed = charge.processed_at is not None and charge.status in PROCESSED
    if now is not None and processed and charge.processed_at < now - timedelta(days=VISIBLE_DAYS):  # type: ignore[operator]
        return None
    return charge


def many(conn: Connection, store_id: int, ids: list[int], *, shown: bool = False) -> dict[int, Charge]:
    """``shown``: as the API shows them, with `shipments_count` (a webhook's payloads, which
    must equal a GET; found by an audit: several charges rendered at once showed 0)."""
    if not ids:
        return {}
    stmt = (_shown if shown else _select).where(charges.c.store_id == store_id, among(charges.c.id, set(ids)))
    return {row.id: Charge(*row) for row in conn.execute(stmt)}


def _filtered(store_id: int, filters: dict[str, Any], now: datetime) -> Any:
    return where(_shown.where(charges.c.store_id == store_id, visible(now)), FILTERS, filters)


def page(conn: Connection, store_id: int, query: ListQuery, now: datetime) -> PageResult:
    return fetch_page(conn, _filtered(store_id, query.filters, now), charges, query, Charge)


def count_where(conn: Connection, store_id: int, filters: dict[str, Any], now: datetime) -> int:
    stmt = select(charges.c.id).where(charges.c.store_id == store_id, visible(now))
    return count(conn, where(stmt, FILTERS, filters))


def of_addresses(conn: Connection, store_id: int, address_ids: list[int], statuses: tuple[str, ...]) -> list[Charge]:
    if not address_ids:
        return []
    stmt = _select.where(charges.c.store_id == store_id, among(charges.c.address_id, set(address_ids)),
                         charges.c.status.in_(statuses))
    return sorted((Charge(*row) for row in conn.execute(stmt)), key=lambda c: c.id)


_open = select(*columns_for(OpenCharge, charges.c))
# No ORDER BY: with it SQLite walks the store's index in id order instead of the address's
# (docs/performance.md); the few rows are sorted here.
_open_of_one = Prepared(_open.where(
    charges.c.store_id == bindparam("store_id"), charges.c.address_id == bindparam("address_id"),
    # Comparisons, not IN: an IN list is expanded per call, which a prepared statement cannot do.
    or_(*(charges.c.status == status for status in OPEN))))
_open_of_many = Prepared(_open.where(charges.c.store_id == bindparam("store_id"),
                                     among_bound(charges.c.address_id, "address_ids"),
                                     or_(*(charges.c.status == status for status in OPEN))))


def open_of(conn: Connection, store_id: int, address_ids: list[int]) -> list[OpenCharge]:
    """The open charges of these addresses (queued, skipped, in retry), as a replan reads them."""
    if not address_ids:
        return []
    if len(address_ids) == 1:  # prepared: every replan of one address
        rows = _open_of_one.all(conn, store_id=store_id, address_id=address_ids[0])
    else:
        rows = _open_of_many.all(conn, store_id=store_id, address_ids=sorted(set(address_ids)))
    return sorted((OpenCharge(*row) for row in rows), key=lambda c: c.id)


# Writes: only the reconciler (domain/schedule/reconcile.py) writes queued and skipped charges.

def insert_many(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """Inserts ``rows`` (all with the same keys) and returns their ids in order."""
    if not rows:
        return []
    if len(rows) == 1:
        return [insert_row(conn, charges, rows[0])]
    return statements.insert_many(conn, charges, rows)


def update_many(conn: Connection, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    """Rows of ``{"charge_id": id, column: value, ...}`` for the same ``columns``, in one
    executemany (a regeneration rewrites thousands of charges)."""
    if not rows:
        return
    if len(rows) == 1:  # one address's change: a prepared statement
        one = _rewrite_one.get(columns)
        if one is None:
            one = _rewrite_one[columns] = Prepared(
                update(charges).where(charges.c.id == bindparam("charge_id"))
                .values({**{name: bindparam(name) for name in columns}, "lock_version": charges.c.lock_version + 1}))
        one.run(conn, **rows[0])
        return
    stmt = _updates.get(columns)
    if stmt is None:  # built once per set of columns: building it cost more than running it
        stmt = _updates[columns] = (
            update(charges).where(charges.c.id == bindparam("charge_id"))
            .values({**{name: bindparam(name) for name in columns}, "lock_version": charges.c.lock_version + 1}))
    conn.execute(stmt, rows)


_updates: dict[tuple[str, ...], Any] = {}
_insert_items = insert(charge_items)


def update_one(conn: Connection, store_id: int, charge_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(charges).where(charges.c.id == charge_id, charges.c.store_id == store_id)
                 .values(**values, lock_version=charges.c.lock_version + 1))


def delete_many(conn: Connection, store_id: int, ids: list[int]) -> None:
    if ids:
        conn.execute(delete(charges).where(charges.c.store_id == store_id, among(charges.c.id, ids)))


_add_item = Prepared(insert(charge_items).values(charge_id=bindparam("charge_id"),
                                                purchase_item_id=bindparam("purchase_item_id"),
                                                store_id=bindparam("store_id")))
_drop_item = Prepared(delete(charge_items).where(charge_items.c.charge_id == bindparam("charge_id"),
                                                 charge_items.c.purchase_item_id == bindparam("purchase_item_id")))
_rewrite_one: dict[tuple[str, ...], Prepared] = {}


def change_items(conn: Connection, store_id: int, added: list[tuple[int, int]], removed: list[tuple[int, int]]) -> None:
    """(charge id, purchase item id) pairs to add to and remove from ``charge_items``. A few
    pairs (one address's change) go through prepared statements, many in one executemany."""
    if len(added) + len(removed) <= 8:
        for charge_id, item_id in removed:
            _drop_item.run(conn, charge_id=charge_id, purchase_item_id=item_id)
        for charge_id, item_id in added:
            _add_item.run(conn, charge_id=charge_id, purchase_item_id=item_id, store_id=store_id)
        return
    if removed:
        conn.execute(delete(charge_items).where(charge_items.c.charge_id == bindparam("c"),
                                                charge_items.c.purchase_item_id == bindparam("i")),
                     [{"c": c, "i": i} for c, i in removed])
    if added:
        conn.execute(_insert_items, [{"charge_id": c, "purchase_item_id": i, "store_id": store_id} for c, i in added])


def clear_uncommitted(conn: Connection, store_id: int, ids: list[int]) -> None:
    """The flag of ``mark_uncommitted`` back on charges whose plan did not change: no other
    column, ``updated_at`` neither (the flag is not an API change, docs/api-choices.md)."""
    if ids:
        conn.execute(update(charges).where(charges.c.store_id == store_id, among(charges.c.id, ids))
                     .values(has_uncommitted_changes=False))


def mark_uncommitted(conn: Connection, store_id: int, address_id: int) -> None:
    conn.execute(update(charges).where(charges.c.store_id == store_id, charges.c.address_id == address_id,
                                       charges.c.status == "queued")
                 .values(has_uncommitted_changes=True))
