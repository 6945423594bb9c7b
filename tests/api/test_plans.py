"""Contract tests of the plan endpoints (spec 01 Plans, decisions §5.4, §5.8, §5.16): 2021-11
only; create, get, update, delete, list with every filter, bulk create and update (all or
nothing, at most 20). Shapes, exact errors, tenancy, scopes and events."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from rebill.domain.catalog.model import VariantInput
from tests.api.test_products import MONTHLY, make_plan, make_product
from tests.builders import events_of

V01, V11 = "2021-01", "2021-11"
OFFSET_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NOT_FOUND = {"errors": "Not Found"}
ALL_CHANNELS = {c: {"display": True} for c in ("api", "checkout_page", "customer_portal", "merchant_portal")}
FULL_PREFERENCES = {"charge_interval_frequency": 1, "interval_unit": "month", "order_interval_frequency": 1,
                    "order_day_of_month": None, "order_day_of_week": None, "cutoff_day_of_month": None,
                    "cutoff_day_of_week": None, "expire_after_specific_number_of_charges": None,
                    "apply_cutoff_date_to_checkout": False}


def body(**overrides: Any) -> dict[str, Any]:
    return {"external_product_id": "7001", "title": "Monthly", "type": "subscription",
            "subscription_preferences": dict(MONTHLY), **overrides}


def create(api: Any, **overrides: Any) -> dict[str, Any]:
    response = api.post("/plans", json=body(**overrides))
    assert response.status_code == 201, response.text
    return response.json()["plan"]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


@pytest.fixture
def coffee(api):
    """The api's store with product 7001 (variants 7001-1, 7001-2) in its catalog."""
    return make_product(api, "7001", variants=[
        VariantInput(external_variant_id="7001-1", price=Decimal("10")),
        VariantInput(external_variant_id="7001-2", price=Decimal("20"))])


# Versions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path", [("GET", "/plans"), ("POST", "/plans"), ("GET", "/plans/1"),
                                         ("PUT", "/plans/1"), ("DELETE", "/plans/1"),
                                         ("POST", "/plans/bulk_create"), ("PUT", "/plans/bulk_update")])
def test_plan_endpoints_answer_501_in_2021_01(api, method, path):
    response = api.request(method, path, json={} if method in ("POST", "PUT") else None, version=V01)
    assert response.status_code == 501
    assert response.json() == {"errors": "This resource is not implemented in the requested API version"}


# Create ------------------------------------------------------------------------------------

def test_create_answers_201_with_every_field_of_spec_03(api, coffee):
    now = api.clock.now()
    plan = create(api, discount_amount="10", sort_order=2, external_variant_ids=["7001-2"])
    assert type(plan["id"]) is int
    assert plan == {
        "id": plan["id"], "title": "Monthly", "type": "subscription",
        "external_product_id": {"ecommerce": "7001"}, "external_variant_ids": ["7001-2"],
        "has_variant_restrictions": True, "discount_amount": "10.00", "discount_type": "percentage",
        "channel_settings": ALL_CHANNELS, "sort_order": 2, "subscription_preferences": FULL_PREFERENCES,
        "external_plan_group_id": None, "external_plan_id": None, "external_plan_name": None, "deleted_at": None,
        "created_at": now.isoformat(), "updated_at": now.isoformat()}
    assert OFFSET_TS.match(plan["created_at"])
    assert api.get(f"/plans/{plan['id']}").json() == {"plan": plan}


def test_types_and_interval_units_are_taken_in_any_case_and_shown_lower_case(api, coffee):
    plan = create(api, type="PREPAID", subscription_preferences={"interval_unit": "Week", "order_interval_frequency": 2,
                                                                 "charge_interval_frequency": "6"})
    assert plan["type"] == "prepaid"
    assert plan["subscription_preferences"]["interval_unit"] == "week"
    assert plan["subscription_preferences"]["charge_interval_frequency"] == 6


def test_external_product_id_may_be_a_plain_string_or_a_number(api, coffee):
    assert create(api, external_product_id="7001")["external_product_id"] == {"ecommerce": "7001"}
    assert create(api, external_product_id=7001)["external_product_id"] == {"ecommerce": "7001"}


def test_a_onetime_plan_has_no_preferences(api, coffee):
    plan = create(api, type="onetime", subscription_preferences=None)
    assert plan["subscription_preferences"] is None
    response = api.post("/plans", json=body(type="onetime"))
    assert errors_of(response) == {"subscription_preferences": ["must be empty for a onetime plan"]}


def test_create_requires_product_title_and_type(api):
    assert errors_of(api.post("/plans", json={})) == {
        "external_product_id": ["is required"], "title": ["is required"], "type": ["is required"]}


def test_wrong_types_are_named_field_by_field(api, coffee):
    response = api.post("/plans", json=body(title=1, sort_order="first", channel_settings=[], discount_amount=True,
                                            external_variant_ids="7001-1", subscription_preferences="monthly"))
    assert errors_of(response) == {"title": ["must be a string"], "discount_amount": [
        "must be a decimal number as a string"], "channel_settings": ["must be an object"],
        "sort_order": ["must be an integer"], "subscription_preferences": ["must be an object"],
        "external_variant_ids": ["must be an array"]}


def test_an_unknown_type_is_refused(api, coffee):
    assert errors_of(api.post("/plans", json=body(type="weekly"))) == {
        "type": ["must be one of: subscription, prepaid, onetime"]}


def test_the_product_must_be_in_the_stores_catalog(api, coffee):
    assert errors_of(api.post("/plans", json=body(external_product_id="9999"))) == {
        "external_product_id": ["product not found"]}
    make_product(api.other_store(), "8001")
    assert errors_of(api.post("/plans", json=body(external_product_id="8001"))) == {
        "external_product_id": ["product not found"]}


def test_an_unknown_product_is_named_together_with_the_other_bad_fields(api):
    response = api.post("/plans", json=body(external_product_id="9999", discount_amount="200",
                                            subscription_preferences={"interval_unit": "month"}))
    assert errors_of(response) == {
        "external_product_id": ["product not found"],
        "discount_amount": ["must be greater than 0 and at most 100 for a percentage"],
        "subscription_preferences": {"order_interval_frequency": ["is required"],
                                     "charge_interval_frequency": ["is required"]}}


def test_recurring_plans_need_their_preferences(api, coffee):
    for plan_type in ("subscription", "prepaid"):
        response = api.post("/plans", json=body(type=plan_type, subscription_preferences=None))
        assert errors_of(response) == {"subscription_preferences": [f"is required for a {plan_type} plan"]}
    response = api.post("/plans", json=body(subscription_preferences={}))
    assert errors_of(response) == {"subscription_preferences": {
        "interval_unit": ["is required"], "order_interval_frequency": ["is required"],
        "charge_interval_frequency": ["is required"]}}
    response = api.post("/plans", json=body(subscription_preferences={
        "interval_unit": "year", "order_interval_frequency": 0, "charge_interval_frequency": -1}))
    assert errors_of(response) == {"subscription_preferences": {
        "interval_unit": ["must be one of: day, week, month"], "order_interval_frequency": ["must be from 1 to 1000"],
        "charge_interval_frequency": ["must be from 1 to 1000"]}}


def test_a_subscription_charges_at_every_order(api, coffee):
    response = api.post("/plans", json=body(subscription_preferences={**MONTHLY, "charge_interval_frequency": 2}))
    assert errors_of(response) == {"subscription_preferences": {
        "charge_interval_frequency": ["must equal order_interval_frequency for a subscription plan"]}}


@pytest.mark.parametrize("order,charge", [(2, 2), (2, 3), (3, 2)])
def test_prepaid_charges_a_larger_multiple_of_the_order_interval(api, coffee, order, charge):
    """NOTE: decisions §5.4."""
    response = api.post("/plans", json=body(type="prepaid", subscription_preferences={
        "interval_unit": "month", "order_interval_frequency": order, "charge_interval_frequency": charge}))
    assert errors_of(response) == {"subscription_preferences": {
        "charge_interval_frequency": ["must be a multiple of order_interval_frequency and larger for a prepaid plan"]}}


def test_order_and_cutoff_days_fit_the_interval_unit(api, coffee):
    plan = create(api, subscription_preferences={**MONTHLY, "order_day_of_month": 31, "cutoff_day_of_month": 1,
                                                 "expire_after_specific_number_of_charges": 12,
                                                 "apply_cutoff_date_to_checkout": True})
    prefs = plan["subscription_preferences"]
    assert (prefs["order_day_of_month"], prefs["cutoff_day_of_month"]) == (31, 1)
    assert prefs["expire_after_specific_number_of_charges"] == 12 and prefs["apply_cutoff_date_to_checkout"] is True
    response = api.post("/plans", json=body(subscription_preferences={
        **MONTHLY, "order_day_of_month": 32, "order_day_of_week": 2, "cutoff_day_of_week": 7,
        "expire_after_specific_number_of_charges": 0}))
    assert errors_of(response) == {"subscription_preferences": {
        "order_day_of_month": ["must be from 1 to 31"], "order_day_of_week": ["can only be set when interval_unit is week"],
        "cutoff_day_of_week": ["must be from 0 to 6"], "expire_after_specific_number_of_charges": ["must be at least 1"]}}
    weekly = create(api, subscription_preferences={"interval_unit": "week", "order_interval_frequency": 1,
                                                   "charge_interval_frequency": 1, "order_day_of_week": 0})
    assert weekly["subscription_preferences"]["order_day_of_week"] == 0


@pytest.mark.parametrize("amount,kind,message", [
    ("0", "percentage", "must be greater than 0 and at most 100 for a percentage"),
    ("100.01", "percentage", "must be greater than 0 and at most 100 for a percentage"),
    ("12.345", "percentage", "has too many decimal places (at most 2)"),
    ("0", "fixed_amount", "must be greater than 0"),
    ("1.005", "fixed_amount", "has too many decimal places (at most 2)"),
    ("-5", "fixed_amount", "must not be negative"),
])
def test_discount_amounts_follow_their_type(api, coffee, amount, kind, message):
    response = api.post("/plans", json=body(discount_amount=amount, discount_type=kind))
    assert errors_of(response) == {"discount_amount": [message]}


def test_discounts_show_with_two_places_or_the_currencys_digits(api, coffee):
    assert create(api, discount_amount="12.5")["discount_amount"] == "12.50"
    assert create(api, discount_amount=3, discount_type="FIXED_AMOUNT")["discount_amount"] == "3.00"
    yen = api.other_store(currency="JPY")
    make_product(yen, "7001", variants=[])
    plan = create(yen, discount_amount="500", discount_type="fixed_amount")
    assert (plan["discount_amount"], plan["discount_type"]) == ("500", "fixed_amount")
    assert errors_of(yen.post("/plans", json=body(discount_amount="5.5", discount_type="fixed_amount"))) == {
        "discount_amount": ["has too many decimal places (at most 0)"]}
    assert errors_of(api.post("/plans", json=body(discount_type="bogo"))) == {
        "discount_type": ["must be one of: percentage, fixed_amount"]}


def test_variant_restrictions_name_variants_of_the_product(api, coffee):
    plan = create(api, external_variant_ids=["7001-1", {"ecommerce": "7001-2"}])
    assert plan["external_variant_ids"] == ["7001-1", "7001-2"]
    response = api.post("/plans", json=body(external_variant_ids=["7001-1", "nope", "7001-1"]))
    assert errors_of(response) == {"external_variant_ids": {"1": ["is not a variant of the product"],
                                                            "2": ["is duplicated"]}}
    assert create(api, external_variant_ids=[])["has_variant_restrictions"] is False


def test_channel_settings_default_to_shown_everywhere_and_merge_by_channel(api, coffee):
    plan = create(api, channel_settings={"customer_portal": {"display": False}})
    assert plan["channel_settings"] == {**ALL_CHANNELS, "customer_portal": {"display": False}}
    response = api.post("/plans", json=body(channel_settings={"api": {"display": "no"}}))
    assert errors_of(response) == {"channel_settings": {"api": {"display": ["must be a boolean"]}}}


# Retrieve, update, delete ----------------------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_another_stores_or_an_unknown_plan_answers_404(api, method):
    other = api.other_store()
    theirs = make_plan(other, make_product(other))
    for plan_id in (theirs.id, 987654321):
        response = api.request(method, f"/plans/{plan_id}", json={"title": "x"} if method == "PUT" else None)
        assert response.status_code == 404
        assert response.json() == NOT_FOUND
    assert other.get(f"/plans/{theirs.id}").status_code == 200


def test_update_changes_only_the_sent_fields_and_merges_preferences(api, coffee):
    before = create(api, discount_amount="5")
    later = api.clock.advance(minutes=1)
    response = api.put(f"/plans/{before['id']}", json={"title": "Every month", "subscription_preferences": {
        "order_day_of_month": 10}})
    assert response.status_code == 200, response.text
    after = response.json()["plan"]
    assert after["title"] == "Every month"
    assert after["subscription_preferences"] == {**FULL_PREFERENCES, "order_day_of_month": 10}
    assert after["discount_amount"] == "5.00" and after["updated_at"] == later.isoformat()
    assert after["created_at"] == before["created_at"]


def test_update_checks_the_plan_as_it_would_become(api, coffee):
    plan = create(api)
    response = api.put(f"/plans/{plan['id']}", json={"type": "prepaid"})
    assert errors_of(response) == {"subscription_preferences": {
        "charge_interval_frequency": ["must be a multiple of order_interval_frequency and larger for a prepaid plan"]}}
    response = api.put(f"/plans/{plan['id']}", json={"type": "prepaid", "subscription_preferences": {
        "charge_interval_frequency": 3}})
    assert response.json()["plan"]["type"] == "prepaid"
    assert errors_of(api.put(f"/plans/{plan['id']}", json={"title": None, "type": None})) == {
        "title": ["cannot be null"], "type": ["cannot be null"]}


def test_a_plan_that_becomes_onetime_drops_its_preferences_and_back_needs_them(api, coffee):
    plan = create(api)
    onetime = api.put(f"/plans/{plan['id']}", json={"type": "onetime"}).json()["plan"]
    assert onetime["subscription_preferences"] is None
    assert errors_of(api.put(f"/plans/{plan['id']}", json={"type": "subscription"})) == {
        "subscription_preferences": ["is required for a subscription plan"]}
    back = api.put(f"/plans/{plan['id']}", json={"type": "subscription", "subscription_preferences": MONTHLY})
    assert back.json()["plan"]["subscription_preferences"] == FULL_PREFERENCES


def test_a_plan_may_move_to_another_product_of_the_catalog(api, coffee):
    plan = create(api)
    make_product(api, "7002")
    moved = api.put(f"/plans/{plan['id']}", json={"external_product_id": {"ecommerce": "7002"}}).json()["plan"]
    assert moved["external_product_id"] == {"ecommerce": "7002"}
    assert errors_of(api.put(f"/plans/{plan['id']}", json={"external_product_id": "nope"})) == {
        "external_product_id": ["product not found"]}


def test_an_update_that_changes_nothing_records_no_event(api, coffee):
    plan = create(api)
    api.clock.advance(minutes=1)
    assert api.put(f"/plans/{plan['id']}", json={"title": "Monthly", "subscription_preferences": MONTHLY}).json() == \
        {"plan": plan}
    assert events_of(api, plan["id"]) == [("plan/created", plan["id"])]


def test_delete_answers_204_and_the_plan_is_gone(api, coffee):
    plan = create(api)
    response = api.delete(f"/plans/{plan['id']}")
    assert response.status_code == 204 and response.content == b""
    assert api.get(f"/plans/{plan['id']}").json() == NOT_FOUND
    assert api.delete(f"/plans/{plan['id']}").status_code == 404
    assert api.get("/products/7001").status_code == 200


def test_create_update_delete_record_plan_events(api, coffee):
    plan_id = create(api)["id"]
    api.put(f"/plans/{plan_id}", json={"title": "Renamed"})
    api.delete(f"/plans/{plan_id}")
    assert events_of(api, plan_id) == [("plan/created", plan_id), ("plan/updated", plan_id),
                                       ("plan/deleted", plan_id)]


def test_plan_writes_record_product_updated_for_the_2021_01_product_they_change(api, coffee):
    """A 2021-01 product shows its plans (`subscription_defaults`): every plan write through
    these endpoints records `product/updated` of each product it changes (spec 02 Events)."""
    tea = make_product(api, "7002")

    def products_told() -> list[int]:
        return [i for topic, i in events_of(api) if topic == "product/updated"]

    before = api.get(f"/products/{coffee.id}", version=V01).json()["product"]
    plan = create(api, discount_amount="5", discount_type="percentage")
    assert products_told() == [coffee.id]
    after = api.get(f"/products/{coffee.id}", version=V01).json()["product"]
    assert (before["discount_amount"], after["discount_amount"]) == (0, 5)  # what the event tells
    api.put(f"/plans/{plan['id']}", json={"title": "Monthly"})  # changes nothing: no event
    assert products_told() == [coffee.id]
    api.put(f"/plans/{plan['id']}", json={"external_product_id": "7002"})  # moves: both products change
    assert products_told() == [coffee.id, coffee.id, tea.id]
    assert api.delete(f"/plans/{plan['id']}").status_code == 204
    assert products_told() == [coffee.id, coffee.id, tea.id, tea.id]
    assert api.delete(f"/plans/{plan['id']}").status_code == 404
    assert len(products_told()) == 4  # a 404 records nothing


# List --------------------------------------------------------------------------------------

def test_list_is_newest_first_and_pages_with_cursors(api, coffee):
    ids = [create(api, title=f"p{n}")["id"] for n in range(3)]
    first = api.get("/plans", params={"limit": 2}).json()
    assert [p["id"] for p in first["plans"]] == ids[::-1][:2]
    assert first["previous_cursor"] is None
    second = api.get("/plans", params={"cursor": first["next_cursor"], "limit": 2}).json()
    assert [p["id"] for p in second["plans"]] == [ids[0]] and second["next_cursor"] is None
    back = api.get("/plans", params={"cursor": second["previous_cursor"], "limit": 2}).json()
    assert [p["id"] for p in back["plans"]] == ids[::-1][:2]


def test_list_filters_by_product_ids_type_and_update_time(api, coffee):
    monthly = create(api)
    once = create(api, type="onetime", subscription_preferences=None)
    make_product(api, "7002")
    later = api.clock.advance(hours=1)
    other = create(api, external_product_id="7002")
    elsewhere = api.other_store()
    make_plan(elsewhere, make_product(elsewhere, "7001"))

    def listed(**params: Any) -> list[int]:
        response = api.get("/plans", params=params)
        assert response.status_code == 200, response.text
        return sorted(p["id"] for p in response.json()["plans"])

    assert listed() == sorted([monthly["id"], once["id"], other["id"]])
    assert listed(external_product_id="7001") == sorted([monthly["id"], once["id"]])
    assert listed(type="onetime") == [once["id"]]
    assert listed(ids=f"{monthly['id']},{other['id']}") == sorted([monthly["id"], other["id"]])
    assert listed(updated_at_min=later.isoformat()) == [other["id"]]
    assert listed(updated_at_max=(later.replace(second=0)).isoformat(), external_product_id="7001") == \
        sorted([monthly["id"], once["id"]])


def test_list_sorts_by_updated_at(api, coffee):
    first, second = create(api, title="a"), create(api, title="b")
    api.clock.advance(minutes=1)
    api.put(f"/plans/{first['id']}", json={"title": "a2"})
    listed = api.get("/plans", params={"sort_by": "updated_at-desc"}).json()["plans"]
    assert [p["id"] for p in listed] == [first["id"], second["id"]]


def test_list_refuses_bad_filters_and_sorts(api):
    assert errors_of(api.get("/plans", params={"type": "weekly"})) == {
        "type": ["Invalid value: weekly. Must be one of subscription, prepaid, onetime"]}
    assert errors_of(api.get("/plans", params={"sort_by": "title-asc"})) == {"sort_by": [
        "Invalid value: title-asc. Must be one of id-asc, id-desc, updated_at-asc, updated_at-desc"]}
    assert set(errors_of(api.get("/plans", params={"updated_at_min": "yesterday"}))) == {"updated_at_min"}


# Bulk ----------------------------------------------------------------------------------------

def test_bulk_create_makes_every_plan_in_order(api, coffee):
    response = api.post("/plans/bulk_create", json={"plans": [
        body(title="Monthly"), body(title="Once", type="onetime", subscription_preferences=None)]})
    assert response.status_code == 201, response.text
    made = response.json()["plans"]
    assert [p["title"] for p in made] == ["Monthly", "Once"]
    assert [api.get(f"/plans/{p['id']}").json()["plan"] for p in made] == made
    assert events_of(api)[-3:] == [("plan/created", made[0]["id"]), ("plan/created", made[1]["id"]),
                                   ("product/updated", coffee.id)]


def test_bulk_create_writes_nothing_when_an_item_fails_and_names_it_by_index(api, coffee):
    before = events_of(api)
    response = api.post("/plans/bulk_create", json={"plans": [
        body(), body(external_product_id="nope"), body(), {"type": "onetime"}]})
    assert errors_of(response) == {"plans": {"3": {"external_product_id": ["is required"],
                                                   "title": ["is required"]}}}
    response = api.post("/plans/bulk_create", json={"plans": [
        body(), body(external_product_id="nope"), body(type="prepaid")]})
    assert errors_of(response) == {"plans": {
        "1": {"external_product_id": ["product not found"]},
        "2": {"subscription_preferences": {"charge_interval_frequency": [
            "must be a multiple of order_interval_frequency and larger for a prepaid plan"]}}}}
    assert api.get("/plans").json()["plans"] == []
    assert events_of(api) == before


@pytest.mark.parametrize("plans,message", [
    (None, "is required"), ("all", "must be an array"), ([], "cannot be empty"),
    ([{}] * 21, "has too many items (at most 20)"),
])
def test_bulk_bodies_need_1_to_20_plans(api, coffee, plans, message):
    for method, path in (("POST", "/plans/bulk_create"), ("PUT", "/plans/bulk_update")):
        response = api.request(method, path, json={} if plans is None else {"plans": plans})
        assert errors_of(response) == {"plans": [message]}


def test_bulk_create_takes_exactly_20(api, coffee):
    response = api.post("/plans/bulk_create", json={"plans": [body(title=f"p{n}") for n in range(20)]})
    assert response.status_code == 201 and len(response.json()["plans"]) == 20


def test_bulk_items_must_be_objects(api, coffee):
    response = api.post("/plans/bulk_create", json={"plans": [body(), "plan"]})
    assert errors_of(response) == {"plans": {"1": ["must be an object"]}}


def test_bulk_update_changes_each_named_plan(api, coffee):
    a, b = create(api, title="a"), create(api, title="b")
    response = api.put("/plans/bulk_update", json={"plans": [
        {"id": b["id"], "title": "B", "discount_amount": "5"}, {"id": a["id"], "sort_order": 9}]})
    assert response.status_code == 200, response.text
    changed = response.json()["plans"]
    assert [(p["id"], p["title"], p["sort_order"], p["discount_amount"]) for p in changed] == [
        (b["id"], "B", 0, "5.00"), (a["id"], "a", 9, None)]
    assert api.get(f"/plans/{b['id']}").json()["plan"] == changed[0]
    assert events_of(api)[-3:] == [("plan/updated", b["id"]), ("plan/updated", a["id"]),
                                   ("product/updated", coffee.id)]


def test_bulk_update_is_all_or_nothing_with_errors_by_index(api, coffee):
    a = create(api, title="a")
    elsewhere = api.other_store()
    theirs = make_plan(elsewhere, make_product(elsewhere))
    before = events_of(api)
    response = api.put("/plans/bulk_update", json={"plans": [
        {"id": a["id"], "title": "changed"}, {"title": "no id"}, {"id": theirs.id, "title": "x"},
        {"id": a["id"], "title": "again"}, {"id": a["id"], "type": "onetime", "subscription_preferences": MONTHLY}]})
    assert errors_of(response) == {"plans": {"1": {"id": ["is required"]}}}
    response = api.put("/plans/bulk_update", json={"plans": [
        {"id": a["id"], "title": "changed"}, {"id": theirs.id, "title": "x"}, {"id": a["id"], "title": "again"}]})
    assert errors_of(response) == {"plans": {"1": {"id": ["plan not found"]},
                                             "2": {"id": ["is duplicated in this request"]}}}
    assert api.get(f"/plans/{a['id']}").json()["plan"]["title"] == "a"
    assert events_of(api) == before


# Scopes ------------------------------------------------------------------------------------

def test_read_plans_may_read_but_not_write(api, coffee):
    plan = create(api)
    token = api.token_with("read_plans")
    assert api.get("/plans", token=token).status_code == 200
    assert api.get(f"/plans/{plan['id']}", token=token).json() == {"plan": plan}
    refused = [api.post("/plans", json=body(), token=token),
               api.put(f"/plans/{plan['id']}", json={"title": "x"}, token=token),
               api.delete(f"/plans/{plan['id']}", token=token),
               api.post("/plans/bulk_create", json={"plans": [body()]}, token=token),
               api.put("/plans/bulk_update", json={"plans": [{"id": plan["id"]}]}, token=token)]
    for response in refused:
        assert response.status_code == 403
        assert response.json() == {"errors": "This token lacks the scope this endpoint needs: write_plans"}


def test_product_scopes_do_not_grant_plans_and_write_plans_implies_read(api, coffee):
    token = api.token_with("write_products")
    assert api.get("/plans", token=token).json() == {
        "errors": "This token lacks the scope this endpoint needs: read_plans"}
    assert api.post("/plans", json=body(), token=token).status_code == 403
    writer = api.token_with("write_plans")
    plan_id = api.post("/plans", json=body(), token=writer).json()["plan"]["id"]
    assert api.get(f"/plans/{plan_id}", token=writer).status_code == 200


def test_sort_order_is_bounded_and_null_channel_settings_reset_to_shown(api, coffee):
    assert errors_of(api.post("/plans", json=body(sort_order=2**31))) == {
        "sort_order": ["must be from -2147483647 to 2147483647"]}
    plan = create(api, channel_settings={"api": {"display": False}})
    after = api.put(f"/plans/{plan['id']}", json={"channel_settings": None}).json()["plan"]
    assert after["channel_settings"] == ALL_CHANNELS


def test_the_preference_ranges_the_document_states_are_the_ones_a_plan_keeps(api, coffee):
    """A plan's preferences state their ranges as a subscription's cadence does (the same
    bounds, domain/subscription/intervals.py): ends taken, one past either end a 422."""
    from rebill.api import openapi
    operation = openapi.document("2021-11")["paths"]["/plans"]["post"]
    fields = operation["requestBody"]["content"]["application/json"]["schema"]["properties"][
        "subscription_preferences"]["properties"]
    ranges = {name: (f["minimum"], f["maximum"]) for name, f in fields.items() if "minimum" in f}
    assert len(ranges) == 7
    for name, (low, high) in ranges.items():
        unit = "week" if name.endswith("_week") else "month"
        for value, taken in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
            prefs = {**MONTHLY, "interval_unit": unit, name: value}
            if name.endswith("_frequency"):
                prefs.update(charge_interval_frequency=value, order_interval_frequency=value)
            response = api.post("/plans", json=body(subscription_preferences=prefs))
            if taken:
                assert response.status_code == 201, (name, value, response.text)
            else:
                assert name in errors_of(response)["subscription_preferences"], (name, value)
