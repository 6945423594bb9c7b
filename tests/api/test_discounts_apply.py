"""Applying and removing discounts on addresses and charges (spec 02 Discount application
endpoints, Charges rule 2; spec 01 Address `discounts`; decisions §7.5): every refusal is a 422
naming why, and queued charges follow (amounts exact, events). Both versions, both databases."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from rebill.domain.billing import run as billing
from rebill.domain.payment.sandbox import SandboxGateway
from tests.api.test_charges_totals import set_rates
from tests.builders import (
    charges_of,
    events_of,
    make_address,
    make_customer,
    make_discount,
    make_onetime,
    make_payment_method,
    make_subscription,
)

V01, V11 = "2021-01", "2021-11"


def errors_of(reply: Any, status: int = 422) -> Any:
    assert reply.status_code == status, reply.text
    return reply.json()["errors"]


def queued(api: Any, address_id: int) -> Any:
    [charge] = [c for c in charges_of(api, address_id) if c.status == "queued"]
    return charge


def subscribed(api: Any, customer: Any = None, **kw: Any) -> Any:
    address = make_address(api, customer)
    make_subscription(api, address, **kw)
    return address


def pay(api: Any, charge_id: int) -> Any:
    [paid] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge_id], api.clock.now())
    return paid


def times_used(api: Any, discount_id: int) -> int:
    return api.get(f"/discounts/{discount_id}", version=V01).json()["discount"]["times_used"]


# Addresses -------------------------------------------------------------------------------

def test_apply_to_an_address_by_code_passes_it_to_its_queued_charges(vapi):
    discount_id = make_discount(vapi, code="TENOFF", value="10")
    address = subscribed(vapi)
    reply = vapi.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "tenoff"})
    assert reply.status_code == 200, reply.text
    shown = reply.json()["address"]
    if vapi.version == V01:
        assert shown["discount_id"] == discount_id
    else:
        assert shown["discounts"] == [{"id": discount_id, "code": "TENOFF", "value": "10", "value_type": "percentage"}]
    charge = queued(vapi, address.id)
    assert (charge.total_discounts, charge.total_price) == (Decimal("1.25"), Decimal("11.25"))
    body = vapi.get(f"/charges/{charge.id}").json()["charge"]
    if vapi.version == V01:
        assert body["discount_codes"] == [{"amount": "1.25", "code": "TENOFF", "type": "percentage"}]
    else:
        assert body["discounts"][0]["code"] == "TENOFF" and body["total_discounts"] == "1.25"
    topics = [t for t, i in events_of(vapi) if t in ("address/updated", "charge/updated")]
    assert topics == ["address/updated", "charge/updated"]


def test_when_both_are_sent_discount_id_wins(api):
    wanted = make_discount(api, code="WIN")
    make_discount(api, code="LOSE")
    address = subscribed(api)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": wanted, "discount_code": "LOSE"})
    assert queued(api, address.id).discount_id == wanted


@pytest.mark.parametrize("body, errors", [
    ({}, {"discount_id": ["is required"]}),
    ({"discount_id": "abc"}, {"discount_id": ["must be an integer"]}),
    ({"discount_code": 7}, {"discount_code": ["must be a string"]}),
    ({"discount_code": "NOPE"}, {"discount_code": ["discount not found"]}),
    ({"discount_id": 999999}, {"discount_id": ["discount not found"]}),
])
def test_apply_refuses_missing_wrong_or_unknown_codes(vapi, body, errors):
    address = subscribed(vapi)
    assert errors_of(vapi.post(f"/addresses/{address.id}/apply_discount", json=body)) == errors
    assert queued(vapi, address.id).discount_id is None


def test_apply_refuses_another_stores_code_and_404s_for_another_stores_address(api):
    other = api.other_store()
    foreign_code = make_discount(other)
    address = subscribed(api)
    assert errors_of(api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": foreign_code})) == {
        "discount_id": ["discount not found"]}
    mine = make_discount(api)
    foreign_address = make_address(other)
    for path in (f"/addresses/{foreign_address.id}/apply_discount", "/addresses/999999/apply_discount",
                 "/addresses/999999/remove_discount"):
        assert api.post(path, json={"discount_id": mine}).status_code == 404


def test_apply_needs_the_write_discounts_scope(vapi):
    address = subscribed(vapi)
    token = vapi.token_with("write_customers", "write_subscriptions")
    for path in (f"/addresses/{address.id}/apply_discount", f"/addresses/{address.id}/remove_discount",
                 f"/charges/{queued(vapi, address.id).id}/apply_discount",
                 f"/charges/{queued(vapi, address.id).id}/remove_discount"):
        assert vapi.post(path, json={}, token=token).json() == {
            "errors": "This token lacks the scope this endpoint needs: write_discounts"}


def test_an_address_that_has_a_discount_cannot_receive_another(api):
    first, second = make_discount(api), make_discount(api)
    address = subscribed(api)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": first})
    assert errors_of(api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": second})) == {
        "discount_id": ["the address already has a discount; remove it first"]}


def test_an_address_whose_queued_charge_has_a_discount_cannot_receive_one(api):
    first, second = make_discount(api), make_discount(api)
    address = subscribed(api)
    api.post(f"/charges/{queued(api, address.id).id}/apply_discount", json={"discount_id": first})
    assert errors_of(api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": second})) == {
        "discount_id": ["a queued charge of the address already has a discount"]}


@pytest.mark.parametrize("overrides, message", [
    ({"status": "disabled"}, "discount is disabled"),
    ({"status": "fully_disabled"}, "discount is fully disabled"),
    ({"ends_at": "past"}, "discount has ended"),
    ({"starts_at": "future"}, "discount has not started yet"),
    ({"channel_settings": {"api": {"can_apply": False}}}, "discount cannot be applied through the API"),
    ({"usage_limit": 2, "times_used": 2}, "discount has reached its usage limit"),
])
def test_a_code_that_cannot_be_redeemed_now_is_refused_naming_why(api, overrides, message):
    now = api.clock.now()
    if overrides.get("ends_at") == "past":
        overrides["ends_at"] = now - timedelta(seconds=1)
    if overrides.get("starts_at") == "future":
        overrides["starts_at"] = now + timedelta(days=1)
    discount_id = make_discount(api, **overrides)
    address = subscribed(api)
    assert errors_of(api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})) == {
        "discount_id": [message]}


def test_a_fixed_amount_is_refused_on_an_address_in_another_currency(api):
    euro = api.other_store(presentment_currencies=["EUR"])
    discount_id = make_discount(euro, discount_type="fixed_amount", value="5")
    address = make_address(euro, presentment_currency="EUR")
    assert errors_of(euro.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})) == {
        "discount_id": ["a fixed amount discount applies only to charges in USD"]}


def test_once_per_customer_refuses_the_code_on_a_second_address(vapi):
    discount_id = make_discount(vapi, once_per_customer=True)
    customer = make_customer(vapi)
    first, second = subscribed(vapi, customer), subscribed(vapi, customer)
    assert vapi.post(f"/addresses/{first.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    assert errors_of(vapi.post(f"/addresses/{second.id}/apply_discount", json={"discount_id": discount_id})) == {
        "discount_id": ["discount can be used once per customer"]}
    assert subscribed(vapi) and vapi.post(f"/addresses/{subscribed(vapi).id}/apply_discount",
                                          json={"discount_id": discount_id}).status_code == 200


def test_once_per_customer_counts_a_code_the_customer_already_used(api):
    discount_id = make_discount(api, once_per_customer=True)
    customer = make_customer(api)
    make_payment_method(api, customer)
    first = subscribed(api, customer, next_charge_scheduled_at=api.clock.now().date())
    api.post(f"/addresses/{first.id}/apply_discount", json={"discount_id": discount_id})
    assert pay(api, queued(api, first.id).id).status == "success"
    api.post(f"/addresses/{first.id}/remove_discount", json={})
    second = subscribed(api, customer)
    assert errors_of(api.post(f"/addresses/{second.id}/apply_discount", json={"discount_id": discount_id})) == {
        "discount_id": ["discount can be used once per customer"]}


def test_first_time_customer_restriction_refuses_a_customer_with_a_paid_charge(api):
    discount_id = make_discount(api, first_time_customer_restriction="customer_must_not_exist_in_service")
    customer = make_customer(api)
    make_payment_method(api, customer)
    newcomer = subscribed(api)
    assert api.post(f"/addresses/{newcomer.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    first = subscribed(api, customer, next_charge_scheduled_at=api.clock.now().date())
    pay(api, queued(api, first.id).id)
    assert errors_of(api.post(f"/addresses/{first.id}/apply_discount", json={"discount_id": discount_id})) == {
        "discount_id": ["discount is for first-time customers only"]}


def test_remove_from_an_address_also_removes_it_from_future_charges(vapi):
    discount_id = make_discount(vapi)
    address = subscribed(vapi)
    vapi.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    reply = vapi.post(f"/addresses/{address.id}/remove_discount", json={})
    assert reply.status_code == 200
    assert reply.json()["address"].get("discount_id") is None and reply.json()["address"].get("discounts") in (None, [])
    assert queued(vapi, address.id).discount_id is None and queued(vapi, address.id).total_discounts == 0


def test_2021_11_address_discounts_array_applies_by_the_same_rules(api):
    discount_id = make_discount(api, once_per_customer=True, code="ONCE")
    customer = make_customer(api)
    first = subscribed(api, customer)
    reply = api.put(f"/addresses/{first.id}", json={"discounts": [{"code": "once"}]})
    assert reply.status_code == 200 and reply.json()["address"]["discounts"][0]["id"] == discount_id
    second = subscribed(api, customer)
    assert errors_of(api.put(f"/addresses/{second.id}", json={"discounts": [{"id": discount_id}]})) == {
        "discounts": ["discount can be used once per customer"]}
    assert api.put(f"/addresses/{first.id}", json={"discounts": []}).json()["address"]["discounts"] == []
    assert queued(api, first.id).discount_id is None


# Charges ---------------------------------------------------------------------------------

def test_apply_to_a_charge_discounts_that_charge_only(vapi):
    discount_id = make_discount(vapi, discount_type="fixed_amount", value="3")
    address = subscribed(vapi)
    charge = queued(vapi, address.id)
    reply = vapi.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})
    assert reply.status_code == 200, reply.text
    assert reply.json()["charge"]["id"] == charge.id and reply.json()["charge"]["total_price"] == "9.50"
    assert vapi.get(f"/addresses/{address.id}", version=V01).json()["address"]["discount_id"] is None


def test_a_charge_that_has_a_discount_or_whose_address_has_one_cannot_receive_another(api):
    first, second = make_discount(api), make_discount(api)
    address = subscribed(api)
    charge = queued(api, address.id)
    api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": first})
    assert errors_of(api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": second})) == {
        "discount_id": ["the charge already has a discount; remove it first"]}
    other = subscribed(api)
    api.post(f"/addresses/{other.id}/apply_discount", json={"discount_id": first})
    assert errors_of(api.post(f"/charges/{queued(api, other.id).id}/apply_discount",
                              json={"discount_id": second})) == {
        "discount_id": ["the charge already has a discount; remove it first"]}


def test_apply_to_a_charge_below_the_minimum_or_with_no_matching_line_is_refused(api):
    minimum = make_discount(api, prerequisite_subtotal_min=Decimal("50"))
    product = make_discount(api, applies_to_id="other-product", applies_to_resource="platform_product")
    address = subscribed(api)
    charge = queued(api, address.id)
    assert errors_of(api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": minimum})) == {
        "discount_id": ["the charge's subtotal 12.50 is below the discount's minimum 50.00"]}
    assert errors_of(api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": product})) == {
        "discount_id": ["discount applies to no line of this charge"]}


def test_apply_and_remove_on_charges_404_for_unknown_or_foreign_charges(api):
    discount_id = make_discount(api)
    other = api.other_store()
    their = queued(other, subscribed(other).id)
    for path in (f"/charges/{their.id}/apply_discount", "/charges/999999/apply_discount",
                 f"/charges/{their.id}/remove_discount"):
        assert api.post(path, json={"discount_id": discount_id}).status_code == 404


def test_remove_from_a_charge_and_the_address_code_needs_address_id(vapi):
    discount_id = make_discount(vapi)
    address = subscribed(vapi)
    charge = queued(vapi, address.id)
    vapi.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})
    reply = vapi.post(f"/charges/{charge.id}/remove_discount", json={"charge_id": charge.id})
    assert reply.status_code == 200 and queued(vapi, address.id).discount_id is None
    vapi.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    assert errors_of(vapi.post(f"/charges/{charge.id}/remove_discount", json={"charge_id": charge.id})) == {
        "charge_id": ["the discount is on the charge's address; remove it from the address (send address_id)"]}
    reply = vapi.post(f"/charges/{charge.id}/remove_discount", json={"address_id": address.id,
                                                                    "charge_id": charge.id})
    assert reply.status_code == 200 and queued(vapi, address.id).discount_id is None
    assert errors_of(vapi.post(f"/charges/{charge.id}/remove_discount", json={"address_id": "x"})) == {
        "address_id": ["must be an integer"]}


def test_remove_with_another_charges_id_is_refused_and_changes_nothing(vapi):
    """As an `address_id` must be the charge's address (found by an audit: another charge's id,
    or an unknown one, was ignored and the path's charge lost its code)."""
    discount_id = make_discount(vapi)
    address = subscribed(vapi)
    charge = queued(vapi, address.id)
    vapi.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})
    for other in (999_999, charge.id + 1):
        assert errors_of(vapi.post(f"/charges/{charge.id}/remove_discount", json={"charge_id": other})) == {
            "charge_id": ["is not the charge of this path"]}
    assert queued(vapi, address.id).discount_id == discount_id


def test_a_discount_applied_to_a_charge_goes_when_its_date_moves(api):
    discount_id = make_discount(api)
    address = subscribed(api)
    charge = queued(api, address.id)
    api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})
    new_date = (charge.scheduled_at + timedelta(days=3)).isoformat()
    api.post(f"/charges/{charge.id}/change_next_charge_date", json={"next_charge_date": new_date}, version=V01)
    assert queued(api, address.id).discount_id is None


# Amounts ---------------------------------------------------------------------------------

def test_only_the_lines_a_code_applies_to_are_discounted(api):
    discount_id = make_discount(api, applies_to_product_type="ONETIME", value="50")
    address = subscribed(api)
    make_onetime(api, address, price="8.00", next_charge_scheduled_at=queued(api, address.id).scheduled_at)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    charge = queued(api, address.id)
    assert charge.total_discounts == Decimal("4.00") and charge.total_price == Decimal("16.50")
    assert [line["total_price"] for line in charge.line_items] == ["12.50", "8.00"]


def test_a_queued_charge_below_the_minimum_takes_nothing_and_shows_no_code(api):
    discount_id = make_discount(api, prerequisite_subtotal_min=Decimal("20"))
    address = subscribed(api)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    charge = queued(api, address.id)
    assert charge.discount_id is None and charge.total_discounts == 0


def test_a_shipping_discount_takes_its_percent_off_shipping_only(api):
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "6.00"}])
    discount_id = make_discount(api, discount_type="shipping", value="50")
    address = subscribed(api)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    charge = queued(api, address.id)
    assert (charge.total_shipping, charge.total_discounts, charge.total_price) == (
        Decimal("6.00"), Decimal("3.00"), Decimal("15.50"))


def test_a_shipping_discount_for_one_time_lines_frees_only_charges_that_have_one(api):
    # decisions §7.5, `applies_to_*` for a shipping code too: a charge with no line it applies
    # to takes nothing and shows no code (found by a money audit: it took the shipping off).
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00"}])
    discount_id = make_discount(api, discount_type="shipping", value="100", applies_to_product_type="ONETIME")
    address = subscribed(api)
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.total_discounts, charge.total_price) == (None, 0, Decimal("17.50"))
    make_onetime(api, address, price="8.00", next_charge_scheduled_at=charge.scheduled_at)
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.total_discounts, charge.total_price) == (
        discount_id, Decimal("5.00"), Decimal("20.50"))


def test_a_shipping_code_that_applies_to_no_line_cannot_be_applied_to_a_charge(api):
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00"}])
    discount_id = make_discount(api, discount_type="shipping", value="100", applies_to_product_type="ONETIME")
    charge = queued(api, subscribed(api).id)
    applied = api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id}, version=V01)
    assert (applied.status_code, applied.json()) == (
        422, {"errors": {"discount_id": ["discount applies to no line of this charge"]}})
    assert queued(api, charge.address_id).total_price == Decimal("17.50")


def test_a_shipping_code_is_not_spent_on_a_charge_with_nothing_to_ship(api):
    # Found by a review: a charge of a download (no shipping since it ships nothing) carried a
    # free-shipping code that took 0.00 and would have counted a use.
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00"}])
    discount_id = make_discount(api, discount_type="shipping", value="100")
    made = api.post("/products", json={"external_product_id": "ebook", "title": "E-book", "requires_shipping": False,
                                        "variants": [{"external_variant_id": "ebook-1", "price": "5.00"}]}, version=V11)
    assert made.status_code == 201, made.text
    address = make_address(api)
    make_subscription(api, address, external_product_id="ebook", external_variant_id="ebook-1")
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.total_discounts, charge.shipping_lines) == (None, 0, [])
    applied = api.post(f"/charges/{charge.id}/remove_discount", json={"address_id": address.id})
    assert applied.status_code == 200
    applied = api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id}, version=V01)
    assert (applied.status_code, applied.json()) == (
        422, {"errors": {"discount_id": ["the charge has nothing to ship"]}})


def _carried_by_no_charge(api: Any, address: Any, discount_id: int, reason: str) -> Any:
    """The address takes the code, its queued charge carries none (no line, no use), a code
    applied to the charge itself is refused with ``reason``; then the address takes it again
    for what the test changes next. Returns the charge as it was without the code."""
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.discounts, charge.total_discounts) == (None, [], 0)
    assert api.post(f"/charges/{charge.id}/remove_discount", json={"address_id": address.id}).status_code == 200
    refused = api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id}, version=V01)
    assert (refused.status_code, refused.json()) == (422, {"errors": {"discount_id": [reason]}})
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    return charge


def test_a_shipping_code_is_not_spent_on_a_charge_whose_shipping_costs_nothing(api):
    """Found by an audit: with the address's shipping overridden to nothing, a single-use
    free-shipping code sat on the charge at 0.00 and was used up by its payment; the next
    charge, which ships, paid its shipping in full."""
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00"}])
    discount_id = make_discount(api, discount_type="shipping", value="100", duration="single_use")
    address = subscribed(api)
    assert api.put(f"/addresses/{address.id}", json={"shipping_lines_override": []}).status_code == 200
    charge = _carried_by_no_charge(api, address, discount_id, "the charge has no shipping to take off")
    assert charge.total_shipping == 0
    # Shipping back: the address's code takes it off.
    assert api.put(f"/addresses/{address.id}", json={"shipping_lines_override": None}).status_code == 200
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.total_shipping, charge.total_discounts) == (discount_id, 5, 5)


@pytest.mark.parametrize("kind", ["percentage", "fixed_amount"])
def test_a_code_is_not_spent_on_a_charge_whose_lines_cost_nothing(api, kind):
    """Found by an audit: a single-use code sat on a free sample's charge at 0.00 and was used
    up by its payment; the next charge, which costs something, took nothing off."""
    discount_id = make_discount(api, discount_type=kind, value="5", duration="single_use")
    address = make_address(api)
    item = make_subscription(api, address, price=Decimal("0.00"))
    _carried_by_no_charge(api, address, discount_id, "the charge has no amount to take off")
    # A price: the address's code takes it off.
    assert api.put(f"/subscriptions/{item.id}", json={"price": "20.00"}, version=V11).status_code == 200
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.total_discounts) == (discount_id, Decimal(1 if kind == "percentage" else 5))


@pytest.mark.parametrize(("kind", "price", "shipping"), [("percentage", "0.01", None), ("shipping", "10.00", "0.03")])
def test_a_code_is_not_spent_on_a_charge_it_would_take_nothing_off_once_rounded(api, kind, price, shipping):
    """Found by an audit: 15 % of a 0.01 line rounds to 0.00; the single-use code sat on the
    charge as a line of 0.00 and was used up by its payment, and the next charge, at 100.00,
    took nothing off. A share that rounds to nothing is nothing to take off (the same for a
    shipping code's share of a shipping of 0.03)."""
    if shipping is not None:
        set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": shipping}])
    discount_id = make_discount(api, discount_type=kind, value="15", duration="single_use")
    address = make_address(api)
    item = make_subscription(api, address, price=Decimal(price))
    _carried_by_no_charge(api, address, discount_id, "the charge has no amount to take off")
    # Enough to take 15 % of: the address's code takes it off.
    if shipping is not None:
        set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "10.00"}])
    else:
        assert api.put(f"/subscriptions/{item.id}", json={"price": "100.00"}, version=V11).status_code == 200
    charge = queued(api, address.id)
    assert (charge.discount_id, charge.total_discounts) == (discount_id, Decimal("15.00" if shipping is None else "1.50"))


def test_a_fixed_amount_larger_than_the_lines_never_makes_the_total_negative(api):
    discount_id = make_discount(api, discount_type="fixed_amount", value="100")
    address = subscribed(api)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    charge = queued(api, address.id)
    assert charge.total_discounts == Decimal("12.50") and charge.total_price == 0


# Uses ------------------------------------------------------------------------------------

def test_times_used_counts_one_per_successful_charge_never_on_apply_or_failure(api):
    discount_id = make_discount(api)
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token="pm_declined")
    address = subscribed(api, customer, next_charge_scheduled_at=api.clock.now().date())
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    assert times_used(api, discount_id) == 0
    charge = queued(api, address.id)
    assert pay(api, charge.id).status == "error"
    assert times_used(api, discount_id) == 0


def test_processing_a_paid_charge_again_counts_no_second_use(api):
    discount_id = make_discount(api)
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = subscribed(api, customer, next_charge_scheduled_at=api.clock.now().date())
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    charge = queued(api, address.id)
    assert pay(api, charge.id).status == "success"
    tier_a = api.token_with("write_orders")
    api.post(f"/charges/{charge.id}/process", json={}, token=tier_a)
    billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge.id], api.clock.now())
    assert times_used(api, discount_id) == 1


def test_a_single_use_code_is_not_reapplied_after_its_first_use(api):
    discount_id = make_discount(api, duration="single_use")
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = subscribed(api, customer, next_charge_scheduled_at=api.clock.now().date())
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    pay(api, queued(api, address.id).id)
    assert times_used(api, discount_id) == 1
    assert queued(api, address.id).discount_id is None
