"""The delivery schedule projection (``rebill.domain.schedule.delivery.project``, decisions §5.15,
§5.16) on plain purchase items: no database."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from rebill.domain.order.model import Order
from rebill.domain.schedule.delivery import project
from rebill.domain.schedule.plan import ADDRESS_FIELDS
from rebill.domain.subscription.model import PurchaseItem

TODAY = date(2026, 1, 15)
FAR = TODAY + timedelta(days=365)
NOW = datetime(2026, 1, 15, 12, tzinfo=timezone.utc)
_ids = iter(range(1, 10_000))


def item(**overrides: Any) -> PurchaseItem:
    """A monthly subscription of address 1, next charged on Feb 1."""
    values: dict[str, Any] = dict(
        id=next(_ids), store_id=1, kind="subscription", customer_id=1, address_id=1, plan_id=None, status="active",
        external_product_id="coffee", external_variant_id="coffee-1lb", product_title="Coffee", variant_title="1 lb",
        sku=None, sku_override=False, price=Decimal("12.50"), quantity=2, properties=[], grams=None, taxable=True,
        requires_shipping=True, images=None, presentment_currency="USD", next_charge_scheduled_at=date(2026, 2, 1),
        charge_interval_frequency=1, order_interval_frequency=1, order_interval_unit="month", order_day_of_month=None,
        order_day_of_week=None, cutoff_day_of_month=None, cutoff_day_of_week=None,
        expire_after_specific_number_of_charges=None, anchor_day=1, charges_count=0, last_charge_date=None,
        cancelled_next_date=None, is_skippable=True, is_swappable=True, max_retries_reached=False,
        cancellation_reason=None, cancellation_reason_comments=None, cancelled_at=None, analytics_data=None,
        lock_version=1, created_at=NOW, updated_at=NOW)
    values.update(overrides)
    return PurchaseItem(**values)


def onetime(**overrides: Any) -> PurchaseItem:
    return item(**{"kind": "onetime", "charge_interval_frequency": None, "order_interval_frequency": None,
                   "order_interval_unit": None, "anchor_day": None, "is_swappable": False, **overrides})


def dates_of(deliveries: Any) -> list[date]:
    return [d.date for d in deliveries]


def place(address_id: int) -> Any:
    """An address as the projection reads it: its shipping fields."""
    return SimpleNamespace(**{**dict.fromkeys(ADDRESS_FIELDS), "address1": f"{address_id} Main St",
                              "country_code": "US"})


ADDRESSES = {n: place(n) for n in (1, 2)}


def stored(order_id: int, when: date, lines: list[dict[str, Any]], *, charge_id: int = 40, address_id: int = 1,
           shipping: dict[str, Any] | None = None) -> Order:
    """A prepaid charge's later order as the billing run stored it (the charge's lines)."""
    return Order(
        order_id, 1, 1, address_id, charge_id, "queued", "recurring", True, 1, when, None, "USD", lines, [], [], [],
        None, shipping or {"address1": "9 Old Rd", "country_code": "US", "city": "Austin"}, [], None, None, True,
        Decimal(0), Decimal(0), Decimal(0), Decimal(0), Decimal(0), Decimal("75.00"), 0, None, None, None, 1000 + order_id,
        None, NOW, NOW, "success", "sandbox", None, None, None, None, None, None, None, None, True)


def prepaid_line(item_id: int, *, unit_price: str = "37.50", quantity: int = 2, orders: int = 3) -> dict[str, Any]:
    return {"purchase_item_id": item_id, "purchase_item_type": "subscription", "external_product_id": "coffee",
            "external_variant_id": "coffee-1lb", "title": "Coffee (old title)", "variant_title": "1 lb",
            "quantity": quantity, "unit_price": unit_price, "images": None, "properties": [],
            "orders_per_charge": orders}


def run(items: list[PurchaseItem], skips: Any = (), charge_ids: Any = None, *, until: date = FAR,
        limit: int = 10, orders: Any = ()) -> Any:
    return project(items, skips, charge_ids or {}, ADDRESSES, orders, today=TODAY, until=until, limit=limit)


def test_a_subscription_delivers_on_every_cadence_date_from_its_next_date():
    sub = item()
    deliveries = run([sub], limit=4)
    assert dates_of(deliveries) == [date(2026, 2, 1), date(2026, 3, 1), date(2026, 4, 1), date(2026, 5, 1)]
    order = deliveries[0].orders[0]
    assert (order.address_id, order.charge_id, order.is_skipped) == (1, None, False)
    assert [line.subscription_id for line in order.lines] == [sub.id]


def test_month_ends_keep_their_anchor_day():
    sub = item(next_charge_scheduled_at=date(2026, 1, 31), anchor_day=31)
    assert dates_of(run([sub], limit=3)) == [date(2026, 1, 31), date(2026, 2, 28), date(2026, 3, 31)]


def test_deliveries_stop_at_until_and_at_the_limit_of_dates():
    sub = item(order_interval_unit="week", charge_interval_frequency=1, order_interval_frequency=1, anchor_day=None,
               next_charge_scheduled_at=TODAY)
    assert dates_of(run([sub], until=TODAY + timedelta(days=14))) == [TODAY + timedelta(days=7 * k) for k in range(3)]
    assert len(run([sub], limit=50)) == 50
    assert run([sub], until=TODAY - timedelta(days=1)) == []


def test_the_limit_counts_dates_not_items():
    weekly = item(order_interval_unit="week", anchor_day=None, next_charge_scheduled_at=TODAY + timedelta(days=1))
    monthly = item(address_id=2)
    deliveries = run([weekly, monthly], limit=3)
    assert dates_of(deliveries) == [TODAY + timedelta(days=1), TODAY + timedelta(days=8), TODAY + timedelta(days=15)]
    deliveries = run([weekly, monthly], limit=10)
    feb1 = next(d for d in deliveries if d.date == date(2026, 2, 1))
    assert [o.address_id for o in feb1.orders] == [2]


def test_dates_before_today_are_left_out():
    overdue = item(next_charge_scheduled_at=TODAY - timedelta(days=3), order_interval_unit="week", anchor_day=None)
    assert dates_of(run([overdue], limit=2)) == [TODAY + timedelta(days=4), TODAY + timedelta(days=11)]


def test_expiry_counts_the_charges_left():
    sub = item(expire_after_specific_number_of_charges=5, charges_count=3)
    assert dates_of(run([sub])) == [date(2026, 2, 1), date(2026, 3, 1)]
    assert run([item(expire_after_specific_number_of_charges=2, charges_count=2)]) == []


def test_a_skipped_date_is_a_skipped_delivery_and_uses_up_no_charge():
    # Skipping Feb 1 moved the next date to Mar 1 (charge service); Apr 1 is skipped ahead.
    sub = item(next_charge_scheduled_at=date(2026, 3, 1), expire_after_specific_number_of_charges=2)
    deliveries = run([sub], [(sub.id, date(2026, 2, 1)), (sub.id, date(2026, 4, 1))])
    assert dates_of(deliveries) == [date(2026, 2, 1), date(2026, 3, 1), date(2026, 4, 1), date(2026, 5, 1)]
    assert [d.orders[0].is_skipped for d in deliveries] == [True, False, True, False]
    assert [d.orders[0].lines[0].is_skipped for d in deliveries] == [True, False, True, False]


def test_past_skips_are_not_deliveries():
    sub = item()
    assert dates_of(run([sub], [(sub.id, TODAY - timedelta(days=1))], limit=1)) == [date(2026, 2, 1)]


def test_a_partial_skip_makes_a_queued_and_a_skipped_order_on_one_date():
    kept, skipped = item(), item()
    charges = {(kept.id, date(2026, 2, 1)): 70, (skipped.id, date(2026, 2, 1)): 71}
    first = run([kept, skipped], [(skipped.id, date(2026, 2, 1))], charges, limit=1)[0]
    assert [(o.charge_id, o.is_skipped, [line.subscription_id for line in o.lines]) for o in first.orders] == [
        (70, False, [kept.id]), (71, True, [skipped.id])]


def test_lines_of_one_address_and_charge_form_one_order_with_its_total():
    a, b = item(price=Decimal("12.50"), quantity=2), item(price=Decimal("3.10"), quantity=1)
    charges = {(a.id, date(2026, 2, 1)): 9, (b.id, date(2026, 2, 1)): 9}
    first, second = run([a, b], (), charges, limit=2)
    (order,) = first.orders
    assert order.charge_id == 9 and [line.subscription_id for line in order.lines] == [a.id, b.id]
    assert [line.subtotal_price for line in order.lines] == [Decimal("25.00"), Decimal("3.10")]
    assert order.total_price == Decimal("28.10") and order.currency == "USD"
    # Later cadence dates have no charge yet.
    assert [o.charge_id for o in second.orders] == [None]


def test_a_prepaid_subscription_delivers_every_order_interval():
    # Charged every 3 months, delivered monthly: order k of a charge on its date + k months.
    prepaid = item(charge_interval_frequency=3, order_interval_frequency=1, anchor_day=1)
    charges = {(prepaid.id, date(2026, 2, 1)): 5}
    deliveries = run([prepaid], (), charges, limit=5)
    assert dates_of(deliveries) == [date(2026, m, 1) for m in (2, 3, 4, 5, 6)]
    # The three orders of the queued charge carry its id; the next charge is not stored yet.
    assert [d.orders[0].charge_id for d in deliveries] == [5, 5, 5, None, None]
    assert all(line.unit_price == Decimal("12.50") for d in deliveries for o in d.orders for line in o.lines)


def test_a_prepaid_expiry_counts_charges_not_orders():
    prepaid = item(charge_interval_frequency=2, order_interval_frequency=1, expire_after_specific_number_of_charges=1)
    assert dates_of(run([prepaid])) == [date(2026, 2, 1), date(2026, 3, 1)]


def test_the_stored_later_orders_of_a_paid_prepaid_charge_are_deliveries_as_stored():
    """docs/api-choices.md: a paid prepaid charge's later orders are shown as stored (found by an
    audit: they were projected from the subscription as it is now), whatever the item became."""
    prepaid = item(charge_interval_frequency=3, order_interval_frequency=1, charges_count=1, price=Decimal("99.00"),
                   last_charge_date=date(2025, 12, 20), anchor_day=20, next_charge_scheduled_at=date(2026, 3, 20))
    # The second order was delayed to Jan 27; the third was moved to another address's copy.
    second = stored(7, date(2026, 1, 27), [prepaid_line(prepaid.id)])
    third = stored(8, date(2026, 2, 20), [prepaid_line(prepaid.id)], shipping={"address1": "1 New Ave"})
    deliveries = run([prepaid], limit=4, orders=[third, second])
    assert dates_of(deliveries) == [date(2026, 1, 27), date(2026, 2, 20), date(2026, 3, 20), date(2026, 4, 20)]
    first, next_ = deliveries[0].orders[0], deliveries[1].orders[0]
    assert (first.id, first.charge_id, next_.id) == (7, 40, 8)
    assert next_.shipping_address["address1"] == "1 New Ave" and next_.shipping_address["zip"] is None
    # One delivery's share of the prepaid line (37.50 for 3 orders), not the item's price now.
    (line,) = first.lines
    assert (line.unit_price, line.subtotal_price, first.total_price) == (Decimal("12.50"), Decimal("25.00"),
                                                                        Decimal("25.00"))
    assert (line.product_title, line.plan_type, line.is_skippable, line.subscription_id) == (
        "Coffee (old title)", "prepaid", False, prepaid.id)
    # Projected deliveries have no order yet; their price is the item's.
    assert deliveries[2].orders[0].id is None and deliveries[2].orders[0].lines[0].unit_price == Decimal("99.00")


def test_stored_orders_outlive_their_subscription_and_keep_to_the_window():
    cancelled = item(status="cancelled", next_charge_scheduled_at=None, charge_interval_frequency=3)
    kept = stored(5, date(2026, 1, 20), [prepaid_line(cancelled.id)])
    early, late = stored(4, TODAY - timedelta(days=1), []), stored(6, FAR + timedelta(days=1), [])
    (only,) = run([cancelled], orders=[early, kept, late])
    assert only.date == date(2026, 1, 20) and [o.id for o in only.orders] == [5]


def test_a_stored_order_is_an_order_of_its_own_beside_the_projected_ones_of_its_date():
    a = item(address_id=1, next_charge_scheduled_at=date(2026, 1, 20))
    charges = {(a.id, date(2026, 1, 20)): 70}
    (only,) = run([a], (), charges, limit=1, orders=[stored(3, date(2026, 1, 20), [prepaid_line(999)], charge_id=12)])
    # By address, queued before skipped, then by charge: the older paid charge first.
    assert [(o.id, o.charge_id) for o in only.orders] == [(3, 12), (None, 70)]


def test_a_onetime_delivers_once_and_shows_its_skip():
    once = onetime(next_charge_scheduled_at=date(2026, 1, 20))
    (only,) = run([once])
    assert only.date == date(2026, 1, 20) and not only.orders[0].is_skipped
    (only,) = run([once], [(once.id, date(2026, 1, 20))])
    assert only.orders[0].is_skipped and only.orders[0].lines[0].is_skipped


def test_cancelled_and_processed_items_make_no_deliveries():
    cancelled = item(status="cancelled", next_charge_scheduled_at=None)
    processed = onetime(status="processed")
    assert run([cancelled, processed], [(cancelled.id, date(2026, 2, 1))]) == []


def test_orders_of_a_date_are_ordered_by_address_then_status():
    a1, a2 = item(address_id=2), item(address_id=1)
    first = run([a1, a2], [(a2.id, date(2026, 2, 1))], limit=1)[0]
    assert [(o.address_id, o.is_skipped) for o in first.orders] == [(1, True), (2, False)]
