"""The orders one charge makes (decisions §5.4, §6.12): pure functions, no I/O. The plan counts
them (`orders_count`, schedule/plan.py) and the billing run makes them (billing/outcome.py), from
the same dates.

The first order is on the charge's date and delivers every line. An order interval belongs to a
subscription, so each prepaid subscription of the charge delivers again on its own dates: its
order k on the charge's date plus k of its order intervals (month ends clamped on its day),
for as many orders as its charge interval pays for. A later order is one date on which one of
them delivers; items whose dates coincide share it (found by a review: every later order was
dated by the first prepaid item's interval, so a weekly item of a charge led by a monthly one
was delivered monthly)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date

from ..schedule.dates import add_interval, anchor_on
from ..subscription.model import SUBSCRIPTION, PurchaseItem


def later_orders(scheduled_at: date, items: Iterable[PurchaseItem]) -> list[tuple[date, list[int]]]:
    """The later orders of a charge dated ``scheduled_at`` holding ``items``: (date, ids of the
    prepaid subscriptions it delivers, by id), by date. None without a prepaid item."""
    found: dict[date, list[int]] = defaultdict(list)
    for item in sorted(items, key=lambda i: i.id):
        if item.kind != SUBSCRIPTION or not item.is_prepaid:
            continue
        assert item.order_interval_unit and item.order_interval_frequency
        # NOTE: decisions §6.12, the charge's date plus k order intervals, month ends clamped on
        # the cadence's day when the charge is on it, else on the charge's own day (found by an
        # audit: a checkout's charge, or one whose subscription's day moved before its capture,
        # dated its later orders on the subscription's new day).
        anchor = anchor_on(scheduled_at, item.order_interval_unit, item.anchor_day)
        for k in range(1, item.orders_per_charge):
            try:
                when = add_interval(scheduled_at, item.order_interval_unit, item.order_interval_frequency * k, anchor)
            except (OverflowError, ValueError):
                break  # past 9999-12-31 (a date set by hand at the calendar's end): no such delivery
            found[when].append(item.id)  # an item's dates only grow with k: each once
    return sorted(found.items())


def count(scheduled_at: date, items: Sequence[PurchaseItem]) -> int:
    """How many orders the charge makes: its first, and one per later delivery date."""
    if not any(item.is_prepaid for item in items):
        return 1  # most charges: no dates to work out (the plan counts every charge it builds)
    return 1 + len(later_orders(scheduled_at, items))
