"""The event log's `updated_attributes` (issue 14, "The event log"): every `*/updated` event
names exactly the fields its update changed, as the head (2021-11) API names them; an update
that changes nothing records no event; and deletes are found by their customer
(`GET /events?customer_id=X`), though the deleted row is gone when the event is written."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from rebill.domain.catalog.model import VariantInput
from tests.api.test_products import make_plan, make_product
from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_discount,
    make_metafield,
    make_onetime,
    make_order,
    make_payment_method,
    make_subscription,
)

V11 = "2021-11"


def events(api: Any, **filters: Any) -> list[dict[str, Any]]:
    """The store's events matching ``filters``, newest first (2021-11 `GET /events`)."""
    reply = api.get("/events", params={"limit": 250, **filters}, version=V11)
    assert reply.status_code == 200, reply.text
    return reply.json()["events"]


def updated(api: Any, object_type: str, object_id: int) -> list[list[str]]:
    """The `updated_attributes` of the resource's `updated` events, newest first."""
    return [e["updated_attributes"] for e in events(api, object_type=object_type, verb="updated",
                                                    object_id=object_id)]


def put(api: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.put(path, json=body, version=V11)
    assert reply.status_code == 200, reply.text
    return reply.json()


def check_update(api: Any, object_type: str, object_id: int, path: str, body: dict[str, Any],
                 expected: list[str]) -> None:
    """One update names ``expected``; the same body again changes nothing and records nothing."""
    before = updated(api, object_type, object_id)
    put(api, path, body)
    after = updated(api, object_type, object_id)
    assert after == [expected, *before]
    put(api, path, body)
    assert updated(api, object_type, object_id) == after


# Each resource's update endpoint -------------------------------------------------------------

def test_customer_update_names_the_fields_it_changed(api):
    customer = make_customer(api)
    check_update(api, "customer", customer.id, f"/customers/{customer.id}",
                 {"email": "renamed@example.com", "first_name": "Grace", "last_name": customer.last_name},
                 ["email", "first_name"])
    check_update(api, "customer", customer.id, f"/customers/{customer.id}",
                 {"external_customer_id": {"ecommerce": "77"}, "tax_exempt": True},
                 ["external_customer_id", "tax_exempt"])


def test_address_update_names_the_fields_it_changed_discounts_for_its_code(api):
    address = make_address(api)
    code = "TEN" + str(address.id)
    make_discount(api, code=code)
    check_update(api, "address", address.id, f"/addresses/{address.id}",
                 {"address2": "Apt 4", "city": address.city, "discounts": [{"code": code}]},
                 ["address2", "discounts"])
    check_update(api, "address", address.id, f"/addresses/{address.id}",
                 {"shipping_lines_override": [{"code": "fast", "price": "4.00", "title": "Fast"}]},
                 ["shipping_lines_override"])


def test_subscription_update_names_the_fields_it_changed_not_internal_ones(api):
    item = make_subscription(api)
    later = (item.next_charge_scheduled_at + timedelta(days=3)).isoformat()
    # A new date also moves the monthly anchor, which 2021-11 does not show.
    check_update(api, "subscription", item.id, f"/subscriptions/{item.id}",
                 {"quantity": 2, "next_charge_scheduled_at": later, "product_title": item.product_title},
                 ["next_charge_scheduled_at", "quantity"])


def test_subscription_moves_outside_put_name_their_fields_too(api):
    item = make_subscription(api)
    later = item.next_charge_scheduled_at + timedelta(days=5)
    reply = api.post(f"/subscriptions/{item.id}/set_next_charge_date", json={"date": later.isoformat()},
                     version=V11)
    assert reply.status_code == 200, reply.text
    assert updated(api, "subscription", item.id) == [["next_charge_scheduled_at"]]


def test_onetime_update_names_the_fields_it_changed(api):
    item = make_onetime(api)
    check_update(api, "onetime", item.id, f"/onetimes/{item.id}",
                 {"quantity": 3, "product_title": "Big mug", "price": "8.00"},
                 ["product_title", "quantity"])


def test_order_update_names_the_fields_it_changed(api):
    order = make_order(api)
    check_update(api, "order", order.id, f"/orders/{order.id}", {"note": "leave at the door", "tags": "gift"},
                 ["note", "tags"])


def test_discount_update_names_the_fields_it_changed_usage_limits_for_the_count(api):
    discount_id = make_discount(api)
    check_update(api, "discount", discount_id, f"/discounts/{discount_id}",
                 {"status": "disabled", "usage_limits": {"redemptions": 5}}, ["status", "usage_limits"])


def test_metafield_update_names_the_fields_it_changed(api):
    metafield = make_metafield(api)
    check_update(api, "metafield", metafield.id, f"/metafields/{metafield.id}",
                 {"value": "silver", "description": "tier"}, ["description", "value"])


def test_plan_and_product_updates_name_the_fields_they_changed(api):
    product = make_product(api, "7001", variants=[VariantInput(external_variant_id="7001-1", price=Decimal("10"))])
    plan = make_plan(api, product)
    check_update(api, "plan", plan.id, f"/plans/{plan.id}", {"title": "Every month", "sort_order": 3},
                 ["sort_order", "title"])
    check_update(api, "product", product.id, f"/products/{product.external_product_id}",
                 {"title": "Tea", "vendor": "Leaf & Co"}, ["title", "vendor"])


def test_webhook_update_names_the_fields_it_changed(api):
    reply = api.post("/webhooks", json={"address": "https://hooks.example.com/a", "topic": "customer/created"},
                     version=V11)
    assert reply.status_code == 201, reply.text
    webhook_id = reply.json()["webhook"]["id"]
    check_update(api, "webhook", webhook_id, f"/webhooks/{webhook_id}",
                 {"address": "https://hooks.example.com/b", "topic": "customer/created"}, ["address"])


# What an update moves elsewhere --------------------------------------------------------------

def test_a_charge_regenerated_by_a_price_change_names_the_charge_fields_that_moved(api):
    item = make_subscription(api)
    [charge] = [c for c in charges_of(api, item.address_id) if c.status == "queued"]
    put(api, f"/subscriptions/{item.id}", {"price": "20.00"})
    assert updated(api, "subscription", item.id) == [["price"]]
    assert updated(api, "charge", charge.id) == [
        ["line_items", "subtotal_price", "total_line_items_price", "total_price"]]


def test_a_charge_regenerated_by_a_new_date_names_its_date(api):
    item = make_subscription(api)
    [charge] = [c for c in charges_of(api, item.address_id) if c.status == "queued"]
    later = (item.next_charge_scheduled_at + timedelta(days=2)).isoformat()
    # A 2021-01 endpoint; the event log reads it in 2021-11 like any change.
    reply = api.post(f"/charges/{charge.id}/change_next_charge_date", json={"next_charge_date": later},
                     version="2021-01")
    assert reply.status_code == 200, reply.text
    assert updated(api, "subscription", item.id) == [["next_charge_scheduled_at"]]
    # The charge keeps its id at its new date (its `original_scheduled_at` was set when made).
    assert updated(api, "charge", charge.id) == [["scheduled_at"]]


def test_a_payment_advances_its_subscription_by_its_date(api):
    order = make_order(api)
    [line] = order.line_items
    assert updated(api, "subscription", line["purchase_item_id"]) == [["next_charge_scheduled_at"]]


def test_a_payment_that_ends_its_subscription_names_its_status_too(api):
    order = make_order(api, expire_after_specific_number_of_charges=1)
    [line] = order.line_items
    assert updated(api, "subscription", line["purchase_item_id"]) == [["next_charge_scheduled_at", "status"]]


def test_a_charge_in_retry_left_by_a_cancelled_item_names_its_money(api):
    store = api.other_store(plan_tier="premium_a")  # manual processing
    customer = make_customer(store)
    make_payment_method(store, customer, processor_payment_method_token="pm_declined")
    address = make_address(store, customer)
    first = make_subscription(store, address, price=Decimal("9.00"))
    make_subscription(store, address, price=Decimal("3.00"))
    [charge] = charges_of(store, address.id)
    reply = store.post(f"/charges/{charge.id}/process", json={}, version=V11)
    assert reply.json()["charge"]["status"] == "error", reply.text
    reply = store.post(f"/subscriptions/{first.id}/cancel", json={"cancellation_reason": "too much"}, version=V11)
    assert reply.status_code == 200, reply.text
    # Newest first: the cancel's, after the one the second subscription made when it joined.
    assert updated(store, "charge", charge.id)[0] == [
        "line_items", "subtotal_price", "total_line_items_price", "total_price"]
    # The cancel itself names what it changed (no comments were sent: they stay null).
    [cancelled] = events(store, object_type="subscription", verb="cancelled", object_id=first.id)
    assert cancelled["updated_attributes"] == [
        "cancellation_reason", "cancelled_at", "next_charge_scheduled_at", "status"]


# Deletes, found by their customer -----------------------------------------------------------

def deleted(api: Any, customer_id: int) -> set[tuple[str, int]]:
    return {(e["object_type"], e["object_id"]) for e in events(api, customer_id=customer_id, verb="deleted")}


def test_deletes_are_found_by_their_customer(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    subscription = make_subscription(api, address)
    onetime = make_onetime(api, address)
    [charge] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    on_customer = make_metafield(api, customer)
    on_subscription = make_metafield(api, subscription, owner_resource="subscription")
    on_address = make_metafield(api, address, owner_resource="address")

    for path in (f"/subscriptions/{subscription.id}", f"/onetimes/{onetime.id}", f"/metafields/{on_customer.id}"):
        assert api.delete(path, version=V11).status_code == 204, path
    # The charge went with its last item (the reconciler); the address goes with what is left.
    assert api.delete(f"/addresses/{address.id}", version=V11).status_code == 204
    assert deleted(api, customer.id) == {
        ("subscription", subscription.id), ("onetime", onetime.id), ("charge", charge.id),
        ("metafield", on_customer.id), ("metafield", on_subscription.id), ("metafield", on_address.id),
        ("address", address.id)}


def test_an_address_delete_names_the_customer_of_everything_it_takes(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    onetime = make_onetime(api, address)
    [charge] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    assert api.delete(f"/addresses/{address.id}", version=V11).status_code == 204
    assert deleted(api, customer.id) == {("onetime", onetime.id), ("charge", charge.id), ("address", address.id)}


def test_a_customer_delete_names_the_customer_of_its_addresses(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    metafield = make_metafield(api, customer)
    assert api.delete(f"/customers/{customer.id}", version=V11).status_code == 204
    assert deleted(api, customer.id) == {("address", address.id), ("metafield", metafield.id),
                                         ("customer", customer.id)}


def test_an_order_delete_is_found_by_its_customer(api):
    order = make_order(api)
    reply = api.post(f"/orders/{order.id}/clone", json={"scheduled_at": api.clock.now().date().isoformat()},
                     version=V11)
    assert reply.status_code == 201, reply.text
    clone = reply.json()["order"]["id"]
    assert api.delete(f"/orders/{clone}", version=V11).status_code == 204
    assert ("order", clone) in deleted(api, order.customer_id)
