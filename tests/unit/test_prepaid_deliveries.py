"""The orders one charge makes (domain/order/deliveries.py; decisions §5.4, §6.12): each prepaid
item delivers on its own order interval, and a later order is a date on which one of them does."""

from __future__ import annotations

from datetime import date
from typing import Any

import msgspec

from rebill.domain.order.deliveries import count, later_orders
from rebill.domain.subscription.model import ONETIME, SUBSCRIPTION, PurchaseItem


def item(item_id: int, unit: str | None, order: int | None, charge: int | None, anchor: int | None = None,
         kind: str = SUBSCRIPTION) -> PurchaseItem:
    values: dict[str, Any] = {f.name: None for f in msgspec.structs.fields(PurchaseItem)}
    values.update(id=item_id, kind=kind, order_interval_unit=unit, order_interval_frequency=order,
                  charge_interval_frequency=charge, anchor_day=anchor)
    return PurchaseItem(**values)


def test_one_prepaid_item_makes_its_deliveries_as_before():
    monthly = item(1, "month", 1, 3, anchor=31)
    assert later_orders(date(2027, 1, 31), [monthly]) == [(date(2027, 2, 28), [1]), (date(2027, 3, 31), [1])]
    assert count(date(2027, 1, 31), [monthly]) == monthly.orders_per_charge == 3


def test_each_prepaid_item_follows_its_own_interval_and_month_end():
    a = item(1, "month", 1, 3, anchor=31)
    b = item(2, "week", 2, 4)
    pay_as_you_go = item(3, "week", 1, 1)
    once = item(4, None, None, None, kind=ONETIME)
    held = [once, b, pay_as_you_go, a]
    assert later_orders(date(2027, 1, 31), held) == [
        (date(2027, 2, 14), [2]), (date(2027, 2, 28), [1]), (date(2027, 3, 31), [1])]
    assert count(date(2027, 1, 31), held) == 4


def test_items_whose_dates_coincide_share_an_order():
    a = item(1, "week", 2, 4)
    b = item(2, "day", 7, 28)
    assert later_orders(date(2027, 3, 8), [b, a]) == [
        (date(2027, 3, 15), [2]), (date(2027, 3, 22), [1, 2]), (date(2027, 3, 29), [2])]
    assert count(date(2027, 3, 8), [a, b]) == 4


def test_a_charge_without_a_prepaid_item_makes_one_order():
    assert later_orders(date(2027, 3, 8), [item(1, "month", 1, 1), item(2, None, None, None, kind=ONETIME)]) == []
    assert count(date(2027, 3, 8), [item(1, "month", 1, 1)]) == 1


def test_no_delivery_past_the_end_of_the_calendar():
    """A date set by hand at the calendar's end: the plan counts only the orders that can be made."""
    assert later_orders(date(9999, 11, 30), [item(1, "month", 1, 3)]) == [(date(9999, 12, 30), [1])]
    assert count(date(9999, 11, 30), [item(1, "month", 1, 3)]) == 2
