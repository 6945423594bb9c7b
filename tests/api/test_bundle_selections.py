"""Contract tests of bundle selections (spec 01 Bundle selection and Bundle selections, premium tier
B; 03-real-fields "bundle_selection (2021-11)"; decisions §6.6, §7.4, §7.7 item 8; docs/api-choices.md,
Bundles): every endpoint, 2021-01 answering 501, success bodies field by field, the bundle found
from the purchase item's variant, items checked against the bundle's collections and quantity
ranges with the exact error bodies, prices of dynamic bundles from plans, the list's filters,
sorts and cursors, `include=bundle_selections|bundle_product` on subscriptions, unknown and other
stores' ids, scopes, the tier and events. Both databases (the `api` fixture)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from rebill.domain.catalog import repository as catalog_repo
from rebill.domain.catalog.model import VariantInput
from rebill.domain.charge.model import item_ids
from rebill.models import events
from tests.api.test_bundle_variants import make_box, make_bundle, make_collection, topics
from tests.api.test_edge_properties import JSON, _check
from tests.api.test_includes_query_count import counting
from tests.api.test_products import make_plan, make_product
from tests.api.test_real_fields import BOOL, DT_OFFSET, INT, NULL, STR, assert_fields
from tests.api.test_review_lists import _walk
from tests.builders import (
    charges_of,
    concurrently,
    events_of,
    make_address,
    make_customer,
    make_onetime,
    make_payment_method,
    make_subscription,
)

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
NOT_HERE = {"errors": "This resource is not implemented in the requested API version"}


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def stamp(api: Any) -> str:
    return api.clock.now().strftime("%Y-%m-%dT%H:%M:%S+00:00")


@pytest.fixture
def bapi(api: Any) -> Any:
    """A store of plan tier B, speaking 2021-11."""
    return api.other_store(plan_tier="premium_b")


def _product(api: Any, key: str, price: str) -> None:
    make_product(api, key, title=f"Product {key}",
                 variants=[VariantInput(external_variant_id=f"{key}-1", price=Decimal(price)),
                           VariantInput(external_variant_id=f"{key}-2", price=Decimal(price) + 1)])


@pytest.fixture
def world(bapi: Any) -> dict[str, Any]:
    """A box bundle: coffee (p-1, p-2) 1 to 3 items, tea (p-3) at most 2, 2 to 4 in all; a
    subscription to the box and one to a product that is no bundle."""
    make_box(bapi)
    for key, price in (("p-1", "4.00"), ("p-2", "5.00"), ("p-3", "6.00"), ("p-4", "7.00")):
        _product(bapi, key, price)
    coffee, tea = make_collection(bapi, "p-1", "p-2"), make_collection(bapi, "p-3", title="Tea")
    bundle = make_bundle(bapi, [{"collection_id": coffee, "min_quantity": 1, "max_quantity": 3},
                                {"collection_id": tea, "max_quantity": 2}], min_quantity=2, max_quantity=4)
    address = make_address(bapi)
    box = make_subscription(bapi, address, external_product_id="box", external_variant_id="box-1", price=None)
    plain = make_subscription(bapi, address, external_product_id="p-4", external_variant_id="p-4-1", price=None)
    return {"coffee": coffee, "tea": tea, "bundle": bundle, "address": address, "box": box, "plain": plain}


def item(product: str, quantity: int = 1, variant: int = 1, **extra: Any) -> dict[str, Any]:
    return {"external_product_id": product, "external_variant_id": f"{product}-{variant}", "quantity": quantity,
            **extra}


def create(api: Any, purchase_item_id: int, *items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    reply = api.post("/bundle_selections", json={"purchase_item_id": purchase_item_id, "items": list(items), **extra})
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["bundle_selection"])


def fetch(api: Any, selection_id: int) -> dict[str, Any]:
    reply = api.get(f"/bundle_selections/{selection_id}")
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["bundle_selection"])


def post(api: Any, purchase_item_id: int, *items: dict[str, Any], **extra: Any) -> Any:
    return api.post("/bundle_selections", json={"purchase_item_id": purchase_item_id, "items": list(items), **extra})


# Create and get ---------------------------------------------------------------------------------

def test_create_answers_200_with_every_field(bapi, world):
    made = create(bapi, world["box"].id, item("p-1", 2, collection_id=str(world["coffee"]), collection_source="shop"),
                  item("p-3", collection_id=world["tea"]))
    first, second = made["items"]
    assert made == {
        "id": made["id"], "bundle_variant_id": world["bundle"]["id"], "charge_id": None,
        "created_at": stamp(bapi), "updated_at": stamp(bapi), "external_product_id": "box",
        "external_variant_id": "box-1", "is_fallback": False, "order_id": None,
        "purchase_item_id": world["box"].id,
        "items": [
            {"id": first["id"], "collection_id": str(world["coffee"]), "collection_source": "shop",
             "external_product_id": "p-1", "external_variant_id": "p-1-1", "price": "4.00", "quantity": 2,
             "created_at": stamp(bapi), "updated_at": stamp(bapi)},
            {"id": second["id"], "collection_id": str(world["tea"]), "collection_source": "rebill",
             "external_product_id": "p-3", "external_variant_id": "p-3-1", "price": "6.00", "quantity": 1,
             "created_at": stamp(bapi), "updated_at": stamp(bapi)}]}
    assert fetch(bapi, made["id"]) == made


def test_real_fields(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    assert_fields(made, [
        ("bundle_variant_id", {INT}), ("charge_id", {NULL}), ("created_at", {DT_OFFSET}),
        ("external_product_id", {STR}), ("external_variant_id", {STR}), ("id", {INT}), ("is_fallback", {BOOL}),
        ("items[].collection_id", {STR}), ("items[].collection_source", {STR}), ("items[].created_at", {DT_OFFSET}),
        ("items[].external_product_id", {STR}), ("items[].external_variant_id", {STR}), ("items[].id", {INT}),
        ("items[].price", {STR}), ("items[].quantity", {INT}), ("items[].updated_at", {DT_OFFSET}),
        ("order_id", {NULL}), ("purchase_item_id", {INT}), ("updated_at", {DT_OFFSET})])


def test_an_item_without_a_collection_comes_from_the_first_of_the_bundles_that_holds_it(bapi, world):
    # p-3 is in both collections now; the bundle lists coffee first.
    add = bapi.post(f"/collections/{world['coffee']}/collection_products-bulk",
                    json={"collection_products": [{"external_product_id": "p-3"}]})
    assert add.status_code == 201
    made = create(bapi, world["box"].id, item("p-3", 2), item("p-2"))
    assert [i["collection_id"] for i in made["items"]] == [str(world["coffee"])] * 2


def test_create_records_bundle_selection_created_with_the_items_customer(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    assert topics(bapi, "bundle_selection", made["id"]) == [("bundle_selection/created", made["id"])]
    with bapi.db.read() as conn:
        customer = conn.execute(select(events.c.customer_id).where(
            events.c.topic == "bundle_selection/created", events.c.resource_id == made["id"])).scalar()
    assert customer == world["box"].customer_id


def test_a_one_time_item_of_a_bundle_takes_a_selection(bapi, world):
    onetime = make_onetime(bapi, world["address"], external_product_id="box", external_variant_id="box-1", price=None)
    made = create(bapi, onetime.id, item("p-2", 2))
    assert made["purchase_item_id"] == onetime.id


# The purchase item ------------------------------------------------------------------------------

def test_an_item_whose_variant_is_no_bundle_is_refused(bapi, world):
    assert errors_of(post(bapi, world["plain"].id, item("p-1", 2))) == {
        "purchase_item_id": ["the purchase item's variant p-4-1 is not a bundle"]}


def test_unknown_and_other_stores_items_are_not_found(bapi, world):
    other = bapi.other_store(plan_tier="premium_b")
    theirs = make_subscription(other)
    for item_id in (theirs.id, 999999999):
        assert errors_of(post(bapi, item_id, item("p-1", 2))) == {"purchase_item_id": ["purchase item not found"]}


def test_an_item_has_one_selection(bapi, world):
    made = create(bapi, world["box"].id, item("p-1", 2))
    assert errors_of(post(bapi, world["box"].id, item("p-2", 2))) == {
        "purchase_item_id": [f"already has a bundle selection ({made['id']}); update that one"]}


# Items against the bundle -----------------------------------------------------------------------

def test_an_item_outside_the_bundles_collections_is_named_by_its_index(bapi, world):
    reply = post(bapi, world["box"].id, item("p-1"), item("p-3"), item("p-4"),
                 item("p-3", collection_id=world["coffee"]), item("p-1", collection_id=999999))
    assert errors_of(reply) == {"items": {
        "2": {"external_product_id": ["product p-4 is in none of this bundle's collections"]},
        "3": {"external_product_id": [f"product p-3 is not in collection {world['coffee']}"]},
        "4": {"collection_id": ["collection 999999 is not one of this bundle's collections"]}}}
    assert bapi.get("/bundle_selections").json()["bundle_selections"] == []


def test_an_unknown_variant_and_an_item_twice_are_named(bapi, world):
    reply = post(bapi, world["box"].id, item("p-1"), item("p-1", variant=7), item("p-3"), item("p-1"))
    assert errors_of(reply) == {"items": {
        "1": {"external_variant_id": ["variant p-1-7 is not a variant of product p-1 in the catalog"]},
        "3": {"external_variant_id": ["is already selected from this collection in item 0"]}}}


def test_quantities_per_collection_and_in_all(bapi, world):
    assert errors_of(post(bapi, world["box"].id, item("p-3", 2))) == {"items": [
        f"collection {world['coffee']} needs from 1 to 3 item(s); the selection has 0"]}
    assert errors_of(post(bapi, world["box"].id, item("p-1", 3), item("p-3", 3))) == {"items": [
        f"collection {world['tea']} needs at most 2 item(s); the selection has 3",
        "the bundle needs from 2 to 4 item(s) in all; the selection has 6"]}
    assert errors_of(post(bapi, world["box"].id, item("p-1"))) == {"items": [
        "the bundle needs from 2 to 4 item(s) in all; the selection has 1"]}
    assert create(bapi, world["box"].id, item("p-1", 2), item("p-2"), item("p-3"))["items"]


@pytest.mark.parametrize("body, errors", [
    ({}, {"purchase_item_id": ["is required"], "items": ["is required"]}),
    ({"purchase_item_id": "x", "items": {}, "plan_id": "y"},
     {"purchase_item_id": ["must be an integer"], "items": ["must be an array"], "plan_id": ["must be an integer"]}),
    ({"purchase_item_id": 1, "items": []}, {"items": ["cannot be empty"]}),
    ({"purchase_item_id": 1, "items": [{}, 5, {"external_product_id": "p-1", "external_variant_id": "p-1-1",
                                               "quantity": 0, "collection_id": "coffee", "collection_source": 7}]},
     {"items": {"0": {"external_product_id": ["is required"], "external_variant_id": ["is required"],
                      "quantity": ["is required"]},
                "1": ["must be an object"],
                "2": {"quantity": ["must be from 1 to 1000"], "collection_id": ["must be an integer"],
                      "collection_source": ["must be a string"]}}}),
    ({"purchase_item_id": 1, "items": [item("p-1")] * 101}, {"items": ["has too many items (at most 100)"]}),
])
def test_bad_bodies_name_each_problem(bapi, body, errors):
    assert errors_of(bapi.post("/bundle_selections", json=body)) == errors


# Prices -----------------------------------------------------------------------------------------

def _catalog(api: Any, key: str) -> Any:
    with api.db.read() as conn:
        return catalog_repo.product_by_external_id(conn, api.store.id, key)


def _dynamic(bapi: Any, world: dict[str, Any]) -> None:
    reply = bapi.put(f"/bundle_variants/{world['bundle']['id']}", json={"price_rule": "dynamic"})
    assert reply.status_code == 200, reply.text


def test_a_dynamic_bundle_prices_items_from_the_plan_sent_and_the_item_costs_their_sum(bapi, world):
    _dynamic(bapi, world)
    plan = make_plan(bapi, _catalog(bapi, "box"), discount_type="percentage", discount_amount=Decimal("10"))
    made = create(bapi, world["box"].id, item("p-1", 2), item("p-3"), plan_id=plan.id)
    assert [i["price"] for i in made["items"]] == ["3.60", "5.40"]
    subscription = bapi.get(f"/subscriptions/{world['box'].id}").json()["subscription"]
    assert subscription["price"] == "12.60"  # 2 x 3.60 + 5.40
    [charge] = [c for c in charges_of(bapi, world["address"].id) if c.status == "queued"]
    assert any(line["purchase_item_id"] == world["box"].id and line["unit_price"] == "12.60"
               for line in charge.line_items)
    assert ("subscription/updated", world["box"].id) in events_of(bapi, world["box"].id)


def test_a_charged_one_time_item_refuses_a_new_dynamic_price_naming_the_purchase_item(bapi, world):
    """A processed one-time item is done (decisions §5.6): its dynamic bundle's selection cannot
    reprice it, and the refusal names what the caller sent (found by an audit: it named `price`)."""
    from tests.api.test_discounts_apply import pay
    _dynamic(bapi, world)
    customer = make_customer(bapi)
    make_payment_method(bapi, customer)
    address = make_address(bapi, customer)
    today = bapi.clock.now().date()
    onetime = make_onetime(bapi, address, external_product_id="box", external_variant_id="box-1", price=None,
                           next_charge_scheduled_at=today)
    made = create(bapi, onetime.id, item("p-1", 2))
    [charge] = [c for c in charges_of(bapi, address.id) if c.status == "queued"]
    assert pay(bapi, charge.id).status == "success"
    reply = bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-2", 2)]})
    assert errors_of(reply) == {"purchase_item_id": ["the one-time item is processed: it was charged and is done"]}
    assert fetch(bapi, made["id"])["items"] == made["items"]


def test_a_charged_one_time_items_fixed_bundle_selection_is_not_written_again(bapi, world):
    """Found by an audit: only a dynamic bundle was refused (through its price); a fixed bundle's
    selection of a processed one-time item took new contents, and a new selection after a
    delete, that no order would ever carry."""
    from tests.api.test_discounts_apply import pay
    customer = make_customer(bapi)
    make_payment_method(bapi, customer)
    address = make_address(bapi, customer)
    onetime = make_onetime(bapi, address, external_product_id="box", external_variant_id="box-1",
                           next_charge_scheduled_at=bapi.clock.now().date())
    made = create(bapi, onetime.id, item("p-1", 2))
    [charge] = [c for c in charges_of(bapi, address.id) if c.status == "queued"]
    assert pay(bapi, charge.id).status == "success"
    done = {"purchase_item_id": ["the one-time item is processed: it was charged and is done"]}
    assert errors_of(bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-2", 2)]})) == done
    assert fetch(bapi, made["id"])["items"] == made["items"]
    other = create(bapi, world["box"].id, item("p-1", 2))
    assert errors_of(bapi.put(f"/bundle_selections/{other['id']}", json={"purchase_item_id": onetime.id})) == done
    assert bapi.delete(f"/bundle_selections/{made['id']}").status_code == 204
    assert errors_of(post(bapi, onetime.id, item("p-2", 2))) == done


def test_without_a_plan_the_greatest_discount_among_the_items_own_plans(bapi, world):
    _dynamic(bapi, world)
    p1 = _catalog(bapi, "p-1")
    make_plan(bapi, p1, discount_type="percentage", discount_amount=Decimal("10"))
    make_plan(bapi, p1, title="Big", discount_type="fixed_amount", discount_amount=Decimal("1.50"))
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    assert [i["price"] for i in made["items"]] == ["2.50", "6.00"]  # 4.00 - 1.50 beats 10 %; p-3 has no plan


def test_an_items_own_plan_restricted_to_other_variants_does_not_price_it(bapi, world):
    _dynamic(bapi, world)
    p1 = _catalog(bapi, "p-1")
    make_plan(bapi, p1, discount_type="percentage", discount_amount=Decimal("90"), external_variant_ids=["p-1-1"])
    made = create(bapi, world["box"].id, item("p-1", variant=2), item("p-1"))
    assert [i["price"] for i in made["items"]] == ["5.00", "0.40"]  # 90 % off p-1-1 only


def test_a_plan_of_another_product_or_store_is_refused(bapi, world):
    p1 = _catalog(bapi, "p-1")
    plan = make_plan(bapi, p1)
    assert errors_of(post(bapi, world["box"].id, item("p-1"), item("p-3"), plan_id=plan.id)) == {
        "plan_id": ["is not a plan of the bundle's product box"]}
    assert errors_of(post(bapi, world["box"].id, item("p-1"), item("p-3"), plan_id=999999999)) == {
        "plan_id": ["plan not found"]}


def _narrow(api: Any, plan_id: int, variants: list[str]) -> None:
    """A plan restricted to a variant the box does not have here (its product has one variant)."""
    from sqlalchemy import update

    from rebill.models import plans as plans_table
    with api.db.write() as conn:
        conn.execute(update(plans_table).where(plans_table.c.id == plan_id).values(external_variant_ids=variants))


def test_a_plan_restricted_to_another_variant_of_the_bundle_is_refused(bapi, world):
    """docs/api-choices.md, a plan fits its item: a bundle's plan_id too (found by an audit: a
    plan of the bundle's product for another variant gave its 50 % to the bundle's items)."""
    _dynamic(bapi, world)
    box = _catalog(bapi, "box")
    other = make_plan(bapi, box, discount_type="percentage", discount_amount=Decimal("50"))
    _narrow(bapi, other.id, ["box-other"])
    assert errors_of(post(bapi, world["box"].id, item("p-1"), item("p-3"), plan_id=other.id)) == {
        "plan_id": ["does not apply to the variant box-1"]}
    fits = make_plan(bapi, box, title="Fits", discount_type="percentage", discount_amount=Decimal("10"),
                     external_variant_ids=["box-1"])
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"), plan_id=fits.id)
    assert [i["price"] for i in made["items"]] == ["3.60", "5.40"]
    # Narrowed to another variant afterwards: forgotten at the next write, catalog prices again.
    _narrow(bapi, fits.id, ["box-other"])
    again = bapi.put(f"/bundle_selections/{made['id']}", json={})
    assert again.status_code == 200, again.text
    assert [i["price"] for i in again.json()["bundle_selection"]["items"]] == ["4.00", "6.00"]


def test_a_fixed_bundle_keeps_its_price_and_shows_catalog_prices(bapi, world):
    made = create(bapi, world["box"].id, item("p-1", variant=2), item("p-3"))
    assert [i["price"] for i in made["items"]] == ["5.00", "6.00"]
    assert bapi.get(f"/subscriptions/{world['box'].id}").json()["subscription"]["price"] == "30.00"


# Update and delete ------------------------------------------------------------------------------

def test_update_replaces_the_items_keeping_those_chosen_again(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    bapi.clock.advance(minutes=5)
    reply = bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-1", 2), item("p-2")]})
    assert reply.status_code == 200, reply.text
    updated = reply.json()["bundle_selection"]
    kept, fresh = updated["items"]
    assert kept == {**made["items"][0], "quantity": 2, "updated_at": stamp(bapi)}
    assert fresh["external_product_id"] == "p-2" and fresh["created_at"] == stamp(bapi)
    assert updated["updated_at"] == stamp(bapi)
    with bapi.db.read() as conn:
        [changed] = conn.execute(select(events.c.updated_attributes).where(
            events.c.resource_id == made["id"], events.c.topic == "bundle_selection/updated")).scalars()
    assert changed == ["items"]


def test_an_update_that_changes_nothing_records_nothing(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    bapi.clock.advance(minutes=5)
    reply = bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-1"), item("p-3")]})
    assert reply.json()["bundle_selection"] == made
    assert bapi.put(f"/bundle_selections/{made['id']}", json={}).json()["bundle_selection"] == made
    assert topics(bapi, "bundle_selection", made["id"]) == [("bundle_selection/created", made["id"])]


def test_update_checks_the_items_and_moves_to_another_item_of_a_bundle(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    assert errors_of(bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-4"), item("p-1")]})) == {
        "items": {"0": {"external_product_id": ["product p-4 is in none of this bundle's collections"]}}}
    assert errors_of(bapi.put(f"/bundle_selections/{made['id']}", json={"purchase_item_id": world["plain"].id})) == {
        "purchase_item_id": ["the purchase item's variant p-4-1 is not a bundle"]}
    other = make_subscription(bapi, external_product_id="box", external_variant_id="box-1", price=None)
    reply = bapi.put(f"/bundle_selections/{made['id']}", json={"purchase_item_id": other.id})
    assert reply.status_code == 200 and reply.json()["bundle_selection"]["purchase_item_id"] == other.id
    assert fetch(bapi, made["id"])["items"] == made["items"]


def test_an_item_holding_a_selection_swaps_only_to_a_bundle(bapi, world):
    """Found by an audit: swapped to a variant that is no bundle, a subscription kept its
    selection and its next orders carried the bundle's contents."""
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    onetime = make_onetime(bapi, world["address"], external_product_id="box", external_variant_id="box-1", price=None)
    held = create(bapi, onetime.id, item("p-2", 2))
    for path, selection in ((f"/subscriptions/{world['box'].id}", made), (f"/onetimes/{onetime.id}", held)):
        reply = bapi.put(path, json={"external_product_id": {"ecommerce": "p-2"},
                                     "external_variant_id": {"ecommerce": "p-2-1"}})
        assert errors_of(reply) == {"external_variant_id": [
            f"the variant p-2-1 is not a bundle, and this item holds bundle selection {selection['id']}: "
            "delete it first"]}
    assert bapi.get(f"/subscriptions/{world['box'].id}").json()["subscription"]["external_variant_id"] == {
        "ecommerce": "box-1"}
    # Without a selection the same swap is an ordinary one.
    assert bapi.delete(f"/bundle_selections/{made['id']}").status_code == 204
    swapped = bapi.put(f"/subscriptions/{world['box'].id}", json={"external_product_id": {"ecommerce": "p-2"},
                                                                  "external_variant_id": {"ecommerce": "p-2-1"}})
    assert swapped.status_code == 200, swapped.text


def test_delete_answers_204_and_records_it(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    reply = bapi.delete(f"/bundle_selections/{made['id']}")
    assert (reply.status_code, reply.content) == (204, b"")
    assert bapi.get(f"/bundle_selections/{made['id']}").json() == NOT_FOUND
    assert topics(bapi, "bundle_selection", made["id"])[-1] == ("bundle_selection/deleted", made["id"])
    assert create(bapi, world["box"].id, item("p-1"), item("p-3"))["id"] != made["id"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_unknown_and_other_stores_selections_answer_404(bapi, world, method):
    other = bapi.other_store(plan_tier="premium_b")
    make_box(other)
    make_product(other, "x")
    make_bundle(other, [make_collection(other, "x")])
    theirs = create(other, make_subscription(other, external_product_id="box", external_variant_id="box-1",
                                             price=None).id, item("x"))["id"]
    for selection_id in (theirs, 999999999):
        reply = bapi.request(method, f"/bundle_selections/{selection_id}", json={"items": [item("p-1")]})
        assert (reply.status_code, reply.json()) == (404, NOT_FOUND)


def test_a_bundle_variant_with_selections_cannot_be_deleted(bapi, world):
    create(bapi, world["box"].id, item("p-1"), item("p-3"))
    assert errors_of(bapi.delete(f"/bundle_variants/{world['bundle']['id']}")) == {
        "bundle_selections": ["Bundle variant has 1 bundle selection(s); delete them first"]}


def test_a_selection_follows_its_item_to_another_bundle_and_is_counted_there(bapi, world):
    """Found by an audit: a swap to another bundle left the selection naming the old one, so the
    new bundle could be deleted under it (its orders then carried contents of no bundle) and
    the old one, which nothing used, could not."""
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    make_box(bapi, "box2")
    other = make_bundle(bapi, [world["coffee"], world["tea"]], key="box2")
    reply = bapi.put(f"/subscriptions/{world['box'].id}", json={"external_product_id": {"ecommerce": "box2"},
                                                               "external_variant_id": {"ecommerce": "box2-1"}})
    assert reply.status_code == 200, reply.text
    moved = fetch(bapi, made["id"])
    assert (moved["bundle_variant_id"], moved["external_variant_id"]) == (other["id"], "box2-1")
    assert moved["items"] == made["items"]
    assert topics(bapi, "bundle_selection", made["id"])[-1] == ("bundle_selection/updated", made["id"])
    assert errors_of(bapi.delete(f"/bundle_variants/{other['id']}")) == {
        "bundle_selections": ["Bundle variant has 1 bundle selection(s); delete them first"]}
    assert bapi.delete(f"/bundle_variants/{world['bundle']['id']}").status_code == 204


def test_a_dynamic_selection_keeps_its_contents_while_its_charge_waits_for_its_capture(bapi, world):
    """Found by an audit: changed while its charge was authorized, a dynamic bundle's order
    (made at the capture) carried the new contents for the money authorized for the old ones."""
    _dynamic(bapi, world)
    customer = make_customer(bapi)
    make_payment_method(bapi, customer, processor_payment_method_token="authorize_only")
    address = make_address(bapi, customer)
    box = make_subscription(bapi, address, external_product_id="box", external_variant_id="box-1", price=None)
    made = create(bapi, box.id, item("p-1"), item("p-3"))
    [charge] = [c for c in charges_of(bapi, address.id) if c.status == "queued"]
    processed = bapi.post(f"/charges/{charge.id}/process", json={})
    assert processed.json()["charge"]["status"] == "pending", processed.text
    reply = bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-1"), item("p-2"), item("p-3")]})
    assert errors_of(reply) == {"purchase_item_id": [
        f"its charge {charge.id} is authorized for the contents' present price and waits for its capture: "
        "change the contents once it is captured"]}
    assert fetch(bapi, made["id"])["items"] == made["items"]
    # Other contents at the same price (5.00 + 5.00 for 4.00 + 6.00) are no other money: taken.
    same = bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-1", variant=2), item("p-2")]})
    assert same.status_code == 200, same.text
    captured = bapi.post(f"/charges/{charge.id}/capture_payment", json={})
    assert captured.json()["charge"]["status"] == "success", captured.text
    again = bapi.put(f"/bundle_selections/{made['id']}", json={"items": [item("p-1"), item("p-2"), item("p-3")]})
    assert again.status_code == 200, again.text


@pytest.mark.parametrize("removal", ["delete the selection", "move it away", "delete the subscription"])
def test_no_contents_leave_an_item_whose_charge_waits_for_its_capture(bapi, world, removal):
    """Found by an audit: deleting the selection, moving it to another item or deleting the
    subscription while its charge was authorized answered 2xx, and the capture charged for an
    order that carried no contents. Each is refused until the capture, then taken."""
    _dynamic(bapi, world)
    customer = make_customer(bapi)
    make_payment_method(bapi, customer, processor_payment_method_token="authorize_only")
    address = make_address(bapi, customer)
    box = make_subscription(bapi, address, external_product_id="box", external_variant_id="box-1", price=None)
    other = make_subscription(bapi, address, external_product_id="box", external_variant_id="box-1", price=None,
                              next_charge_scheduled_at=bapi.clock.now().date() + timedelta(days=40))
    made = create(bapi, box.id, item("p-1"), item("p-3"))
    [charge] = [c for c in charges_of(bapi, address.id) if c.status == "queued" and box.id in item_ids(c.line_items)]
    assert bapi.post(f"/charges/{charge.id}/process", json={}).json()["charge"]["status"] == "pending"

    def remove():
        if removal == "delete the selection":
            return bapi.delete(f"/bundle_selections/{made['id']}"), "purchase_item_id", "delete the bundle selection"
        if removal == "move it away":
            return (bapi.put(f"/bundle_selections/{made['id']}", json={"purchase_item_id": other.id}),
                    "purchase_item_id", "move the contents")
        return bapi.delete(f"/subscriptions/{box.id}"), "id", "delete it"
    reply, field, then = remove()
    assert errors_of(reply) == {field: [f"its charge {charge.id} is authorized for its bundle's contents and waits "
                                        f"for its capture: {then} once it is captured"]}
    assert fetch(bapi, made["id"])["items"] == made["items"]
    captured = bapi.post(f"/charges/{charge.id}/capture_payment", json={})
    assert captured.json()["charge"]["status"] == "success", captured.text
    [order] = [o for o in bapi.get("/orders", params={"charge_id": charge.id}).json()["orders"]]
    lines = [line for line in order["line_items"] if line["purchase_item_id"] == box.id]
    assert any(p["name"] == "_bundle_items" for p in lines[0]["properties"]), lines
    reply, _, _ = remove()
    assert reply.status_code in (200, 204), reply.text


def test_a_selection_goes_with_its_subscription(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    assert bapi.delete(f"/subscriptions/{world['box'].id}").status_code == 204
    assert bapi.get(f"/bundle_selections/{made['id']}").status_code == 404


def test_concurrent_creates_for_one_item_make_one_selection_and_no_error(bapi, world):
    body = {"purchase_item_id": world["box"].id, "items": [item("p-1"), item("p-3")]}
    replies = concurrently(bapi, [("POST", "/bundle_selections", body)] * 4)
    assert sorted(reply.status_code for reply in replies) == [200, 422, 422, 422], [r.text for r in replies]
    assert len(bapi.get("/bundle_selections").json()["bundle_selections"]) == 1


def test_a_bundle_variant_deleted_while_a_selection_is_made_is_either_kept_or_refused(bapi, world):
    replies = concurrently(bapi, [
        ("POST", "/bundle_selections", {"purchase_item_id": world["box"].id, "items": [item("p-1"), item("p-3")]}),
        ("DELETE", f"/bundle_variants/{world['bundle']['id']}", None)])
    made, deleted = (reply.status_code for reply in replies)
    assert (made, deleted) in ((200, 422), (422, 204)), [r.text for r in replies]


# The list ---------------------------------------------------------------------------------------

@pytest.fixture
def three(bapi: Any, world: dict[str, Any]) -> list[dict[str, Any]]:
    """Selections of the box, another box subscription (cancelled) and a one-time box."""
    other = make_subscription(bapi, world["address"], external_product_id="box", external_variant_id="box-1",
                              price=None)
    onetime = make_onetime(bapi, world["address"], external_product_id="box", external_variant_id="box-1", price=None)
    made = [create(bapi, world["box"].id, item("p-1"), item("p-3")),
            create(bapi, other.id, item("p-2", 2)),
            create(bapi, onetime.id, item("p-1"), item("p-2", variant=2))]
    reply = bapi.post(f"/subscriptions/{other.id}/cancel", json={"cancellation_reason": "enough"})
    assert reply.status_code == 200, reply.text
    return made


def _ids(reply: Any) -> list[int]:
    assert reply.status_code == 200, reply.text
    return [row["id"] for row in reply.json()["bundle_selections"]]


def test_the_list_is_newest_first_with_cursors_in_the_body(bapi, three):
    reply = bapi.get("/bundle_selections")
    assert _ids(reply) == [s["id"] for s in three][::-1]
    assert (reply.json()["next_cursor"], reply.json()["previous_cursor"]) == (None, None)
    assert reply.json()["bundle_selections"][-1] == three[0]


def test_each_filter(bapi, world, three):
    first, second, third = (s["id"] for s in three)
    params = {
        "purchase_item_ids": (f"{three[0]['purchase_item_id']},{three[2]['purchase_item_id']}", [third, first]),
        "bundle_variant_ids": (str(world["bundle"]["id"]), [third, second, first]),
        "item_external_product_ids": ("999", []),
        "active_purchase_items": ("true", [third, first]),
    }
    for name, (value, expected) in params.items():
        assert _ids(bapi.get("/bundle_selections", params={name: value})) == expected, name
    assert _ids(bapi.get("/bundle_selections", params={"active_purchase_items": "false"})) == [third, second, first]


def test_item_filters_take_integer_external_ids(bapi, world):
    _product(bapi, "501", "3.00")
    add = bapi.post(f"/collections/{world['coffee']}/collection_products-bulk",
                    json={"collection_products": [{"external_product_id": "501"}]})
    assert add.status_code == 201
    made = create(bapi, world["box"].id, item("501"), item("p-3"))
    create(bapi, make_subscription(bapi, external_product_id="box", external_variant_id="box-1", price=None).id,
           item("p-1", 2))
    assert _ids(bapi.get("/bundle_selections", params={"item_external_product_ids": "501,7"})) == [made["id"]]
    # The ids as they spell: leading zeros count (found by an audit: `007` found no `007`).
    _product(bapi, "007", "2.00")
    bapi.post(f"/collections/{world['coffee']}/collection_products-bulk",
              json={"collection_products": [{"external_product_id": "007"}]})
    zeros = create(bapi, make_subscription(bapi, external_product_id="box", external_variant_id="box-1",
                                           price=None).id, item("007"), item("p-3"))
    assert _ids(bapi.get("/bundle_selections", params={"item_external_product_ids": " 007 "})) == [zeros["id"]]
    assert _ids(bapi.get("/bundle_selections", params={"item_external_product_ids": "7"})) == []
    assert _ids(bapi.get("/bundle_selections", params={"item_external_product_ids": "0501"})) == []
    for name in ("item_external_product_ids", "item_external_variant_ids", "purchase_item_ids", "bundle_variant_ids"):
        assert errors_of(bapi.get("/bundle_selections", params={name: "p-1"})) == {
            name: ["Invalid ids: p-1. Must be comma-separated integers"]}
    assert errors_of(bapi.get("/bundle_selections", params={"active_purchase_items": "maybe"})) == {
        "active_purchase_items": ["Invalid boolean: maybe. Must be true, false, 1 or 0"]}


def test_sorts_and_cursors(bapi, three):
    first, second, third = (s["id"] for s in three)
    bapi.clock.advance(minutes=1)
    assert bapi.put(f"/bundle_selections/{first}", json={"items": [item("p-1", 2), item("p-3")]}).status_code == 200
    assert _ids(bapi.get("/bundle_selections", params={"sort_by": "id-asc"})) == [first, second, third]
    assert _ids(bapi.get("/bundle_selections", params={"sort_by": "updated_at-desc"})) == [first, third, second]
    assert _walk(bapi, "bundle_selections", {"sort_by": "updated_at-asc"}, V11) == [second, third, first]
    assert errors_of(bapi.get("/bundle_selections", params={"sort_by": "created_at-asc"})) == {
        "sort_by": ["Invalid value: created_at-asc. Must be one of id-asc, id-desc, updated_at-asc, updated_at-desc"]}


# Include on subscriptions -----------------------------------------------------------------------

def test_subscriptions_include_their_selection_and_bundle(bapi, world):
    made = create(bapi, world["box"].id, item("p-1"), item("p-3"))
    reply = bapi.get(f"/subscriptions/{world['box'].id}", params={"include": "bundle_selections,bundle_product"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["subscription"]["include"] == {"bundle_selections": [made],
                                                       "bundle_product": world["bundle"]}
    listed = bapi.get("/subscriptions", params={"include": "bundle_selections,bundle_product"}).json()
    by_id = {s["id"]: s["include"] for s in listed["subscriptions"]}
    assert by_id[world["plain"].id] == {"bundle_selections": [], "bundle_product": None}
    assert by_id[world["box"].id]["bundle_selections"] == [made]


def _statements(api: Any, path: str, params: dict[str, Any]) -> int:
    with counting(api.db) as statements:
        reply = api.get(path, params={**params, "limit": 250})
    assert reply.status_code == 200, reply.text
    return len(statements)


def test_lists_load_items_and_includes_in_statements_that_do_not_grow_with_rows(bapi, world):
    def selections(n: int) -> None:
        for _ in range(n):
            box = make_subscription(bapi, world["address"], external_product_id="box", external_variant_id="box-1",
                                    price=None)
            create(bapi, box.id, item("p-1"), item("p-3"))
    include = {"include": "bundle_selections,bundle_product"}
    selections(2)
    few = (_statements(bapi, "/bundle_selections", {}), _statements(bapi, "/subscriptions", include))
    selections(6)
    assert (_statements(bapi, "/bundle_selections", {}), _statements(bapi, "/subscriptions", include)) == few
    assert len(bapi.get("/bundle_selections").json()["bundle_selections"]) == 8


# Tier, versions, scopes -------------------------------------------------------------------------

ENDPOINTS = [("GET", "/bundle_selections"), ("POST", "/bundle_selections"), ("GET", "/bundle_selections/1"),
             ("PUT", "/bundle_selections/1"), ("DELETE", "/bundle_selections/1")]


@pytest.mark.parametrize("method, path", ENDPOINTS)
@pytest.mark.parametrize("tier", ["standard", "premium_a"])
def test_a_store_without_tier_b_gets_403_naming_it(api, method, path, tier):
    store = api if tier == "standard" else api.other_store(plan_tier=tier)
    expected = (403, {"errors": f"The bundle selections API needs plan tier B (premium_b); this store's tier is {tier}"})
    reply = store.request(method, path, json={})
    assert (reply.status_code, reply.json()) == expected
    # Before the body or the query is read (found by an audit: a body that is no object got 415).
    for sent in ({"content": b"nope"}, {"json": []}):
        odd = store.request(method, path, params={"limit": "x", "include": "y"}, **sent)
        assert (odd.status_code, odd.json()) == expected


@pytest.mark.parametrize("method, path", ENDPOINTS)
def test_2021_01_answers_501(bapi, method, path):
    reply = bapi.request(method, path, json={}, version=V01)
    assert (reply.status_code, reply.json()) == (501, NOT_HERE)


@pytest.mark.parametrize("method, path, scope", [
    ("GET", "/bundle_selections", "read_subscriptions"), ("GET", "/bundle_selections/1", "read_subscriptions"),
    ("POST", "/bundle_selections", "write_subscriptions"), ("PUT", "/bundle_selections/1", "write_subscriptions"),
    ("DELETE", "/bundle_selections/1", "write_subscriptions")])
def test_a_token_without_the_scope_gets_403(bapi, method, path, scope):
    token = bapi.token_with("read_products")
    reply = bapi.request(method, path, json={}, token=token)
    assert (reply.status_code, reply.json()) == (
        403, {"errors": f"This token lacks the scope this endpoint needs: {scope}"})
    reader = bapi.token_with("read_subscriptions")
    assert bapi.get("/bundle_selections", token=reader).status_code == 200


# Hostile input on a tier B store (the shared property test's store has no tier B) ----------------

PROPERTY = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _hostile_items(world: dict[str, Any]) -> st.SearchStrategy[Any]:
    products = st.sampled_from(["p-1", "p-2", "p-3", "p-4", "box", "nope"]) | st.integers(-1, 2**64) | JSON
    one = st.fixed_dictionaries({
        "external_product_id": products,
        "external_variant_id": st.sampled_from(["p-1-1", "p-2-2", "p-3-1", "box-1", "x"]) | JSON,
        "quantity": st.integers(-2, 1002) | JSON,
    }, optional={"collection_id": st.sampled_from([world["coffee"], world["tea"], str(world["tea"])])
                 | st.integers(-1, 2**64) | JSON,
                 "collection_source": st.text(max_size=40) | JSON})
    return st.lists(one, max_size=5) | JSON


@given(data=st.data())
@PROPERTY
def test_no_body_reaches_a_500(bapi, world, data):
    # The fixtures are made once for all the examples: the box's selection, once made, stays.
    listed = bapi.get("/bundle_selections", params={"purchase_item_ids": world["box"].id}).json()
    made = listed["bundle_selections"][0] if listed["bundle_selections"] else \
        create(bapi, world["box"].id, item("p-1"), item("p-3"))
    ids = st.sampled_from([world["box"].id, world["plain"].id, made["id"]]) | st.integers(-1, 2**64) | JSON
    body = data.draw(st.fixed_dictionaries({}, optional={"purchase_item_id": ids, "items": _hostile_items(world),
                                                         "plan_id": ids}))
    for method, path in (("POST", "/bundle_selections"), ("PUT", f"/bundle_selections/{made['id']}")):
        _check(bapi.request(method, path, json=body), f"{method} {path} {body!r}")
    query = data.draw(st.dictionaries(st.sampled_from(["purchase_item_ids", "bundle_variant_ids",
                                                       "item_external_product_ids", "item_external_variant_ids",
                                                       "active_purchase_items", "sort_by"]),
                                      st.text(max_size=20) | ids.map(str), max_size=3))
    _check(bapi.get("/bundle_selections", params=query), f"GET {query!r}")
