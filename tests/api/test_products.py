"""Contract tests of the product endpoints (decisions §5.7, §5.16): 2021-11 `/products` keyed by
`external_product_id` with variants, and the deprecated 2021-01 `/products` that map onto plans
and answer with a `Deprecation` header. Shapes, exact errors, tenancy, scopes and events."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from rebill.domain.catalog import plans as plan_service
from rebill.domain.catalog import service as catalog
from rebill.domain.catalog.model import PlanCreate, ProductCreate, VariantInput
from rebill.domain.unit import Unit
from tests.builders import events_of

V01, V11 = "2021-01", "2021-11"
OFFSET_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
NOT_FOUND = {"errors": "Not Found"}
DEPRECATED = {"deprecation": "true", "sunset": "Mon, 30 Jun 2025 00:00:00 GMT"}
IMAGES = {"large": "https://img.test/l.png", "medium": "https://img.test/m.png",
          "original": "https://img.test/o.png", "small": "https://img.test/s.png"}
MONTHLY = {"interval_unit": "month", "order_interval_frequency": 1, "charge_interval_frequency": 1}


# Builders --------------------------------------------------------------------------------

def _unit(api: Any, conn: Any) -> Unit:
    return Unit(conn, api.store, api.clock.now())


def make_product(api: Any, external_product_id: str = "7001", **overrides: Any) -> Any:
    values = {"external_product_id": external_product_id, "title": "Coffee",
              "variants": [VariantInput(external_variant_id=f"{external_product_id}-1", title="250 g",
                                        price=Decimal("12.50"))], **overrides}
    with api.db.write() as conn:
        return catalog.create_product(_unit(api, conn), ProductCreate(**values))


def make_plan(api: Any, product: Any, **overrides: Any) -> Any:
    values = {"external_product_id": product.external_product_id, "title": "Monthly", "type": "subscription",
              "subscription_preferences": dict(MONTHLY), **overrides}
    with api.db.write() as conn:
        return plan_service.create(_unit(api, conn), PlanCreate(**values))


def body(**overrides: Any) -> dict[str, Any]:
    return {"external_product_id": "7001", "title": "Coffee", **overrides}


def create(api: Any, **overrides: Any) -> dict[str, Any]:
    response = api.post("/products", json=body(**overrides), version=V11)
    assert response.status_code == 201, response.text
    return response.json()["product"]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def plans_of(api: Any, external_product_id: str) -> list[dict[str, Any]]:
    response = api.get("/plans", params={"external_product_id": external_product_id, "sort_by": "id-asc"},
                       version=V11)
    assert response.status_code == 200, response.text
    return response.json()["plans"]


def legacy_body(**overrides: Any) -> dict[str, Any]:
    return {"platform_product_id": 8001, "title": "Tea", "subscription_defaults": {
        "storefront_purchase_options": "subscription_only", "order_interval_unit": "month",
        "order_interval_frequency_options": ["1"]}, **overrides}


def legacy_create(api: Any, **overrides: Any) -> dict[str, Any]:
    response = api.post("/products", json=legacy_body(**overrides), version=V01)
    assert response.status_code == 200, response.text
    return response.json()["product"]


# 2021-11: create -------------------------------------------------------------------------

def test_create_answers_201_with_every_field_typed(api):
    now = api.clock.now()
    response = api.post("/products", json=body(
        handle="coffee", product_type="beans", vendor="Roastery", description="Dark roast", images=IMAGES,
        variants=[{"external_variant_id": "v1", "title": "250 g", "price": "12.5", "sku": "COF-250", "grams": 250,
                   "image": "https://img.test/v1.png"}]), version=V11)
    assert response.status_code == 201, response.text
    product = response.json()["product"]
    assert type(product["id"]) is int
    assert product["external_product_id"] == "7001"
    assert (product["title"], product["handle"], product["product_type"]) == ("Coffee", "coffee", "beans")
    assert (product["vendor"], product["description"]) == ("Roastery", "Dark roast")
    assert product["images"] == IMAGES
    assert product["requires_shipping"] is True and product["taxable"] is True
    assert product["variants"] == [{"external_variant_id": "v1", "title": "250 g", "price": "12.50", "sku": "COF-250",
                                    "grams": 250, "requires_shipping": True, "taxable": True,
                                    "image": "https://img.test/v1.png"}]
    assert OFFSET_TS.match(product["created_at"])
    assert product["created_at"] == product["updated_at"] == now.isoformat()


def test_a_created_product_reads_back_identically_by_its_external_id(api):
    product = create(api, variants=[{"external_variant_id": "v1", "price": 3}])
    assert api.get("/products/7001", version=V11).json() == {"product": product}


@pytest.mark.parametrize("given", [{"ecommerce": "7001"}, 7001, "7001"])
def test_external_ids_may_be_nested_or_numbers_and_show_as_plain_strings(api, given):
    product = create(api, external_product_id=given, variants=[{"external_variant_id": {"ecommerce": 55}}])
    assert product["external_product_id"] == "7001"
    assert product["variants"][0]["external_variant_id"] == "55"


def test_an_external_id_is_trimmed_as_everywhere_else(api):
    """Found by an audit: " 6002 " was kept, and no subscription, collection or filter could
    name the product."""
    made = create(api, external_product_id=" 6002 ", variants=[{"external_variant_id": " v1 ", "price": "5.00"}])
    assert made["external_product_id"] == "6002"
    assert made["variants"][0]["external_variant_id"] == "v1"
    found = api.get("/products", params={"external_product_ids": "6002"}, version=V11).json()["products"]
    assert [p["id"] for p in found] == [made["id"]]


def test_a_non_numeric_external_id_is_a_key_like_any_other(api):
    create(api, external_product_id="sku-coffee.250")
    assert api.get("/products/sku-coffee.250", version=V11).json()["product"]["title"] == "Coffee"


def test_create_requires_the_external_id_and_title(api):
    assert errors_of(api.post("/products", json={}, version=V11)) == {
        "external_product_id": ["is required"], "title": ["is required"]}


def test_wrong_types_are_named_field_by_field(api):
    response = api.post("/products", json=body(title=5, requires_shipping="yes", images="pic", variants={},
                                               description=["x"]), version=V11)
    assert errors_of(response) == {"title": ["must be a string"], "description": ["must be a string"],
                                   "images": ["must be an object"], "requires_shipping": ["must be a boolean"],
                                   "variants": ["must be an array"]}


def test_variant_errors_are_keyed_by_the_variants_index(api):
    response = api.post("/products", json=body(variants=[
        {"external_variant_id": "v1", "price": "1"}, {"price": "-1"}, {"external_variant_id": "v3", "grams": -5},
        {"external_variant_id": "v4", "price": "abc"}]), version=V11)
    assert errors_of(response) == {"variants": {
        "1": {"external_variant_id": ["is required"], "price": ["must not be negative"]},
        "2": {"grams": ["must not be negative"]},
        "3": {"price": ["must be a decimal number as a string"]}}}


def test_variant_ids_are_unique_within_a_product(api):
    response = api.post("/products", json=body(variants=[{"external_variant_id": "v1"},
                                                         {"external_variant_id": "v1"}]), version=V11)
    assert errors_of(response) == {"variants": {"1": {"external_variant_id": ["is duplicated in this product"]}}}


def test_prices_take_the_store_currencys_minor_digits(api):
    assert create(api, variants=[{"external_variant_id": "v1", "price": 12}])["variants"][0]["price"] == "12.00"
    yen = api.other_store(currency="JPY")
    made = create(yen, variants=[{"external_variant_id": "v1", "price": "1200"}])
    assert made["variants"][0]["price"] == "1200"
    response = yen.post("/products", json=body(external_product_id="2", variants=[
        {"external_variant_id": "v1", "price": "12.5"}]), version=V11)
    assert errors_of(response) == {"variants": {"0": {"price": ["has too many decimal places (at most 0)"]}}}
    response = api.post("/products", json=body(external_product_id="3", variants=[
        {"external_variant_id": "v1", "price": "12.505"}]), version=V11)
    assert errors_of(response) == {"variants": {"0": {"price": ["has too many decimal places (at most 2)"]}}}


def test_variants_take_the_products_shipping_and_tax_flags_unless_they_say(api):
    product = create(api, requires_shipping=False, taxable=False, variants=[
        {"external_variant_id": "v1"}, {"external_variant_id": "v2", "taxable": True, "requires_shipping": True}])
    assert [(v["requires_shipping"], v["taxable"]) for v in product["variants"]] == [(False, False), (True, True)]


def test_the_external_id_is_unique_per_store(api):
    create(api)
    assert errors_of(api.post("/products", json=body(), version=V11)) == {
        "external_product_id": ["has already been taken"]}
    assert create(api.other_store())["external_product_id"] == "7001"


def test_an_external_id_with_a_slash_is_refused_it_is_a_path_segment(api):
    response = api.post("/products", json=body(external_product_id="a/b"), version=V11)
    assert errors_of(response) == {"external_product_id": ["must not contain '/'"]}


@pytest.mark.parametrize("raw", [b"[]", b"{oops"])
def test_a_body_that_is_not_a_json_object_answers_415(vapi, raw):
    response = vapi.post("/products", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 415


def test_a_failed_create_stores_nothing_and_records_no_event(api):
    api.post("/products", json=body(variants=[{"price": "1"}]), version=V11)
    assert api.get("/products", version=V11).json()["products"] == []
    assert events_of(api) == []


# 2021-11: retrieve, update, delete -------------------------------------------------------

def test_get_an_unknown_product_answers_404(api):
    response = api.get("/products/nope", version=V11)
    assert response.status_code == 404 and response.json() == NOT_FOUND
    assert "deprecation" not in response.headers


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_another_stores_product_answers_404(vapi, method):
    theirs = make_product(vapi.other_store())
    key = theirs.external_product_id if vapi.version == V11 else theirs.id
    response = vapi.request(method, f"/products/{key}", json={"title": "Mine"} if method == "PUT" else None)
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


def test_update_changes_only_the_sent_fields(api):
    before = create(api, vendor="Roastery", variants=[{"external_variant_id": "v1", "price": "1"}])
    later = api.clock.advance(seconds=60)
    after = api.put("/products/7001", json={"title": "Decaf"}, version=V11).json()["product"]
    assert after["title"] == "Decaf"
    assert after["updated_at"] == later.isoformat()
    assert {k: v for k, v in after.items() if k not in ("title", "updated_at")} == \
        {k: v for k, v in before.items() if k not in ("title", "updated_at")}


def test_update_replaces_the_variants_whole(api):
    create(api, variants=[{"external_variant_id": "v1"}, {"external_variant_id": "v2"}])
    after = api.put("/products/7001", json={"variants": [{"external_variant_id": "v3", "price": "2"}]},
                    version=V11).json()["product"]
    assert [v["external_variant_id"] for v in after["variants"]] == ["v3"]
    assert after["variants"][0]["price"] == "2.00"


def test_update_does_not_move_the_external_id(api):
    create(api)
    after = api.put("/products/7001", json={"external_product_id": "9"}, version=V11).json()["product"]
    assert after["external_product_id"] == "7001"


def test_update_refuses_null_or_blank_title(api):
    create(api)
    assert errors_of(api.put("/products/7001", json={"title": None}, version=V11)) == {"title": ["cannot be null"]}
    assert errors_of(api.put("/products/7001", json={"title": " "}, version=V11)) == {"title": ["cannot be blank"]}


def test_an_update_that_changes_nothing_records_no_event(api):
    before = create(api)
    api.clock.advance(seconds=30)
    assert api.put("/products/7001", json={"title": "Coffee"}, version=V11).json() == {"product": before}
    assert events_of(api, before["id"]) == [("product/created", before["id"])]


def test_delete_answers_204_and_the_product_is_gone(api):
    create(api)
    response = api.delete("/products/7001", version=V11)
    assert response.status_code == 204 and response.content == b""
    assert api.get("/products/7001", version=V11).status_code == 404
    assert api.delete("/products/7001", version=V11).status_code == 404


def test_deleting_a_product_deletes_its_plans_each_with_its_event(api):
    product = make_product(api)
    first, second = make_plan(api, product), make_plan(api, product, title="Other")
    other = make_plan(api, make_product(api, "7002"))
    api.delete("/products/7001", version=V11)
    for plan in (first, second):
        assert api.get(f"/plans/{plan.id}", version=V11).status_code == 404
    assert api.get(f"/plans/{other.id}", version=V11).status_code == 200
    topics = events_of(api)
    assert ("plan/deleted", first.id) in topics and ("plan/deleted", second.id) in topics
    assert topics[-1] == ("product/deleted", product.id)


def test_create_update_delete_record_product_events(api):
    pid = create(api)["id"]
    api.put("/products/7001", json={"title": "Decaf"}, version=V11)
    api.delete("/products/7001", version=V11)
    assert events_of(api, pid) == [("product/created", pid), ("product/updated", pid), ("product/deleted", pid)]


# 2021-11: list ---------------------------------------------------------------------------

def test_list_is_newest_first_with_cursors_in_the_body(api):
    ids = [create(api, external_product_id=str(n))["id"] for n in range(3)]
    first = api.get("/products", params={"limit": 2}, version=V11).json()
    assert [p["id"] for p in first["products"]] == ids[::-1][:2]
    assert first["previous_cursor"] is None and first["next_cursor"]
    second = api.get("/products", params={"limit": 2, "cursor": first["next_cursor"]}, version=V11).json()
    assert [p["id"] for p in second["products"]] == [ids[0]]
    assert second["next_cursor"] is None


def test_list_filters_by_external_ids_ids_and_time(api):
    start = api.clock.now()
    a = create(api, external_product_id="a")
    later = api.clock.advance(hours=1)
    b = create(api, external_product_id="b")
    create(api, external_product_id="c")
    make_product(api.other_store(), "a")

    def listed(**params: Any) -> list[str]:
        response = api.get("/products", params=params, version=V11)
        assert response.status_code == 200, response.text
        return sorted(p["external_product_id"] for p in response.json()["products"])

    assert listed(external_product_ids="a,b") == ["a", "b"]
    assert listed(ids=f"{a['id']},{b['id']}") == ["a", "b"]
    assert listed(updated_at_min=later.isoformat()) == ["b", "c"]
    assert listed(created_at_max=start.isoformat()) == ["a"]


def test_list_refuses_bad_filters_and_sorts(api):
    assert errors_of(api.get("/products", params={"ids": "1,x"}, version=V11)) == {
        "ids": ["Invalid ids: 1,x. Must be comma-separated integers"]}
    assert set(errors_of(api.get("/products", params={"sort_by": "title-asc"}, version=V11))) == {"sort_by"}


# 2021-01: the deprecated endpoints ---------------------------------------------------------

def test_every_2021_01_product_reply_carries_the_deprecation_headers(api):
    product = legacy_create(api)
    replies = [
        api.get("/products", version=V01),
        api.get(f"/products/{product['id']}", version=V01),
        api.put(f"/products/{product['id']}", json={"title": "Green tea"}, version=V01),
        api.get("/products/987654321", version=V01),
        api.post("/products", json={}, version=V01),
        api.delete(f"/products/{product['id']}", version=V01),
        # Refused before the handler runs (a token without the scope): still deprecated.
        api.get("/products", version=V01, token=api.token_with("read_customers")),
        api.post("/products", json={}, version=V01, token=api.token_with("read_products")),
        # A method the path does not serve (found by an audit: the 405 had no headers).
        api.delete("/products", version=V01),
        api.request("PATCH", f"/products/{product['id']}", version=V01),
    ]
    assert [r.status_code for r in replies[-4:]] == [403, 403, 405, 405]
    for response in replies:
        assert {k: response.headers.get(k) for k in DEPRECATED} == DEPRECATED, response.request.url
    assert "deprecation" not in api.get("/products", version=V11).headers


def test_2021_01_product_has_the_fields_of_spec_03(api):
    now = api.clock.now()
    product = legacy_create(api, handle="tea", images=IMAGES, discount_amount="10", discount_type="percentage")
    assert set(product) == {"id", "product_id", "platform_product_id", "title", "handle", "images", "collection_id",
                            "discount_amount", "discount_type", "subscription_defaults", "created_at", "updated_at"}
    assert type(product["id"]) is int
    assert product["platform_product_id"] == product["product_id"] == 8001
    assert (product["title"], product["handle"], product["images"]) == ("Tea", "tea", IMAGES)
    assert product["collection_id"] is None
    # Every size, null when not given (found by an audit: only the sizes given were shown).
    some = legacy_create(api, platform_product_id=8002, images={"original": "https://img.test/o.png"})
    assert some["images"] == {"large": None, "medium": None, "original": "https://img.test/o.png", "small": None}
    assert product["discount_amount"] == 10 and isinstance(product["discount_amount"], (int, float))
    assert product["discount_type"] == "percentage"
    assert NAIVE_TS.match(product["created_at"]) and product["created_at"] == now.isoformat()[:-6]
    assert product["subscription_defaults"] == {
        "apply_cutoff_date_to_checkout": False, "charge_interval_frequency": 1, "cutoff_day_of_month": None,
        "cutoff_day_of_week": None, "expire_after_specific_number_of_charges": None, "modifiable_properties": [],
        "number_charges_until_expiration": None, "order_day_of_month": None, "order_day_of_week": None,
        "order_interval_frequency_options": ["1"], "order_interval_unit": "month",
        "storefront_purchase_options": "subscription_only", "handle": "tea", "order_interval_frequency": 1}
    assert api.get(f"/products/{product['id']}", version=V01).json() == {"product": product}


def test_2021_01_platform_product_id_is_a_string_when_the_external_id_is_no_number(api):
    make_product(api, "sku-9")
    product = api.get("/products", version=V01).json()["products"][0]
    assert product["platform_product_id"] == product["product_id"] == "sku-9"


def test_2021_01_paths_take_the_integer_id_not_the_external_one(api):
    product = make_product(api, "7001")
    assert api.get(f"/products/{product.id}", version=V01).json()["product"]["title"] == "Coffee"
    assert api.get("/products/abc", version=V01).json() == NOT_FOUND
    assert api.get(f"/products/{product.id}", version=V11).status_code == 404  # 2021-11 reads the external id


@pytest.mark.parametrize("option,types", [
    ("subscription_only", ["subscription"]),
    ("subscription_and_onetime", ["subscription", "onetime"]),
    ("onetime", ["onetime"]),
])
def test_2021_01_create_derives_plans_from_the_storefront_purchase_options(api, option, types):
    product = legacy_create(api, subscription_defaults={
        "storefront_purchase_options": option, "order_interval_unit": "Week",
        "order_interval_frequency_options": ["2"]}, discount_amount=5 if option != "onetime" else 0)
    plans = plans_of(api, "8001")
    assert [p["type"] for p in plans] == types
    for plan in plans:
        if plan["type"] == "subscription":
            assert plan["subscription_preferences"]["interval_unit"] == "week"
            assert plan["subscription_preferences"]["order_interval_frequency"] == 2
            assert plan["subscription_preferences"]["charge_interval_frequency"] == 2
            assert (plan["discount_amount"], plan["discount_type"]) == ("5.00", "percentage")
        else:
            assert plan["subscription_preferences"] is None and plan["discount_amount"] is None
    assert product["subscription_defaults"]["storefront_purchase_options"] == option


def test_2021_01_create_makes_one_subscription_plan_per_frequency_option(api):
    product = legacy_create(api, subscription_defaults={
        "storefront_purchase_options": "subscription_only", "order_interval_unit": "day",
        "order_interval_frequency_options": ["30", "60", 30]})
    plans = plans_of(api, "8001")
    assert [p["subscription_preferences"]["order_interval_frequency"] for p in plans] == [30, 60]
    assert product["subscription_defaults"]["order_interval_frequency_options"] == ["30", "60"]
    assert product["subscription_defaults"]["order_interval_frequency"] == 30  # the first one


def test_2021_01_the_charge_frequency_among_several_options_names_the_default(api):
    """Found by an audit: options 1 and 2 with a charge frequency of 2 answered 200 and read
    back 1 (the first option's plan), and a PUT of the charge frequency alone changed nothing.
    The named option's plan comes first; the others keep the order sent."""
    product = legacy_create(api, subscription_defaults={
        "order_interval_unit": "week", "order_interval_frequency_options": ["1", "2", "4"],
        "charge_interval_frequency": 2})
    defaults = product["subscription_defaults"]
    assert (defaults["charge_interval_frequency"], defaults["order_interval_frequency"]) == (2, 2)
    assert defaults["order_interval_frequency_options"] == ["2", "1", "4"]
    assert api.get(f"/products/{product['id']}", version=V01).json()["product"]["subscription_defaults"] == defaults
    changed = api.put(f"/products/{product['id']}", json={"subscription_defaults": {"charge_interval_frequency": 4}},
                      version=V01)
    assert changed.status_code == 200, changed.text
    defaults = changed.json()["product"]["subscription_defaults"]
    assert (defaults["charge_interval_frequency"], defaults["order_interval_frequency_options"]) == (4, ["4", "2", "1"])
    by_frequency = {p["subscription_preferences"]["order_interval_frequency"]: p for p in plans_of(api, "8001")}
    assert len(by_frequency) == 3 and all(p["type"] == "subscription" for p in by_frequency.values())
    assert sorted(by_frequency, key=lambda f: by_frequency[f]["sort_order"]) == [4, 2, 1]


def test_2021_01_a_larger_charge_frequency_with_one_option_makes_a_prepaid_plan(api):
    legacy_create(api, subscription_defaults={
        "order_interval_unit": "month", "order_interval_frequency_options": ["1"], "charge_interval_frequency": 3})
    (plan,) = plans_of(api, "8001")
    assert plan["type"] == "prepaid"
    assert (plan["subscription_preferences"]["order_interval_frequency"],
            plan["subscription_preferences"]["charge_interval_frequency"]) == (1, 3)


def test_2021_01_create_checks_the_subscription_defaults(api):
    response = api.post("/products", json=legacy_body(subscription_defaults={
        "storefront_purchase_options": "sometimes", "order_interval_frequency_options": []}), version=V01)
    assert errors_of(response) == {"subscription_defaults": {
        "storefront_purchase_options": ["must be one of: subscription_only, subscription_and_onetime, onetime"]}}
    response = api.post("/products", json=legacy_body(subscription_defaults={
        "order_interval_frequency_options": ["2"], "charge_interval_frequency": 3}), version=V01)
    assert errors_of(response) == {"subscription_defaults": {
        "order_interval_unit": ["is required"],
        "charge_interval_frequency": ["must be a multiple of order_interval_frequency and larger for a prepaid plan"]}}
    response = api.post("/products", json=legacy_body(subscription_defaults={
        "order_interval_unit": "year", "order_interval_frequency_options": []}), version=V01)
    assert errors_of(response) == {"subscription_defaults": {
        "order_interval_frequency_options": ["cannot be empty for a subscription product"],
        "order_interval_unit": ["must be one of: day, week, month"]}}
    assert plans_of(api, "8001") == [] and events_of(api) == []


def test_2021_01_create_requires_the_platform_id_and_for_a_new_product_the_title(api):
    assert errors_of(api.post("/products", json={}, version=V01)) == {"platform_product_id": ["is required"]}
    assert errors_of(api.post("/products", json={"platform_product_id": 1}, version=V01)) == {
        "title": ["is required"]}


def test_2021_01_a_second_create_for_a_product_with_plans_answers_422(api):
    product = legacy_create(api)
    response = api.post("/products", json=legacy_body(), version=V01)
    assert errors_of(response) == {"platform_product_id": [
        f"the product already has plans; update it with PUT /products/{product['id']}"]}
    assert len(plans_of(api, "8001")) == 1


def test_2021_01_create_for_a_catalog_product_without_plans_gives_it_plans(api):
    existing = make_product(api, "8001")
    product = legacy_create(api, title="Tea")
    assert product["id"] == existing.id and product["title"] == "Tea"
    assert [p["type"] for p in plans_of(api, "8001")] == ["subscription"]
    assert api.get("/products/8001", version=V11).json()["product"]["variants"][0]["external_variant_id"] == "8001-1"


def test_2021_01_discount_zero_means_none_and_a_discount_needs_a_subscription_option(api):
    product = legacy_create(api, discount_amount=0)
    assert product["discount_amount"] == 0 and product["discount_type"] == "percentage"
    assert plans_of(api, "8001")[0]["discount_amount"] is None
    response = api.post("/products", json=legacy_body(platform_product_id=2, discount_amount="5", subscription_defaults={
        "storefront_purchase_options": "onetime"}), version=V01)
    assert errors_of(response) == {
        "discount_amount": ["applies to subscriptions, and the product has no subscription option"]}
    response = api.post("/products", json=legacy_body(platform_product_id=3, discount_amount="150"), version=V01)
    assert errors_of(response) == {"discount_amount": ["must be greater than 0 and at most 100 for a percentage"]}


def test_2021_01_fixed_discounts_render_as_numbers(api):
    product = legacy_create(api, discount_amount="2.5", discount_type="fixed_amount")
    assert product["discount_amount"] == 2.5 and product["discount_type"] == "fixed_amount"
    assert plans_of(api, "8001")[0]["discount_amount"] == "2.50"


def test_2021_01_update_changes_the_product_and_its_derived_plans(api):
    product = legacy_create(api)
    (monthly,) = plans_of(api, "8001")
    later = api.clock.advance(minutes=5)
    response = api.put(f"/products/{product['id']}", json={"title": "Green tea", "discount_amount": 15,
                                                           "subscription_defaults": {
                                                               "storefront_purchase_options": "subscription_and_onetime",
                                                               "order_interval_frequency_options": ["1", "3"]}},
                       version=V01)
    assert response.status_code == 200, response.text
    after = response.json()["product"]
    assert after["title"] == "Green tea" and after["discount_amount"] == 15
    assert after["updated_at"] == later.isoformat()[:-6]
    assert after["subscription_defaults"]["order_interval_frequency_options"] == ["1", "3"]
    assert after["subscription_defaults"]["storefront_purchase_options"] == "subscription_and_onetime"
    plans = plans_of(api, "8001")
    assert plans[0]["id"] == monthly["id"]  # the plan of the kept frequency keeps its id
    assert [(p["type"], (p["subscription_preferences"] or {}).get("order_interval_frequency")) for p in plans] == [
        ("subscription", 1), ("subscription", 3), ("onetime", None)]
    assert all(p["discount_amount"] == "15.00" for p in plans if p["type"] == "subscription")


def test_2021_01_update_to_onetime_deletes_the_subscription_plans(api):
    product = legacy_create(api)
    (monthly,) = plans_of(api, "8001")
    api.put(f"/products/{product['id']}", json={"subscription_defaults": {"storefront_purchase_options": "onetime"}},
            version=V01)
    assert [p["type"] for p in plans_of(api, "8001")] == ["onetime"]
    assert ("plan/deleted", monthly["id"]) in events_of(api)


def test_2021_01_what_a_product_shows_sent_back_changes_no_plan(api):
    """Found by an audit: the echo of `subscription_defaults` re-derived the plans, deleting
    those 2021-11 had made (the plan of an active subscription among them), or answered 422 for a
    mix of plans the options cannot say."""
    product = make_product(api, "8001")
    monthly = make_plan(api, product)
    prepaid = make_plan(api, product, type="prepaid", subscription_preferences={**MONTHLY, "charge_interval_frequency": 3})
    weekly = make_plan(api, product, subscription_preferences={**MONTHLY, "interval_unit": "week"})
    before = plans_of(api, "8001")
    shown = api.get(f"/products/{product.id}", version=V01).json()["product"]
    told = len(events_of(api))
    for echo in ({"subscription_defaults": shown["subscription_defaults"]},
                 {key: shown[key] for key in ("subscription_defaults", "discount_amount", "discount_type", "title")}):
        reply = api.put(f"/products/{product.id}", json=echo, version=V01)
        assert reply.status_code == 200, reply.text
    assert plans_of(api, "8001") == before and {p["id"] for p in before} == {monthly.id, prepaid.id, weekly.id}
    assert events_of(api)[told:] == []


def test_2021_01_a_flag_changed_keeps_the_plans_of_a_unit_the_view_cannot_show(api):
    """Found by an audit: the view shows one interval unit (the first plan's); a flag changed
    through it deleted the monthly plan 2021-11 had made beside the weekly one shown."""
    product = make_product(api, "8001")
    monthly = make_plan(api, product, title="Monthly milk", sort_order=2)
    weekly = make_plan(api, product, title="Weekly milk", sort_order=1,
                       subscription_preferences={**MONTHLY, "interval_unit": "week"})
    before = {p["id"]: p for p in plans_of(api, "8001")}
    told = len(events_of(api))
    reply = api.put(f"/products/{product.id}", json={"subscription_defaults": {"apply_cutoff_date_to_checkout": True}},
                    version=V01)
    assert reply.status_code == 200, reply.text
    defaults = reply.json()["product"]["subscription_defaults"]
    assert (defaults["order_interval_unit"], defaults["apply_cutoff_date_to_checkout"]) == ("week", True)
    after = {p["id"]: p for p in plans_of(api, "8001")}
    assert set(after) == {monthly.id, weekly.id}
    assert after[monthly.id] == before[monthly.id]
    assert after[weekly.id]["subscription_preferences"]["apply_cutoff_date_to_checkout"] is True
    assert [e for e in events_of(api)[told:] if e[0].startswith("plan/")] == [("plan/updated", weekly.id)]


def test_2021_01_a_unit_changed_to_that_of_a_hidden_plan_keeps_it_and_drops_the_shown_one(api):
    product = make_product(api, "8001")
    weekly = make_plan(api, product, title="Weekly", sort_order=1,
                       subscription_preferences={**MONTHLY, "interval_unit": "week"})
    monthly = make_plan(api, product, title="Monthly", sort_order=2)
    reply = api.put(f"/products/{product.id}", json={"subscription_defaults": {"order_interval_unit": "month"}},
                    version=V01)
    assert reply.status_code == 200, reply.text
    assert reply.json()["product"]["subscription_defaults"]["order_interval_unit"] == "month"
    (left,) = plans_of(api, "8001")
    assert (left["id"], left["title"]) == (monthly.id, "Monthly")
    assert ("plan/deleted", weekly.id) in events_of(api)


def test_2021_01_a_write_reads_back_as_written_when_a_hidden_plan_sorts_first(api):
    """A plan the write leaves alone must not become the first recurring plan, whose unit and
    defaults the view shows: the written plans move ahead of it."""
    product = make_product(api, "8001")
    weekly = make_plan(api, product, title="Weekly", sort_order=5,
                       subscription_preferences={**MONTHLY, "interval_unit": "week", "order_interval_frequency": 2,
                                                 "charge_interval_frequency": 2})
    make_plan(api, product, title="Daily", sort_order=7, subscription_preferences={
        **MONTHLY, "interval_unit": "day", "order_interval_frequency": 3, "charge_interval_frequency": 3})
    reply = api.put(f"/products/{product.id}", json={"subscription_defaults": {
        "order_interval_frequency_options": ["4"], "charge_interval_frequency": 4}}, version=V01)
    assert reply.status_code == 200, reply.text
    defaults = reply.json()["product"]["subscription_defaults"]
    assert (defaults["order_interval_unit"], defaults["order_interval_frequency_options"]) == ("week", ["4"])
    plans = plans_of(api, "8001")
    assert weekly.id not in {p["id"] for p in plans}
    by_unit = {p["subscription_preferences"]["interval_unit"]: p for p in plans}
    assert set(by_unit) == {"week", "day"} and by_unit["week"]["sort_order"] < by_unit["day"]["sort_order"]
    assert api.get(f"/products/{product.id}", version=V01).json()["product"]["subscription_defaults"] == defaults


def test_2021_01_a_switch_to_one_time_drops_the_plans_of_every_unit(api):
    product = make_product(api, "8001")
    make_plan(api, product)
    make_plan(api, product, subscription_preferences={**MONTHLY, "interval_unit": "week"})
    reply = api.put(f"/products/{product.id}", json={"subscription_defaults": {
        "storefront_purchase_options": "onetime"}}, version=V01)
    assert reply.status_code == 200, reply.text
    assert [p["type"] for p in plans_of(api, "8001")] == ["onetime"]


def test_2021_01_images_shown_null_may_be_sent_back(api):
    """Found by an audit: a size shown null (never given) sent back was 422 `cannot be null`;
    null is no image of that size, in both versions."""
    product = legacy_create(api, images={"small": "https://img.test/s.png"})
    shown = api.get(f"/products/{product['id']}", version=V01).json()["product"]
    told = len(events_of(api))
    reply = api.put(f"/products/{product['id']}", json={"title": shown["title"], "images": shown["images"]},
                    version=V01)
    assert reply.status_code == 200, reply.text
    assert reply.json()["product"]["images"] == shown["images"]
    assert events_of(api)[told:] == []
    reply = api.put(f"/products/{product['id']}", json={"images": {"small": None, "large": "https://img.test/l.png"}},
                    version=V01)
    assert reply.json()["product"]["images"] == {"large": "https://img.test/l.png", "medium": None,
                                                 "original": None, "small": None}
    assert api.get("/products/8001", version=V11).json()["product"]["images"] == {"large": "https://img.test/l.png"}


def test_2021_01_a_product_of_no_image_sent_back_changes_nothing(api):
    """Found by an audit: its four sizes shown null, sent back, stored `{}` for null: an update,
    a `product/updated`, and 2021-11 showed `images: {}`."""
    product = legacy_create(api)
    shown = api.get(f"/products/{product['id']}", version=V01).json()["product"]
    told = len(events_of(api))
    reply = api.put(f"/products/{product['id']}", json={"title": shown["title"], "images": shown["images"]},
                    version=V01)
    assert (reply.status_code, reply.json()["product"]["updated_at"]) == (200, shown["updated_at"]), reply.text
    assert events_of(api)[told:] == []
    assert api.get("/products/8001", version=V11).json()["product"]["images"] is None


def test_2021_01_a_switch_to_one_time_drops_the_subscription_discount(api):
    """Found by an audit: refused over the discount of the plans that go, which was not sent."""
    product = legacy_create(api, discount_amount="15")
    reply = api.put(f"/products/{product['id']}", json={"subscription_defaults": {
        "storefront_purchase_options": "onetime"}}, version=V01)
    assert reply.status_code == 200, reply.text
    assert reply.json()["product"]["discount_amount"] == 0
    assert [p["type"] for p in plans_of(api, "8001")] == ["onetime"]


def test_2021_01_a_discount_sent_alone_goes_to_the_recurring_plans_and_keeps_them(api):
    product = make_product(api, "8001")
    weekly = make_plan(api, product, subscription_preferences={**MONTHLY, "interval_unit": "week"})
    prepaid = make_plan(api, product, type="prepaid",
                        subscription_preferences={**MONTHLY, "charge_interval_frequency": 3})
    make_plan(api, product, type="onetime", subscription_preferences=None)
    response = api.put(f"/products/{product.id}", json={"discount_amount": "12.5"}, version=V01)
    assert response.json()["product"]["discount_amount"] == 12.5
    plans = {p["id"]: p for p in plans_of(api, "8001")}
    assert len(plans) == 3
    assert plans[weekly.id]["discount_amount"] == plans[prepaid.id]["discount_amount"] == "12.50"


def test_2021_01_update_of_a_product_without_plans_derives_them(api):
    product = make_product(api, "8001")
    response = api.put(f"/products/{product.id}", json={"subscription_defaults": {
        "order_interval_unit": "month", "order_interval_frequency_options": ["2"]}}, version=V01)
    assert response.status_code == 200, response.text
    assert [p["type"] for p in plans_of(api, "8001")] == ["subscription"]
    assert errors_of(api.put(f"/products/{product.id}", json={"subscription_defaults": {
        "order_day_of_week": 3}}, version=V01)) == {"subscription_defaults": {
            "order_day_of_week": ["can only be set when interval_unit is week"]}}


def test_2021_01_shows_plans_made_through_2021_11(api):
    product = make_product(api, "8001")
    assert api.get(f"/products/{product.id}", version=V01).json()["product"]["subscription_defaults"][
        "storefront_purchase_options"] == "onetime"
    make_plan(api, product, discount_amount=Decimal("5"), subscription_preferences={
        **MONTHLY, "order_day_of_month": 15, "expire_after_specific_number_of_charges": 6})
    make_plan(api, product, type="onetime", subscription_preferences=None, title="Once")
    shown = api.get(f"/products/{product.id}", version=V01).json()["product"]
    assert shown["discount_amount"] == 5
    defaults = shown["subscription_defaults"]
    assert defaults["storefront_purchase_options"] == "subscription_and_onetime"
    assert (defaults["order_day_of_month"], defaults["expire_after_specific_number_of_charges"],
            defaults["number_charges_until_expiration"]) == (15, 6, 6)


def test_a_2021_11_plan_write_moves_the_2021_01_products_updated_at(api):
    """docs/api-choices.md: a change to the plans bumps the product's `updated_at` (found by an
    audit: a plan written through 2021-11 changed the 2021-01 product without it, so an
    `updated_at_min` sync missed the change)."""
    product = legacy_create(api, subscription_defaults={"storefront_purchase_options": "subscription_and_onetime",
                                                        "order_interval_unit": "month",
                                                        "order_interval_frequency_options": [1]})
    subscription, _ = plans_of(api, "8001")
    for step in ("update", "create", "delete"):
        before = api.get(f"/products/{product['id']}", version=V01).json()["product"]["updated_at"]
        api.clock.advance(seconds=5)
        if step == "update":
            reply = api.put(f"/plans/{subscription['id']}", json={"discount_amount": "25"}, version=V11)
        elif step == "create":  # a second frequency option of the product's unit
            reply = api.post("/plans", version=V11, json={
                "title": "Every two months", "type": "subscription", "external_product_id": "8001",
                "subscription_preferences": {**MONTHLY, "order_interval_frequency": 2, "charge_interval_frequency": 2}})
        else:
            reply = api.delete(f"/plans/{subscription['id']}", version=V11)
        assert reply.status_code in (200, 201, 204), reply.text
        after = api.get(f"/products/{product['id']}", version=V01).json()["product"]["updated_at"]
        assert after > before, step
        found = api.get("/products", params={"updated_at_min": after}, version=V01).json()["products"]
        assert [p["id"] for p in found] == [product["id"]], step
    # A plan write that changes nothing the 2021-01 product shows (a second onetime plan: it is
    # sold once already) leaves the product as it was: no event, no new `updated_at`.
    before = api.get(f"/products/{product['id']}", version=V01).json()["product"]
    told = len(events_of(api, product["id"], "product"))
    api.clock.advance(seconds=5)
    made = api.post("/plans", version=V11, json={"title": "Once more", "type": "onetime", "external_product_id": "8001"})
    assert made.status_code == 201, made.text
    assert api.get(f"/products/{product['id']}", version=V01).json()["product"] == before
    assert len(events_of(api, product["id"], "product")) == told


def test_a_plan_write_names_the_2021_01_product_fields_it_changed(api):
    """Found by an audit: the `product/updated` a plan write records named no field, though the
    2021-01 product's `discount_amount` (or `subscription_defaults`) had changed."""
    product = legacy_create(api, discount_amount="5", discount_type="percentage")
    subscription = plans_of(api, "8001")[0]
    assert api.put(f"/products/{product['id']}", json={"discount_amount": "10"}, version=V01).status_code == 200
    assert api.put(f"/plans/{subscription['id']}", version=V11, json={
        "subscription_preferences": {**subscription["subscription_preferences"], "order_day_of_month": 3}}
    ).status_code == 200
    shown = api.get("/events", params={"object_type": "product", "object_id": product["id"], "sort_by": "id-asc"})
    said = [e["updated_attributes"] for e in shown.json()["events"] if e["verb"] == "updated"]
    assert said[-2:] == [["discount_amount"], ["subscription_defaults"]], said


def test_2021_01_delete_answers_200_and_removes_the_product_and_its_plans(api):
    product = legacy_create(api)
    response = api.delete(f"/products/{product['id']}", version=V01)
    assert response.status_code == 200 and response.json() == {}
    assert api.get(f"/products/{product['id']}", version=V01).status_code == 404
    assert plans_of(api, "8001") == []


def test_2021_01_create_and_update_record_product_and_plan_events(api):
    product = legacy_create(api, subscription_defaults={"storefront_purchase_options": "subscription_and_onetime",
                                                        "order_interval_unit": "month",
                                                        "order_interval_frequency_options": [1]})
    subscription, onetime = plans_of(api, "8001")
    assert events_of(api) == [("product/created", product["id"]), ("plan/created", subscription["id"]),
                              ("plan/created", onetime["id"])]
    api.put(f"/products/{product['id']}", json={"discount_amount": 5}, version=V01)
    assert events_of(api)[3:] == [("plan/updated", subscription["id"]), ("product/updated", product["id"])]


def test_2021_01_list_pages_with_a_link_header_except_when_filtered_by_ids(api):
    made = [make_product(api, str(n)) for n in range(3)]
    response = api.get("/products", params={"limit": 2}, version=V01)
    assert [p["id"] for p in response.json()["products"]] == [made[2].id, made[1].id]
    link = response.headers["link"]
    assert 'rel="next"' in link
    page_info = parse_qs(urlparse(link.split(";")[0].strip("<>")).query)["page_info"][0]
    rest = api.get("/products", params={"limit": 2, "page_info": page_info}, version=V01)
    assert [p["id"] for p in rest.json()["products"]] == [made[0].id]
    for params in ({"ids": ",".join(str(p.id) for p in made)}, {"platform_product_ids": "0,1,2"}):
        filtered = api.get("/products", params={"limit": 2, **params}, version=V01)
        assert len(filtered.json()["products"]) == 2
        assert "link" not in filtered.headers


def _walk(api: Any, params: dict[str, Any]) -> tuple[list[str], list[int]]:
    """Every page of a 2021-01 product list by its Link header: titles and ids in order."""
    titles, ids = [], []
    response = api.get("/products", params=params, version=V01)
    while True:
        assert response.status_code == 200, response.text
        titles += [p["title"] for p in response.json()["products"]]
        ids += [p["id"] for p in response.json()["products"]]
        links = dict((part.split(";")[1].strip(), part.split(";")[0].strip(" <>"))
                     for part in response.headers.get("link", "").split(",") if part)
        if 'rel="next"' not in links:
            return titles, ids
        page_info = parse_qs(urlparse(links['rel="next"']).query)["page_info"][0]
        response = api.get("/products", params={"limit": params["limit"], "page_info": page_info}, version=V01)


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_2021_01_list_sorted_by_title_pages_by_page_number_and_by_link_header(api, direction):
    # Found by an audit: a title sort had no Link header (spec 02 Cursor paging: every page that
    # has more carries one). Equal titles are kept apart by their ids, so no page skips or repeats.
    titles = ["b", "c", "a", "b", "a", "c", "b"]
    made = [make_product(api, str(n), title=title) for n, title in enumerate(titles)]
    expected = sorted(((p.title, p.id) for p in made), reverse=direction == "desc")
    walked_titles, walked_ids = _walk(api, {"sort_by": f"title-{direction}", "limit": 2})
    assert walked_titles == [t for t, _ in expected] and sorted(walked_ids) == sorted(p.id for p in made)
    assert len(set(walked_ids)) == len(made)
    page = api.get("/products", params={"sort_by": f"title-{direction}", "limit": 2, "page": 4}, version=V01)
    assert [p["title"] for p in page.json()["products"]] == [expected[-1][0]]


# Scopes ------------------------------------------------------------------------------------

def test_read_products_may_read_but_not_write(vapi):
    product = make_product(vapi)
    key = product.external_product_id if vapi.version == V11 else product.id
    token = vapi.token_with("read_products")
    assert vapi.get("/products", token=token).status_code == 200
    assert vapi.get(f"/products/{key}", token=token).status_code == 200
    refused = [vapi.post("/products", json=legacy_body() if vapi.version == V01 else body(external_product_id="2"),
                         token=token),
               vapi.put(f"/products/{key}", json={"title": "x"}, token=token),
               vapi.delete(f"/products/{key}", token=token)]
    for response in refused:
        assert response.status_code == 403
        assert response.json() == {"errors": "This token lacks the scope this endpoint needs: write_products"}


def test_plan_scopes_do_not_grant_products_and_write_products_implies_read(vapi):
    token = vapi.token_with("write_plans")
    assert vapi.get("/products", token=token).json() == {
        "errors": "This token lacks the scope this endpoint needs: read_products"}
    writer = vapi.token_with("write_products")
    assert vapi.get("/products", token=writer).status_code == 200


# Guards --------------------------------------------------------------------------------------

def test_a_path_key_that_can_be_no_external_id_answers_404(api):
    for key in ("%00", "x" * 65):
        response = api.get(f"/products/{key}", version=V11)
        assert response.status_code == 404 and response.json() == NOT_FOUND


def test_grams_are_bounded_by_the_column_they_are_copied_to(api):
    response = api.post("/products", json=body(variants=[{"external_variant_id": "v1", "grams": 2**31}]),
                        version=V11)
    assert errors_of(response) == {"variants": {"0": {"grams": ["is out of range"]}}}


def test_2021_01_frequency_options_are_bounded(api):
    response = api.post("/products", json=legacy_body(subscription_defaults={
        "order_interval_unit": "day", "order_interval_frequency_options": [str(n) for n in range(1, 22)]}),
        version=V01)
    assert errors_of(response) == {"subscription_defaults": {
        "order_interval_frequency_options": ["has too many items (at most 20)"]}}
    response = api.post("/products", json=legacy_body(subscription_defaults={
        "order_interval_unit": "day", "order_interval_frequency_options": ["1001"]}), version=V01)
    assert errors_of(response) == {"subscription_defaults": {
        "order_interval_frequency_options": ["must be from 1 to 1000"]}}


def test_listing_products_reads_their_plans_in_one_query_per_page(api):
    from tests.api.test_includes_query_count import counting

    def statements(count: int) -> int:
        with counting(api.db) as seen:
            response = api.get("/products", params={"limit": 250}, version=V01)
        assert len(response.json()["products"]) == count
        return len(seen)

    product = make_product(api, "1")
    make_plan(api, product)
    few = statements(1)
    for n in range(2, 8):
        make_plan(api, make_product(api, str(n)))
    assert statements(7) == few
