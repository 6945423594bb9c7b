"""One charge holding prepaid subscriptions of different order intervals (decisions §5.4,
§6.12; docs/api-choices.md, Orders "Lines of prepaid orders" and Charges "Order counts").

An order interval belongs to a subscription: each prepaid item delivers on its own dates
(the charge's date + k of its own order intervals). The charge makes one order per date on
which one of them delivers; the first carries every line, items whose dates coincide share
an order. Found by a review: every later order was dated by the first prepaid item's interval
(03-08 [A,B], 04-08 [A,B], 05-08 [B], 06-08 [B] below).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from tests.builders import make_address, make_customer, make_payment_method
from tests.scenarios.conftest import advance

V01, V11 = "2021-01", "2021-11"
START = date(2027, 3, 8)
# What the billing run on START makes (A: monthly, 2 months a charge; B: weekly, 4 weeks a charge).
MADE = [("2027-03-08", "success", "AB"), ("2027-03-15", "queued", "B"), ("2027-03-22", "queued", "B"),
        ("2027-03-29", "queued", "B"), ("2027-04-08", "queued", "A")]


def _mixed(api: Any, at: Any, a: dict[str, Any] | None = None, b: dict[str, Any] | None = None) -> dict[str, Any]:
    """A sandbox customer (token pm_ok4) with prepaid subscriptions A and B, both next on
    START, on one address: one queued charge. ``a``/``b`` override their cadences."""
    at(date(2027, 3, 6))
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token="pm_ok4")
    address = make_address(api, customer)
    made = {"customer": customer, "address": address}
    for name, price, cadence in (("A", "20.00", {"order_interval_unit": "month", "order_interval_frequency": 1,
                                                  "charge_interval_frequency": 2, **(a or {})}),
                                 ("B", "3.00", {"order_interval_unit": "week", "order_interval_frequency": 1,
                                                "charge_interval_frequency": 4, **(b or {})})):
        reply = api.post("/subscriptions", version=V11, json={
            "address_id": address.id, "product_title": f"Box {name}", "price": price, "quantity": 1,
            "next_charge_scheduled_at": START.isoformat(), **cadence})
        assert reply.status_code == 201, reply.text
        made[name] = reply.json()["subscription"]["id"]
    charges = api.get("/charges", version=V11, params={"address_id": address.id}).json()["charges"]
    [charge] = [c for c in charges if c["status"] == "queued"]
    made["charge"] = charge["id"]
    return made


def _orders(api: Any, made: dict[str, Any], version: str) -> list[tuple[str, str, str]]:
    """(date, status, names of the items delivered) of the charge's orders, by date, as
    ``version`` shows them."""
    reply = api.get("/orders", version=version, params={"charge_id": made["charge"]})
    assert reply.status_code == 200, reply.text
    names = {made["A"]: "A", made["B"]: "B"}
    key = "purchase_item_id" if version == V11 else "subscription_id"
    found = [(o["scheduled_at"][:10], o["status"].lower(), "".join(sorted(names[line[key]] for line in o["line_items"])))
             for o in reply.json()["orders"]]
    return sorted(found)


def _order_ids(api: Any, made: dict[str, Any]) -> dict[str, int]:
    """The charge's orders' ids by date."""
    orders = api.get("/orders", version=V11, params={"charge_id": made["charge"]}).json()["orders"]
    return {o["scheduled_at"][:10]: o["id"] for o in orders}


def _counts(api: Any, made: dict[str, Any]) -> tuple[int, int]:
    """The charge's 2021-11 `orders_count` and 2021-01 `shipments_count`."""
    new = api.get(f"/charges/{made['charge']}", version=V11)
    old = api.get(f"/charges/{made['charge']}", version=V01)
    assert new.status_code == old.status_code == 200, (new.text, old.text)
    assert "orders_count" not in old.json()["charge"]
    return new.json()["charge"]["orders_count"], old.json()["charge"]["shipments_count"]


def test_each_prepaid_item_delivers_on_its_own_order_interval(api, at):
    made = _mixed(api, at)
    # From its planning on: the orders the charge will make, one per delivery date.
    assert _counts(api, made) == (5, 0)
    clock = advance(api, to=START.isoformat())
    assert clock["paid"] == 1 and clock["failed"] == 0
    for version in (V11, V01):
        assert _orders(api, made, version) == MADE
    assert _counts(api, made) == (5, 1)
    # Each subscription's next charge is one charge interval of its own on.
    for name, next_date in (("A", "2027-05-08"), ("B", "2027-04-05")):
        shown = api.get(f"/subscriptions/{made[name]}", version=V11).json()["subscription"]
        assert shown["next_charge_scheduled_at"][:10] == next_date
    # The queued orders go out on their dates: one more shipment each.
    advance(api, to="2027-03-15")
    assert _counts(api, made) == (5, 2)
    assert [status for _, status, _ in _orders(api, made, V11)] == ["success", "success", "queued", "queued",
                                                                    "queued"]
    advance(api, to="2027-04-08")
    assert _counts(api, made) == (5, 5)
    assert {status for _, status, _ in _orders(api, made, V01)} == {"success"}


def test_items_whose_dates_coincide_share_one_order(api, at):
    """A every 2 weeks, B every week, both 4 weeks a charge: A's second delivery falls on B's
    third, and that date is one order holding both."""
    made = _mixed(api, at, a={"order_interval_unit": "week", "order_interval_frequency": 2,
                              "charge_interval_frequency": 4})
    assert _counts(api, made) == (4, 0)
    advance(api, to=START.isoformat())
    assert _orders(api, made, V11) == [("2027-03-08", "success", "AB"), ("2027-03-15", "queued", "B"),
                                       ("2027-03-22", "queued", "AB"), ("2027-03-29", "queued", "B")]
    assert _counts(api, made) == (4, 1)


def test_the_delivery_schedule_shows_each_stored_later_order_once(api, at):
    made = _mixed(api, at)
    advance(api, to=START.isoformat())
    ids = _order_ids(api, made)
    reply = api.get(f"/customers/{made['customer'].id}/delivery_schedule", version=V11)
    assert reply.status_code == 200, reply.text
    names = {made["A"]: "A", made["B"]: "B"}
    shown = [(d["date"], [(o["id"], "".join(names[line["subscription_id"]] for line in o["line_items"]))
                          for o in d["orders"]]) for d in reply.json()["deliveries"]]
    # The stored later orders as stored (their ids), then the next charges' deliveries projected
    # (B's next charge on 04-05, four weekly orders; A's on 05-08): no date twice for an item.
    assert shown == [
        ("2027-03-15", [(ids["2027-03-15"], "B")]), ("2027-03-22", [(ids["2027-03-22"], "B")]),
        ("2027-03-29", [(ids["2027-03-29"], "B")]), ("2027-04-05", [(None, "B")]),
        ("2027-04-08", [(ids["2027-04-08"], "A")]), ("2027-04-12", [(None, "B")]), ("2027-04-19", [(None, "B")]),
        ("2027-04-26", [(None, "B")]), ("2027-05-03", [(None, "B")]), ("2027-05-08", [(None, "A")]),
    ]


def test_a_delay_moves_each_later_order_by_its_own_items_interval(vapi, at):
    """decisions §6.12: the order and every later queued order of its charge move one interval;
    each by the order interval of the prepaid subscription it delivers, so B's weekly orders
    keep their week and A's monthly one its day of the month."""
    made = _mixed(vapi, at)
    advance(vapi, to=START.isoformat())
    ids = _order_ids(vapi, made)
    reply = vapi.post(f"/orders/{ids['2027-03-15']}/delay", json={})
    assert reply.status_code == 200, reply.text
    assert reply.json()["order"]["scheduled_at"][:10] == "2027-03-22"
    assert _orders(vapi, made, vapi.version) == [
        ("2027-03-08", "success", "AB"), ("2027-03-22", "queued", "B"), ("2027-03-29", "queued", "B"),
        ("2027-04-05", "queued", "B"), ("2027-05-08", "queued", "A")]


def test_a_delay_of_a_later_order_of_one_item_moves_it_by_that_items_interval(vapi, at):
    made = _mixed(vapi, at)
    advance(vapi, to=START.isoformat())
    ids = _order_ids(vapi, made)
    assert vapi.post(f"/orders/{ids['2027-04-08']}/delay").status_code == 200  # A's: a month, alone
    assert vapi.post(f"/orders/{ids['2027-03-29']}/delay").status_code == 200  # B's: a week, and A's a month
    assert _orders(vapi, made, vapi.version) == [
        ("2027-03-08", "success", "AB"), ("2027-03-15", "queued", "B"), ("2027-03-22", "queued", "B"),
        ("2027-04-05", "queued", "B"), ("2027-06-08", "queued", "A")]


def test_an_order_of_two_cadences_on_one_date_moves_by_its_lowest_id_items_interval(api, at):
    """docs/api-choices.md, Orders: an order delivering prepaid items of two order intervals on
    one date is delayed by the interval of the one with the lowest id (A, two weeks here)."""
    made = _mixed(api, at, a={"order_interval_unit": "week", "order_interval_frequency": 2,
                              "charge_interval_frequency": 4})
    assert made["A"] < made["B"]
    advance(api, to=START.isoformat())
    ids = _order_ids(api, made)
    assert api.post(f"/orders/{ids['2027-03-22']}/delay").status_code == 200
    assert _orders(api, made, V11) == [("2027-03-08", "success", "AB"), ("2027-03-15", "queued", "B"),
                                       ("2027-04-05", "queued", "AB"), ("2027-04-05", "queued", "B")]


def test_a_later_order_whose_subscription_is_gone_moves_by_the_delayed_orders_interval(api, at):
    """The delay asked for names the delayed order's subscription: a later order of the charge
    whose own prepaid subscription was deleted since still moves (decisions §6.12: every later
    queued order), by that interval, instead of refusing the whole delay."""
    made = _mixed(api, at)
    advance(api, to=START.isoformat())
    ids = _order_ids(api, made)
    assert api.post(f"/subscriptions/{made['A']}/cancel", json={"cancellation_reason": "x"}).status_code == 200
    assert api.delete(f"/subscriptions/{made['A']}").status_code in (200, 204)
    assert api.post(f"/orders/{ids['2027-03-29']}/delay").status_code == 200
    assert _orders(api, made, V11) == [("2027-03-08", "success", "AB"), ("2027-03-15", "queued", "B"),
                                       ("2027-03-22", "queued", "B"), ("2027-04-05", "queued", "B"),
                                       ("2027-04-15", "queued", "A")]
