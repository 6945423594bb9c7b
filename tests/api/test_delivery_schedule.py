"""`GET /customers/{id}/delivery_schedule` (decisions §5.15, §5.16, 03-real-fields
delivery_schedule, docs/api-choices.md "Address merge and delivery schedule"): the deliveries
to come, projected from the customer's subscriptions and one-time items, skips included."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tests.api.test_real_fields import ARR, BOOL, INT, NULL, OBJ, STR, assert_fields
from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_onetime,
    make_payment_method,
    make_subscription,
)

NOT_FOUND = {"errors": "Not Found"}
NOT_IN_VERSION = {"errors": "This resource is not implemented in the requested API version"}
ADDRESS = ("address1", "address2", "city", "company", "country_code", "first_name", "last_name", "phone",
           "province", "zip")

# NOTE: spec 03 delivery_schedule (2021-11), with null where a value can be empty; plus the
# `is_skipped` of decisions §5.16 and the `total_price` of decisions §5.15.
EXPECTED = [
    ("customer", {OBJ}), ("customer.email", {STR}), ("customer.first_name", {STR}), ("customer.id", {INT}),
    ("customer.last_name", {STR}), ("deliveries", {ARR}), ("deliveries[].date", {STR}),
    ("deliveries[].orders", {ARR}), ("deliveries[].orders[].address_id", {INT}),
    ("deliveries[].orders[].charge_id", {INT, NULL}), ("deliveries[].orders[].id", {NULL}),
    ("deliveries[].orders[].line_items", {ARR}),
    ("deliveries[].orders[].line_items[].external_product_id", {OBJ}),
    ("deliveries[].orders[].line_items[].external_product_id.ecommerce", {STR, NULL}),
    ("deliveries[].orders[].line_items[].external_variant_id", {OBJ}),
    ("deliveries[].orders[].line_items[].external_variant_id.ecommerce", {STR, NULL}),
    ("deliveries[].orders[].line_items[].images", {OBJ}),
    ("deliveries[].orders[].line_items[].is_skippable", {BOOL}),
    ("deliveries[].orders[].line_items[].is_skipped", {BOOL}),
    ("deliveries[].orders[].line_items[].plan_type", {STR, NULL}),
    ("deliveries[].orders[].line_items[].product_title", {STR}),
    ("deliveries[].orders[].line_items[].properties", {ARR}),
    ("deliveries[].orders[].line_items[].properties[].name", {STR}),
    ("deliveries[].orders[].line_items[].properties[].value", {STR, NULL}),
    ("deliveries[].orders[].line_items[].quantity", {INT}),
    ("deliveries[].orders[].line_items[].subscription_id", {INT}),
    ("deliveries[].orders[].line_items[].subtotal_price", {STR}),
    ("deliveries[].orders[].line_items[].unit_price", {STR}),
    ("deliveries[].orders[].line_items[].variant_title", {STR, NULL}),
    ("deliveries[].orders[].payment_method", {OBJ, NULL}),
    ("deliveries[].orders[].payment_method.billing_address", {OBJ, NULL}),
    *((f"deliveries[].orders[].payment_method.billing_address.{name}", {STR, NULL}) for name in ADDRESS),
    ("deliveries[].orders[].payment_method.id", {INT}),
    ("deliveries[].orders[].payment_method.payment_details", {OBJ}),
    ("deliveries[].orders[].shipping_address", {OBJ}),
    *((f"deliveries[].orders[].shipping_address.{name}", {STR, NULL}) for name in ADDRESS),
    ("deliveries[].orders[].total_price", {STR}),
]


def days(api: Any, n: int) -> date:
    return api.clock.now().date() + timedelta(days=n)


def weekly(api: Any, address: Any, *, on: int = 7, **overrides: Any) -> Any:
    """Day cadences keep date arithmetic free of month ends, whatever the shared clock says."""
    return make_subscription(api, address, **{"order_interval_unit": "day", "charge_interval_frequency": 7,
                                              "order_interval_frequency": 7, "next_charge_scheduled_at": days(api, on),
                                              **overrides})


def schedule(api: Any, customer: Any, **params: Any) -> dict[str, Any]:
    reply = api.get(f"/customers/{customer.id}/delivery_schedule", params=params or None)
    assert reply.status_code == 200, reply.text
    return reply.json()


def dates(body: dict[str, Any]) -> list[str]:
    return [d["date"] for d in body["deliveries"]]


def test_the_schedule_lists_every_delivery_with_the_fields_clients_expect(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    sub = weekly(api, address, on=3, properties=[{"name": "grind", "value": "fine"}], quantity=2)
    once = make_onetime(api, address, next_charge_scheduled_at=days(api, 3), price="4.25")
    (charge,) = charges_of(api, address.id)

    body = schedule(api, customer)

    assert_fields(body, EXPECTED)
    assert body["customer"] == {"id": customer.id, "email": customer.email, "first_name": customer.first_name,
                                "last_name": customer.last_name}
    assert dates(body) == [days(api, 3 + 7 * k).isoformat() for k in range(10)]
    first = body["deliveries"][0]
    assert first["orders"] == [{
        "id": None,
        "address_id": address.id,
        "charge_id": charge.id,
        "currency": "USD",
        "line_items": [
            {"external_product_id": {"ecommerce": None}, "external_variant_id": {"ecommerce": None}, "images": {},
             "is_skippable": True, "is_skipped": False, "plan_type": "subscription", "product_title": "Coffee",
             "properties": [{"name": "grind", "value": "fine"}], "quantity": 2, "subscription_id": sub.id,
             "subtotal_price": "25.00", "unit_price": "12.50", "variant_title": "1 lb"},
            {"external_product_id": {"ecommerce": None}, "external_variant_id": {"ecommerce": None}, "images": {},
             "is_skippable": True, "is_skipped": False, "plan_type": "onetime", "product_title": "Mug",
             "properties": [], "quantity": 1, "subscription_id": once.id, "subtotal_price": "4.25",
             "unit_price": "4.25", "variant_title": None},
        ],
        "payment_method": None,
        "shipping_address": {name: getattr(address, name) for name in ADDRESS},
        "total_price": "29.25",
    }]
    # Later dates have no charge yet, and the one-time item is gone.
    second = body["deliveries"][1]["orders"]
    assert [(o["charge_id"], [line["subscription_id"] for line in o["line_items"]]) for o in second] == [
        (None, [sub.id])]


def test_a_customer_without_items_has_no_deliveries(api):
    customer = make_customer(api)
    make_address(api, customer)
    assert schedule(api, customer)["deliveries"] == []


def test_skipped_dates_are_deliveries_with_skipped_lines(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    sub, other = weekly(api, address, on=7), weekly(api, address, on=7)
    skipped_day = days(api, 14)
    reply = api.post(f"/addresses/{address.id}/charges/skip",
                     json={"date": skipped_day.isoformat(), "purchase_item_ids": [sub.id]})
    assert reply.status_code == 200, reply.text
    skipped_charge = reply.json()["charge"]["id"]
    queued = {c.scheduled_at: c.id for c in charges_of(api, address.id) if c.status == "queued"}

    body = schedule(api, customer, delivery_count_future=3)

    assert dates(body) == [days(api, 7).isoformat(), skipped_day.isoformat(), days(api, 21).isoformat()]
    orders = body["deliveries"][1]["orders"]
    # NOTE: docs/api-choices.md, one order per charge: the queued lines, then the skipped ones.
    assert [(o["charge_id"], o["line_items"][0]["subscription_id"], o["line_items"][0]["is_skipped"])
            for o in orders] == [(None, other.id, False), (skipped_charge, sub.id, True)]
    assert body["deliveries"][0]["orders"][0]["charge_id"] == queued[days(api, 7)]


def test_skips_on_two_addresses_each_show_on_their_own_address(api):
    """A customer's addresses are read together (one statement for many addresses, prepared
    with the ids as its parameter: db/among.py ``among_bound``), on each backend's read path."""
    customer = make_customer(api)
    first, second = make_address(api, customer), make_address(api, customer)
    on_first, on_second = weekly(api, first, on=7), weekly(api, second, on=7)
    for address, sub, day in ((first, on_first, 14), (second, on_second, 21)):
        reply = api.post(f"/addresses/{address.id}/charges/skip",
                         json={"date": days(api, day).isoformat(), "purchase_item_ids": [sub.id]})
        assert reply.status_code == 200, reply.text

    body = schedule(api, customer, delivery_count_future=4)

    skipped = {(o["address_id"], d["date"]) for d in body["deliveries"] for o in d["orders"]
               if all(line["is_skipped"] for line in o["line_items"])}
    assert skipped == {(first.id, days(api, 14).isoformat()), (second.id, days(api, 21).isoformat())}
    assert dates(body) == [days(api, n).isoformat() for n in (7, 14, 21, 28)]


def test_a_prepaid_subscription_delivers_every_order_interval(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    prepaid = weekly(api, address, on=2, charge_interval_frequency=21)
    (charge,) = charges_of(api, address.id)

    body = schedule(api, customer, delivery_count_future=4)

    assert dates(body) == [days(api, n).isoformat() for n in (2, 9, 16, 23)]
    assert [d["orders"][0]["charge_id"] for d in body["deliveries"]] == [charge.id, charge.id, charge.id, None]
    line = body["deliveries"][0]["orders"][0]["line_items"][0]
    assert (line["subscription_id"], line["plan_type"], line["is_skippable"], line["unit_price"]) == (
        prepaid.id, "prepaid", False, "12.50")


def test_expiring_subscriptions_stop_after_their_charges(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    weekly(api, address, on=1, expire_after_specific_number_of_charges=3)
    assert dates(schedule(api, customer)) == [days(api, n).isoformat() for n in (1, 8, 15)]


def test_each_address_is_its_own_order(api):
    customer = make_customer(api)
    home, office = make_address(api, customer), make_address(api, customer, address1="1 Office Park")
    weekly(api, office, on=4)
    weekly(api, home, on=4)

    (first, *_) = schedule(api, customer)["deliveries"]

    assert [o["address_id"] for o in first["orders"]] == sorted([home.id, office.id])
    assert {o["shipping_address"]["address1"] for o in first["orders"]} == {"101 Market St", "1 Office Park"}


def test_orders_are_paid_with_the_address_payment_method_else_the_default_one(api):
    customer = make_customer(api)
    default = make_payment_method(api, customer, is_default=True)
    chosen = make_payment_method(api, customer, is_default=False, payment_details={"brand": "amex", "last4": "0005"})
    with_own = make_address(api, customer, payment_method_id=chosen)
    without = make_address(api, customer)
    weekly(api, with_own, on=2)
    weekly(api, without, on=2)

    orders = schedule(api, customer)["deliveries"][0]["orders"]

    paid = {o["address_id"]: o["payment_method"] for o in orders}
    # Every field of the billing address, null when the method has none (03-real-fields).
    assert paid[with_own.id] == {"id": chosen, "billing_address": dict.fromkeys(ADDRESS),
                                 "payment_details": {"brand": "amex", "last4": "0005"}}
    assert paid[without.id]["id"] == default


def test_cancelled_subscriptions_make_no_deliveries(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    sub = weekly(api, address)
    assert api.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "moving"}).status_code == 200
    assert schedule(api, customer)["deliveries"] == []


# The query ---------------------------------------------------------------------------------------

def test_delivery_count_future_defaults_to_10_and_takes_up_to_50(api):
    customer = make_customer(api)
    weekly(api, make_address(api, customer), on=1, charge_interval_frequency=1, order_interval_frequency=1)
    assert len(schedule(api, customer)["deliveries"]) == 10
    assert len(schedule(api, customer, delivery_count_future=2)["deliveries"]) == 2
    assert len(schedule(api, customer, delivery_count_future=50)["deliveries"]) == 50


def test_future_interval_and_date_max_bound_the_dates(api):
    customer = make_customer(api)
    weekly(api, make_address(api, customer), on=0)
    assert dates(schedule(api, customer, future_interval=14)) == [days(api, n).isoformat() for n in (0, 7, 14)]
    assert dates(schedule(api, customer, date_max=days(api, 13).isoformat())) == [
        days(api, n).isoformat() for n in (0, 7)]
    assert dates(schedule(api, customer, future_interval=30, date_max=days(api, 7).isoformat())) == [
        days(api, n).isoformat() for n in (0, 7)]
    assert dates(schedule(api, customer, future_interval=0)) == [days(api, 0).isoformat()]
    assert schedule(api, customer, date_max=days(api, -1).isoformat())["deliveries"] == []


@pytest.mark.parametrize(("params", "errors"), [
    ({"delivery_count_future": "51"}, {"delivery_count_future": ["must be from 1 to 50"]}),
    ({"delivery_count_future": "0"}, {"delivery_count_future": ["must be from 1 to 50"]}),
    ({"delivery_count_future": "ten"}, {"delivery_count_future": ["Invalid integer: ten"]}),
    ({"future_interval": "-1", "date_max": "someday"},
     {"future_interval": ["must be from 0 to 3650"],
      "date_max": ["Invalid date: someday. Must be a valid ISO-8601 datetime string"]}),
    ({"future_interval": "3651"}, {"future_interval": ["must be from 0 to 3650"]}),
])
def test_bad_query_values_answer_422(api, params, errors):
    customer = make_customer(api)
    reply = api.get(f"/customers/{customer.id}/delivery_schedule", params=params)
    assert reply.status_code == 422
    assert reply.json() == {"errors": errors}


# Tenancy, versions, scopes -----------------------------------------------------------------------

def test_unknown_and_other_stores_customers_answer_404(api):
    foreign = make_customer(api.other_store())
    assert api.get(f"/customers/{foreign.id}/delivery_schedule").json() == NOT_FOUND
    reply = api.get("/customers/999999999/delivery_schedule", params={"delivery_count_future": "99"})
    assert reply.status_code == 404  # the path names the customer: 404 before the query's 422


def test_the_delivery_schedule_is_a_2021_11_endpoint(api):
    customer = make_customer(api)
    reply = api.get(f"/customers/{customer.id}/delivery_schedule", version="2021-01")
    assert reply.status_code == 501
    assert reply.json() == NOT_IN_VERSION


def test_the_delivery_schedule_needs_read_customers(api):
    customer = make_customer(api)
    path = f"/customers/{customer.id}/delivery_schedule"
    assert api.get(path, token=api.token_with("read_customers")).status_code == 200
    refused = api.get(path, token=api.token_with("read_subscriptions"))
    assert refused.status_code == 403
    assert refused.json() == {"errors": "This token lacks the scope this endpoint needs: read_customers"}


def test_the_later_orders_of_a_paid_prepaid_charge_show_the_charge_that_paid_them(api):
    """docs/api-choices.md: a prepaid item's later orders show the charge that pays for them;
    once that charge was paid they showed none (found by an audit)."""
    from tests.api.test_orders import prepaid
    first, second, third = prepaid(api)
    paid = first.charge_id
    customer_id = api.get(f"/orders/{first.id}").json()["order"]["customer"]["id"]
    body = api.get(f"/customers/{customer_id}/delivery_schedule", params={"delivery_count_future": 4}).json()
    shown = {d["date"]: [o["charge_id"] for o in d["orders"]] for d in body["deliveries"]}
    [queued] = [c.id for c in charges_of(api, first.address_id) if c.status == "queued"]
    assert shown[second.scheduled_at.isoformat()] == [paid]
    assert shown[third.scheduled_at.isoformat()] == [paid]
    assert shown[(third.scheduled_at + timedelta(days=7)).isoformat()] == [queued]


def _paid_orders_shown(api: Any, customer_id: int) -> dict[str, list[dict[str, Any]]]:
    body = api.get(f"/customers/{customer_id}/delivery_schedule", params={"delivery_count_future": 6}).json()
    return {d["date"]: [o for o in d["orders"] if o["id"] is not None] for d in body["deliveries"]}


def test_the_later_orders_of_a_paid_prepaid_charge_are_shown_as_stored(api):
    """docs/api-choices.md: a paid prepaid charge's later orders are the stored queued orders, not
    a projection of the subscription as it is now (found by an audit: after a delay, a new price
    or an order's new address they showed the projected date, total and address, without an id,
    and after a cancellation nothing, although the orders are still sent)."""
    from tests.api.test_orders import prepaid
    first, second, third = prepaid(api, quantity=2)
    customer_id = api.get(f"/orders/{first.id}").json()["order"]["customer"]["id"]
    price = api.get(f"/subscriptions/{first.purchase_item_ids[0]}").json()["subscription"]["price"]
    item_id = first.purchase_item_ids[0]
    # The third order goes somewhere else; the second is delayed a week (onto the third's date
    # before the move); the subscription's price changes, then it is cancelled.
    moved = api.put(f"/orders/{third.id}", json={"shipping_address": {"address1": "77 Elsewhere Rd"}})
    assert moved.status_code == 200, moved.text
    assert api.post(f"/orders/{second.id}/delay", json={}).status_code == 200
    assert api.put(f"/subscriptions/{item_id}", json={"price": "99.00"}).status_code == 200
    cancel = api.post(f"/subscriptions/{item_id}/cancel", json={"cancellation_reason": "moving"})
    assert cancel.status_code == 200, cancel.text
    shown = _paid_orders_shown(api, customer_id)
    # A delay moves the order and the later ones of its charge one order interval (7 days).
    week = timedelta(days=7)
    assert [o["id"] for o in shown[(second.scheduled_at + week).isoformat()]] == [second.id]
    assert [o["id"] for o in shown[(third.scheduled_at + week).isoformat()]] == [third.id]
    assert second.scheduled_at.isoformat() not in shown
    by_id = {o["id"]: o for orders in shown.values() for o in orders}
    assert set(by_id) == {second.id, third.id}
    assert by_id[third.id]["shipping_address"]["address1"] == "77 Elsewhere Rd"
    assert by_id[second.id]["charge_id"] == first.charge_id
    (line,) = by_id[second.id]["line_items"]
    # One delivery's share at the price paid (the charge paid 3 deliveries), not the new 99.00.
    assert (line["unit_price"], line["quantity"], line["subtotal_price"]) == (
        price, 2, f"{Decimal(price) * 2:.2f}")
    assert by_id[second.id]["total_price"] == line["subtotal_price"]
    assert (line["plan_type"], line["is_skippable"], line["is_skipped"], line["subscription_id"]) == (
        "prepaid", False, False, item_id)
    assert_fields(api.get(f"/customers/{customer_id}/delivery_schedule").json(),
                  [(p, {INT, NULL} if p == "deliveries[].orders[].id" else kinds) for p, kinds in EXPECTED])


def test_a_clone_of_a_checkout_order_with_a_one_time_line_is_a_delivery(api):
    """Found by a review: a checkout's one-time line has no purchase item, and the schedule of a
    customer holding a clone of such an order failed (500)."""
    from tests.api.test_checkouts import CHARGE, priced_store, ready
    from tests.api.test_orders_actions import clone
    priced_store(api)
    paid = api.post(f"/checkouts/{ready(api)['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    charge_id = paid.json()["checkout_charge"]["charge_id"]
    [order] = api.get("/orders", params={"charge_id": charge_id}).json()["orders"]
    when = days(api, 5).isoformat()
    copy = clone(api, order["id"], {"scheduled_at": when}).json()["order"]
    body = schedule(api, type("C", (), {"id": order["customer"]["id"]})())
    [cloned] = [o for d in body["deliveries"] if d["date"] == when for o in d["orders"] if o["id"] == copy["id"]]
    shown = [(line["subscription_id"], line["plan_type"]) for line in cloned["line_items"]]
    assert shown == [(line["purchase_item_id"], line["purchase_item_type"]) for line in order["line_items"]]
    assert (None, "onetime") in shown
    assert cloned["total_price"] == f"{sum(Decimal(line['subtotal_price']) for line in cloned['line_items']):.2f}"


def test_an_authorized_prepaid_charge_shows_its_later_deliveries_until_captured(api):
    """Decisions §6.12 Authorize-only: the orders of a pending charge are made at its capture;
    its later deliveries are projected from it meanwhile (found by a review: they vanished)."""
    api = api.other_store(plan_tier="premium_a")  # capturing on request
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token="authorize_only")
    address = make_address(api, customer)
    weekly(api, address, on=0, charge_interval_frequency=21)
    [charge] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    [pending] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge.id],
                                api.clock.now())
    assert pending.status == "pending"
    body = schedule(api, customer, delivery_count_future=3)
    assert [(d["date"], [(o["id"], o["charge_id"]) for o in d["orders"]]) for d in body["deliveries"]] == [
        (days(api, 7).isoformat(), [(None, charge.id)]), (days(api, 14).isoformat(), [(None, charge.id)]),
        (days(api, 21).isoformat(), [(None, [c.id for c in charges_of(api, address.id) if c.status == "queued"][0])])]
    captured = api.post(f"/charges/{charge.id}/capture_payment")
    assert captured.status_code == 200, captured.text
    after = schedule(api, customer, delivery_count_future=3)["deliveries"]
    assert [d["date"] for d in after] == [d["date"] for d in body["deliveries"]]
    assert all(o["id"] is not None for d in after[:2] for o in d["orders"])  # the orders made


def test_an_item_charged_on_the_date_of_a_queued_charge_is_in_that_charges_order(api):
    """Found by an audit: a daily subscription's delivery two days on, the date of the weekly
    subscription's queued charge of the same address, showed as an order of its own (no
    charge), beside the charge's; billing made one charge and one order of both
    (decisions §5.9: one charge per address, date and status)."""
    customer = make_customer(api)
    address = make_address(api, customer)
    make_subscription(api, address, price=Decimal("1.00"), order_interval_unit="day",
                      next_charge_scheduled_at=days(api, 1))
    weekly_one = make_subscription(api, address, price=Decimal("7.00"), order_interval_unit="week",
                                   next_charge_scheduled_at=days(api, 2))
    [charge] = [c for c in charges_of(api, address.id) if c.scheduled_at == days(api, 2)]
    assert [line["purchase_item_id"] for line in charge.line_items] == [weekly_one.id]
    body = schedule(api, customer, delivery_count_future=2)
    second = next(d for d in body["deliveries"] if d["date"] == days(api, 2).isoformat())
    assert [(o["charge_id"], o["total_price"], len(o["line_items"])) for o in second["orders"]] == [
        (charge.id, "8.00", 2)]
