"""Contract tests of the subscription endpoints: create, retrieve, update, delete, in both
versions and on both databases (decisions §5.1-§5.5, §5.16, spec 03 "subscription").

Lists live in ``test_subscriptions_list.py``, cancel/activate/next date/address moves in
``test_subscriptions_lifecycle.py``, the 2021-01 bulk endpoints in ``test_subscriptions_bulk.py``;
the helpers below are shared with them.
"""

from __future__ import annotations

import itertools
import re
from datetime import date, timedelta
from typing import Any

import pytest

from tests.api.test_real_fields import ARR, BOOL, DT_NAIVE, DT_OFFSET, INT, NULL, OBJ, STR, UTM, assert_fields
from tests.builders import charges_of, events_of, make_address, make_customer, make_subscription

V01, V11 = "2021-01", "2021-11"
OFFSET_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
NOT_FOUND = {"errors": "Not Found"}
NOT_IN_VERSION = {"errors": "This resource is not implemented in the requested API version"}
MONTHLY = {"charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}

_products = itertools.count(1)


# Helpers (imported by the other test_subscriptions_* modules) ------------------------------

def today(api: Any) -> date:
    return api.clock.now().date()


def day(api: Any, days: int) -> str:
    """The store's today plus ``days``, as an ISO date."""
    return (today(api) + timedelta(days=days)).isoformat()


def stamp(version: str, api: Any) -> str:
    text = api.clock.now().replace(microsecond=0).isoformat()
    return text[:-6] if version == V01 else text


def next_date(version: str, iso: str | None) -> str | None:
    """A next charge date as the version renders it (a date, or a naive midnight in 2021-01)."""
    return None if iso is None else (f"{iso}T00:00:00" if version == V01 else iso)


def created_status(version: str) -> int:
    return 201 if version == V11 else 200


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def sub_body(api: Any, address_id: int, **overrides: Any) -> dict[str, Any]:
    """A valid create body from explicit fields (no catalog); an override of None leaves the
    field out."""
    body = {"address_id": address_id, "product_title": "Coffee", "variant_title": "1 lb", "price": "12.50",
            "quantity": 1, "next_charge_scheduled_at": day(api, 10), **MONTHLY, **overrides}
    return {key: value for key, value in body.items() if value is not None}


def create_sub(api: Any, address: Any = None, *, version: str | None = None, **overrides: Any) -> dict[str, Any]:
    """POST /subscriptions in ``version`` (default the api's); returns the record."""
    version = version or api.version
    address = address or make_address(api)
    response = api.post("/subscriptions", json=sub_body(api, address.id, **overrides), version=version)
    assert response.status_code == created_status(version), response.text
    return response.json()["subscription"]


def make_catalog(api: Any, external_product_id: str | None = None, **plan: Any) -> tuple[str, int | None]:
    """A product with two variants made through the API, and a plan of it when ``plan`` is
    given (its fields override a two-weekly subscription plan). Returns (product id, plan id)."""
    product_id = external_product_id or f"{7000 + next(_products)}"
    response = api.post("/products", json={
        "external_product_id": product_id, "title": "Coffee", "variants": [
            {"external_variant_id": f"{product_id}-1", "title": "250 g", "price": "12.50", "sku": "COF-250",
             "grams": 250},
            {"external_variant_id": f"{product_id}-2", "title": "1 kg", "price": "40.00", "sku": "COF-1K"}]},
        version=V11)
    assert response.status_code == 201, response.text
    if not plan:
        return product_id, None
    body = {"external_product_id": product_id, "title": "Every 2 weeks", "type": "subscription",
            "subscription_preferences": {"interval_unit": "week", "order_interval_frequency": 2,
                                         "charge_interval_frequency": 2}, **plan}
    response = api.post("/plans", json=body, version=V11)
    assert response.status_code == 201, response.text
    return product_id, response.json()["plan"]["id"]


def line_ids(api: Any, address_id: int, status: str = "queued") -> list[tuple[str, list[int]]]:
    """(date, item ids) of the address's charges of ``status``."""
    return [(c.scheduled_at.isoformat(), [line["purchase_item_id"] for line in c.line_items])
            for c in charges_of(api, address_id) if c.status == status]


def topics(api: Any, resource_id: int | None = None) -> list[str]:
    """The store's event topics; with ``resource_id``, those of purchase items with that id
    (charges number their own rows, so a charge may share the id)."""
    return [topic for topic, _ in events_of(api, resource_id)
            if resource_id is None or topic.startswith(("subscription/", "onetime/"))]


# Spec 03, transcribed (types narrowed by decisions §2.4; null where a value can be empty) ----

SUBSCRIPTION_2021_11 = [
    ("address_id", {INT}), ("analytics_data", {OBJ}), ("analytics_data.utm_params", {ARR}),
    *[(f"analytics_data.utm_params[].{u}", {STR, NULL}) for u in UTM],
    ("cancellation_reason", {STR, NULL}), ("cancellation_reason_comments", {STR, NULL}),
    ("cancelled_at", {DT_OFFSET, NULL}), ("charge_interval_frequency", {INT}), ("created_at", {DT_OFFSET}),
    ("customer_id", {INT}), ("expire_after_specific_number_of_charges", {INT, NULL}),
    ("external_product_id", {OBJ}), ("external_product_id.ecommerce", {STR, NULL}),
    ("external_variant_id", {OBJ}), ("external_variant_id.ecommerce", {STR, NULL}),
    ("has_queued_charges", {BOOL}), ("id", {INT}), ("is_prepaid", {BOOL}), ("is_skippable", {BOOL}),
    ("is_swappable", {BOOL}), ("max_retries_reached", {BOOL}), ("next_charge_scheduled_at", {STR, NULL}),
    ("order_day_of_month", {INT, NULL}), ("order_day_of_week", {INT, NULL}), ("order_interval_frequency", {INT}),
    ("order_interval_unit", {STR}), ("presentment_currency", {STR, NULL}), ("price", {STR}),
    ("product_title", {STR}), ("properties", {ARR}), ("properties[].name", {STR}), ("properties[].value", {STR}),
    ("quantity", {INT}), ("sku", {STR, NULL}), ("sku_override", {BOOL}), ("status", {STR}),
    ("updated_at", {DT_OFFSET}), ("variant_title", {STR, NULL}),
]
SUBSCRIPTION_2021_01 = [
    ("address_id", {INT}), ("cancellation_reason", {STR, NULL}), ("cancellation_reason_comments", {STR, NULL}),
    ("cancelled_at", {DT_NAIVE, NULL}), ("charge_interval_frequency", {STR}), ("commit_update", {BOOL}),
    ("created_at", {DT_NAIVE}), ("customer_id", {INT}), ("expire_after_specific_number_of_charges", {INT, NULL}),
    ("has_queued_charges", {BOOL}), ("id", {INT}), ("is_skippable", {BOOL}), ("is_swappable", {BOOL}),
    ("max_retries_reached", {BOOL}), ("next_charge_scheduled_at", {DT_NAIVE, NULL}),
    ("order_day_of_month", {INT, NULL}), ("order_day_of_week", {INT, NULL}), ("order_interval_frequency", {STR}),
    ("order_interval_unit", {STR}), ("platform_product_id", {INT, STR, NULL}),
    ("platform_variant_id", {INT, STR, NULL}), ("price", {STR}), ("product_title", {STR}), ("properties", {ARR}),
    ("properties[].name", {STR}), ("properties[].value", {STR}), ("quantity", {INT}),
    ("service_product_id", {INT, STR, NULL}), ("sku", {STR, NULL}), ("sku_override", {BOOL}), ("status", {STR}),
    ("updated_at", {DT_NAIVE}), ("variant_title", {STR, NULL}),
    # decisions §5.1, the 2021-01 extras
    ("email", {STR}), ("charge_delay", {INT, NULL}), ("cutoff_day_of_month_before_and_after", {INT, NULL}),
    ("cutoff_day_of_week_before_and_after", {INT, NULL}),
]


# Create: shapes ------------------------------------------------------------------------------

def test_create_answers_201_in_2021_11_with_every_field_nested_ids_lower_case_status_and_dates(api):
    address = make_address(api)
    sub = create_sub(api, address, external_product_id={"ecommerce": "123"},
                     external_variant_id={"ecommerce": "456"}, sku="COF-1", sku_override=True,
                     properties=[{"name": "grind", "value": "fine"}],
                     analytics_data={"utm_params": [{"utm_source": "mail", "utm_medium": "email"}]},
                     expire_after_specific_number_of_charges=6, is_swappable=False)
    now = stamp(V11, api)
    assert type(sub["id"]) is int
    assert sub == {
        "id": sub["id"], "address_id": address.id, "customer_id": address.customer_id,
        "analytics_data": {"utm_params": [{"utm_source": "mail", "utm_medium": "email"}]},
        "cancellation_reason": None, "cancellation_reason_comments": None, "cancelled_at": None,
        "charge_interval_frequency": 1, "created_at": now, "cutoff_day_of_month": None, "cutoff_day_of_week": None,
        "expire_after_specific_number_of_charges": 6, "external_product_id": {"ecommerce": "123"},
        "external_variant_id": {"ecommerce": "456"}, "has_queued_charges": True, "is_prepaid": False,
        "is_skippable": True, "is_swappable": False, "max_retries_reached": False,
        "next_charge_scheduled_at": day(api, 10), "order_day_of_month": None, "order_day_of_week": None,
        "order_interval_frequency": 1, "order_interval_unit": "month", "plan_id": None,
        "presentment_currency": "USD", "price": "12.50", "product_title": "Coffee",
        "properties": [{"name": "grind", "value": "fine"}], "quantity": 1, "sku": "COF-1", "sku_override": True,
        "status": "active", "updated_at": now, "variant_title": "1 lb"}
    assert OFFSET_TS.match(sub["created_at"])
    assert api.get(f"/subscriptions/{sub['id']}").json() == {"subscription": sub}


def test_create_answers_200_in_2021_01_with_flat_platform_ids_upper_case_status_and_string_frequencies(api):
    customer = make_customer(api, email="ada@example.com")
    address = make_address(api, customer)
    sub = create_sub(api, address, version=V01, platform_product_id="123", platform_variant_id="v-456",
                     properties=[{"name": "grind", "value": "fine"}])
    now = stamp(V01, api)
    assert sub == {
        "id": sub["id"], "address_id": address.id, "customer_id": customer.id, "analytics_data": {"utm_params": []},
        "cancellation_reason": None, "cancellation_reason_comments": None, "cancelled_at": None,
        "charge_delay": None, "charge_interval_frequency": "1", "commit_update": False, "created_at": now,
        "cutoff_day_of_month": None, "cutoff_day_of_month_before_and_after": None, "cutoff_day_of_week": None,
        "cutoff_day_of_week_before_and_after": None, "email": "ada@example.com",
        "expire_after_specific_number_of_charges": None, "has_queued_charges": True, "is_prepaid": False,
        "is_skippable": True, "is_swappable": True, "max_retries_reached": False,
        "next_charge_scheduled_at": f"{day(api, 10)}T00:00:00", "order_day_of_month": None,
        "order_day_of_week": None, "order_interval_frequency": "1", "order_interval_unit": "month", "plan_id": None,
        "platform_product_id": 123, "platform_variant_id": "v-456", "presentment_currency": "USD",
        "price": "12.50", "product_title": "Coffee", "properties": [{"name": "grind", "value": "fine"}],
        "quantity": 1, "service_product_id": None, "sku": None, "sku_override": False, "status": "ACTIVE",
        "updated_at": now, "variant_title": "1 lb"}
    assert NAIVE_TS.match(sub["created_at"])
    assert not {"external_product_id", "external_variant_id"} & set(sub)
    assert api.get(f"/subscriptions/{sub['id']}", version=V01).json() == {"subscription": sub}


def test_subscription_renders_every_real_field_of_spec_03_in_2021_11(api):
    sub = create_sub(api, properties=[{"name": "a", "value": "b"}],
                     analytics_data={"utm_params": [{u: "x" for u in UTM}]})
    assert_fields(sub, SUBSCRIPTION_2021_11)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", sub["next_charge_scheduled_at"])


def test_subscription_renders_every_real_field_of_spec_03_in_2021_01(api):
    sub = create_sub(api, version=V01, properties=[{"name": "a", "value": "b"}])
    assert_fields(sub, SUBSCRIPTION_2021_01)


def test_a_cancelled_subscription_still_renders_every_real_field(vapi):
    sub = create_sub(vapi)
    response = vapi.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "too much"})
    assert response.status_code == 200, response.text
    cancelled = response.json()["subscription"]
    assert_fields(cancelled, SUBSCRIPTION_2021_11 if vapi.version == V11 else SUBSCRIPTION_2021_01)
    assert cancelled["next_charge_scheduled_at"] is None


def test_create_records_subscription_created_customer_activated_and_the_charge(vapi):
    address = make_address(vapi)
    sub = create_sub(vapi, address)
    assert events_of(vapi)[-3:] == [("subscription/created", sub["id"]), ("customer/activated", address.customer_id),
                                    ("charge/created", charges_of(vapi, address.id)[0].id)]
    assert line_ids(vapi, address.id) == [(day(vapi, 10), [sub["id"]])]


def test_unit_is_taken_in_any_case_and_shown_lower_case(vapi):
    sub = create_sub(vapi, order_interval_unit="WeeK")
    assert sub["order_interval_unit"] == "week"


# Create: the catalog and plans ---------------------------------------------------------------

def test_create_from_a_catalog_variant_takes_its_titles_price_and_sku(vapi):
    product_id, _ = make_catalog(vapi)
    ids = ({"external_product_id": {"ecommerce": product_id}, "external_variant_id": {"ecommerce": f"{product_id}-2"}}
           if vapi.version == V11 else {"platform_product_id": product_id, "platform_variant_id": f"{product_id}-2"})
    body = {"address_id": make_address(vapi).id, **MONTHLY, **ids}
    response = vapi.post("/subscriptions", json=body)
    assert response.status_code == created_status(vapi.version), response.text
    sub = response.json()["subscription"]
    assert (sub["product_title"], sub["variant_title"], sub["price"], sub["sku"]) == ("Coffee", "1 kg", "40.00",
                                                                                      "COF-1K")
    if vapi.version == V11:
        assert sub["external_variant_id"] == {"ecommerce": f"{product_id}-2"}
    else:
        assert (sub["platform_product_id"], sub["platform_variant_id"]) == (int(product_id), f"{product_id}-2")


def test_create_from_a_catalog_product_without_a_variant_takes_the_first_variant(api):
    product_id, _ = make_catalog(api)
    sub = create_sub(api, external_product_id={"ecommerce": product_id}, product_title=None, variant_title=None,
                     price=None)
    assert sub["external_variant_id"] == {"ecommerce": f"{product_id}-1"}
    assert (sub["product_title"], sub["variant_title"], sub["price"], sub["sku"]) == ("Coffee", "250 g", "12.50",
                                                                                      "COF-250")


def test_fields_sent_win_over_the_catalog_defaults(api):
    product_id, _ = make_catalog(api)
    sub = create_sub(api, external_product_id={"ecommerce": product_id}, product_title="Special", price="9.99")
    assert (sub["product_title"], sub["price"], sub["variant_title"]) == ("Special", "9.99", "1 lb")


def test_a_product_not_in_the_catalog_needs_a_title_and_a_price(vapi):
    ids = ({"external_product_id": {"ecommerce": "nope"}} if vapi.version == V11 else {"platform_product_id": "nope"})
    response = vapi.post("/subscriptions", json={"address_id": make_address(vapi).id, **MONTHLY, **ids})
    name = "external_product_id" if vapi.version == V11 else "platform_product_id"
    assert errors_of(response) == {name: ["not found in the catalog"]}


def test_an_unknown_variant_of_a_catalog_product_answers_422_in_the_callers_names(vapi):
    product_id, _ = make_catalog(vapi)
    ids = ({"external_product_id": {"ecommerce": product_id}, "external_variant_id": {"ecommerce": "nope"}}
           if vapi.version == V11 else {"platform_product_id": product_id, "platform_variant_id": "nope"})
    response = vapi.post("/subscriptions", json={"address_id": make_address(vapi).id, **MONTHLY, **ids})
    name = "external_variant_id" if vapi.version == V11 else "platform_variant_id"
    assert errors_of(response) == {name: ["not found in the catalog"]}


def test_create_from_a_plan_takes_the_product_the_cadence_and_the_discounted_price(vapi):
    product_id, plan_id = make_catalog(vapi, discount_amount="10", discount_type="percentage")
    response = vapi.post("/subscriptions", json={"address_id": make_address(vapi).id, "plan_id": plan_id})
    assert response.status_code == created_status(vapi.version), response.text
    sub = response.json()["subscription"]
    assert sub["plan_id"] == plan_id
    assert sub["order_interval_unit"] == "week"
    assert {sub["order_interval_frequency"], sub["charge_interval_frequency"]} == ({2} if vapi.version == V11
                                                                                    else {"2"})
    # NOTE: 12.50 less 10 %.
    assert (sub["product_title"], sub["variant_title"], sub["price"]) == ("Coffee", "250 g", "11.25")
    assert sub["next_charge_scheduled_at"] == next_date(vapi.version, day(vapi, 14))


def test_a_fixed_plan_discount_comes_off_the_price_and_a_price_sent_is_kept(api):
    _, plan_id = make_catalog(api, discount_amount="2.50", discount_type="fixed_amount")
    address = make_address(api)
    made = api.post("/subscriptions", json={"address_id": address.id, "plan_id": plan_id}).json()["subscription"]
    assert made["price"] == "10.00"
    kept = api.post("/subscriptions", json={"address_id": address.id, "plan_id": plan_id, "price": "7.00"})
    assert kept.json()["subscription"]["price"] == "7.00"


def test_interval_fields_sent_win_over_the_plans(api):
    _, plan_id = make_catalog(api, sort_order=1)
    response = api.post("/subscriptions", json={"address_id": make_address(api).id, "plan_id": plan_id,
                                                **MONTHLY})
    assert response.status_code == 201, response.text
    assert response.json()["subscription"]["order_interval_unit"] == "month"


def test_an_unknown_or_another_stores_plan_answers_422(api):
    other = api.other_store()
    _, foreign_plan = make_catalog(other, title="Theirs")
    address = make_address(api)
    for plan_id in (foreign_plan, 999_999_999):
        response = api.post("/subscriptions", json={"address_id": address.id, "plan_id": plan_id})
        assert errors_of(response) == {"plan_id": ["plan not found"]}


def test_a_onetime_plan_cannot_make_a_subscription(api):
    _, plan_id = make_catalog(api, type="onetime", title="Once", subscription_preferences=None)
    response = api.post("/subscriptions", json={"address_id": make_address(api).id, "plan_id": plan_id})
    assert errors_of(response) == {"plan_id": ["is a onetime plan"]}


# Create: intervals and dates -----------------------------------------------------------------

def test_the_interval_fields_are_required_on_create(vapi):
    body = sub_body(vapi, make_address(vapi).id)
    for name in MONTHLY:
        del body[name]
    assert errors_of(vapi.post("/subscriptions", json=body)) == {
        "charge_interval_frequency": ["is required"], "order_interval_frequency": ["is required"],
        "order_interval_unit": ["is required"]}


@pytest.mark.parametrize("values,errors", [
    ({"order_interval_unit": "year"}, {"order_interval_unit": ["must be one of: day, week, month"]}),
    ({"charge_interval_frequency": 0, "order_interval_frequency": 0},
     {"charge_interval_frequency": ["must be from 1 to 1000"], "order_interval_frequency": ["must be from 1 to 1000"]}),
    ({"charge_interval_frequency": 1001, "order_interval_frequency": 1001},
     {"charge_interval_frequency": ["must be from 1 to 1000"], "order_interval_frequency": ["must be from 1 to 1000"]}),
    ({"charge_interval_frequency": 2, "order_interval_frequency": 3},
     {"charge_interval_frequency": ["must equal order_interval_frequency or be a larger multiple of it (prepaid)"]}),
    ({"charge_interval_frequency": 5, "order_interval_frequency": 2},
     {"charge_interval_frequency": ["must equal order_interval_frequency or be a larger multiple of it (prepaid)"]}),
    ({"order_day_of_month": 0}, {"order_day_of_month": ["must be from 1 to 31"]}),
    ({"order_day_of_month": 32}, {"order_day_of_month": ["must be from 1 to 31"]}),
    ({"order_day_of_week": 2}, {"order_day_of_week": ["applies to weekly intervals only"]}),
    ({"order_interval_unit": "week", "order_day_of_week": 7},
     {"order_day_of_week": ["must be from 0 (Monday) to 6 (Sunday)"]}),
    ({"order_interval_unit": "week", "order_day_of_week": -1},
     {"order_day_of_week": ["must be from 0 (Monday) to 6 (Sunday)"]}),
    ({"order_interval_unit": "day", "order_day_of_month": 3}, {"order_day_of_month": ["applies to monthly intervals only"]}),
    ({"cutoff_day_of_month": 32}, {"cutoff_day_of_month": ["must be from 0 to 31"]}),
    ({"order_interval_unit": "week", "cutoff_day_of_week": 7},
     {"cutoff_day_of_week": ["must be from 0 (Monday) to 6 (Sunday)"]}),
    # A cutoff day belongs to its cadence as an order day does, and as a plan's does (found by
    # an audit: a weekly subscription took a day of the month).
    ({"cutoff_day_of_week": 3}, {"cutoff_day_of_week": ["applies to weekly intervals only"]}),
    ({"order_interval_unit": "week", "cutoff_day_of_month": 5}, {"cutoff_day_of_month": ["applies to monthly intervals only"]}),
    ({"order_interval_unit": "day", "cutoff_day_of_month": 5, "cutoff_day_of_week": 1},
     {"cutoff_day_of_month": ["applies to monthly intervals only"], "cutoff_day_of_week": ["applies to weekly intervals only"]}),
    ({"expire_after_specific_number_of_charges": 0}, {"expire_after_specific_number_of_charges": ["must be at least 1"]}),
    ({"quantity": 0}, {"quantity": ["must be from 1 to 1000000"]}),
    ({"price": "1.234"}, {"price": ["has too many decimal places for USD (at most 2)"]}),
    ({"status": "cancelled"}, {"status": ["a new subscription is active"]}),
])
def test_create_rules_answer_422_naming_the_field(vapi, values, errors):
    response = vapi.post("/subscriptions", json=sub_body(vapi, make_address(vapi).id, **values))
    assert errors_of(response) == errors


def _stated_ranges(version: str, method: str, path: str) -> dict[str, tuple[int, int]]:
    """The integer ranges the OpenAPI document states for a body's fields."""
    from rebill.api import openapi
    document = openapi.document(version)
    schema = document["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    found = {}
    for name, field in schema["properties"].items():
        field = next((f for f in field.get("anyOf", [field]) if "minimum" in f), field)
        if "minimum" in field and "maximum" in field and field["maximum"] < 2**63 - 1:
            found[name] = (field["minimum"], field["maximum"])
    return found


def test_the_ranges_the_document_states_are_the_ones_a_create_keeps(api):
    """Found by an audit: the document said nothing of a quantity's or a cadence's range, which
    the domain checks (a client's validator took a quantity of 0). Each stated range: its ends
    are taken, one past either end answers 422 naming the field."""
    ranges = _stated_ranges("2021-11", "post", "/subscriptions")
    assert set(ranges) == {"quantity", "charge_interval_frequency", "order_interval_frequency",
                           "order_day_of_month", "order_day_of_week", "cutoff_day_of_month",
                           "cutoff_day_of_week", "expire_after_specific_number_of_charges"}
    unit_of = {"order_day_of_week": "week", "cutoff_day_of_week": "week"}
    address = make_address(api)
    for name, (low, high) in ranges.items():
        for value, taken in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
            values = {name: value, "order_interval_unit": unit_of.get(name, "month")}
            if name.endswith("_frequency"):
                values.update(charge_interval_frequency=value, order_interval_frequency=value)
            response = api.post("/subscriptions", json=sub_body(api, address.id, **values))
            if taken:
                assert response.status_code == 201, (name, value, response.text)
            else:
                assert name in errors_of(response), (name, value)
    # A one-time item and a checkout's line state the quantity's range alike (a line's is checked
    # by tests/api/test_checkouts.py: "must be from 1 to 1000000").
    from rebill.api import openapi
    checkout = openapi.document("2021-11")["paths"]["/checkouts"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["properties"]["line_items"]["items"]["properties"]["quantity"]
    assert (checkout["minimum"], checkout["maximum"]) == ranges["quantity"]
    assert _stated_ranges("2021-11", "post", "/onetimes")["quantity"] == ranges["quantity"]
    assert _stated_ranges("2021-01", "post", "/addresses/{address_id}/onetimes")["quantity"] == ranges["quantity"]
    assert _stated_ranges("2021-01", "post", "/subscriptions")["quantity"] == ranges["quantity"]


def test_a_create_names_every_rule_its_values_break_at_once(vapi):
    """Decisions §2.3 (found by an audit: a bad quantity, unit and status took three requests)."""
    body = sub_body(vapi, make_address(vapi).id, quantity=0, order_interval_unit="year", status="cancelled",
                    price="1.234")
    assert errors_of(vapi.post("/subscriptions", json=body)) == {
        "quantity": ["must be from 1 to 1000000"], "order_interval_unit": ["must be one of: day, week, month"],
        "status": ["a new subscription is active"], "price": ["has too many decimal places for USD (at most 2)"]}


def test_a_prepaid_subscription_charges_a_multiple_of_the_order_interval(vapi):
    sub = create_sub(vapi, charge_interval_frequency=3, order_interval_frequency=1)
    assert sub["is_prepaid"] is True
    assert sub["charge_interval_frequency"] == (3 if vapi.version == V11 else "3")


def test_a_next_date_in_the_past_answers_422_and_today_is_allowed(vapi):
    address = make_address(vapi)
    past = vapi.post("/subscriptions", json=sub_body(vapi, address.id, next_charge_scheduled_at=day(vapi, -1)))
    assert errors_of(past) == {"next_charge_scheduled_at": ["must not be in the past"]}
    sub = create_sub(vapi, address, next_charge_scheduled_at=day(vapi, 0))
    assert sub["next_charge_scheduled_at"] == next_date(vapi.version, day(vapi, 0))


@pytest.mark.parametrize("cadence,days", [({"order_interval_unit": "day", "charge_interval_frequency": 3,
                                            "order_interval_frequency": 3}, 3),
                                           ({"order_interval_unit": "week", "charge_interval_frequency": 2,
                                             "order_interval_frequency": 2}, 14)])
def test_without_a_next_date_the_first_charge_is_one_charge_interval_from_today(api, cadence, days):
    sub = create_sub(api, next_charge_scheduled_at=None, **cadence)
    assert sub["next_charge_scheduled_at"] == day(api, days)


def test_the_default_monthly_date_falls_on_the_order_day_of_month(api):
    sub = create_sub(api, next_charge_scheduled_at=None, order_day_of_month=28)
    when = date.fromisoformat(sub["next_charge_scheduled_at"])
    assert when.day == 28 and today(api) + timedelta(days=27) <= when <= today(api) + timedelta(days=62)


def test_the_default_weekly_date_falls_on_the_order_day_of_week(api):
    sub = create_sub(api, next_charge_scheduled_at=None, order_interval_unit="week", order_day_of_week=4)
    when = date.fromisoformat(sub["next_charge_scheduled_at"])
    assert when.weekday() == 4 and today(api) + timedelta(days=7) <= when < today(api) + timedelta(days=14)
    assert sub["order_day_of_week"] == 4


# Create: bad input -----------------------------------------------------------------------------

def test_an_empty_body_names_the_address(vapi):
    assert errors_of(vapi.post("/subscriptions", json={})) == {"address_id": ["is required"]}


def test_wrongly_typed_fields_are_all_named_at_once(vapi):
    response = vapi.post("/subscriptions", json={
        "address_id": "x", "price": True, "quantity": "a", "properties": 3, "product_title": 5,
        "order_interval_frequency": "x", "next_charge_scheduled_at": "nope", "is_skippable": "maybe",
        "analytics_data": [], "plan_id": "p"})
    assert errors_of(response) == {
        "address_id": ["must be an integer"], "price": ["must be a decimal number as a string"],
        "quantity": ["must be an integer"], "properties": ["must be an array"], "product_title": ["must be a string"],
        "order_interval_frequency": ["must be an integer"], "next_charge_scheduled_at": ["must be a date (YYYY-MM-DD)"],
        "is_skippable": ["must be a boolean"], "analytics_data": ["must be an object"], "plan_id": ["must be an integer"]}


def test_a_property_without_a_name_is_named_by_its_index(api):
    response = api.post("/subscriptions", json=sub_body(api, make_address(api).id, properties=[{"value": "x"}]))
    assert errors_of(response) == {"properties": {"0": {"name": ["is required"]}}}


def test_a_body_that_is_not_an_object_answers_415(api):
    response = api.post("/subscriptions", json=[1])
    assert response.status_code == 415


def test_an_unknown_or_another_stores_address_answers_422(vapi):
    foreign = make_address(vapi.other_store())
    for address_id in (foreign.id, 999_999_999):
        response = vapi.post("/subscriptions", json=sub_body(vapi, address_id))
        assert errors_of(response) == {"address_id": ["address not found"]}
    assert "subscription/created" not in topics(vapi)


# Get ---------------------------------------------------------------------------------------------

def test_get_of_an_unknown_or_another_stores_subscription_answers_404(vapi):
    foreign = make_subscription(vapi.other_store())
    for ident in (foreign.id, 999_999_999):
        response = vapi.get(f"/subscriptions/{ident}")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_a_onetime_item_is_not_a_subscription(api):
    from tests.builders import make_onetime
    onetime = make_onetime(api)
    assert api.get(f"/subscriptions/{onetime.id}").status_code == 404


def test_get_with_include_embeds_the_address_and_the_customer(api):
    sub = make_subscription(api)
    record = api.get(f"/subscriptions/{sub.id}", params={"include": "address,customer"}).json()["subscription"]
    assert record["include"]["address"]["id"] == sub.address_id
    assert record["include"]["customer"]["id"] == sub.customer_id


# Delete ------------------------------------------------------------------------------------------

def test_delete_answers_204_in_2021_11_and_200_empty_in_2021_01(api):
    for version, status in ((V11, 204), (V01, 200)):
        address = make_address(api)
        sub = create_sub(api, address, version=version)
        response = api.delete(f"/subscriptions/{sub['id']}", version=version)
        assert response.status_code == status
        assert (response.content == b"") if version == V11 else (response.json() == {})
        assert api.get(f"/subscriptions/{sub['id']}", version=version).status_code == 404
        assert charges_of(api, address.id) == []
        assert topics(api)[-3:] == ["subscription/deleted", "customer/deactivated", "charge/deleted"]


def test_delete_of_an_unknown_or_another_stores_subscription_answers_404(vapi):
    foreign = make_subscription(vapi.other_store())
    for ident in (foreign.id, 999_999_999):
        response = vapi.delete(f"/subscriptions/{ident}")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


# Scopes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,scope", [
    ("GET", "/subscriptions", "read_subscriptions"), ("GET", "/subscriptions/1", "read_subscriptions"),
    ("POST", "/subscriptions", "write_subscriptions"), ("PUT", "/subscriptions/1", "write_subscriptions"),
    ("DELETE", "/subscriptions/1", "write_subscriptions"),
    ("POST", "/subscriptions/1/cancel", "write_subscriptions"),
    ("POST", "/subscriptions/1/activate", "write_subscriptions"),
    ("POST", "/subscriptions/1/set_next_charge_date", "write_subscriptions"),
    ("POST", "/subscriptions/1/change_address", "write_subscriptions"),
])
def test_a_token_without_the_scope_answers_403(vapi, method, path, scope):
    token = vapi.token_with("read_customers") if scope.startswith("read") else vapi.token_with("read_subscriptions")
    response = vapi.request(method, path, json={} if method in ("POST", "PUT") else None, token=token)
    assert response.status_code == 403
    assert response.json() == {"errors": f"This token lacks the scope this endpoint needs: {scope}"}


def test_write_subscriptions_grants_reading_them(api):
    sub = make_subscription(api)
    token = api.token_with("write_subscriptions")
    assert api.get(f"/subscriptions/{sub.id}", token=token).status_code == 200


def test_count_and_bulk_answer_501_in_2021_11(api):
    for method, path in (("GET", "/subscriptions/count"), ("POST", "/addresses/1/subscriptions-bulk"),
                         ("PUT", "/addresses/1/subscriptions-bulk"), ("DELETE", "/addresses/1/subscriptions-bulk")):
        response = api.request(method, path, json={} if method != "GET" else None, version=V11)
        assert (response.status_code, response.json()) == (501, NOT_IN_VERSION), (method, path)


@pytest.mark.parametrize("version,field,value,expected", [
    ("2021-11", "external_product_id", {"ecommerce": "7001"}, "7001"),
    ("2021-11", "external_product_id", "7001", "7001"),
    ("2021-11", "external_product_id", 7001, "7001"),
    ("2021-01", "platform_product_id", 7001, 7001),
    ("2021-01", "platform_product_id", "abc-1", "abc-1"),
])
def test_an_external_product_id_is_taken_as_a_string_a_number_or_nested(api, version, field, value, expected):
    address = make_address(api)
    body = {"address_id": address.id, "product_title": "Tea", "price": "4.00", field: value,
            "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}
    response = api.post("/subscriptions", json=body, version=version)
    assert response.status_code in (200, 201), response.text
    shown = response.json()["subscription"][field]
    assert (shown["ecommerce"] if isinstance(shown, dict) else shown) == expected


@pytest.mark.parametrize("value", [True, [], {"ecommerce": "1", "other": 2}, ""])
def test_an_external_product_id_of_another_type_answers_422(api, value):
    address = make_address(api)
    body = {"address_id": address.id, "product_title": "Tea", "price": "4.00", "external_product_id": value,
            "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}
    response = api.post("/subscriptions", json=body)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["external_product_id"]


def test_a_cutoff_day_kept_before_its_unit_rule_does_not_refuse_an_update_of_other_fields(api):
    """Found by a review: a weekly subscription stored with a `cutoff_day_of_month` (taken
    before cutoff days were held to their unit) answered every cadence update 422 naming that
    field, which the caller never sent. Held to its unit only when sent."""
    from sqlalchemy import update

    from rebill.models import purchase_items
    sub = create_sub(api, order_interval_unit="week")
    with api.db.write() as conn:
        conn.execute(update(purchase_items).where(purchase_items.c.id == sub["id"]).values(cutoff_day_of_month=5))
    changed = api.put(f"/subscriptions/{sub['id']}", json={"expire_after_specific_number_of_charges": 12})
    assert changed.status_code == 200, changed.text
    sent = api.put(f"/subscriptions/{sub['id']}", json={"cutoff_day_of_month": 6})
    assert errors_of(sent) == {"cutoff_day_of_month": ["applies to monthly intervals only"]}
