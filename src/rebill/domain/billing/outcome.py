"""What a payment's result does (decisions §6.3, §6.4, §6.7, §6.12), recorded in one
transaction with every event, and only by the run that holds the charge's claim.

- captured: the charge is paid (`success`), its orders are made (several for prepaid), its
  subscriptions advance one charge interval from the charge's date (or expire on their Nth
  charge), its one-time items are processed, and the address is replanned so the next
  queued charges appear;
- authorized (authorize-only): the charge is `pending` until captured; its items advance as
  for a payment, and its orders wait for the capture;
- failed: the charge is in `error` with the attempt counted and the next retry date; the last
  allowed attempt closes it and runs the store's action.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from sqlalchemy import update

from rebill.models import payment_methods

from ..address import repository as addresses
from ..charge import repository as charge_repo
from ..charge.model import ERROR, PENDING, SUCCESS, Charge
from ..customer import activity
from ..order import repository as orders
from ..payment.gateway import AUTHORIZED, CAPTURED, CARD_EXPIRED, CUSTOMER_NEEDS_TO_UPDATE_CARD, Result
from ..schedule.dates import add_interval
from ..schedule.reconcile import replan
from ..subscription import repository as items
from ..subscription.model import ACTIVE, CANCELLED, EXPIRED, PROCESSED, SUBSCRIPTION, PurchaseItem
from ..unit import Unit
from . import dunning

# NOTE: decisions §6.12, these failures say the method itself is no good.
INVALIDATING = (CARD_EXPIRED, CUSTOMER_NEEDS_TO_UPDATE_CARD)


@dataclass(frozen=True, slots=True)
class Recorded:
    charge_id: int
    status: str  # success | pending | error
    amount: Decimal
    currency: str
    closed: bool = False  # the last allowed attempt failed
    retry: bool = False  # it had failed before


def record(unit: Unit, charge_id: int, run: str, result: Result, method_id: int | None,
           processor: str) -> Recorded | None:
    """Records ``result`` for the charge this run claimed; None when the claim is no longer
    this run's (another run took over a claim it thought abandoned and records its own)."""
    charge = charge_repo.get(unit.conn, unit.store_id, charge_id, unit.now)
    if charge is None:
        return None
    addresses.lock(unit.conn, unit.store_id, [charge.address_id])
    charge = charge_repo.get(unit.conn, unit.store_id, charge_id, unit.now)
    if charge is None or charge.claimed_by != run:
        return None
    attempts = charge.charge_attempts + 1
    base = {"claimed_by": None, "claimed_at": None, "charge_attempts": attempts, "last_charge_attempt": unit.now,
            "payment_method_id": method_id, "payment_processor": processor, "updated_at": unit.now}
    if result.outcome in (CAPTURED, AUTHORIZED):
        paid = result.outcome == CAPTURED
        _save(unit, charge_id, {**base, "status": SUCCESS if paid else PENDING, "processed_at": unit.now,
                                "external_transaction_id": result.transaction_id, "error": None,
                                "error_type": None, "retry_date": None,
                                "authorized_at": None if paid else unit.now})
        _method_status(unit, method_id, "valid", None)
        advanced = _advance(unit, charge)
        if paid:
            make_orders(unit, charge, advanced)
            unit.record("charge/paid", charge_id)
        else:
            unit.record("charge/updated", charge_id)
        replan(unit, [charge.address_id])
        return Recorded(charge_id, SUCCESS if paid else PENDING, charge.total_price, charge.currency,
                        retry=charge.charge_attempts > 0)
    return _failed(unit, charge, base, attempts, result, method_id)


def _save(unit: Unit, charge_id: int, values: dict[str, Any]) -> None:
    charge_repo.update_one(unit.conn, unit.store_id, charge_id, values)


def _method_status(unit: Unit, method_id: int | None, status: str, reason: str | None) -> None:
    if method_id is None:
        return
    unit.conn.execute(update(payment_methods)
                      .where(payment_methods.c.id == method_id, payment_methods.c.store_id == unit.store_id,
                             payment_methods.c.status != status)
                      .values(status=status, status_reason=reason, updated_at=unit.now))


def _items_of(unit: Unit, charge: Charge) -> list[PurchaseItem]:
    found = items.many(unit.conn, unit.store_id, charge.purchase_item_ids)
    return [found[i] for i in charge.purchase_item_ids if i in found]


def _advance(unit: Unit, charge: Charge) -> list[PurchaseItem]:
    """Each subscription moves one charge interval on from the charge's date, or expires with
    its Nth charge (decisions §6.12: in this transaction, with no next queued charge); each
    one-time item is done. Returns the items as they were."""
    held = _items_of(unit, charge)
    for item in held:
        if item.kind != SUBSCRIPTION:
            if item.status == ACTIVE:
                _update_item(unit, item, {"status": PROCESSED, "last_charge_date": charge.scheduled_at},
                             "onetime/updated")
            continue
        if item.status != ACTIVE:
            continue
        count = item.charges_count + 1
        changes: dict[str, Any] = {"charges_count": count, "last_charge_date": charge.scheduled_at,
                                   "max_retries_reached": False}
        limit = item.expire_after_specific_number_of_charges
        if limit is not None and count >= limit:
            changes.update(status=EXPIRED, next_charge_scheduled_at=None)
        else:
            assert item.order_interval_unit and item.charge_interval_frequency
            changes["next_charge_scheduled_at"] = add_interval(
                charge.scheduled_at, item.order_interval_unit, item.charge_interval_frequency, item.anchor_day)
        _update_item(unit, item, changes, "subscription/updated")
        if changes.get("status") == EXPIRED:
            activity.refresh(unit, item.customer_id)
    return held


def _update_item(unit: Unit, item: PurchaseItem, changes: dict[str, Any], topic: str) -> None:
    changes["updated_at"] = unit.now
    # The address lock is held: nothing else writes this item now, so its version holds.
    items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, changes)
    unit.record(topic, item.id)


def make_orders(unit: Unit, charge: Charge, held: list[PurchaseItem]) -> list[int]:
    """One order per delivery: a prepaid charge makes one for each order interval it paid for
    (decisions §6.12: order k on the charge's date plus k order intervals, the first `success`,
    the rest `queued`)."""
    prepaid = [i for i in held if i.kind == SUBSCRIPTION and i.is_prepaid]
    count = max((i.orders_per_charge for i in prepaid), default=1)
    rows = []
    for k in range(count):
        when = charge.scheduled_at if k == 0 else _nth_order_date(prepaid[0], charge.scheduled_at, k)
        rows.append(_order_row(unit, charge, k, when, bool(prepaid)))
    ids = orders.insert_many(unit.conn, rows, [charge.purchase_item_ids] * count)
    for k, order_id in enumerate(ids):
        unit.record("order/created", order_id)
        if k == 0:
            unit.record("order/processed", order_id)
    _save(unit, charge.id, {"orders_count": charge.orders_count + count})
    return ids


def _nth_order_date(item: PurchaseItem, start: date, k: int) -> date:
    assert item.order_interval_unit and item.order_interval_frequency
    return add_interval(start, item.order_interval_unit, item.order_interval_frequency * k, item.anchor_day)


def _order_row(unit: Unit, charge: Charge, k: int, when: date, prepaid: bool) -> dict[str, Any]:
    return {
        "store_id": unit.store_id, "customer_id": charge.customer_id, "address_id": charge.address_id,
        "charge_id": charge.id, "status": "success" if k == 0 else "queued", "type": "recurring",
        "is_prepaid": prepaid, "sequence": k, "scheduled_at": when, "processed_at": unit.now if k == 0 else None,
        "currency": charge.currency, "line_items": charge.line_items, "shipping_lines": charge.shipping_lines,
        "tax_lines": charge.tax_lines, "discounts": charge.discounts, "billing_address": charge.billing_address,
        "shipping_address": charge.shipping_address, "order_attributes": charge.order_attributes,
        "note": charge.note, "tags": charge.tags, "taxable": charge.taxable,
        "subtotal_price": charge.subtotal_price, "total_discounts": charge.total_discounts,
        "total_line_items_price": charge.total_line_items_price, "total_tax": charge.total_tax,
        "total_shipping": charge.total_shipping, "total_price": charge.total_price,
        "total_weight_grams": charge.total_weight_grams, "external_order_id": None, "external_order_name": None,
        "external_order_number": None, "error": None, "created_at": unit.now, "updated_at": unit.now,
    }


def _failed(unit: Unit, charge: Charge, base: dict[str, Any], attempts: int, result: Result,
            method_id: int | None) -> Recorded:
    retry = dunning.retry_date(unit.store.dunning, attempts, unit.today)
    closed = retry is None
    _save(unit, charge.id, {**base, "status": ERROR, "error": result.error,
                            "error_type": dunning.CLOSED_MAX_RETRIES_REACHED if closed else result.error_type,
                            "retry_date": retry})
    if result.error_type in INVALIDATING:
        _method_status(unit, method_id, "invalid", result.error)
    unit.record("charge/failed", charge.id)
    if closed:
        unit.record("charge/max_retries_reached", charge.id)
        _close(unit, charge)
    return Recorded(charge.id, ERROR, charge.total_price, charge.currency, closed, charge.charge_attempts > 0)


def _close(unit: Unit, charge: Charge) -> None:
    """NOTE: decisions §6.4, the last attempt failed: every subscription of the charge is marked
    `max_retries_reached`, then the store's action runs."""
    action = dunning.settings(unit.store.dunning)["on_max_retries"]
    customer_ids = set()
    for item in _items_of(unit, charge):
        if item.kind != SUBSCRIPTION or item.status != ACTIVE:
            continue
        changes: dict[str, Any] = {"max_retries_reached": True}
        topic = "subscription/updated"
        if action in ("cancel_subscriptions", "cancel_subscriptions_and_customer"):
            changes.update(status=CANCELLED, cancelled_at=unit.now, cancellation_reason="max retries reached",
                           cancellation_reason_comments=None, next_charge_scheduled_at=None,
                           cancelled_next_date=item.next_charge_scheduled_at)
            topic = "subscription/cancelled"
        _update_item(unit, item, changes, topic)
        customer_ids.add(item.customer_id)
    for customer_id in customer_ids:
        activity.refresh(unit, customer_id)
