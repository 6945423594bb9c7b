"""Contract tests of the checkout endpoints (spec 02 Checkouts, decisions §7.3, §7.7, issue 15;
docs/api-choices.md, Checkouts): every endpoint in both versions (2021-11 per §7.7.14), lines
priced from the catalog, partial shipping, discount codes, the store's shipping and tax rates to
the cent, the charge (success, decline, a completed checkout, a payment whose answer was lost),
what a paid checkout makes, tenancy, scopes, a platform S store, and every error body."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import func, select

from rebill.domain.catalog import service as catalog
from rebill.domain.catalog.model import ProductCreate, VariantInput
from rebill.domain.checkout import charge as checkout_charge
from rebill.domain.schedule.dates import add_months
from rebill.domain.unit import Unit
from rebill.models import checkouts, customers, events, orders, sandbox_payments
from tests.api.test_charges_totals import set_rates
from tests.api.test_real_fields import ARR, BOOL, INT, NULL, OBJ, STR, field_problems
from tests.builders import key_taken_over, make_customer, make_discount

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
CHARGE = {"payment_processor": "stripe", "payment_token": "tok_visa"}
SHIPPING = {"address1": "101 Market St", "city": "San Francisco", "province": "CA", "zip": "94105",
            "country_code": "US", "first_name": "Ada", "last_name": "Lovelace", "phone": "+14155550100"}
MONTHLY = {"order_interval_unit": "month", "order_interval_frequency": 1}
SUB_LINE = {"product_id": "100", "variant_id": "101", "quantity": 2, **MONTHLY}
ONE_LINE = {"product_id": "200", "variant_id": "201", "quantity": 1}
# NOTE: spec 01 Versioning 4: 2021-11 says `order_attributes` where 2021-01 says `note_attributes`.
ATTRIBUTES = {V01: "note_attributes", V11: "order_attributes"}


# Builders ----------------------------------------------------------------------------------

def stock(api: Any) -> None:
    """The catalog the checkouts buy from: coffee (12.50, 250 g), a mug (8.00), a gift card
    with no price, and a download that ships nowhere."""
    products = [
        ProductCreate(external_product_id="100", title="Coffee", handle="coffee", vendor="Roaster",
                      product_type="Beans", variants=[VariantInput(external_variant_id="101", title="250 g",
                                                                   price=Decimal("12.50"), sku="COF-250", grams=250)]),
        ProductCreate(external_product_id="200", title="Mug",
                      variants=[VariantInput(external_variant_id="201", title="Blue", price=Decimal("8.00"))]),
        ProductCreate(external_product_id="300", title="Gift card", variants=[VariantInput(external_variant_id="301")]),
        ProductCreate(external_product_id="400", title="E-book", requires_shipping=False,
                      variants=[VariantInput(external_variant_id="401", price=Decimal("5.00"))]),
    ]
    with api.db.write() as conn:
        for product in products:
            catalog.create_product(Unit(conn, api.store, api.clock.now()), product)


def priced_store(api: Any, **rates: Any) -> None:
    """US shipping 5.00 and 7.25 % US tax (``rates`` overrides), and the catalog."""
    stock(api)
    set_rates(api, shipping=rates.get("shipping", [{"code": "std", "title": "Standard", "price": "5.00",
                                                   "country_codes": ["US"]}]),
              tax=rates.get("tax", [{"country_code": "US", "rate": "0.0725", "title": "Sales tax"}]),
              taxes_included=rates.get("taxes_included"))


def create(api: Any, version: str | None = None, **body: Any) -> dict[str, Any]:
    body.setdefault("line_items", [SUB_LINE, ONE_LINE])
    response = api.post("/checkouts", json=body, version=version)
    assert response.status_code in (200, 201), response.text
    return response.json()["checkout"]


def ready(api: Any, **body: Any) -> dict[str, Any]:
    """A checkout that can be charged: an e-mail, both lines and a complete US address."""
    return create(api, email=body.pop("email", "ada@example.com"), shipping_address=dict(SHIPPING), **body)


def count(api: Any, table: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(table).where(table.c.store_id == api.store.id)).scalar()


def topics(api: Any, since: int = 0) -> list[str]:
    with api.db.read() as conn:
        return list(conn.execute(select(events.c.topic).where(events.c.store_id == api.store.id,
                                                              events.c.id > since).order_by(events.c.id)).scalars())


def last_event(api: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.coalesce(func.max(events.c.id), 0))
                            .where(events.c.store_id == api.store.id)).scalar()


def money(body: dict[str, Any]) -> tuple[str, str, str]:
    return body["subtotal_price"], body["total_tax"], body["total_price"]


# Create and read ---------------------------------------------------------------------------

def test_create_prices_each_line_from_the_catalog_with_the_stores_shipping_and_tax_to_the_cent(vapi):
    priced_store(vapi)
    response = vapi.post("/checkouts", json={"line_items": [SUB_LINE, ONE_LINE], "email": "ada@example.com",
                                             "shipping_address": SHIPPING})
    assert response.status_code == (201 if vapi.version == V11 else 200)
    body = response.json()["checkout"]
    assert len(body["token"]) == 32
    # 2 x 12.50 + 8.00; tax 7.25 % per line (1.8125 -> 1.81, 0.58); shipping 5.00 untaxed.
    assert money(body) == ("33.00", "2.39", "40.39")
    assert body["shipping_line"] == [{"code": "std", "price": "5.00", "title": "Standard"}]
    assert body["shipping_rate"] == "Standard"
    assert body["tax_lines"] == [{"price": "2.39", "rate": "0.0725", "title": "Sales tax"}]
    assert body["taxes_included"] is False and body["requires_shipping"] is True
    assert body["applied_discount"] is None and body["completed_at"] is None and body["charge_id"] is None
    sub, one = body["line_items"]
    assert (sub["price"], sub["line_price"], sub["original_price"], sub["recurring_price"]) == \
        ("12.50", "25.00", "12.50", "12.50")
    assert (sub["title"], sub["variant_title"], sub["sku"], sub["grams"], sub["handle"], sub["vendor"]) == \
        ("Coffee", "250 g", "COF-250", 250, "coffee", "Roaster")
    assert (sub["order_interval_unit"], sub["order_interval_frequency"], sub["charge_interval_frequency"]) == \
        ("month", 1, 1)  # NOTE: decisions §7.7.2, the charge frequency defaults to the order's
    assert (one["price"], one["line_price"], one["recurring_price"], one["order_interval_unit"]) == \
        ("8.00", "8.00", None, None)
    assert body["shipping_address_validations"] == {"country_is_supported": True, "ups": True}
    if vapi.version == V11:
        assert (sub["type"], one["type"]) == ("subscription", "onetime")
        assert (sub["product_id"], sub["external_product_id"], sub["external_variant_id"]) == \
            ("100", {"ecommerce": "100"}, {"ecommerce": "101"})
        assert body["external_customer_id"] == {"ecommerce": None}
        assert body["created_at"].endswith("+00:00") and "country" not in body["shipping_address"]
    else:
        assert (sub["type"], one["type"]) == ("SUBSCRIPTION", "ONETIME")
        assert (sub["product_id"], sub["variant_id"], sub["platform_product_id"]) == (100, 101, 100)
        assert "external_product_id" not in sub and body["external_customer_id"] is None
        assert not body["created_at"].endswith("+00:00")
        assert body["shipping_address"]["country"] == "United States"


# NOTE: 03-real-fields "checkout (2021-01)", schema only (types ours); where spec 02 and 03
# disagree the seeds win: `shipping_line` is an array and `shipping_rate` a string.
CHECKOUT_FIELDS = [
    ("analytics_data", {OBJ}), ("analytics_data.utm_params", {ARR}), ("applied_discount", {OBJ, NULL}),
    ("billing_address", {OBJ, NULL}), ("buyer_accepts_marketing", {BOOL}), ("charge_id", {INT, NULL}),
    ("completed_at", {"datetime-naive", NULL}), ("created_at", {"datetime-naive"}), ("currency", {STR}),
    ("discount_code", {STR, NULL}), ("email", {STR, NULL}), ("external_checkout_id", {STR, NULL}),
    ("external_checkout_source", {STR, NULL}), ("external_customer_id", {STR, NULL}), ("line_items", {ARR}),
    ("line_items[].grams", {INT, NULL}), ("line_items[].images", {OBJ}), ("line_items[].images.large", {STR, NULL}),
    ("line_items[].images.medium", {STR, NULL}), ("line_items[].images.original", {STR, NULL}),
    ("line_items[].images.small", {STR, NULL}), ("line_items[].platform_product_id", {INT, STR}),
    ("line_items[].platform_variant_id", {INT, STR}), ("line_items[].price", {STR}),
    ("line_items[].properties", {ARR}), ("line_items[].quantity", {INT}), ("line_items[].sku", {STR, NULL}),
    ("line_items[].subscription_id", {INT, NULL}), ("line_items[].title", {STR}),
    ("line_items[].variant_title", {STR, NULL}), ("note", {STR, NULL}), ("note_attributes", {ARR}),
    ("note_attributes[].name", {STR}), ("note_attributes[].value", {STR, NULL}), ("payment_processor", {STR, NULL}),
    ("payment_processor_customer_id", {STR, NULL}), ("payment_processor_transaction_id", {STR, NULL}),
    ("phone", {STR, NULL}), ("requires_shipping", {BOOL}), ("shipping_address", {OBJ, NULL}),
    *[(f"{a}.{f}", {STR, NULL}) for a in ("billing_address", "shipping_address")
      for f in ("address1", "address2", "city", "company", "country", "first_name", "last_name", "phone", "province",
                "zip")],
    ("shipping_address_validations", {OBJ, NULL}), ("shipping_address_validations.country_is_supported", {BOOL}),
    ("shipping_address_validations.ups", {BOOL}), ("shipping_line", {ARR}), ("shipping_line[].code", {STR, NULL}),
    ("shipping_line[].price", {STR}), ("shipping_line[].title", {STR, NULL}), ("shipping_rate", {STR, NULL}),
    ("subtotal_price", {STR}), ("tax_lines", {ARR}), ("tax_lines[].price", {STR}), ("tax_lines[].rate", {STR}),
    ("tax_lines[].title", {STR}), ("taxes_included", {BOOL}), ("token", {STR}), ("total_price", {STR}),
    ("total_tax", {STR}), ("updated_at", {"datetime-naive"}),
]
# Spec 02's fields of a line that 03 does not list.
LINE_FIELDS = ("charge_interval_frequency", "cutoff_day_of_month", "cutoff_day_of_week",
               "expire_after_specific_number_of_charges", "first_recurring_charge_delay", "fulfillment_service",
               "grams",
               "handle", "image", "line_price", "order_day_of_month", "order_day_of_week", "order_interval_frequency",
               "order_interval_unit", "order_interval_unit_type", "original_price", "price", "product_id",
               "product_type", "properties", "quantity", "recurring_price", "requires_shipping", "sku", "tax_code",
               "taxable", "title", "type", "variant_id", "variant_title", "vendor")


def test_a_2021_01_checkout_renders_every_field_of_spec_03_with_its_type(api):
    priced_store(api)
    discount = make_discount(api, code="TENOFF")
    body = ready(api, version=V01, discount_code="TENOFF", billing_address=dict(SHIPPING),
                 note_attributes=[{"name": "gift", "value": "yes"}], note="Leave at the door")
    assert discount and field_problems(body, CHECKOUT_FIELDS) == []
    assert set(LINE_FIELDS) <= set(body["line_items"][0])
    assert set(body["applied_discount"]) == {"amount", "applicable", "non_applicable_reason", "value", "value_type"}


def test_the_order_attributes_carry_each_versions_name_both_ways(api):
    # Found by a cross-version audit: 2021-11 showed and took `note_attributes`, and dropped the
    # `order_attributes` its clients send.
    priced_store(api)
    made = create(api, version=V01, note_attributes=[{"name": "gift", "value": "yes"}])
    token = made["token"]
    assert made["note_attributes"] == [{"name": "gift", "value": "yes"}] and "order_attributes" not in made
    shown = api.get(f"/checkouts/{token}", version=V11).json()["checkout"]
    assert shown["order_attributes"] == [{"name": "gift", "value": "yes"}] and "note_attributes" not in shown
    updated = api.put(f"/checkouts/{token}", json={"order_attributes": [{"name": "wrap", "value": "no"}]}, version=V11)
    assert updated.status_code == 200, updated.text
    # The event log (2021-11) names the field in 2021-11 too (found by a review).
    [event] = api.get("/events", params={"object_type": "checkout", "verb": "updated"}, version=V11).json()["events"]
    assert event["updated_attributes"] == ["order_attributes"]
    assert api.get(f"/checkouts/{token}", version=V01).json()["checkout"]["note_attributes"] == [
        {"name": "wrap", "value": "no"}]
    # Each version names its own field in errors, and ignores the other's name like any unknown field.
    for version in (V01, V11):
        bad = api.put(f"/checkouts/{token}", json={ATTRIBUTES[version]: "wrap"}, version=version)
        assert bad.status_code == 422 and list(bad.json()["errors"]) == [ATTRIBUTES[version]]
        other = ATTRIBUTES[V11 if version == V01 else V01]
        assert api.put(f"/checkouts/{token}", json={other: []}, version=version).status_code == 200
    assert api.get(f"/checkouts/{token}", version=V11).json()["checkout"]["order_attributes"] == [
        {"name": "wrap", "value": "no"}]
    made = create(api, version=V11, order_attributes=[{"name": "x", "value": "y"}])
    assert made["order_attributes"] == [{"name": "x", "value": "y"}]


def test_get_answers_the_checkout_in_the_callers_version(vapi):
    priced_store(vapi)
    made = create(vapi, version=V11, email="ada@example.com")
    response = vapi.get(f"/checkouts/{made['token']}")
    assert response.status_code == 200
    body = response.json()["checkout"]
    assert body["token"] == made["token"] and body["email"] == "ada@example.com"
    assert (body["line_items"][0]["type"] == "subscription") is (vapi.version == V11)


@pytest.mark.parametrize("path", ["/checkouts/{}", "/checkouts/{}/shipping_rates"])
def test_unknown_and_other_stores_tokens_answer_404(vapi, path):
    priced_store(vapi)
    other = vapi.other_store()
    stock(other)
    theirs = create(other)["token"]
    for token in (theirs, "0" * 32):
        assert (vapi.get(path.format(token)).status_code, vapi.get(path.format(token)).json()) == (404, NOT_FOUND)
    assert vapi.put(f"/checkouts/{theirs}", json={"note": "x"}).json() == NOT_FOUND
    assert vapi.post(f"/checkouts/{theirs}/charge", json=CHARGE).status_code == 404
    # A token that is none of ours (another form) matches no route.
    assert vapi.get("/checkouts/not%20a%20token").status_code == 404
    assert vapi.get("/checkouts/" + "a" * 65).status_code == 404


# Bad input ---------------------------------------------------------------------------------

def test_missing_and_wrongly_typed_fields_are_named_all_at_once(vapi):
    priced_store(vapi)
    assert vapi.post("/checkouts", json={}).json() == {"errors": {"line_items": ["is required"]}}
    response = vapi.post("/checkouts", json={
        "line_items": "coffee", "email": "nope", "currency": "US", "buyer_accepts_marketing": "yes",
        "shipping_address": [], "note": 5, "analytics_data": {"utm_params": "x"}})
    assert response.status_code == 422
    assert response.json() == {"errors": {
        "line_items": ["must be an array"], "email": ["is invalid"], "currency": ["must be a 3-letter currency code"],
        "buyer_accepts_marketing": ["must be a boolean"], "shipping_address": ["must be an object"],
        "note": ["must be a string"]}}
    response = vapi.post("/checkouts", json={"line_items": [{}, {"product_id": "100", "variant_id": "101",
                                                                 "quantity": "two"}]})
    assert response.json() == {"errors": {"line_items": {
        "0": {"product_id": ["is required"], "variant_id": ["is required"], "quantity": ["is required"]},
        "1": {"quantity": ["must be an integer"]}}}}


def test_an_unknown_product_or_variant_is_named_on_its_line(vapi):
    priced_store(vapi)
    response = vapi.post("/checkouts", json={"line_items": [
        ONE_LINE, {"product_id": "999", "variant_id": "1", "quantity": 1},
        {"product_id": "100", "variant_id": "999", "quantity": 1},
        {"product_id": "300", "variant_id": "301", "quantity": 1},
        {"product_id": "200", "variant_id": "201", "quantity": 0}]})
    assert response.status_code == 422
    assert response.json() == {"errors": {"line_items": {
        "1": {"product_id": ["not found in the catalog"]}, "2": {"variant_id": ["not found in the catalog"]},
        "3": {"variant_id": ["has no price in the catalog"]}, "4": {"quantity": ["must be from 1 to 1000000"]}}}}
    assert count(vapi, checkouts) == 0


def test_a_subscription_lines_cadence_is_checked(vapi):
    priced_store(vapi)
    response = vapi.post("/checkouts", json={"line_items": [
        {**SUB_LINE, "order_interval_unit": "year"},
        {**SUB_LINE, "charge_interval_frequency": 3, "order_interval_frequency": 2},
        {**SUB_LINE, "first_recurring_charge_delay": -1},
        # A line that has the two is a subscription line whatever they say (decisions §7.7.2;
        # found by an audit: a frequency of 0 made a one-time line).
        {**SUB_LINE, "order_interval_frequency": 0}]})
    assert response.json() == {"errors": {"line_items": {
        "0": {"order_interval_unit": ["must be one of: day, week, month"]},
        "1": {"charge_interval_frequency": ["must equal order_interval_frequency or be a larger multiple of it "
                                            "(prepaid)"]},
        "2": {"first_recurring_charge_delay": ["must be from 0 to 3650 (days)"]},
        "3": {"order_interval_frequency": ["must be from 1 to 1000"]}}}}


def test_a_shipping_address_without_partial_shipping_must_be_complete(vapi):
    priced_store(vapi)
    response = vapi.post("/checkouts", json={"line_items": [ONE_LINE],
                                             "shipping_address": {"country_code": "US", "zip": "94105"}})
    assert response.status_code == 422
    assert response.json() == {"errors": {"shipping_address": {
        "address1": ["is required"], "city": ["is required"], "first_name": ["is required"],
        "last_name": ["is required"]}}}
    # A complete one obeys the address rules (decisions §4): the country, the province, the zip.
    response = vapi.post("/checkouts", json={"line_items": [ONE_LINE], "shipping_address": {
        **SHIPPING, "country_code": "NL", "province": None, "zip": "1011 AB"}})
    assert response.json() == {"errors": {"shipping_address": {
        "country_code": ["is not a country the store ships to"]}}}


def test_with_partial_shipping_the_country_and_zip_are_enough(vapi):
    priced_store(vapi)
    body = create(vapi, line_items=[ONE_LINE], partial_shipping=True,
                  shipping_address={"country_code": "US", "zip": "94105"})
    assert body["shipping_address"]["zip"] == "94105" and body["shipping_address"]["address1"] is None
    assert body["shipping_address_validations"] == {"country_is_supported": True, "ups": False}
    assert body["shipping_line"] == [{"code": "std", "price": "5.00", "title": "Standard"}]
    assert money(body) == ("8.00", "0.58", "13.58")
    # A country the store does not ship to is told, not refused, until the charge.
    body = create(vapi, line_items=[ONE_LINE], partial_shipping=True,
                  shipping_address={"country_code": "BR", "zip": "01000-000"})
    assert body["shipping_address_validations"] == {"country_is_supported": False, "ups": False}
    response = vapi.post("/checkouts", json={"line_items": [ONE_LINE], "partial_shipping": True,
                                             "shipping_address": {"country_code": "US", "zip": "9410"}})
    assert response.json() == {"errors": {"shipping_address": {"zip": ["is not a valid United States zip code"]}}}
    # Found by an audit: a well-formed code no country has was told it "must be a 2-letter code".
    response = vapi.post("/checkouts", json={"line_items": [ONE_LINE], "partial_shipping": True,
                                             "shipping_address": {"country_code": "XX", "zip": "1"}})
    assert response.json() == {"errors": {"shipping_address": {"country_code": ["is not a valid country code"]}}}


def test_an_unknown_code_or_a_currency_the_store_does_not_present_in_is_422(vapi):
    priced_store(vapi)
    response = vapi.post("/checkouts", json={"line_items": [ONE_LINE], "discount_code": "NOPE", "currency": "EUR"})
    assert response.json() == {"errors": {"discount_code": ["discount not found"],
                                          "currency": ["is not a currency enabled for the store"]}}


# Update ------------------------------------------------------------------------------------

def test_an_update_completes_a_partial_address_replaces_the_lines_and_prices_again(vapi):
    priced_store(vapi)
    made = create(vapi, line_items=[ONE_LINE], partial_shipping=True,
                  shipping_address={"country_code": "US", "zip": "94105"})
    since = last_event(vapi)
    response = vapi.put(f"/checkouts/{made['token']}", json={
        "email": "ada@example.com", "line_items": [SUB_LINE],
        "shipping_address": {k: v for k, v in SHIPPING.items() if k not in ("country_code", "zip")}})
    assert response.status_code == 200, response.text
    body = response.json()["checkout"]
    assert body["shipping_address"]["address1"] == "101 Market St" and body["shipping_address"]["zip"] == "94105"
    assert body["shipping_address"]["province"] == "California"
    assert [line["product_id"] for line in body["line_items"]] == (["100"] if vapi.version == V11 else [100])
    assert money(body) == ("25.00", "1.81", "31.81")
    assert topics(vapi, since) == ["checkout/updated"]
    with vapi.db.read() as conn:
        changed = conn.execute(select(events.c.updated_attributes).where(events.c.id > since,
                                                                        events.c.store_id == vapi.store.id)).scalar()
    assert set(changed) >= {"email", "line_items", "shipping_address", "subtotal_price", "total_price",
                            "shipping_address_validations"}
    # The same body again changes nothing and records nothing.
    again = vapi.put(f"/checkouts/{made['token']}", json={"email": "ada@example.com"})
    assert again.json()["checkout"]["updated_at"] == body["updated_at"] and topics(vapi, since) == ["checkout/updated"]


def test_a_new_checkout_sent_back_as_shown_is_no_change(vapi):
    """Found by an audit: its shown analytics_data ({"utm_params": []} of none) sent back was a
    change, with a checkout/updated event and a new updated_at."""
    priced_store(vapi)
    made = create(vapi, email="echo@example.com")
    shown = vapi.get(f"/checkouts/{made['token']}").json()["checkout"]
    since = last_event(vapi)
    vapi.clock.advance(seconds=1)
    reply = vapi.put(f"/checkouts/{made['token']}", json=shown)
    assert reply.status_code == 200, reply.text
    assert reply.json()["checkout"]["updated_at"] == shown["updated_at"] and topics(vapi, since) == []


def test_an_update_names_its_bad_fields_and_changes_nothing(vapi):
    priced_store(vapi)
    made = create(vapi)
    response = vapi.put(f"/checkouts/{made['token']}", json={"line_items": [{"product_id": "999", "variant_id": "1",
                                                                             "quantity": 1}], "email": "x"})
    assert response.json() == {"errors": {"email": ["is invalid"]}}
    response = vapi.put(f"/checkouts/{made['token']}", json={"line_items": [{"product_id": "999", "variant_id": "1",
                                                                             "quantity": 1}]})
    assert response.json() == {"errors": {"line_items": {"0": {"product_id": ["not found in the catalog"]}}}}
    assert vapi.get(f"/checkouts/{made['token']}").json()["checkout"]["total_price"] == made["total_price"]


# Discount codes ----------------------------------------------------------------------------

def test_a_code_that_applies_takes_its_share_before_tax(vapi):
    priced_store(vapi)
    make_discount(vapi, code="TENOFF", value="10")
    body = ready(vapi, discount_code="tenoff")
    assert body["discount_code"] == "TENOFF"
    assert body["applied_discount"] == {"amount": "3.30", "applicable": True, "non_applicable_reason": None,
                                        "value": "10", "value_type": "percentage"}
    # 33.00 - 3.30 (2.50 and 0.80 by line) + 5.00 + tax on 22.50 and 7.20 (1.63 + 0.52).
    assert money(body) == ("33.00", "2.15", "36.85")
    removed = vapi.put(f"/checkouts/{body['token']}", json={"discount_code": None}).json()["checkout"]
    assert removed["applied_discount"] is None and removed["discount_code"] is None
    assert money(removed) == ("33.00", "2.39", "40.39")


@pytest.mark.parametrize("overrides, reason", [
    ({"status": "disabled"}, "discount is disabled"),
    ({"applies_to_product_type": "ONETIME", "applies_to_id": "100", "applies_to_resource": "platform_product"},
     "discount applies to no line of this checkout"),
    ({"prerequisite_subtotal_min": Decimal("50")}, "the checkout's subtotal 33.00 is below the discount's minimum 50.00"),
    ({"channel_settings": {"checkout_page": {"can_apply": False}}},
     "discount cannot be applied through the checkout page"),
])
def test_a_code_that_does_not_apply_is_kept_and_says_why(api, overrides, reason):
    priced_store(api)
    make_discount(api, code="NOPE10", **overrides)
    body = ready(api, discount_code="NOPE10")
    assert body["discount_code"] == "NOPE10"
    assert body["applied_discount"] == {"amount": "0.00", "applicable": False, "non_applicable_reason": reason,
                                        "value": "10", "value_type": "percentage"}
    assert money(body) == ("33.00", "2.39", "40.39")


@pytest.mark.parametrize("lines, overrides, reason", [
    # A shipping code for subscriptions only, on a one-time line that ships (found by a review:
    # it said the subtotal 0 was below a minimum of None).
    ([ONE_LINE], {"applies_to_product_type": "SUBSCRIPTION"}, "discount applies to no line of this checkout"),
    # Nothing to ship: no shipping to take off, and the code is not spent.
    ([{"product_id": "400", "variant_id": "401", "quantity": 1}], {}, "the checkout has nothing to ship"),
    # Shipping that costs nothing (a free rate): nothing to take off (found by a review: it
    # showed the code applicable at 0.00 while its charge took none).
    ([ONE_LINE], {"free_rate": True}, "the checkout has no shipping to take off"),
])
def test_a_shipping_code_that_has_nothing_to_free_says_why(api, lines, overrides, reason):
    overrides = dict(overrides)  # the parameter's dict is shared by both databases' runs
    if overrides.pop("free_rate", False):
        priced_store(api, shipping=[{"code": "free", "title": "Free", "price": "0.00", "country_codes": ["US"]}])
    else:
        priced_store(api)
    make_discount(api, code="SHIPFREE", discount_type="shipping", value="100", **overrides)
    body = ready(api, discount_code="SHIPFREE", line_items=lines)
    assert (body["applied_discount"]["applicable"], body["applied_discount"]["amount"],
            body["applied_discount"]["non_applicable_reason"]) == (False, "0.00", reason)


def test_a_code_for_a_collection_takes_its_share_of_the_collections_products_only(api):
    from tests.api.test_collections import add
    from tests.api.test_collections import create as create_collection
    priced_store(api)
    mugs = create_collection(api, title="Mugs")
    add(api, mugs["id"], "200")
    make_discount(api, code="MUGS", value="50", applies_to_id=str(mugs["id"]),
                  applies_to_resource="platform_collection_id")
    body = ready(api, discount_code="MUGS")
    # Half of the mug's 8.00; the coffee is not in the collection. Tax: 1.81 + 4.00 x 7.25 % (0.29).
    assert body["applied_discount"]["amount"] == "4.00" and body["applied_discount"]["applicable"] is True
    assert money(body) == ("33.00", "2.10", "36.10")


def test_a_once_per_customer_code_is_refused_for_a_customer_who_used_it(api):
    priced_store(api)
    make_discount(api, code="ONCE", once_per_customer=True)
    first = ready(api, email="once@example.com", discount_code="ONCE")
    assert first["applied_discount"]["applicable"] is True
    assert api.post(f"/checkouts/{first['token']}/charge", json=CHARGE).status_code == 200
    second = ready(api, email="ONCE@example.com", discount_code="ONCE")
    assert second["applied_discount"]["non_applicable_reason"] == "discount can be used once per customer"


def test_a_payment_token_that_reads_as_a_card_number_is_refused_and_nothing_is_charged(vapi):
    """A checkout's payment token is kept as its customer's payment method token: a card number
    there is card data stored as a token (spec 02 Customers; found by an audit)."""
    priced_store(vapi)
    checkout = ready(vapi)
    before = count(vapi, orders)
    response = vapi.post(f"/checkouts/{checkout['token']}/charge",
                         json={**CHARGE, "payment_token": "4242 4242 4242 4242"})
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {"payment_token": ["must be a payment processor's token, not card data"]}
    assert count(vapi, orders) == before
    assert vapi.get(f"/checkouts/{checkout['token']}").json()["checkout"]["completed_at"] is None


def _claimed_elsewhere(api, token):
    """The checkout as a concurrent request's live claim holds it (its payment not yet answered)."""
    from sqlalchemy import update as sql_update
    with api.db.write() as conn:
        conn.execute(sql_update(checkouts).where(checkouts.c.token == token)
                     .values(claimed_by="another-request", claimed_at=api.clock.now()))


RULES = {"usage_limit": {"usage_limit": 1}, "once_per_customer": {"once_per_customer": True},
         "first_time": {"first_time_customer_restriction": "customer_must_not_exist_in_service"}}


@pytest.mark.parametrize("limit", list(RULES))
def test_a_code_being_used_by_a_checkout_charged_now_counts_as_used(api, limit):
    """decisions §7.5 across checkouts charged at the same moment (found by audits on
    PostgreSQL: concurrent charges each saw the code unused, or their e-mail's customer unpaid,
    and all took it): the live claim of another checkout with the code counts as a use (and as
    a payment of its e-mail's customer); the charge answers 409 and moves no money; once that
    claim is gone it goes through, as it would have one after the other."""
    priced_store(api)
    make_discount(api, code="HOLD", **RULES[limit])
    email = "first@example.com" if limit == "usage_limit" else "busy@example.com"
    first = ready(api, email=email, discount_code="HOLD")
    second = ready(api, email="busy@example.com", discount_code="HOLD")
    assert second["applied_discount"]["applicable"] is True
    _claimed_elsewhere(api, first["token"])
    payments = count(api, sandbox_payments)
    refused = api.post(f"/checkouts/{second['token']}/charge", json=CHARGE)
    assert refused.status_code == 409, refused.text
    assert count(api, sandbox_payments) == payments
    with api.db.write() as conn:
        from sqlalchemy import update as sql_update
        conn.execute(sql_update(checkouts).where(checkouts.c.token == first["token"])
                     .values(claimed_by=None, claimed_at=None))
    paid = api.post(f"/checkouts/{second['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text


def test_a_stale_claim_with_the_code_still_counts_as_a_use(api):
    """Found by an audit: a checkout whose payment's answer was lost holds a stale claim, and
    will be finished with its code; once stale it no longer counted, another checkout took the
    one-use code, and both were recorded with it (`times_used` 2 of 1)."""
    from rebill.domain.checkout.repository import STALE_AFTER
    priced_store(api)
    make_discount(api, code="STALE1", usage_limit=1)
    first = ready(api, email="first@example.com", discount_code="STALE1")
    second = ready(api, email="second@example.com", discount_code="STALE1")
    _claimed_elsewhere(api, first["token"])
    api.clock.advance(STALE_AFTER * 2)
    refused = api.post(f"/checkouts/{second['token']}/charge", json=CHARGE)
    assert refused.status_code == 409, refused.text


def test_an_authorized_checkout_payment_with_the_code_counts_as_a_use(api):
    """Found by an audit: a one-use code's first checkout was authorized (its capture to come),
    a second checkout then took the code too, and both captures counted it (`times_used` 2 of
    1). The authorized charge carrying the code is a use its capture will count: the second
    checkout is priced without it."""
    from rebill.domain.store import repository as stores
    with api.db.write() as conn:
        stores.update_store(conn, api.store.id, {"plan_tier": "premium_a"})  # captures need tier A
    priced_store(api)
    code = make_discount(api, code="AUTH1", usage_limit=1)
    first = ready(api, email="first@example.com", discount_code="AUTH1")
    authorized = api.post(f"/checkouts/{first['token']}/charge", json={**CHARGE, "payment_token": "tok_authorize_only"})
    assert authorized.json()["checkout_charge"]["status"] == "pending", authorized.text
    second = ready(api, email="second@example.com", discount_code="AUTH1")
    assert second["applied_discount"]["applicable"] is False
    assert second["applied_discount"]["non_applicable_reason"] == "discount has reached its usage limit"
    paid = api.post(f"/checkouts/{second['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    charge_id = paid.json()["checkout_charge"]["charge_id"]
    assert api.get(f"/charges/{charge_id}").json()["charge"]["discounts"] == []
    captured = api.post(f"/charges/{authorized.json()['checkout_charge']['charge_id']}/capture_payment", json={})
    assert captured.status_code == 200, captured.text
    assert api.get(f"/discounts/{code}", version="2021-01").json()["discount"]["times_used"] == 1


def test_an_authorization_past_its_capture_window_is_no_use_of_the_code(api):
    """Found by a review: an authorization nothing can capture any more (past its 7 days) held
    a one-use code for good. It counts while it can be captured, no longer."""
    from rebill.domain.charge.model import CAPTURE_WINDOW
    priced_store(api)
    make_discount(api, code="AUTH2", usage_limit=1)
    first = ready(api, email="first@example.com", discount_code="AUTH2")
    authorized = api.post(f"/checkouts/{first['token']}/charge", json={**CHARGE, "payment_token": "tok_authorize_only"})
    assert authorized.json()["checkout_charge"]["status"] == "pending", authorized.text
    assert ready(api, email="second@example.com", discount_code="AUTH2")["applied_discount"]["applicable"] is False
    api.clock.advance(CAPTURE_WINDOW + timedelta(seconds=1))
    assert ready(api, email="third@example.com", discount_code="AUTH2")["applied_discount"]["applicable"] is True


@pytest.mark.parametrize("limit", ["once_per_customer", "first_time"])
def test_a_per_customer_code_taken_by_a_new_customer_meanwhile_answers_409(api, monkeypatch, limit):
    """Found by audits on PostgreSQL: checkouts of a new e-mail charged at once took a
    once-per-customer code, or a first-time customers' one, several times. Each priced the
    checkout when no customer of that e-mail existed; one recorded its payment (a customer who
    paid, holding the code) while another waited for the code's lock. That one answers 409 now,
    and its next try is priced without the code."""
    from rebill.domain.checkout import charge as checkout_charge
    priced_store(api)
    make_discount(api, code="ONCEONLY", **RULES[limit])
    first = ready(api, email="fresh@example.com", discount_code="ONCEONLY")
    second = ready(api, email="fresh@example.com", discount_code="ONCEONLY")
    real_ready = checkout_charge.ready
    before: dict[str, Any] = {}

    def priced_before_the_first_was_recorded(unit, verifier, checkout):
        if checkout.token == second["token"] and "state" in before:
            return before["state"]
        state = real_ready(unit, verifier, checkout)
        if checkout.token == second["token"]:
            before["state"] = state
        return state

    with api.db.write() as conn:  # the second's pricing, as it was before the first was paid
        from rebill.domain.checkout import repository as checkout_repository
        from rebill.domain.unit import Unit
        unit = Unit(conn, api.store, api.clock.now())
        priced_before_the_first_was_recorded(unit, api.client.app.services.verifier,
                                             checkout_repository.get(conn, api.store.id, second["token"]))
    assert before["state"]["pricing"]["applied_discount"]["applicable"] is True
    assert api.post(f"/checkouts/{first['token']}/charge", json=CHARGE).status_code == 200
    monkeypatch.setattr(checkout_charge, "ready", priced_before_the_first_was_recorded)
    payments = count(api, sandbox_payments)
    refused = api.post(f"/checkouts/{second['token']}/charge", json=CHARGE)
    assert refused.status_code == 409, refused.text
    assert count(api, sandbox_payments) == payments
    monkeypatch.undo()
    paid = api.post(f"/checkouts/{second['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    charge = api.get(f"/charges/{paid.json()['checkout_charge']['charge_id']}").json()["charge"]
    assert charge["total_discounts"] == "0.00"


def test_a_code_without_limits_is_not_held_by_other_charges(api):
    priced_store(api)
    make_discount(api, code="FREEFORALL")
    first = ready(api, email="a@example.com", discount_code="FREEFORALL")
    second = ready(api, email="a@example.com", discount_code="FREEFORALL")
    _claimed_elsewhere(api, first["token"])
    assert api.post(f"/checkouts/{second['token']}/charge", json=CHARGE).status_code == 200


def test_checkouts_of_one_customer_paid_with_one_token_at_once_keep_one_method(api):
    """Found by an audit on PostgreSQL: each read the customer's methods before the customer's
    lock, so four charges at once made four methods with the one token (both databases here)."""
    from tests.builders import concurrently
    priced_store(api)
    customer = make_customer(api)
    email = api.get(f"/customers/{customer.id}").json()["customer"]["email"]
    tokens = [ready(api, email=email)["token"] for _ in range(4)]
    replies = concurrently(api, [("POST", f"/checkouts/{token}/charge", CHARGE) for token in tokens])
    assert [r.status_code for r in replies] == [200] * 4, [r.text for r in replies]
    methods = api.get("/payment_methods", params={"customer_id": customer.id}, version="2021-11").json()
    assert [(m["processor_name"], m["processor_payment_method_token"]) for m in methods["payment_methods"]] == [
        ("stripe", "tok_visa")]


def test_a_customer_deleted_after_it_was_found_gives_the_payment_a_new_customer(api, monkeypatch):
    """Found by an audit on PostgreSQL: the customer of the checkout's e-mail, deleted between
    the look-up and the record, made the record of a captured payment answer 422 `customer not
    found`. It is no customer then: the payment makes one, as for a new e-mail."""
    from rebill.domain.checkout import service as checkout_service
    priced_store(api)
    gone = make_customer(api)
    email = api.get(f"/customers/{gone.id}").json()["customer"]["email"]
    checkout = ready(api, email=email)
    assert api.delete(f"/customers/{gone.id}").status_code in (200, 204)
    real = checkout_service.customer_of
    monkeypatch.setattr(checkout_service, "customer_of",  # as read before the delete committed
                        lambda unit, address: gone.id if address == email else real(unit, address))
    paid = api.post(f"/checkouts/{checkout['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    monkeypatch.undo()
    charge = api.get(f"/charges/{paid.json()['checkout_charge']['charge_id']}", version="2021-01").json()["charge"]
    assert int(charge["customer_id"]) != gone.id
    assert api.get(f"/customers/{charge['customer_id']}").json()["customer"]["email"] == email


# Shipping and tax rates --------------------------------------------------------------------

def test_shipping_rates_list_the_countrys_rates_first_each_with_its_totals(vapi):
    priced_store(vapi, shipping=[
        {"code": "world", "title": "Worldwide", "price": "20.00"},
        {"code": "std", "title": "Standard", "price": "5.00", "country_codes": ["US"]},
        {"code": "exp", "title": "Express", "price": "15.5", "country_codes": ["US", "CA"]},
        {"code": "ca", "title": "Canada", "price": "9.00", "country_codes": ["CA"]}])
    token = ready(vapi)["token"]
    response = vapi.get(f"/checkouts/{token}/shipping_rates")
    assert response.status_code == 200
    rates = response.json()["shipping_rates"]
    assert [(r["code"], r["price"], r["checkout"]["total_price"]) for r in rates] == [
        ("std", "5.00", "40.39"), ("exp", "15.50", "50.89"), ("world", "20.00", "55.39")]
    assert rates[0] == {"checkout": {"subtotal_price": "33.00", "total_price": "40.39", "total_tax": "2.39"},
                        "code": "std", "delivery_range": None, "description": None, "handle": "std",
                        "name": "Standard", "phone_required": False, "price": "5.00", "tax_lines": [],
                        "title": "Standard"}
    # NOTE: decisions §7.7.5, the checkout takes the first.
    assert vapi.get(f"/checkouts/{token}").json()["checkout"]["shipping_line"][0]["code"] == "std"


def test_shipping_rates_need_an_address_and_something_to_ship(vapi):
    priced_store(vapi)
    bare = create(vapi, line_items=[ONE_LINE])
    assert vapi.get(f"/checkouts/{bare['token']}/shipping_rates").json() == {
        "errors": {"shipping_address": ["is required to list shipping rates"]}}
    assert (bare["shipping_line"], money(bare)) == ([], ("8.00", "0.00", "8.00"))
    download = ready(vapi, line_items=[{"product_id": "400", "variant_id": "401", "quantity": 1}])
    assert vapi.get(f"/checkouts/{download['token']}/shipping_rates").json() == {"shipping_rates": []}
    assert (download["requires_shipping"], download["shipping_line"], money(download)) == \
        (False, [], ("5.00", "0.36", "5.36"))


def test_the_renewals_of_a_checkout_with_nothing_to_ship_charge_no_shipping_either(vapi):
    # Found by a money audit: the checkout charged no shipping, its next charge 5.00.
    priced_store(vapi)
    ebook = {"product_id": "400", "variant_id": "401", "quantity": 2, **MONTHLY}
    made = ready(vapi, line_items=[ebook])
    assert (made["shipping_line"], money(made)) == ([], ("10.00", "0.73", "10.73"))
    paid = vapi.post(f"/checkouts/{made['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    first = vapi.get(f"/charges/{paid.json()['checkout_charge']['charge_id']}", version=V11).json()["charge"]
    [renewal] = vapi.get("/charges", params={"address_id": first["address_id"], "status": "queued"},
                         version=V11).json()["charges"]
    for charge in (first, renewal):
        assert (charge["shipping_lines"], charge["total_price"]) == ([], "10.73")
    # A line that ships brings the store's rate back to the whole charge, an override likewise.
    address_id = first["address_id"]
    coffee = {"address_id": address_id, "external_product_id": {"ecommerce": "100"},
              "external_variant_id": {"ecommerce": "101"}, "product_title": "Coffee", "price": "12.50", "quantity": 1,
              "next_charge_scheduled_at": renewal["scheduled_at"]}
    assert vapi.post("/onetimes", json=coffee, version=V11).status_code == 201
    mixed = vapi.get(f"/charges/{renewal['id']}", version=V11).json()["charge"]
    assert [line["price"] for line in mixed["shipping_lines"]] == ["5.00"]
    override = [{"code": "flat", "price": "2.00", "title": "Flat"}]
    assert vapi.put(f"/addresses/{address_id}", json={"shipping_lines_override": override},
                    version=V11).status_code == 200
    assert [line["price"] for line in vapi.get(f"/charges/{renewal['id']}", version=V11).json()["charge"][
        "shipping_lines"]] == ["2.00"]
    # An override with nothing to ship charges nothing either.
    alone = vapi.post("/addresses", json={**SHIPPING, "customer_id": first["customer"]["id"],
                                          "shipping_lines_override": override}, version=V11).json()["address"]
    book = {"address_id": alone["id"], "external_product_id": {"ecommerce": "400"},
            "external_variant_id": {"ecommerce": "401"}, "product_title": "E-book", "price": "5.00", "quantity": 1,
            "order_interval_unit": "month", "order_interval_frequency": 1, "charge_interval_frequency": 1,
            "next_charge_scheduled_at": renewal["scheduled_at"]}
    assert vapi.post("/subscriptions", json=book, version=V11).status_code == 201
    [queued] = vapi.get("/charges", params={"address_id": alone["id"]}, version=V11).json()["charges"]
    assert (queued["shipping_lines"], queued["total_price"]) == ([], "5.36")


def test_taxes_included_are_not_added_and_a_provinces_rate_wins(api):
    priced_store(api, taxes_included=True, tax=[{"country_code": "US", "rate": "0.05"},
                                                {"country_code": "US", "province": "CA", "rate": "0.1",
                                                 "title": "CA tax"}])
    body = ready(api)
    # Tax included: 25.00 x 0.1 / 1.1 = 2.27, 8.00 x 0.1 / 1.1 = 0.73; the total is lines + shipping.
    assert body["taxes_included"] is True
    assert money(body) == ("33.00", "3.00", "38.00")
    assert body["tax_lines"] == [{"price": "3.00", "rate": "0.1", "title": "CA tax"}]


# Tenancy, scopes, platforms ----------------------------------------------------------------

@pytest.mark.parametrize("platform", ["platform_s_hosted", "platform_s_checkout"])
def test_a_platform_s_store_answers_403_on_every_checkout_endpoint(vapi, platform):
    store = vapi.other_store(checkout_platform=platform)
    store.version = vapi.version
    expected = {"errors": f"Checkouts are not available for this store: its checkout platform ({platform}) takes "
                          "checkouts itself"}
    token = "a" * 32
    for response in (store.post("/checkouts", json={}), store.get(f"/checkouts/{token}"),
                     store.put(f"/checkouts/{token}", json={}), store.get(f"/checkouts/{token}/shipping_rates"),
                     store.post(f"/checkouts/{token}/charge", json={})):
        assert (response.status_code, response.json()) == (403, expected)


@pytest.mark.parametrize("platform", ["custom", "platform_b_hosted"])
def test_custom_and_platform_b_stores_take_checkouts(api, platform):
    store = api.other_store(checkout_platform=platform)
    stock(store)
    assert store.post("/checkouts", json={"line_items": [ONE_LINE]}).status_code == 201


def test_reads_need_read_orders_and_writes_write_orders(api):
    priced_store(api)
    token = create(api)["token"]
    reader = api.token_with("read_orders")
    assert api.get(f"/checkouts/{token}", token=reader).status_code == 200
    assert api.get(f"/checkouts/{token}/shipping_rates", token=reader).status_code == 422  # no address: read fine
    for response in (api.post("/checkouts", json={}, token=reader),
                     api.put(f"/checkouts/{token}", json={}, token=reader),
                     api.post(f"/checkouts/{token}/charge", json=CHARGE, token=reader)):
        assert (response.status_code, response.json()) == (
            403, {"errors": "This token lacks the scope this endpoint needs: write_orders"})
    other = api.token_with("read_customers")
    assert api.get(f"/checkouts/{token}", token=other).json() == {
        "errors": "This token lacks the scope this endpoint needs: read_orders"}


def test_a_line_kept_before_a_cadence_rule_is_refused_before_any_payment(api):
    """Found by a review: a weekly line with a `cutoff_day_of_month`, taken before cutoff days
    were held to their unit, was paid and then refused as its subscription was made (422, the
    money taken, the checkout never completed). The lines are checked by today's rules before
    the payment."""
    from sqlalchemy import update as sql_update
    priced_store(api)
    token = ready(api)["token"]
    with api.db.write() as conn:  # as the earlier rules let it be kept
        lines = conn.execute(select(checkouts.c.line_items).where(checkouts.c.token == token)).scalar()
        weekly = next(i for i, line in enumerate(lines) if line["type"] == "subscription")
        lines[weekly].update(order_interval_unit="week", cutoff_day_of_month=5)
        conn.execute(sql_update(checkouts).where(checkouts.c.token == token).values(line_items=lines))
    refused = api.post(f"/checkouts/{token}/charge", json=CHARGE)
    assert (refused.status_code, refused.json()["errors"]) == (422, {"line_items": {str(weekly): {
        "cutoff_day_of_month": ["applies to monthly intervals only"]}}}), refused.text
    assert count(api, sandbox_payments) == 0


def test_a_charge_keeps_a_payment_token_so_it_needs_write_payment_methods_too(api):
    """Spec 02 Customers: a write permission on payments where payment token data is created
    (found by an audit: an orders-only token's checkout charge stored a processor token on an
    existing customer found by e-mail, and pointed the new address at it). Refused before
    anything: no payment, no customer, no method."""
    priced_store(api)
    existing = make_customer(api, email="known@example.com")
    token = ready(api, email="known@example.com")["token"]
    orders_only = api.token_with("read_orders", "write_orders")
    refused = api.post(f"/checkouts/{token}/charge", json=CHARGE, token=orders_only)
    assert (refused.status_code, refused.json()) == (
        403, {"errors": "This token lacks the scope this endpoint needs: write_payment_methods"})
    assert count(api, sandbox_payments) == 0
    assert api.get("/payment_methods", params={"customer_id": existing.id}).json()["payment_methods"] == []
    both = api.token_with("write_orders", "write_payment_methods")
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE, token=both).status_code == 200


# Charge ------------------------------------------------------------------------------------

def test_a_charge_makes_the_customer_address_subscription_charge_and_order_at_once(vapi):
    priced_store(vapi)
    made = ready(vapi, phone="+14155550199", analytics_data={"utm_params": [{"utm_source": "news"}]},
                 note="Ring twice", **{ATTRIBUTES[vapi.version]: [{"name": "gift", "value": "yes"}]})
    since = last_event(vapi)
    response = vapi.post(f"/checkouts/{made['token']}/charge", json={**CHARGE, "payment_type": "apple_pay"})
    assert response.status_code == 200, response.text
    result = response.json()["checkout_charge"]
    transaction = result["payment_processor_transaction_id"]
    assert transaction.startswith("sbx_")
    assert result == {"authorization_token": None, "charge_id": result["charge_id"], "free": False,
                      "payment_processor": "stripe", "payment_processor_customer_id": None,
                      "payment_processor_transaction_id": transaction, "payment_token": "tok_visa",
                      "payment_type": "APPLE_PAY", "status": "success" if vapi.version == V11 else "SUCCESS"}
    checkout = vapi.get(f"/checkouts/{made['token']}").json()["checkout"]
    assert checkout["charge_id"] == result["charge_id"] and checkout["completed_at"] is not None
    assert checkout["payment_processor"] == "stripe" and checkout["payment_processor_transaction_id"] == transaction

    charge = vapi.get(f"/charges/{result['charge_id']}", version=V11).json()["charge"]
    assert (charge["type"], charge["status"], charge["total_price"], charge["total_tax"]) == \
        ("checkout", "success", "40.39", "2.39")
    assert charge["external_transaction_id"] == {"payment_processor": transaction}
    # The processor that took the money, not the checkout's label (found by an audit).
    assert charge["payment_processor"] == "sandbox"
    sub_line, one_line = charge["line_items"]
    subscription_id = sub_line["purchase_item_id"]
    assert (sub_line["purchase_item_type"], one_line["purchase_item_type"], one_line["purchase_item_id"]) == \
        ("subscription", "onetime", None)
    assert [line["subscription_id"] for line in checkout["line_items"]] == [subscription_id, None]
    assert vapi.get(f"/charges/{result['charge_id']}", version=V01).json()["charge"]["type"] == "CHECKOUT"

    [order] = vapi.get("/orders", params={"charge_id": result["charge_id"]}, version=V11).json()["orders"]
    assert (order["type"], order["status"], order["total_price"]) == ("checkout", "success", "40.39")
    assert [line["purchase_item_id"] for line in order["line_items"]] == [subscription_id, None]

    customer = vapi.get(f"/customers/{charge['customer']['id']}", version=V11).json()["customer"]
    assert (customer["email"], customer["first_name"], customer["phone"]) == \
        ("ada@example.com", "Ada", "+14155550199")
    assert customer["analytics_data"] == {"utm_params": [{"utm_source": "news"}]}
    # NOTE: spec 02 Checkout `analytics_data`: copied to the customer, the subscription and the
    # charge; in both versions, and not to the charges the subscription renews with.
    for version in (V01, V11):
        paid = vapi.get(f"/charges/{result['charge_id']}", version=version).json()["charge"]
        assert paid["analytics_data"] == {"utm_params": [{"utm_source": "news"}]}, version
    address = vapi.get(f"/addresses/{charge['address_id']}", version=V11).json()["address"]
    assert (address["address1"], address["order_note"], address["order_attributes"]) == \
        ("101 Market St", "Ring twice", [{"name": "gift", "value": "yes"}])
    [method] = vapi.get("/payment_methods", params={"customer_id": customer["id"]}, version=V11).json()[
        "payment_methods"]
    assert (method["processor_payment_method_token"], method["processor_name"], method["payment_type"],
            method["status"]) == ("tok_visa", "stripe", "APPLE_PAY", "valid")
    assert address["payment_method_id"] == method["id"]
    subscription = vapi.get(f"/subscriptions/{subscription_id}", version=V11).json()["subscription"]
    # NOTE: decisions §7.7.3, no delay: one charge interval after the day it was charged.
    today = vapi.clock.now().date()
    assert subscription["next_charge_scheduled_at"] == str(_months_on(today, 1))
    assert (subscription["price"], subscription["quantity"], subscription["status"]) == ("12.50", 2, "active")
    assert vapi.get("/onetimes", version=V11).json()["onetimes"] == []  # one-time lines: the order only
    [queued] = vapi.get("/charges", params={"status": "queued"}, version=V11).json()["charges"]
    assert (queued["scheduled_at"], queued["total_price"]) == (str(_months_on(today, 1)), "31.81")
    assert subscription["analytics_data"] == {"utm_params": [{"utm_source": "news"}]}
    assert queued["analytics_data"] == {"utm_params": []}

    assert topics(vapi, since) == [
        "customer/created", "customer/payment_method_updated", "address/created", "subscription/created",
        "customer/activated", "charge/created", "order/created", "order/processed", "order/success",
        "charge/paid", "charge/created", "checkout/processed"]


def _months_on(day: date, months: int) -> date:
    month = day.month - 1 + months
    return day.replace(year=day.year + month // 12, month=month % 12 + 1)


def test_a_checkout_of_a_known_email_uses_its_customer(api):
    priced_store(api)
    known = make_customer(api, email="Known@Example.com")
    token = ready(api, email="known@example.com")["token"]
    charge_id = api.post(f"/checkouts/{token}/charge", json=CHARGE).json()["checkout_charge"]["charge_id"]
    assert api.get(f"/charges/{charge_id}").json()["charge"]["customer"]["id"] == known.id
    assert count(api, customers) == 1


def test_a_checkouts_email_is_kept_as_the_customer_it_makes_keeps_it(vapi):
    """Found by an audit: the checkout kept the spaces around it, its customer not."""
    priced_store(vapi)
    token = ready(vapi, email=" New.Person@Example.com ")["token"]
    assert vapi.get(f"/checkouts/{token}").json()["checkout"]["email"] == "New.Person@Example.com"
    assert vapi.post(f"/checkouts/{token}/charge", json=CHARGE).status_code == 200
    assert vapi.get(f"/checkouts/{token}").json()["checkout"]["email"] == "New.Person@Example.com"


def test_a_first_recurring_charge_delay_counts_days_from_the_charge(api):
    priced_store(api)
    token = ready(api, line_items=[{**SUB_LINE, "first_recurring_charge_delay": 10}])["token"]
    charge_id = api.post(f"/checkouts/{token}/charge", json=CHARGE).json()["checkout_charge"]["charge_id"]
    item_id = api.get(f"/charges/{charge_id}").json()["charge"]["line_items"][0]["purchase_item_id"]
    subscription = api.get(f"/subscriptions/{item_id}").json()["subscription"]
    assert subscription["next_charge_scheduled_at"] == str(api.clock.now().date() + timedelta(days=10))


def test_a_prepaid_lines_later_orders_step_from_the_checkouts_day(api):
    """Decisions §6.12: order k on the charge's date plus k order intervals. Found by an audit: a
    prepaid checkout line dated its later orders on its subscription's day (its first renewal's,
    five days on), so the second delivery came five days after the first."""
    priced_store(api)
    line = {**SUB_LINE, "charge_interval_frequency": 3, "first_recurring_charge_delay": 5}
    token = ready(api, line_items=[line])["token"]
    charge_id = api.post(f"/checkouts/{token}/charge", json=CHARGE).json()["checkout_charge"]["charge_id"]
    listed = api.get("/orders", params={"charge_id": charge_id, "sort_by": "id-asc"}).json()["orders"]
    day = api.clock.now().date()
    later = [add_months(day, k) for k in range(3)]
    assert [o["scheduled_at"][:10] for o in listed] == [d.isoformat() for d in later]


def test_a_checkouts_payment_names_the_methods_type_to_the_processor(api, monkeypatch):
    """Found by an audit: a checkout built its payment without the method's type (the billing
    run names it), so a PayPal token went to Stripe as a card payment."""
    priced_store(api)
    gateway = api.client.app.services.gateway
    asked = []
    real = gateway.charge

    def charge(payment):
        asked.append(payment.payment_type)
        return real(payment)
    monkeypatch.setattr(gateway, "charge", charge)
    token = ready(api)["token"]
    paid = api.post(f"/checkouts/{token}/charge", json={**CHARGE, "payment_type": "PAYPAL"})
    assert paid.status_code == 200, paid.text
    assert asked == ["PAYPAL"]


def test_charging_needs_an_email_lines_and_a_complete_shipping_address(vapi):
    priced_store(vapi)
    bare = create(vapi, line_items=[])
    response = vapi.post(f"/checkouts/{bare['token']}/charge", json=CHARGE)
    assert (response.status_code, response.json()) == (422, {"errors": {
        "email": ["is required before the checkout is charged"],
        "line_items": ["is required before the checkout is charged"],
        "shipping_address": ["is required before the checkout is charged"]}})
    partial = create(vapi, email="ada@example.com", partial_shipping=True,
                     shipping_address={"country_code": "US", "zip": "94105"})
    response = vapi.post(f"/checkouts/{partial['token']}/charge", json=CHARGE)
    assert response.json() == {"errors": {"shipping_address": {
        "address1": ["is required"], "city": ["is required"], "first_name": ["is required"],
        "last_name": ["is required"]}}}
    assert vapi.post(f"/checkouts/{partial['token']}/charge", json={}).json() == {"errors": {
        "payment_processor": ["is required"], "payment_token": ["is required"]}}
    assert vapi.post(f"/checkouts/{partial['token']}/charge", json={**CHARGE, "payment_type": "cash"}).json() == {
        "errors": {"payment_type": ["must be one of: CREDIT_CARD, PAYPAL, APPLE_PAY, GOOGLE_PAY"]}}
    assert count(vapi, sandbox_payments) == 0


def test_a_declined_payment_answers_the_processors_reason_and_changes_nothing(vapi):
    priced_store(vapi)
    token = ready(vapi)["token"]
    since = last_event(vapi)
    response = vapi.post(f"/checkouts/{token}/charge", json={**CHARGE, "payment_token": "tok_declined"})
    assert (response.status_code, response.json()) == (422, {"errors": {"payment_token": ["Your card was declined."]}})
    assert topics(vapi, since) == []
    assert vapi.get(f"/checkouts/{token}").json()["checkout"]["completed_at"] is None
    # NOTE: decisions §7.7.6, another token may still pay it: another attempt, another key.
    response = vapi.post(f"/checkouts/{token}/charge", json=CHARGE)
    assert response.status_code == 200, response.text
    with vapi.db.read() as conn:
        keys = list(conn.execute(select(sandbox_payments.c.idempotency_key, sandbox_payments.c.outcome)
                                 .where(sandbox_payments.c.store_id == vapi.store.id)
                                 .order_by(sandbox_payments.c.id)))
    checkout_id = vapi.get(f"/checkouts/{token}", version=V11).json()["checkout"]["id"]
    assert [tuple(k) for k in keys] == [(f"rebill-checkout-{checkout_id}-attempt-1", "failed"),
                                        (f"rebill-checkout-{checkout_id}-attempt-2", "captured")]


def test_a_completed_checkout_cannot_be_charged_or_changed_again(vapi):
    priced_store(vapi)
    token = ready(vapi)["token"]
    assert vapi.post(f"/checkouts/{token}/charge", json=CHARGE).status_code == 200
    response = vapi.post(f"/checkouts/{token}/charge", json=CHARGE)
    assert (response.status_code, response.json()) == (422, {"errors": {"completed_at": [
        "the checkout is completed and cannot be charged again"]}})
    response = vapi.put(f"/checkouts/{token}", json={"note": "late"})
    assert (response.status_code, response.json()) == (422, {"errors": {"completed_at": [
        "the checkout is completed and can no longer be changed"]}})
    assert count(vapi, sandbox_payments) == 1


def test_an_authorization_leaves_the_charge_pending_and_makes_no_order_yet(api):
    priced_store(api)
    token = ready(api)["token"]
    result = api.post(f"/checkouts/{token}/charge", json={**CHARGE, "payment_token": "tok_authorize_only"}).json()
    result = result["checkout_charge"]
    assert result["status"] == "pending" and result["authorization_token"] == result["payment_processor_transaction_id"]
    assert api.get(f"/charges/{result['charge_id']}").json()["charge"]["status"] == "pending"
    assert api.get("/orders").json()["orders"] == []
    # The card said yes, as for a renewal authorized (found by an audit: the method stayed
    # `unvalidated`, also after the capture).
    charge = api.get(f"/charges/{result['charge_id']}").json()["charge"]
    [method] = api.get("/payment_methods", params={"customer_id": charge["customer"]["id"]}).json()["payment_methods"]
    assert method["status"] == "valid"


def test_a_payment_whose_answer_was_lost_is_recorded_once_with_the_same_key(api, monkeypatch):
    priced_store(api)
    token = ready(api)["token"]
    real = checkout_charge._record

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the process died after the processor answered")
    monkeypatch.setattr(checkout_charge, "_record", dies)
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE).status_code == 500
    monkeypatch.setattr(checkout_charge, "_record", real)
    # While the claim is fresh the checkout is held: 409 for a charge or an update.
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE).status_code == 409
    assert api.put(f"/checkouts/{token}", json={"note": "x"}).status_code == 409
    api.clock.advance(timedelta(seconds=61))
    response = api.post(f"/checkouts/{token}/charge", json=CHARGE)
    assert response.status_code == 200, response.text
    assert count(api, sandbox_payments) == 1  # the same attempt, the same key: one payment
    assert len(api.get("/charges", params={"status": "success"}).json()["charges"]) == 1


def _payment_died_unrecorded(api, monkeypatch, headers=None):
    """A ready checkout whose charge's process died after the processor answered: its token."""
    priced_store(api)
    token = ready(api)["token"]
    real = checkout_charge._record
    monkeypatch.setattr(checkout_charge, "_record", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("died")))
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE, headers=headers).status_code == 500
    monkeypatch.setattr(checkout_charge, "_record", real)
    return token


def test_a_request_whose_key_was_taken_over_stops_at_an_abandoned_checkout_payment(api, monkeypatch):
    """As for charges (tests/scenarios/test_billing_abandoned_race.py): a clock advance whose
    Idempotency-Key a repeat took over is refused where it records the checkout's payment, and
    stops there (found by a review: the refusal was taken for "no answer again")."""
    from rebill.domain.unit import KeyTakenOver
    token = _payment_died_unrecorded(api, monkeypatch)
    later = api.clock.now() + timedelta(seconds=61)
    with pytest.raises(KeyTakenOver), key_taken_over(api, later):
        checkout_charge.finish_abandoned(api.db, api.client.app.services.gateway, api.store, later)
    assert api.get(f"/checkouts/{token}").json()["checkout"]["completed_at"] is None


def test_the_billing_run_finishes_a_checkout_payment_nobody_asked_again(api, monkeypatch):
    from rebill.domain.billing import run
    token = _payment_died_unrecorded(api, monkeypatch)
    gateway = api.client.app.services.gateway
    assert run.finish_abandoned(api.db, gateway, api.store, api.clock.now()) == 0  # the claim is fresh
    later = api.clock.now() + timedelta(seconds=61)
    assert run.finish_abandoned(api.db, gateway, api.store, later) == 1
    checkout = api.get(f"/checkouts/{token}").json()["checkout"]
    assert checkout["completed_at"] is not None and count(api, sandbox_payments) == 1
    with api.db.read() as conn:
        origins = set(conn.execute(select(events.c.origin).where(events.c.store_id == api.store.id,
                                                                 events.c.topic == "checkout/processed")).scalars())
    assert origins == {"checkout"}


def test_a_free_checkout_says_so(api):
    priced_store(api, shipping=[])
    make_discount(api, code="ALL", value="100")
    token = ready(api, discount_code="ALL", line_items=[ONE_LINE])["token"]
    result = api.post(f"/checkouts/{token}/charge", json={**CHARGE, "payment_token": "tok_declined"}).json()[
        "checkout_charge"]
    assert result["free"] is True and result["status"] == "success"
    # No card was tried: the kept token is not shown `valid` (found by an audit: a declining one was).
    customer_id = api.get(f"/charges/{result['charge_id']}").json()["charge"]["customer"]["id"]
    [method] = api.get("/payment_methods", params={"customer_id": customer_id}).json()["payment_methods"]
    assert method["status"] == "unvalidated"


def test_the_platform_ids_of_a_checkout_in_each_versions_names(vapi):
    priced_store(vapi)
    if vapi.version == V11:
        body = ready(vapi, external_checkout_id={"ecommerce": "cart_7"}, external_customer_id={"ecommerce": "cus_9"},
                     external_checkout_source="headless")
        assert (body["external_checkout_id"], body["external_customer_id"]) == ({"ecommerce": "cart_7"},
                                                                               {"ecommerce": "cus_9"})
    else:
        # NOTE: spec 02 Checkouts create body names the customer `external_checkout_customer_id`.
        body = ready(vapi, external_checkout_id="cart_7", external_checkout_customer_id="cus_9",
                     external_checkout_source="headless")
        assert (body["external_checkout_id"], body["external_customer_id"]) == ("cart_7", "cus_9")
    assert body["external_checkout_source"] == "headless"
    charge_id = vapi.post(f"/checkouts/{body['token']}/charge", json=CHARGE).json()["checkout_charge"]["charge_id"]
    customer = vapi.get(f"/charges/{charge_id}", version=V11).json()["charge"]["customer"]
    assert customer["external_customer_id"] == {"ecommerce": "cus_9"}


def test_spec_02s_customer_id_name_is_taken_in_both_versions(vapi):
    """NOTE: spec 02 Checkouts create body `external_checkout_customer_id`, kept in 2021-11 by
    decisions §7.7.14 (found by an audit: 2021-11 dropped it, and the customer had no id)."""
    priced_store(vapi)
    sent = {"ecommerce": "cus_7"} if vapi.version == V11 else "cus_7"
    body = ready(vapi, external_checkout_customer_id=sent)
    assert body["external_customer_id"] == sent
    charge_id = vapi.post(f"/checkouts/{body['token']}/charge", json=CHARGE).json()["checkout_charge"]["charge_id"]
    customer = vapi.get(f"/charges/{charge_id}", version=V11).json()["charge"]["customer"]
    assert customer["external_customer_id"] == {"ecommerce": "cus_7"}
    # Both names, the same id: taken; two ids: 422, nothing made.
    assert create(vapi, external_checkout_customer_id="cus_8", external_customer_id="cus_8")[
        "external_customer_id"] in ({"ecommerce": "cus_8"}, "cus_8")
    before = count(vapi, checkouts)
    response = vapi.post("/checkouts", json={"line_items": [ONE_LINE], "external_checkout_customer_id": "a",
                                             "external_customer_id": "b"})
    assert response.status_code == 422
    assert "conflicts with" in str(response.json()["errors"])
    assert count(vapi, checkouts) == before


def test_a_processor_that_does_not_answer_is_asked_again_with_the_same_key(api, monkeypatch):
    from rebill.domain.payment.gateway import GatewayUnavailable
    priced_store(api)
    token = ready(api)["token"]
    gateway = api.client.app.services.gateway
    real = gateway.charge

    def silent(payment: Any) -> Any:
        raise GatewayUnavailable()
    monkeypatch.setattr(gateway, "charge", silent)
    response = api.post(f"/checkouts/{token}/charge", json=CHARGE)
    assert (response.status_code, response.json()) == (
        503, {"errors": "The payment processor could not be reached; try again later"})
    monkeypatch.setattr(gateway, "charge", real)
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE).status_code == 409
    api.clock.advance(timedelta(seconds=61))
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE).status_code == 200
    checkout_id = api.get(f"/checkouts/{token}").json()["checkout"]["id"]
    with api.db.read() as conn:
        keys = list(conn.execute(select(sandbox_payments.c.idempotency_key)
                                 .where(sandbox_payments.c.store_id == api.store.id)).scalars())
    assert keys == [f"rebill-checkout-{checkout_id}-attempt-1"]


def test_an_abandoned_payment_taken_over_by_another_token_answers_409_once_recorded(api, monkeypatch):
    token = _payment_died_unrecorded(api, monkeypatch)
    api.clock.advance(timedelta(seconds=61))
    response = api.post(f"/checkouts/{token}/charge", json={**CHARGE, "payment_token": "tok_other"})
    assert (response.status_code, response.json()) == (409, {"errors": "An earlier payment of this checkout that "
                                                                       "had not answered has now been completed"})
    checkout = api.get(f"/checkouts/{token}").json()["checkout"]
    assert checkout["completed_at"] is not None and checkout["payment_processor_transaction_id"] is not None
    assert count(api, sandbox_payments) == 1


def test_two_charges_at_once_pay_once(api):
    from tests.builders import concurrently
    priced_store(api)
    token = ready(api)["token"]
    first, second = concurrently(api, [("POST", f"/checkouts/{token}/charge", CHARGE)] * 2)
    # The loser finds the payment in flight (409) or already recorded (422).
    assert sorted([first.status_code, second.status_code]) in ([200, 409], [200, 422])
    assert count(api, sandbox_payments) == 1
    assert len(api.get("/charges", params={"status": "success"}).json()["charges"]) == 1


def _status_set_while_paying(api: Any, monkeypatch: Any, code: int, status: str) -> None:
    """The code's status set by another request while a checkout's payment is in flight (after
    its claim, before its record)."""
    real_pay = checkout_charge._pay

    def pay_then_set(*args: Any, **kwargs: Any) -> Any:
        result = real_pay(*args, **kwargs)
        changed = api.put(f"/discounts/{code}", json={"status": status}, version=V11)
        assert changed.status_code == 200, changed.text
        return result
    monkeypatch.setattr(checkout_charge, "_pay", pay_then_set)


def test_a_code_fully_disabled_while_the_payment_is_in_flight_stays_off_the_new_address(api, monkeypatch):
    """Found by an audit on PostgreSQL: the code, fully disabled between the claim and the
    record (no address held it yet, so the disable cleared nothing), was put on the new address
    and its renewals took it. The payment keeps it (it was priced with it); the address does not."""
    priced_store(api)
    code = make_discount(api, code="SHORTLIVED")
    checkout = ready(api, discount_code="SHORTLIVED")
    _status_set_while_paying(api, monkeypatch, code, "fully_disabled")
    paid = api.post(f"/checkouts/{checkout['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    charge = api.get(f"/charges/{paid.json()['checkout_charge']['charge_id']}", version=V11).json()["charge"]
    assert [d["code"] for d in charge["discounts"]] == ["SHORTLIVED"]
    address = api.get(f"/addresses/{charge['address_id']}", version=V11).json()["address"]
    assert address["discounts"] == []
    renewals = api.get("/charges", params={"address_id": address["id"], "status": "queued"}, version=V11)
    assert [c["total_discounts"] for c in renewals.json()["charges"]] == ["0.00"]


def test_an_address_apply_waits_for_a_checkout_of_its_customer_paid_with_the_code(api):
    """Found by an audit on PostgreSQL: a once-per-customer code applied to the customer's address
    while a checkout of the customer's e-mail was being paid with it was taken by both (and by the
    address's renewal again). The apply answers 409 while the payment is in flight, 422 after."""
    from tests.builders import make_address
    priced_store(api)
    make_discount(api, code="ONEPERSON", once_per_customer=True)
    customer = make_customer(api)
    email = api.get(f"/customers/{customer.id}").json()["customer"]["email"]
    address = make_address(api, customer)
    checkout = ready(api, email=email, discount_code="ONEPERSON")
    _claimed_elsewhere(api, checkout["token"])
    apply = api.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "ONEPERSON"}, version=V11)
    assert apply.status_code == 409, apply.text
    assert api.get(f"/addresses/{address.id}", version=V11).json()["address"]["discounts"] == []
    with api.db.write() as conn:  # the payment is recorded (here: given up) ...
        from sqlalchemy import update as sql_update
        conn.execute(sql_update(checkouts).where(checkouts.c.token == checkout["token"])
                     .values(claimed_by=None, claimed_at=None))
    paid = api.post(f"/checkouts/{checkout['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    apply = api.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "ONEPERSON"}, version=V11)
    assert apply.json() == {"errors": {"discount_code": ["discount can be used once per customer"]}}, apply.text


def test_a_code_merely_disabled_while_the_payment_is_in_flight_stays_on_the_new_address(api, monkeypatch):
    """Found by a review: `disabled` keeps a code on the addresses holding it (decisions §7.5);
    paid first and disabled after, the new address would hold it. Only a full disable clears it."""
    priced_store(api)
    code = make_discount(api, code="SOFTOFF")
    checkout = ready(api, discount_code="SOFTOFF")
    _status_set_while_paying(api, monkeypatch, code, "disabled")
    paid = api.post(f"/checkouts/{checkout['token']}/charge", json=CHARGE)
    assert paid.status_code == 200, paid.text
    charge = api.get(f"/charges/{paid.json()['checkout_charge']['charge_id']}", version=V11).json()["charge"]
    address = api.get(f"/addresses/{charge['address_id']}", version=V11).json()["address"]
    assert [d["id"] for d in address["discounts"]] == [code]


def test_an_apply_takes_the_customers_lock_before_the_codes(api):
    """Found by a review on PostgreSQL: an apply of a per-customer code held the code's share lock
    while it waited for the customer's, which a checkout's payment held while it waited for the
    code's: a deadlock (retried, a second late). The apply now waits for the customer first,
    holding nothing of the code."""
    import threading

    from sqlalchemy import text

    from rebill.models import customers as customer_rows
    from tests.builders import make_address
    if api.db.dialect != "postgresql":
        pytest.skip("SQLite runs one writer at a time: no lock is waited for inside a transaction")
    code = make_discount(api, code="MINEONLY", once_per_customer=True)
    customer = make_customer(api)
    address = make_address(api, customer)
    replies: list[Any] = []
    with api.db.write() as conn:
        conn.execute(select(customer_rows.c.id).where(customer_rows.c.id == customer.id).with_for_update())
        sender = threading.Thread(target=lambda: replies.append(api.post(
            f"/addresses/{address.id}/apply_discount", json={"discount_id": code}, version=V11)), daemon=True)
        sender.start()
        deadline = __import__("time").monotonic() + 20
        while True:  # the apply waits for the customer's lock
            with api.db.read() as probe:
                if probe.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                      "AND wait_event_type = 'Lock'")).scalar_one():
                    break
            assert __import__("time").monotonic() < deadline, "the apply never waited for the customer"
            __import__("time").sleep(0.02)
        with api.db.write() as other:  # ... holding no lock on the code meanwhile
            other.execute(text("SELECT id FROM discounts WHERE id = :id FOR UPDATE NOWAIT"), {"id": code})
    sender.join(30)
    assert [r.status_code for r in replies] == [200], [r.text for r in replies]


def test_a_keyed_charge_finished_by_the_billing_run_answers_its_repeat_409_not_422(api, monkeypatch):
    """Found by an audit: the repeat (same Idempotency-Key) of a charge whose process died after
    the processor answered got 422 "completed and cannot be charged again" once the billing run
    had finished it: the client was told its payment failed. The run marks the request's key
    (domain/claimed_keys.py): the repeat answers as after a lost answer, and pays nothing."""
    from rebill.domain.billing import run
    keyed = {"Idempotency-Key": "pay-once"}
    token = _payment_died_unrecorded(api, monkeypatch, keyed)
    # Within the minute the key and the claim are the dead request's: 409, nothing run.
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE, headers=keyed).status_code == 409
    api.clock.advance(timedelta(seconds=61))
    assert run.finish_abandoned(api.db, api.client.app.services.gateway, api.store, api.clock.now()) == 1
    repeat = api.post(f"/checkouts/{token}/charge", json=CHARGE, headers=keyed)
    assert repeat.status_code == 409 and "answer was lost" in repeat.json()["errors"], repeat.text
    assert count(api, sandbox_payments) == 1
    assert api.get(f"/checkouts/{token}").json()["checkout"]["completed_at"] is not None


def test_a_keyed_charge_whose_repeat_comes_first_finishes_it_as_its_own(api, monkeypatch):
    keyed = {"Idempotency-Key": "pay-once"}
    token = _payment_died_unrecorded(api, monkeypatch, keyed)
    api.clock.advance(timedelta(seconds=61))
    repeat = api.post(f"/checkouts/{token}/charge", json=CHARGE, headers=keyed)
    assert repeat.status_code == 200, repeat.text
    assert api.post(f"/checkouts/{token}/charge", json=CHARGE, headers=keyed).json() == repeat.json()  # replayed
    assert count(api, sandbox_payments) == 1
