"""Contract tests of bundle variants (a Rebill extension, decisions §7.7 item 7; docs/api-choices.md,
Bundles): every endpoint in both versions with each version's create and delete answers, success
bodies field by field, the list, bad input with the exact error bodies (an unknown variant or
collection named), one bundle per variant, unknown and other stores' ids, scopes, events, and a
collection a bundle names refusing its delete. Both databases (the `api` fixture)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from rebill.domain.catalog.model import VariantInput
from rebill.models import events
from tests.api.test_products import make_product
from tests.api.test_review_lists import _walk
from tests.builders import events_of

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def topics(api: Any, resource: str, resource_id: int) -> list[tuple[str, int]]:
    """The events of one record (ids of different resources may be equal)."""
    return [(t, i) for t, i in events_of(api, resource_id) if t.startswith(f"{resource}/")]


def stamp(api: Any, naive: bool = False) -> str:
    return api.clock.now().strftime("%Y-%m-%dT%H:%M:%S") + ("" if naive else "+00:00")


# Builders (the bundle selection tests and the bundle scenario use them too) -------------------

def make_box(api: Any, key: str = "box", price: str = "30.00") -> Any:
    """A catalog product whose variant `<key>-1` is to be a bundle."""
    return make_product(api, key, title="Box",
                        variants=[VariantInput(external_variant_id=f"{key}-1", title="Monthly box",
                                               price=Decimal(price))])


def make_collection(api: Any, *external_ids: str, title: str = "Coffee") -> int:
    """A collection holding the given catalog products (made first when missing)."""
    reply = api.post("/collections", json={"title": title}, version=V11)
    assert reply.status_code == 201, reply.text
    collection_id = reply.json()["collection"]["id"]
    if external_ids:
        add = api.post(f"/collections/{collection_id}/collection_products-bulk", version=V11,
                       json={"collection_products": [{"external_product_id": e} for e in external_ids]})
        assert add.status_code == 201, add.text
    return int(collection_id)


def make_bundle(api: Any, collections: list[Any], key: str = "box", **fields: Any) -> dict[str, Any]:
    """A bundle variant of `<key>-1`; ``collections``: ids or {collection_id, ...} ranges."""
    ranges = [c if isinstance(c, dict) else {"collection_id": c} for c in collections]
    body = {"external_product_id": key, "external_variant_id": f"{key}-1", "collections": ranges, **fields}
    reply = api.post("/bundle_variants", json=body, version=V11)
    assert reply.status_code == 201, reply.text
    return dict(reply.json()["bundle_variant"])


@pytest.fixture
def shop(api: Any) -> dict[str, Any]:
    """A box product, two products and two collections (the first holds p-1, the second p-2)."""
    make_box(api)
    make_product(api, "p-1")
    make_product(api, "p-2")
    return {"first": make_collection(api, "p-1"), "second": make_collection(api, "p-2", title="Tea")}


def fetch(api: Any, variant_id: int, version: str = V11) -> dict[str, Any]:
    reply = api.get(f"/bundle_variants/{variant_id}", version=version)
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["bundle_variant"])


# Create and get ---------------------------------------------------------------------------------

def test_create_answers_201_with_every_field(api, shop):
    made = make_bundle(api, [{"collection_id": shop["first"], "min_quantity": 1, "max_quantity": 3},
                             shop["second"]], price_rule="dynamic", min_quantity=2, max_quantity=4)
    assert made == {
        "id": made["id"], "created_at": stamp(api), "updated_at": stamp(api),
        "external_product_id": "box", "external_variant_id": "box-1", "price_rule": "dynamic",
        "min_quantity": 2, "max_quantity": 4,
        "collections": [{"collection_id": shop["first"], "min_quantity": 1, "max_quantity": 3},
                        {"collection_id": shop["second"], "min_quantity": None, "max_quantity": None}]}
    assert fetch(api, made["id"]) == made


def test_a_bundle_is_fixed_price_with_no_bounds_by_default(api, shop):
    made = make_bundle(api, [shop["first"]])
    assert (made["price_rule"], made["min_quantity"], made["max_quantity"]) == ("fixed", None, None)


def test_2021_01_creates_with_200_and_shows_platform_ids_and_naive_datetimes(api, shop):
    make_box(api, "4501")
    body = {"platform_product_id": 4501, "platform_variant_id": "4501-1", "collections": [{"collection_id": shop["first"]}]}
    reply = api.post("/bundle_variants", json=body, version=V01)
    assert reply.status_code == 200, reply.text
    made = reply.json()["bundle_variant"]
    assert made == {
        "id": made["id"], "created_at": stamp(api, naive=True), "updated_at": stamp(api, naive=True),
        "platform_product_id": 4501, "platform_variant_id": "4501-1", "price_rule": "fixed",
        "min_quantity": None, "max_quantity": None,
        "collections": [{"collection_id": shop["first"], "min_quantity": None, "max_quantity": None}]}
    assert fetch(api, made["id"], V01) == made
    assert fetch(api, made["id"])["external_product_id"] == "4501"


def test_create_records_bundle_variant_created(api, shop):
    made = make_bundle(api, [shop["first"]])
    assert topics(api, "bundle_variant", made["id"]) == [("bundle_variant/created", made["id"])]


def test_a_variant_outside_the_catalog_is_named(api, shop):
    sent = {"external_product_id": "nope", "external_variant_id": "box-1", "collections": [{"collection_id": shop["first"]}]}
    assert errors_of(api.post("/bundle_variants", json=sent)) == {
        "external_product_id": ["product nope is not in the catalog"]}
    sent["external_product_id"] = "box"
    sent["external_variant_id"] = "box-9"
    assert errors_of(api.post("/bundle_variants", json=sent)) == {
        "external_variant_id": ["variant box-9 is not a variant of product box in the catalog"]}
    make_box(api.other_store(), "theirs")
    sent.update(external_product_id="theirs", external_variant_id="theirs-1")
    assert errors_of(api.post("/bundle_variants", json=sent)) == {
        "external_product_id": ["product theirs is not in the catalog"]}


def test_2021_01_names_the_platform_fields(api, shop):
    sent = {"platform_product_id": "nope", "platform_variant_id": "x", "collections": [{"collection_id": shop["first"]}]}
    assert errors_of(api.post("/bundle_variants", json=sent, version=V01)) == {
        "platform_product_id": ["product nope is not in the catalog"]}
    assert errors_of(api.post("/bundle_variants", json={}, version=V01)) == {
        "platform_product_id": ["is required"], "platform_variant_id": ["is required"],
        "collections": ["is required"]}


def test_unknown_and_other_stores_collections_are_named_by_index(api, shop):
    theirs = make_collection(api.other_store())
    sent = {"external_product_id": "box", "external_variant_id": "box-1",
            "collections": [{"collection_id": shop["first"]}, {"collection_id": theirs},
                            {"collection_id": 999999999}, {"collection_id": shop["first"]}]}
    assert errors_of(api.post("/bundle_variants", json=sent)) == {"collections": {
        "1": {"collection_id": [f"collection {theirs} not found"]},
        "2": {"collection_id": ["collection 999999999 not found"]},
        "3": {"collection_id": ["is already given at index 0"]}}}
    assert api.get("/bundle_variants").json()["bundle_variants"] == []


def test_one_bundle_per_variant(api, shop):
    first = make_bundle(api, [shop["first"]])
    sent = {"external_product_id": "box", "external_variant_id": "box-1", "collections": [{"collection_id": shop["second"]}]}
    assert errors_of(api.post("/bundle_variants", json=sent)) == {
        "external_variant_id": [f"is already a bundle (bundle variant {first['id']})"]}


def test_a_maximum_below_its_minimum_is_named(api, shop):
    sent = {"external_product_id": "box", "external_variant_id": "box-1", "min_quantity": 5, "max_quantity": 2,
            "collections": [{"collection_id": shop["first"], "min_quantity": 3, "max_quantity": 1}]}
    assert errors_of(api.post("/bundle_variants", json=sent)) == {
        "max_quantity": ["must be at least min_quantity (5)"],
        "collections": {"0": {"max_quantity": ["must be at least min_quantity (3)"]}}}


@pytest.mark.parametrize("body, errors", [
    ({}, {"external_product_id": ["is required"], "external_variant_id": ["is required"],
          "collections": ["is required"]}),
    ({"external_product_id": True, "external_variant_id": {"ecommerce": None}, "collections": "x"},
     {"external_product_id": ["must be a non-empty string or number"], "external_variant_id": ["is required"],
      "collections": ["must be an array"]}),
    ({"external_product_id": "box", "external_variant_id": "box-1", "collections": [], "price_rule": "cheap"},
     {"collections": ["cannot be empty"], "price_rule": ["must be one of: dynamic, fixed"]}),
    ({"external_product_id": "box", "external_variant_id": "box-1", "min_quantity": -1, "max_quantity": 0,
      "collections": [{}, "x", {"collection_id": "a", "min_quantity": 1001, "max_quantity": 1.5}]},
     {"min_quantity": ["must be from 0 to 1000"], "max_quantity": ["must be from 1 to 1000"],
      "collections": {"0": {"collection_id": ["is required"]}, "1": ["must be an object"],
                      "2": {"collection_id": ["must be an integer"], "min_quantity": ["must be from 0 to 1000"],
                            "max_quantity": ["must be an integer"]}}}),
    ({"external_product_id": "box", "external_variant_id": "box-1",
      "collections": [{"collection_id": n} for n in range(1, 52)]},
     {"collections": ["has too many items (at most 50)"]}),
])
def test_bad_bodies_name_each_problem(api, body, errors):
    assert errors_of(api.post("/bundle_variants", json=body)) == errors


def test_a_body_that_is_not_an_object_answers_415(api):
    assert api.post("/bundle_variants", json=["box"]).status_code == 415


# Update and delete ------------------------------------------------------------------------------

def test_update_changes_the_fields_sent_and_records_them(vapi, shop):
    made = make_bundle(vapi, [shop["first"]])
    vapi.clock.advance(minutes=5)
    reply = vapi.put(f"/bundle_variants/{made['id']}", json={
        "price_rule": "dynamic", "max_quantity": 6,
        "collections": [{"collection_id": shop["second"], "max_quantity": 2}, {"collection_id": shop["first"]}]})
    assert reply.status_code == 200, reply.text
    assert fetch(vapi, made["id"]) == {
        **made, "price_rule": "dynamic", "max_quantity": 6, "updated_at": stamp(vapi),
        "collections": [{"collection_id": shop["second"], "min_quantity": None, "max_quantity": 2},
                        {"collection_id": shop["first"], "min_quantity": None, "max_quantity": None}]}
    with vapi.db.read() as conn:
        [changed] = conn.execute(select(events.c.updated_attributes).where(
            events.c.resource_id == made["id"], events.c.topic == "bundle_variant/updated")).scalars()
    assert changed == ["collections", "max_quantity", "price_rule"]


def test_an_update_that_changes_nothing_records_nothing(api, shop):
    made = make_bundle(api, [{"collection_id": shop["first"], "max_quantity": 2}], min_quantity=1)
    api.clock.advance(minutes=5)
    reply = api.put(f"/bundle_variants/{made['id']}", json={
        "min_quantity": 1, "collections": [{"collection_id": shop["first"], "max_quantity": 2}],
        "external_product_id": "box", "external_variant_id": "box-1"})
    assert reply.json()["bundle_variant"] == made
    assert topics(api, "bundle_variant", made["id"]) == [("bundle_variant/created", made["id"])]


def test_update_refuses_another_variant_and_checks_bounds_against_the_stored_ones(api, shop):
    made = make_bundle(api, [shop["first"]], max_quantity=3)
    reply = api.put(f"/bundle_variants/{made['id']}", json={"external_variant_id": "box-2", "min_quantity": 4})
    assert errors_of(reply) == {
        "external_variant_id": ["cannot be changed; delete the bundle variant and create another"],
        "max_quantity": ["must be at least min_quantity (4)"]}
    reply = api.put(f"/bundle_variants/{made['id']}", json={"collections": [{"collection_id": 999999999}]})
    assert errors_of(reply) == {"collections": {"0": {"collection_id": ["collection 999999999 not found"]}}}
    reply = api.put(f"/bundle_variants/{made['id']}", json={"price_rule": None, "collections": None})
    assert errors_of(reply) == {"price_rule": ["cannot be null"], "collections": ["cannot be null"]}
    assert fetch(api, made["id"]) == made


def test_delete_answers_each_versions_way_and_records_it(vapi, shop):
    made = make_bundle(vapi, [shop["first"]])
    reply = vapi.delete(f"/bundle_variants/{made['id']}")
    if vapi.version == V11:
        assert (reply.status_code, reply.content) == (204, b"")
    else:
        assert (reply.status_code, reply.json()) == (200, {})
    assert vapi.get(f"/bundle_variants/{made['id']}").json() == NOT_FOUND
    assert topics(vapi, "bundle_variant", made["id"])[-1] == ("bundle_variant/deleted", made["id"])
    # The variant may be a bundle again.
    assert make_bundle(vapi, [shop["first"]])["id"] != made["id"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_unknown_and_other_stores_bundle_variants_answer_404(vapi, shop, method):
    other = vapi.other_store()
    make_box(other)
    theirs = make_bundle(other, [make_collection(other)])["id"]
    for variant_id in (theirs, 999999999):
        reply = vapi.request(method, f"/bundle_variants/{variant_id}", json={"min_quantity": 1})
        assert (reply.status_code, reply.json()) == (404, NOT_FOUND)


# Collections a bundle names ---------------------------------------------------------------------

def test_a_collection_a_bundle_names_cannot_be_deleted_until_the_bundle_drops_it(api, shop):
    made = make_bundle(api, [shop["first"], shop["second"]])
    reply = api.delete(f"/collections/{shop['first']}", version=V11)
    assert errors_of(reply) == {"bundle_variants": [
        f"Collection is in bundle variant(s) {made['id']}; take it out of them first"]}
    assert api.get(f"/collections/{shop['first']}", version=V11).status_code == 200
    api.put(f"/bundle_variants/{made['id']}", json={"collections": [{"collection_id": shop["second"]}]})
    assert api.delete(f"/collections/{shop['first']}", version=V11).status_code == 204


def test_a_product_leaving_the_catalog_leaves_the_bundle_as_it_was(api, shop):
    made = make_bundle(api, [shop["first"]])
    assert api.delete("/products/box", version=V11).status_code == 204
    assert fetch(api, made["id"]) == made


# The list ---------------------------------------------------------------------------------------

def _ids(reply: Any) -> list[int]:
    assert reply.status_code == 200, reply.text
    return [row["id"] for row in reply.json()["bundle_variants"]]


def _three(api: Any, shop: dict[str, Any]) -> list[int]:
    made = []
    for key in ("b1", "b2", "b3"):
        make_box(api, key)
        made.append(make_bundle(api, [shop["first"]], key=key)["id"])
        api.clock.advance(seconds=1)
    return made


def test_the_list_is_newest_first_in_each_versions_shape(vapi, shop):
    ids = _three(vapi, shop)
    other = vapi.other_store()
    make_box(other)
    make_bundle(other, [make_collection(other)])
    reply = vapi.get("/bundle_variants")
    assert _ids(reply) == ids[::-1]
    if vapi.version == V11:
        assert (reply.json()["next_cursor"], reply.json()["previous_cursor"]) == (None, None)
    else:
        assert set(reply.json()) == {"bundle_variants"}
        assert reply.json()["bundle_variants"][0]["platform_product_id"] == "b3"


def test_sorts_and_filters(api, shop):
    first, second, third = _three(api, shop)
    api.put(f"/bundle_variants/{first}", json={"max_quantity": 9})
    assert _ids(api.get("/bundle_variants", params={"sort_by": "id-asc"})) == [first, second, third]
    assert _ids(api.get("/bundle_variants", params={"sort_by": "updated_at-desc"})) == [first, third, second]
    assert _ids(api.get("/bundle_variants", params={"external_product_id": "b2"})) == [second]
    assert _ids(api.get("/bundle_variants", params={"external_variant_id": "b3-1"})) == [third]
    assert _ids(api.get("/bundle_variants", params={"platform_product_id": "b1"}, version=V01)) == [first]
    assert _ids(api.get("/bundle_variants", params={"ids": f"{first},{third}"})) == [third, first]
    assert errors_of(api.get("/bundle_variants", params={"sort_by": "title-asc"})) == {
        "sort_by": ["Invalid value: title-asc. Must be one of id-asc, id-desc, updated_at-asc, updated_at-desc"]}
    assert errors_of(api.get("/bundle_variants", params={"ids": "1,x"})) == {
        "ids": ["Invalid ids: 1,x. Must be comma-separated integers"]}


@pytest.mark.parametrize("sort", ["id-desc", "updated_at-asc"])
def test_cursors_walk_every_row_once(vapi, shop, sort):
    whole = _three(vapi, shop)
    walked = _walk(vapi, "bundle_variants", {"sort_by": sort}, vapi.version)
    assert sorted(walked) == sorted(whole) and len(walked) == 3


# Scopes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, path, scope", [
    ("GET", "/bundle_variants", "read_products"), ("GET", "/bundle_variants/{id}", "read_products"),
    ("POST", "/bundle_variants", "write_products"), ("PUT", "/bundle_variants/{id}", "write_products"),
    ("DELETE", "/bundle_variants/{id}", "write_products"),
])
def test_a_token_without_the_scope_gets_403(vapi, shop, method, path, scope):
    made = make_bundle(vapi, [shop["first"]])
    token = vapi.token_with("read_subscriptions")
    reply = vapi.request(method, path.format(id=made["id"]), json={}, token=token)
    assert (reply.status_code, reply.json()) == (
        403, {"errors": f"This token lacks the scope this endpoint needs: {scope}"})
