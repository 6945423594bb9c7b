"""Moving queued orders (decisions §6.10, §6.12): a new date for one order (2021-01
`change_date`), and the delay of a prepaid order by one order interval, the later queued
orders of its charge with it."""

from __future__ import annotations

import calendar
from datetime import date

from rebill.errors import ValidationFailed

from ..schedule.dates import add_interval
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
    was paid for on its own dates)."""
    order = get(unit, order_id)
    if order.charge_id is not None:
        repository.lock_of_charge(unit.conn, unit.store_id, order.charge_id)
    order = get(unit, order_id, lock=True)
    if order.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued order can be delayed; this one is {order.status}")
    if not order.is_prepaid:
        raise ValidationFailed.field("is_prepaid", "only a prepaid order can be delayed")
    cadence = _cadence(unit, order)
    moving = [order, *repository.later_queued(unit.conn, unit.store_id, order)]
    try:
        dates = [_one_interval_later(each.scheduled_at, cadence) for each in moving]
    except (OverflowError, ValueError):  # a date moved by hand to the end of the calendar
        raise ValidationFailed.field("scheduled_at", "cannot be delayed past the year 9999") from None
    for each, when in zip(moving, dates):
        _move(unit, each, when)
    return get(unit, order_id)


def _move(unit: Unit, order: Order, when: date) -> None:
    repository.update_order(unit.conn, unit.store_id, order.id, {"scheduled_at": when, "updated_at": unit.now})
    unit.record("order/updated", order.id, changed=("scheduled_at",))


def _cadence(unit: Unit, order: Order) -> PurchaseItem:
    """The prepaid subscription the order delivers (its order interval is the step): one of
    the order's lines that its charge paid several orders of, whatever the subscription's
    cadence became since. Never another line's (found by an audit: a clone of a first order
    whose prepaid subscription was deleted was delayed by its pay-as-you-go line's week)."""
    held = [line["purchase_item_id"] for line in order.line_items if (line.get("orders_per_charge") or 1) > 1]
    found = [i for i in items.many(unit.conn, unit.store_id, held).values()
             if i.kind == SUBSCRIPTION and i.order_interval_unit and i.order_interval_frequency]
    found.sort(key=lambda i: i.id)
    if not found:
        raise ValidationFailed.field("is_prepaid", "the order's prepaid subscription no longer exists")
    return found[0]


def _one_interval_later(day: date, item: PurchaseItem) -> date:
    """A monthly order on its subscription's day keeps that day (Jan 31 -> Feb 28 -> Mar 31,
    decisions §6.12), a weekly one its order weekday; one moved to another day by hand keeps
    its own."""
    assert item.order_interval_unit and item.order_interval_frequency
    anchor = item.anchor_day
    if item.order_interval_unit == "week":
        on_anchor = anchor is not None and day.weekday() == anchor
    else:
        on_anchor = anchor is not None and day.day == min(anchor, calendar.monthrange(day.year, day.month)[1])
    if not on_anchor:
        anchor = None
    return add_interval(day, item.order_interval_unit, item.order_interval_frequency, anchor)
