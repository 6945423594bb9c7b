"""A bundle from its definition to its orders (issue 15 proof; spec 01 Bundle selection,
docs/api-choices.md, Bundles), through HTTP on a plan tier B sandbox store while its test clock
moves: a selection refused for a product outside the bundle's collections, accepted once the
collection gains it, then copied onto the next order the billing run makes; a later change of the
selection reaches the renewal after it, while the first order keeps what it carried. Both
databases."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from tests.api.test_bundle_variants import make_box, make_bundle, make_collection
from tests.api.test_products import make_product
from tests.scenarios.conftest import advance, assert_schedule_consistent, subscriber


def _orders(api: Any, subscription_id: int) -> list[dict[str, Any]]:
    reply = api.get("/orders", params={"purchase_item_id": subscription_id, "sort_by": "id-asc"})
    assert reply.status_code == 200, reply.text
    return list(reply.json()["orders"])


def _bundle_line(order: dict[str, Any], subscription_id: int) -> dict[str, Any]:
    [line] = [line for line in order["line_items"] if line["purchase_item_id"] == subscription_id]
    return line


def _contents(line: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    found = {p["name"]: p["value"] for p in line["properties"]}
    return found["_bundle_selection_id"], json.loads(found["_bundle_items"])


def test_a_selection_refused_outside_the_collections_is_accepted_once_the_collection_gains_it_and_reaches_the_orders(
        api):
    store = api.other_store(plan_tier="premium_b")
    make_box(store)
    make_product(store, "p-1")
    make_product(store, "p-2")
    coffee = make_collection(store, "p-1")
    bundle = make_bundle(store, [{"collection_id": coffee, "max_quantity": 3}], min_quantity=2)
    today = store.clock.now().date()
    address, box = subscriber(store, external_product_id="box", external_variant_id="box-1", price=None,
                              next_charge_scheduled_at=today + timedelta(days=3))
    wanted = {"purchase_item_id": box.id,
              "items": [{"external_product_id": "p-2", "external_variant_id": "p-2-1", "quantity": 2}]}

    refused = store.post("/bundle_selections", json=wanted)
    assert (refused.status_code, refused.json()) == (422, {"errors": {"items": {
        "0": {"external_product_id": ["product p-2 is in none of this bundle's collections"]}}}})

    gained = store.post(f"/collections/{coffee}/collection_products-bulk",
                        json={"collection_products": [{"external_product_id": "p-2"}]})
    assert gained.status_code == 201, gained.text
    accepted = store.post("/bundle_selections", json=wanted)
    assert accepted.status_code == 200, accepted.text
    selection = accepted.json()["bundle_selection"]
    assert selection["bundle_variant_id"] == bundle["id"]
    assert [(i["external_product_id"], i["quantity"], i["collection_id"]) for i in selection["items"]] == [
        ("p-2", 2, str(coffee))]

    # The billing run pays the charge when its date comes, and the order carries the contents.
    advance(store, days=3)
    [first] = _orders(store, box.id)
    line = _bundle_line(first, box.id)
    assert line["unit_price"] == "30.00" and line["quantity"] == 1  # a fixed bundle keeps its price
    assert _contents(line) == (str(selection["id"]), [
        {"collection_id": str(coffee), "external_product_id": "p-2", "external_variant_id": "p-2-1",
         "quantity": 2, "price": "12.50"}])
    assert first["total_price"] == store.get(f"/charges/{first['charge']['id']}").json()["charge"]["total_price"]

    # A change of the selection reaches the next order; the first keeps what it carried.
    changed = store.put(f"/bundle_selections/{selection['id']}", json={"items": [
        {"external_product_id": "p-1", "external_variant_id": "p-1-1", "quantity": 1},
        {"external_product_id": "p-2", "external_variant_id": "p-2-1", "quantity": 2}]})
    assert changed.status_code == 200, changed.text
    next_date = store.get(f"/subscriptions/{box.id}").json()["subscription"]["next_charge_scheduled_at"]
    advance(store, to=next_date)
    first_again, second = _orders(store, box.id)
    assert first_again["line_items"] == first["line_items"]
    # Items in the order first chosen: p-2 kept its place, p-1 joined.
    assert [(i["external_product_id"], i["quantity"]) for i in _contents(_bundle_line(second, box.id))[1]] == [
        ("p-2", 2), ("p-1", 1)]
    assert_schedule_consistent(store, address.id)
