"""Order use cases (decisions §6.10, §6.12): reads, update, delete and clone. Moving a queued
order's date lives in ``dates.py``.

An order keeps its own copy of what was bought and where it goes: these write that copy and
nothing else (no charge, subscription or address changes with it)."""

from __future__ import annotations

from datetime import date
from typing import Any

from rebill.errors import NotFound, ValidationFailed

from ..address.rules import check_location, check_zip_follows_country
from ..address.verifier import AddressVerifier
from ..charge import repository as charges
from ..event import attributes
from ..geo import country
from ..listing import ListQuery, PageResult
from ..metafield import service as metafields
from ..unit import Unit
from . import repository
from .model import QUEUED, UNPAID, Order, OrderUpdate

# The fields of a shipping address that the address rules check (decisions §4).
LOCATION = frozenset({"address1", "city", "country_code", "province", "zip"})


def get(unit: Unit, order_id: int, *, lock: bool = False) -> Order:
    found = repository.get(unit.conn, unit.store_id, order_id, lock=lock)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def count(unit: Unit, filters: dict[str, Any]) -> int:
    return repository.count_where(unit.conn, unit.store_id, filters)


def check_date(unit: Unit, order: Order, when: date) -> None:
    """NOTE: decisions §6.10, only a queued order has a date to move; never into the past."""
    if order.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued order can be rescheduled; this one is {order.status}")
    if when < unit.today:
        raise ValidationFailed.field("scheduled_at", "must not be in the past")


def _address(unit: Unit, verifier: AddressVerifier, name: str, current: dict[str, Any] | None,
             sent: dict[str, Any]) -> dict[str, Any]:
    """The order's copy of an address with ``sent`` merged in. A shipping address obeys the
    rules of an address (decisions §4: the store ships there, province, zip, US carrier
    check); a billing address needs a known country."""
    merged = {**(current or {}), **sent}
    if "province" not in sent and sent.get("country_code", merged.get("country_code")) != (current or {}).get(
            "country_code"):
        merged["province"] = None  # the old country's province means nothing in the new one
    try:
        if name == "shipping_address":
            check_zip_follows_country((current or {}).get("country_code"), (current or {}).get("zip"), sent)
            return check_location(unit.store, verifier, merged) if set(sent) & LOCATION else merged
        if not merged.get("country_code"):
            raise ValidationFailed.field("country_code", "is required")
        if country(merged["country_code"]) is None:
            raise ValidationFailed.field("country_code", "is not a valid country code")
    except ValidationFailed as exc:
        raise ValidationFailed({name: exc.errors}) from None
    return merged


def update(unit: Unit, verifier: AddressVerifier, order_id: int, command: OrderUpdate) -> Order:
    current = get(unit, order_id, lock=True)
    changes = command.changes()
    if "scheduled_at" in changes and changes["scheduled_at"] != current.scheduled_at:
        check_date(unit, current, changes["scheduled_at"])
    for name in ("shipping_address", "billing_address"):
        if name in changes:
            changes[name] = _address(unit, verifier, name, getattr(current, name), changes[name])
    if changes.get("tags") == "":
        changes["tags"] = None  # no tags, shown as "" (found by an audit: "" sent back was a change)
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    if changes:
        # NOTE: an update that changes nothing records no event (docs/api-choices.md).
        repository.update_order(unit.conn, unit.store_id, order_id, {**changes, "updated_at": unit.now})
        unit.record("order/updated", order_id, changed=attributes.names(changes))
        if "external_order_id" in changes and current.charge_id is not None and current.sequence == 0:
            # NOTE: spec 01/02 Charge `external_order_id` / `platform_order_id`: the platform's id of
            # the order the charge made, its first (found by an audit: never set, so the charge
            # filter by it found nothing).
            charges.update_one(unit.conn, unit.store_id, current.charge_id,
                               {"external_order_id": changes["external_order_id"], "updated_at": unit.now})
            unit.record("charge/updated", current.charge_id, customer_id=current.customer_id,
                        changed=("external_order_id",))
    return get(unit, order_id)


def delete(unit: Unit, order_id: int) -> None:
    """Only an order no payment went into (queued or cancelled): a paid order is money history
    (docs/api-choices.md, Orders)."""
    current = get(unit, order_id, lock=True)
    if current.status not in UNPAID:
        raise ValidationFailed.field("status", f"only a queued or cancelled order can be deleted; this one is "
                                               f"{current.status}")
    repository.delete_order(unit.conn, unit.store_id, order_id)
    # The row is gone when the events are written: its customer is named here.
    unit.record("order/deleted", order_id, {"id": order_id}, customer_id=current.customer_id)
    metafields.forget(unit, current.customer_id, order=[order_id])  # NOTE: decisions §7.6


def clone(unit: Unit, order_id: int, when: date) -> Order:
    """NOTE: decisions §6.12, any order can be cloned: a `queued` copy on the given date, with
    no charge (nothing has paid for it) and none of the platform's ids."""
    source = repository.row_of(unit.conn, unit.store_id, order_id)
    if source is None:
        raise NotFound()
    if when < unit.today:
        raise ValidationFailed.field("scheduled_at", "must not be in the past")
    row = {k: v for k, v in source.items() if k != "id"}
    row.update(charge_id=None, status=QUEUED, sequence=0, scheduled_at=when, processed_at=None,
               external_order_id=None, external_order_name=None, external_order_number=None, error=None,
               # A new order, told `order/upcoming` of its own date (found by a review: a clone of
               # a told order on the same date was never told).
               upcoming_told_for=None, created_at=unit.now, updated_at=unit.now)
    items = repository.item_ids_of(unit.conn, [order_id])[order_id]
    [new_id] = repository.insert_many(unit.conn, [row], [items])
    unit.record("order/created", new_id)
    return get(unit, new_id)

