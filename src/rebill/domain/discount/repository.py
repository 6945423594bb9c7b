"""Discounts in the database, with the two plan inputs they own (a discount applied to one
queued charge; the uses of a discount). Every statement is scoped to one store."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, insert, or_, select, update

from rebill.db.among import among, among_bound
from rebill.db.prepared import Prepared
from rebill.db.statements import insert_all, insert_row
from rebill.models import addresses, charge_discounts, charges, deleted_discounts, discount_redemptions, discounts

from ..charge.model import CAPTURE_WINDOW
from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, count, fetch_page
from .model import COLLECTION, DISABLED, ENABLED, code_key, code_keys


def _status(value: tuple[str, datetime]) -> Any:
    """NOTE: spec 02 Discount status, an enabled code whose `ends_at` has passed is disabled."""
    wanted, now = value
    live = or_(discounts.c.ends_at.is_(None), discounts.c.ends_at > now)
    if wanted == ENABLED:
        return and_(discounts.c.status == ENABLED, live)
    if wanted == DISABLED:
        return or_(discounts.c.status == DISABLED, and_(discounts.c.status == ENABLED, ~live))
    return discounts.c.status == wanted


COLUMNS = tuple(discounts.c.keys())
FILTERS: dict[str, Filter] = {
    **time_window(discounts),
    "discount_code": lambda v: discounts.c.code_key.in_(code_keys(v)),
    "discount_type": lambda v: discounts.c.discount_type == v,
    "status": _status,
}

def get(conn: Connection, store_id: int, discount_id: int, *, lock: bool = False) -> Any:
    stmt = select(discounts).where(discounts.c.id == discount_id, discounts.c.store_id == store_id)
    return conn.execute(stmt.with_for_update() if lock else stmt).first()


def find(conn: Connection, store_id: int, *, discount_id: int | None = None, code: str | None = None,
         share: bool = False) -> Any:
    """By id, else by code (case-insensitively, decisions §7.5). ``share``: a share lock on the
    row until the unit ends (PostgreSQL), so that a status change (which locks it for update)
    waits for this unit, or this read waits for it and sees the new status."""
    if discount_id is not None:
        stmt = select(discounts).where(discounts.c.id == discount_id, discounts.c.store_id == store_id)
    else:
        stmt = select(discounts).where(discounts.c.store_id == store_id,
                                       discounts.c.code_key.in_(code_keys(code or "")))
    return conn.execute(stmt.with_for_update(read=True) if share else stmt).first()


def many(conn: Connection, store_id: int, ids: Iterable[int]) -> dict[int, Any]:
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    stmt = select(discounts).where(discounts.c.store_id == store_id, among(discounts.c.id, wanted))
    return {row.id: row for row in conn.execute(stmt)}


def insert_discount(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, discounts, {**values, "code_key": code_key(values["code"])})


def update_discount(conn: Connection, store_id: int, discount_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(discounts).where(discounts.c.id == discount_id, discounts.c.store_id == store_id)
                 .values(**values))


def delete_discount(conn: Connection, store_id: int, discount_id: int, code_key: str) -> None:
    """The discount goes; its code stays findable by its id (``deleted_discounts``)."""
    conn.execute(delete(discounts).where(discounts.c.id == discount_id, discounts.c.store_id == store_id))
    conn.execute(insert(deleted_discounts).values(id=discount_id, store_id=store_id, code_key=code_key))


def page(conn: Connection, store_id: int, query: ListQuery, build: Any) -> PageResult:
    stmt = where(select(discounts).where(discounts.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, discounts, query, build)


def count_where(conn: Connection, store_id: int, filters: dict[str, Any]) -> int:
    return count(conn, where(select(discounts.c.id).where(discounts.c.store_id == store_id), FILTERS, filters))


# Who holds a code ---------------------------------------------------------------------

def for_collections(conn: Connection, store_id: int) -> list[Any]:
    """The store's codes for a collection (`applies_to_resource: platform_collection_id`)."""
    stmt = select(discounts.c.id, discounts.c.applies_to_id, discounts.c.applies_to_resource).where(
        discounts.c.store_id == store_id, discounts.c.applies_to_resource == COLLECTION)
    return list(conn.execute(stmt.order_by(discounts.c.id)))


def addresses_holding(conn: Connection, store_id: int, discount_id: int) -> list[int]:
    stmt = select(addresses.c.id).where(addresses.c.store_id == store_id, addresses.c.discount_id == discount_id)
    return sorted(conn.execute(stmt).scalars())


def charge_inputs_holding(conn: Connection, store_id: int, discount_id: int) -> list[int]:
    """The addresses with a queued charge the discount was applied to."""
    stmt = select(charge_discounts.c.address_id).where(charge_discounts.c.store_id == store_id,
                                                       charge_discounts.c.discount_id == discount_id)
    return sorted(set(conn.execute(stmt).scalars()))


def addresses_of_charges(conn: Connection, store_id: int, discount_id: int, statuses: tuple[str, ...]) -> list[int]:
    stmt = select(charges.c.address_id).where(charges.c.store_id == store_id, charges.c.discount_id == discount_id,
                                              charges.c.status.in_(statuses))
    return sorted(set(conn.execute(stmt).scalars()))


def charges_holding(conn: Connection, store_id: int, discount_id: int, statuses: tuple[str, ...]) -> list[int]:
    stmt = select(charges.c.id).where(charges.c.store_id == store_id, charges.c.discount_id == discount_id,
                                      charges.c.status.in_(statuses))
    return sorted(conn.execute(stmt).scalars())


def clear_addresses(conn: Connection, store_id: int, discount_id: int, now: datetime) -> None:
    conn.execute(update(addresses).where(addresses.c.store_id == store_id, addresses.c.discount_id == discount_id)
                 .values(discount_id=None, updated_at=now, lock_version=addresses.c.lock_version + 1))


def _capturable(now: datetime) -> Any:
    """The pending charges that may still be captured (charge/model.py ``capturable``)."""
    return and_(charges.c.status == "pending",
                or_(charges.c.authorized_at >= now - CAPTURE_WINDOW, charges.c.claimed_by.is_not(None)))


def customer_holds(conn: Connection, store_id: int, customer_id: int, discount_id: int, now: datetime, *,
                   except_address: int | None = None) -> bool:
    """NOTE: decisions §7.5 once_per_customer, an address or open charge of the customer holds
    the code, or a successful charge of the customer used it."""
    on_address = select(addresses.c.id).where(addresses.c.store_id == store_id,
                                              addresses.c.customer_id == customer_id,
                                              addresses.c.discount_id == discount_id,
                                              addresses.c.id != (except_address or 0)).limit(1)
    # A pending (authorized) charge becomes a use when it is captured: it holds the code too,
    # while it can be captured.
    on_charge = select(charges.c.id).where(charges.c.store_id == store_id, charges.c.customer_id == customer_id,
                                           charges.c.discount_id == discount_id,
                                           or_(charges.c.status.in_(("queued", "error")), _capturable(now))).limit(1)
    used = select(discount_redemptions.c.id).where(discount_redemptions.c.discount_id == discount_id,
                                                   discount_redemptions.c.customer_id == customer_id).limit(1)
    return any(conn.execute(stmt).first() is not None for stmt in (on_address, on_charge, used))


def customer_paid(conn: Connection, store_id: int, customer_id: int) -> bool:
    """NOTE: decisions §7.5 first_time_customer_restriction, whether the customer has a
    successful charge (paid at once or captured later; refunds do not undo it)."""
    stmt = select(charges.c.id).where(charges.c.store_id == store_id, charges.c.customer_id == customer_id,
                                      charges.c.status.in_(("success", "refunded", "partially_refunded"))).limit(1)
    return conn.execute(stmt).first() is not None


def pending_codes(conn: Connection, store_id: int, address_ids: list[int],
                  now: datetime) -> list[tuple[int, date, int]]:
    """(address, date, discount) of the authorized, uncaptured charges of these addresses that
    carry a code and may still be captured: uses in flight (decisions §7.5), counted once
    captured."""
    if not address_ids:
        return []
    stmt = select(charges.c.address_id, charges.c.scheduled_at, charges.c.discount_id).where(
        charges.c.store_id == store_id, among(charges.c.address_id, address_ids), _capturable(now),
        charges.c.discount_id.is_not(None))
    return [(a, when, d) for a, when, d in conn.execute(stmt)]


def authorized_uses(conn: Connection, store_id: int, discount_id: int, now: datetime) -> int:
    """How many authorized, uncaptured charges carry the code: uses their captures will count.
    An authorization past its capture window counts no more (found by a review: nothing
    captures it, and it held a one-use code for good), unless a capture holds it now."""
    stmt = select(func.count()).select_from(charges).where(
        charges.c.store_id == store_id, charges.c.discount_id == discount_id, _capturable(now))
    return conn.execute(stmt).scalar_one()


# Discounts applied to one charge (a plan input) -------------------------------------------

def open_charge_has_input(conn: Connection, address_id: int) -> bool:
    """NOTE: spec 02 Discount application endpoints, whether a queued charge of the address (or
    one in retry) carries a code applied to it alone. The input of a charge that is pending
    (authorized) stays until its capture counts the use: it does not count here."""
    stmt = (select(charge_discounts.c.id)
            .join(charges, and_(charges.c.address_id == charge_discounts.c.address_id,
                                charges.c.scheduled_at == charge_discounts.c.scheduled_at))
            .where(charge_discounts.c.address_id == address_id, charges.c.status.in_(("queued", "error")))
            .limit(1))
    return conn.execute(stmt).first() is not None


def charge_input(conn: Connection, address_id: int, when: date) -> Any:
    stmt = select(charge_discounts).where(charge_discounts.c.address_id == address_id,
                                          charge_discounts.c.scheduled_at == when)
    return conn.execute(stmt).first()


def add_charge_input(conn: Connection, store_id: int, address_id: int, when: date, discount_id: int,
                     now: datetime, basis: str | None = None) -> None:
    insert_row(conn, charge_discounts, {"store_id": store_id, "address_id": address_id, "scheduled_at": when,
                                        "discount_id": discount_id, "basis": basis, "created_at": now})


def remove_charge_input(conn: Connection, address_id: int, when: date) -> bool:
    result = conn.execute(delete(charge_discounts).where(charge_discounts.c.address_id == address_id,
                                                         charge_discounts.c.scheduled_at == when))
    return result.rowcount > 0


def remove_charge_inputs_of(conn: Connection, store_id: int, discount_id: int) -> None:
    conn.execute(delete(charge_discounts).where(charge_discounts.c.store_id == store_id,
                                                charge_discounts.c.discount_id == discount_id))


_INPUT_COLUMNS = (charge_discounts.c.address_id, charge_discounts.c.scheduled_at, charge_discounts.c.discount_id,
                  charge_discounts.c.basis)
# Prepared: every subscription write replans one address (building the statement per call
# cost a fifth of a POST /subscriptions, docs/performance.md).
_inputs_of_one = Prepared(select(*_INPUT_COLUMNS).where(charge_discounts.c.address_id == bindparam("address_id")))
_inputs_of_many = Prepared(select(*_INPUT_COLUMNS).where(among_bound(charge_discounts.c.address_id, "ids")))


def charge_inputs(conn: Connection, address_ids: list[int], *, with_basis: bool = False) -> dict[int, dict[date, Any]]:
    """address -> date -> discount id (with ``with_basis``: (discount id, basis))."""
    found: dict[int, dict[date, Any]] = {}
    if not address_ids:
        return found
    if len(address_ids) == 1:
        rows: Any = _inputs_of_one.all(conn, address_id=address_ids[0])
    else:
        rows = _inputs_of_many.all(conn, ids=sorted(set(address_ids)))
    for address_id, when, discount_id, basis in rows:
        found.setdefault(address_id, {})[when] = (discount_id, basis) if with_basis else discount_id
    return found


def drop_charge_inputs(conn: Connection, pairs: list[tuple[int, date]]) -> None:
    """Inputs whose charge is gone (processed, moved, deleted): spec 02 Charges rule 2, a
    discount applied to a charge only goes with that charge."""
    for address_id, when in pairs:
        remove_charge_input(conn, address_id, when)


# Uses ----------------------------------------------------------------------------------

def address_uses(conn: Connection, pairs: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(address, discount) -> successful charges of the address that carried the address's code."""
    if not pairs:
        return {}
    address_ids = {a for a, _ in pairs}
    stmt = (select(discount_redemptions.c.address_id, discount_redemptions.c.discount_id, func.count())
            .where(among(discount_redemptions.c.address_id, address_ids), discount_redemptions.c.via == "address")
            .group_by(discount_redemptions.c.address_id, discount_redemptions.c.discount_id))
    wanted = set(pairs)
    return {(a, d): n for a, d, n in conn.execute(stmt) if (a, d) in wanted}


_COUNT_USES = Prepared(update(discounts).where(discounts.c.id == bindparam("_id")).values(
    times_used=discounts.c.times_used + bindparam("_n"), updated_at=bindparam("_now")))


def record_uses(conn: Connection, store_id: int, rows: list[dict[str, Any]], now: datetime) -> None:
    """NOTE: decisions §7.5, one use per successful charge carrying a code, exactly once: the
    redemption rows (unique per charge) and one set-based count per batch."""
    if not rows:
        return
    # A code deleted since the charge took it (a charge authorized before its full disable and
    # captured after, decisions §7.5) has nothing left to count: its use is not recorded (it
    # was a 500 after the money was taken). The rest are key-share locked, so no delete comes
    # between this look and the insert (PostgreSQL; SQLite has one writer).
    wanted = sorted({row["discount_id"] for row in rows})
    kept = set(conn.execute(select(discounts.c.id).where(among(discounts.c.id, wanted)).order_by(discounts.c.id)
                            .with_for_update(key_share=True, read=True)).scalars())
    rows = [row for row in rows if row["discount_id"] in kept]
    if not rows:
        return
    insert_all(conn, discount_redemptions, [{**row, "store_id": store_id, "created_at": now} for row in rows])
    per: dict[int, int] = {}
    for row in rows:
        per[row["discount_id"]] = per.get(row["discount_id"], 0) + 1
    _COUNT_USES.run_many(conn, [{"_id": d, "_n": n, "_now": now} for d, n in sorted(per.items())])
