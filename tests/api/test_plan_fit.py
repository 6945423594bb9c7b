"""A subscription and its plan agree (found by a catalog audit): the plan's price never goes
below zero, a plan belongs to one product and to the variants it names (decisions §5.8, and
§7.7 item 8 as bundles apply it), a deleted plan stays named on what was made from it, and a
plan keeps the variants it was restricted to after its product drops them."""

from __future__ import annotations

from typing import Any

from tests.api.test_subscriptions import V01, V11, created_status, errors_of, make_catalog
from tests.builders import events_of, make_address


def _plan(api: Any, product_id: str, **fields: Any) -> int:
    body = {"external_product_id": product_id, "title": "Plan", "type": "subscription",
            "subscription_preferences": {"interval_unit": "month", "order_interval_frequency": 1,
                                         "charge_interval_frequency": 1}, **fields}
    made = api.post("/plans", json=body, version=V11)
    assert made.status_code == 201, made.text
    return int(made.json()["plan"]["id"])


def _subscriptions(api: Any) -> int:
    return len(api.get("/subscriptions", version=V11).json()["subscriptions"])


def test_a_fixed_discount_above_the_price_makes_it_zero_in_both_versions(vapi):
    """It was a 500: the price became the integer 0, which the answer could not render."""
    product_id, _ = make_catalog(vapi)  # variants at 12.50 and 40.00
    plan_id = _plan(vapi, product_id, discount_amount="12.51", discount_type="fixed_amount")
    address = make_address(vapi)
    made = vapi.post("/subscriptions", json={"address_id": address.id, "plan_id": plan_id})
    assert made.status_code == created_status(vapi.version), made.text
    assert made.json()["subscription"]["price"] in ("0.00", 0.0)
    assert vapi.get(f"/subscriptions/{made.json()['subscription']['id']}").json()["subscription"]["price"] in (
        "0.00", 0.0)
    equal = _plan(vapi, product_id, discount_amount="12.50", discount_type="fixed_amount")
    again = vapi.post("/subscriptions", json={"address_id": address.id, "plan_id": equal})
    assert again.json()["subscription"]["price"] in ("0.00", 0.0)


def test_a_plan_of_another_product_or_of_other_variants_is_refused_at_create(api):
    product_id, _ = make_catalog(api)
    _, other_plan = make_catalog(api, discount_amount="50", discount_type="percentage")
    restricted = _plan(api, product_id, external_variant_ids=[f"{product_id}-2"], discount_amount="50",
                       discount_type="percentage")
    address = make_address(api)
    before = _subscriptions(api)
    wrong_product = api.post("/subscriptions", json={
        "address_id": address.id, "plan_id": other_plan, "external_product_id": {"ecommerce": product_id},
        "external_variant_id": {"ecommerce": f"{product_id}-1"}})
    assert errors_of(wrong_product) == {"plan_id": [f"is not a plan of the product {product_id}"]}
    wrong_variant = api.post("/subscriptions", json={
        "address_id": address.id, "plan_id": restricted, "external_variant_id": {"ecommerce": f"{product_id}-1"}})
    assert errors_of(wrong_variant) == {"plan_id": [f"does not apply to the variant {product_id}-1"]}
    assert _subscriptions(api) == before
    # No variant sent: the plan's own variant, not the product's first, at the plan's price.
    made = api.post("/subscriptions", json={"address_id": address.id, "plan_id": restricted})
    assert made.status_code == 201, made.text
    sub = made.json()["subscription"]
    assert sub["external_variant_id"] == {"ecommerce": f"{product_id}-2"} and sub["price"] == "20.00"


def test_the_2021_01_create_refuses_a_plan_of_another_product(api):
    product_id, _ = make_catalog(api)
    _, other_plan = make_catalog(api, discount_amount="50", discount_type="percentage")
    response = api.post("/subscriptions", version=V01, json={
        "address_id": make_address(api).id, "plan_id": other_plan, "shopify_variant_id": f"{product_id}-1",
        "platform_variant_id": f"{product_id}-1", "platform_product_id": product_id})
    assert response.status_code == 422, response.text
    assert "plan_id" in response.json()["errors"]


def test_a_deleted_plan_stays_named_and_a_put_that_sends_it_back_is_accepted(vapi):
    _, plan_id = make_catalog(vapi, title="Going")
    address = make_address(vapi)
    made = vapi.post("/subscriptions", json={"address_id": address.id, "plan_id": plan_id})
    sub = made.json()["subscription"]
    assert vapi.delete(f"/plans/{plan_id}", version=V11).status_code == 204
    assert vapi.get(f"/plans/{plan_id}", version=V11).status_code == 404
    assert vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]["plan_id"] == plan_id
    echoed = vapi.put(f"/subscriptions/{sub['id']}", json={"plan_id": plan_id, "quantity": 2})
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["subscription"]["quantity"] == 2
    # Naming it anew, on another subscription, is refused: it is gone.
    other = vapi.post("/subscriptions", json={"address_id": address.id, "product_title": "Tea", "price": "3.00",
                                              "order_interval_unit": "month", "order_interval_frequency": 1,
                                              "charge_interval_frequency": 1})
    other_id = other.json()["subscription"]["id"]
    assert errors_of(vapi.put(f"/subscriptions/{other_id}", json={"plan_id": plan_id})) == {
        "plan_id": ["plan not found"]}


def test_a_plan_keeps_variants_its_product_dropped_and_updates_still_work(api):
    product_id, _ = make_catalog(api)
    plan_id = _plan(api, product_id, external_variant_ids=[f"{product_id}-1"])
    dropped = api.put(f"/products/{product_id}", version=V11, json={
        "variants": [{"external_variant_id": f"{product_id}-2", "title": "1 kg", "price": "40.00"}]})
    assert dropped.status_code == 200, dropped.text
    renamed = api.put(f"/plans/{plan_id}", version=V11, json={"title": "Renamed"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["plan"]["external_variant_ids"] == [f"{product_id}-1"]
    echoed = api.put(f"/plans/{plan_id}", version=V11, json={"external_variant_ids": [f"{product_id}-1"]})
    assert echoed.status_code == 200, echoed.text
    bulk = api.put("/plans/bulk_update", version=V11, json={"plans": [{"id": plan_id, "title": "Bulk"}]})
    assert bulk.status_code == 200, bulk.text
    # A variant the product does not have is still refused when it is new to the plan.
    refused = api.put(f"/plans/{plan_id}", version=V11,
                      json={"external_variant_ids": [f"{product_id}-1", "no-such-variant"]})
    assert errors_of(refused) == {"external_variant_ids": {"1": ["is not a variant of the product"]}}
    topics = [topic for topic, _ in events_of(api) if topic == "plan/updated"]
    assert len(topics) == 2  # the rename and the bulk rename; the echo changed nothing


def test_a_swap_its_plan_does_not_fit_leaves_the_plan_behind(api):
    """Found by an audit: a subscription made from a plan restricted to one variant, swapped to
    another variant or product, kept naming the plan (a state a create refuses). The item keeps
    its price and cadence; a swap the plan fits keeps it."""
    product_id, _ = make_catalog(api)
    other_product, _ = make_catalog(api)
    restricted = _plan(api, product_id, external_variant_ids=[f"{product_id}-2"], discount_amount="50",
                       discount_type="percentage")
    whole = _plan(api, product_id, discount_amount="10", discount_type="percentage")
    address = make_address(api)
    made = api.post("/subscriptions", json={"address_id": address.id, "plan_id": restricted}).json()["subscription"]
    assert (made["plan_id"], made["price"]) == (restricted, "20.00")
    swapped = api.put(f"/subscriptions/{made['id']}", json={"external_variant_id": {"ecommerce": f"{product_id}-1"}})
    assert swapped.status_code == 200, swapped.text
    assert (swapped.json()["subscription"]["plan_id"], swapped.json()["subscription"]["price"]) == (None, "20.00")
    kept = api.post("/subscriptions", json={"address_id": address.id, "plan_id": whole}).json()["subscription"]
    fits = api.put(f"/subscriptions/{kept['id']}", json={"external_variant_id": {"ecommerce": f"{product_id}-2"}})
    assert fits.json()["subscription"]["plan_id"] == whole
    away = api.put(f"/subscriptions/{kept['id']}", json={"external_product_id": {"ecommerce": other_product}})
    assert away.status_code == 200, away.text
    assert away.json()["subscription"]["plan_id"] is None
