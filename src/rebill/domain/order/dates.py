"""Moving queued orders (decisions §6.10, §6.12): a new date for one order (2021-01
`change_date`), and the delay of a prepaid order by one order interval, the later queued
orders of its charge with it."""

from __future__ import annotations

from datetime import date

from rebill.errors import ValidationFailed

from ..schedule.dates import add_interval, anchor_on
from ..subscription import repository as items
from ..subscription.model import SUBSCRIPTION, PurchaseItem
from ..unit import Unit
from . import repository
from .model import QUEUED, Order
from .service import check_date, get


def change_date(unit: Unit, order_id: int, when: date) -> Order:
    order = get(unit, order_id, lock=True)
    check_date(unit, order, when)
    if when != order.scheduled_at:
        _move(unit, order, when)
    return get(unit, order_id)


def delay(unit: Unit, order_id: int) -> Order:
    """NOTE: decisions §6.12, a queued prepaid order and every later queued order of the same
    charge move one order interval later (the subscription's next charge does not move: it
    was paid for on its own dates). Each moves by the order interval of the prepaid
    subscription it delivers: in a charge of prepaid items of different order intervals, the
    later orders of one are not on the other's cadence (order/deliveries.py), and each item's
    deliveries keep their own spacing. A later order whose subscription is gone moves by the
    delayed order's interval, the one the delay asked for (rather than refusing the delay)."""
    order = get(unit, order_id)
    if order.charge_id is not None:
        repository.lock_of_charge(unit.conn, unit.store_id, order.charge_id)
    order = get(unit, order_id, lock=True)
    if order.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued order can be delayed; this one is {order.status}")
    if not order.is_prepaid:
        raise ValidationFailed.field("is_prepaid", "only a prepaid order can be delayed")
    moving = [order, *repository.later_queued(unit.conn, unit.store_id, order)]
    cadences = _cadences(unit, moving)
    cadence = cadences.get(order.id)
    if cadence is None:
        raise ValidationFailed.field("is_prepaid", "the order's prepaid subscription no longer exists")
    try:
        dates = [_one_interval_later(each.scheduled_at, cadences.get(each.id, cadence)) for each in moving]
    except (OverflowError, ValueError):  # a date moved by hand to the end of the calendar
        raise ValidationFailed.field("scheduled_at", "cannot be delayed past the year 9999") from None
    for each, when in zip(moving, dates):
        _move(unit, each, when)
    return get(unit, order_id)


def _move(unit: Unit, order: Order, when: date) -> None:
    repository.update_order(unit.conn, unit.store_id, order.id, {"scheduled_at": when, "updated_at": unit.now})
    unit.record("order/updated", order.id, changed=("scheduled_at",))


def _cadences(unit: Unit, orders: list[Order]) -> dict[int, PurchaseItem]:
    """Per order (by id), the prepaid subscription it delivers (its order interval is the step):
    one of the order's lines that its charge paid several orders of, whatever the subscription's
    cadence became since; an order without one that still exists is left out. Never another
    line's (found by an audit: a clone of a first order whose prepaid subscription was deleted
    was delayed by its pay-as-you-go line's week). An order delivering prepaid items of two
    order intervals on one date (their dates coincide, or a first order's clone) moves by the
    one with the lowest id (docs/api-choices.md, Orders)."""
    held = {each.id: [line["purchase_item_id"] for line in each.line_items
                      if (line.get("orders_per_charge") or 1) > 1] for each in orders}
    found = items.many(unit.conn, unit.store_id, sorted({i for ids in held.values() for i in ids}))
    cadences: dict[int, PurchaseItem] = {}
    for order_id, ids in held.items():
        usable = sorted((found[i] for i in set(ids) if i in found), key=lambda i: i.id)
        usable = [i for i in usable if i.kind == SUBSCRIPTION and i.order_interval_unit and i.order_interval_frequency]
        if usable:
            cadences[order_id] = usable[0]
    return cadences


def _one_interval_later(day: date, item: PurchaseItem) -> date:
    """A monthly order on its subscription's day keeps that day (Jan 31 -> Feb 28 -> Mar 31,
    decisions §6.12), a weekly one its order weekday; one moved to another day by hand keeps
    its own."""
    assert item.order_interval_unit and item.order_interval_frequency
    return add_interval(day, item.order_interval_unit, item.order_interval_frequency,
                        anchor_on(day, item.order_interval_unit, item.anchor_day))
