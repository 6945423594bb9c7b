"""Validation rules of an address, each with its exact 422 body (spec 01 Addresses create and
update bodies, spec 02 "Validation on create and update", decisions §2.2, §2.3, §4)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.api.test_addresses_support import V01, V11, address_events, create, created, us_fields
from tests.builders import make_address, make_customer, make_discount, make_payment_method


def errors_of(response):
    assert response.status_code == 422, response.text
    return response.json()


# --- required fields and types --------------------------------------------------------------------

def test_2021_11_create_with_empty_body_names_every_required_field(api):
    response = api.post("/addresses", json={})
    assert errors_of(response) == {"errors": {
        "customer_id": ["is required"], "address1": ["is required"], "city": ["is required"],
        "country_code": ["is required"], "first_name": ["is required"], "last_name": ["is required"],
        "phone": ["is required"],
    }}


def test_2021_01_create_with_empty_body_names_every_required_field_with_country(api):
    customer = make_customer(api)
    response = api.post(f"/customers/{customer.id}/addresses", json={}, version=V01)
    assert errors_of(response) == {"errors": {
        "address1": ["is required"], "city": ["is required"], "country": ["is required"],
        "first_name": ["is required"], "last_name": ["is required"], "phone": ["is required"],
    }}


@pytest.mark.parametrize("field", ["address1", "city", "first_name", "last_name", "phone"])
def test_create_without_a_required_field_names_it(vapi, field):
    response = create(vapi, make_customer(vapi), **{field: ...})
    assert errors_of(response) == {"errors": {field: ["is required"]}}


def test_2021_11_create_without_customer_id_names_it(api):
    response = create(api, make_customer(api), customer_id=...)
    assert errors_of(response) == {"errors": {"customer_id": ["is required"]}}


def test_2021_11_create_without_country_code_names_it(api):
    response = create(api, make_customer(api), country_code=...)
    assert errors_of(response) == {"errors": {"country_code": ["is required"]}}


def test_2021_01_create_without_country_or_country_code_names_country(api):
    response = create(api, make_customer(api), V01, country_code=...)
    assert errors_of(response) == {"errors": {"country": ["is required"]}}


@pytest.mark.parametrize("field", ["address1", "city", "first_name", "last_name"])
@pytest.mark.parametrize("blank", ["", "   "])
def test_create_with_a_blank_required_text_field_names_it(vapi, field, blank):
    response = create(vapi, make_customer(vapi), **{field: blank})
    assert errors_of(response) == {"errors": {field: ["cannot be blank"]}}


@pytest.mark.parametrize("field", ["address1", "city", "first_name", "last_name", "phone"])
def test_create_with_a_null_required_field_names_it(vapi, field):
    response = create(vapi, make_customer(vapi), **{field: None})
    assert errors_of(response) == {"errors": {field: ["is required"]}}


@pytest.mark.parametrize("field, value, message", [
    ("address1", 12, "must be a string"),
    ("city", ["SF"], "must be a string"),
    ("first_name", {"x": 1}, "must be a string"),
    ("phone", 4155550100, "must be a string"),
    ("zip", 94105, "must be a string"),
    ("province", True, "must be a string"),
    ("address2", 5, "must be a string"),
    ("company", 5, "must be a string"),
])
def test_create_with_a_wrong_type_names_the_field(vapi, field, value, message):
    response = create(vapi, make_customer(vapi), **{field: value})
    assert errors_of(response) == {"errors": {field: [message]}}


@pytest.mark.parametrize("field, value, message", [
    ("customer_id", "abc", "must be an integer"),
    ("customer_id", True, "must be an integer"),
    ("payment_method_id", "x", "must be an integer"),
    ("order_attributes", "gift", "must be an array"),
    ("order_note", 7, "must be a string"),
    ("shipping_lines_override", {"price": "1"}, "must be an array"),
    ("discounts", "SAVE", "must be an array"),
    ("presentment_currency", 840, "must be a string"),
    ("country_code", "USA", "must be a 2-letter country code"),
])
def test_2021_11_create_with_a_wrong_type_names_the_field(api, field, value, message):
    response = create(api, make_customer(api), **{field: value})
    assert errors_of(response) == {"errors": {field: [message]}}


@pytest.mark.parametrize("field, value, message", [
    ("note_attributes", "gift", "must be an array"),
    ("cart_note", 7, "must be a string"),
    ("country", 1, "must be a string"),
])
def test_2021_01_create_with_a_wrong_type_names_the_field_in_2021_01_names(api, field, value, message):
    response = create(api, make_customer(api), V01, **{field: value})
    assert errors_of(response) == {"errors": {field: [message]}}


def test_create_with_several_bad_fields_names_every_one(api):
    response = create(api, make_customer(api), address1=1, city=None, first_name="", phone=...)
    assert errors_of(response) == {"errors": {
        "address1": ["must be a string"], "city": ["is required"], "first_name": ["cannot be blank"],
        "phone": ["is required"]}}


def test_the_rules_after_the_types_name_every_bad_field_too(api):
    """Decisions §2.3 (found by an audit: the zip, then the currency, then the payment method,
    one request each)."""
    customer = make_customer(api)
    response = create(api, customer, zip="1", presentment_currency="GBP", payment_method_id=999_999)
    body = errors_of(response)["errors"]
    assert set(body) == {"zip", "presentment_currency", "payment_method_id"}, body


def test_an_update_and_a_code_name_every_bad_field_too(api):
    """Decisions §2.3, as a create names them (found by an audit: an update named the zip, then
    the payment method, then the code, one request each; a create its code after the rest)."""
    customer = make_customer(api)
    address = make_address(api, customer)
    response = api.put(f"/addresses/{address.id}", json={"zip": "1234", "payment_method_id": 999_999,
                                                          "discounts": [{"code": "NOPE"}]}, version=V11)
    body = errors_of(response)["errors"]
    assert set(body) == {"zip", "payment_method_id", "discounts"}, body
    response = create(api, customer, zip="1", payment_method_id=999_999, discounts=[{"code": "NOPE"}])
    body = errors_of(response)["errors"]
    assert set(body) == {"zip", "payment_method_id", "discounts"}, body


def test_order_attribute_without_a_name_is_refused_at_its_index(api):
    response = create(api, make_customer(api), order_attributes=[{"name": "ok", "value": "1"}, {"value": "2"}])
    assert errors_of(response) == {"errors": {"order_attributes": {"1": {"name": ["is required"]}}}}


def test_2021_01_note_attribute_without_a_name_is_refused_under_note_attributes(api):
    response = create(api, make_customer(api), V01, note_attributes=[{"value": "2"}])
    assert errors_of(response) == {"errors": {"note_attributes": {"0": {"name": ["is required"]}}}}


def test_shipping_line_with_a_non_decimal_price_is_refused_at_its_index(vapi):
    response = create(vapi, make_customer(vapi), shipping_lines_override=[{"code": "x", "price": "cheap"}])
    assert errors_of(response) == {"errors": {"shipping_lines_override": {"0": {
        "price": ["must be a decimal number as a string"]}}}}


def test_shipping_line_without_a_price_is_refused(vapi):
    response = create(vapi, make_customer(vapi), shipping_lines_override=[{"code": "x", "title": "T"}])
    assert errors_of(response) == {"errors": {"shipping_lines_override": {"0": {"price": ["is required"]}}}}


@pytest.mark.parametrize("field, value, message", [
    ("address1", "", "cannot be blank"),
    ("address1", None, "cannot be null"),
    ("city", None, "cannot be null"),
    ("first_name", " ", "cannot be blank"),
    ("last_name", None, "cannot be null"),
    ("phone", None, "cannot be null"),
    ("phone", 5, "must be a string"),
])
def test_update_with_a_bad_value_names_the_field_and_changes_nothing(vapi, field, value, message):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={field: value})
    assert errors_of(response) == {"errors": {field: [message]}}
    assert vapi.get(f"/addresses/{address.id}").json()["address"][field] == getattr(address, field)


def test_update_may_set_phone_to_the_empty_string(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"phone": ""})
    assert response.status_code == 200, response.text
    assert response.json()["address"]["phone"] == ""


# --- country --------------------------------------------------------------------------------------

def test_create_for_a_country_the_store_does_not_ship_to_is_refused_on_country_code(api):
    response = create(api, make_customer(api), country_code="NZ", province=None, zip="1010")
    assert errors_of(response) == {"errors": {"country_code": ["is not a country the store ships to"]}}


def test_2021_01_create_for_a_country_the_store_does_not_ship_to_is_refused_on_country(api):
    response = create(api, make_customer(api), V01, country_code=..., country="New Zealand", province=None,
                      zip="1010")
    assert errors_of(response) == {"errors": {"country": ["is not a country the store ships to"]}}


def test_2021_01_create_for_a_country_the_store_does_not_ship_to_is_refused(api):
    # The status half of the rule above, which holds today.
    response = create(api, make_customer(api), V01, country_code=..., country="New Zealand", province=None,
                      zip="1010")
    assert response.status_code == 422
    assert list(response.json()["errors"].values()) == [["is not a country the store ships to"]]


def test_store_that_ships_only_to_canada_refuses_us_addresses(api):
    store = api.other_store(ships_to=["CA"])
    response = create(store, make_customer(store))
    assert errors_of(response) == {"errors": {"country_code": ["is not a country the store ships to"]}}
    assert created(store, make_customer(store), country_code="CA", province="ON", zip="M5V 3L9")["country_code"] == "CA"


def test_create_with_an_unknown_country_code_is_refused(api):
    response = create(api, make_customer(api), country_code="ZZ")
    assert errors_of(response) == {"errors": {"country_code": ["is not a valid country code"]}}


def test_2021_01_create_with_an_unknown_country_name_is_refused_on_country(api):
    response = create(api, make_customer(api), V01, country_code=..., country="Narnia")
    assert errors_of(response) == {"errors": {"country": ["is not a known country"]}}


def test_country_code_is_stored_upper_case(api):
    assert created(api, make_customer(api), country_code="us")["country_code"] == "US"


def test_location_errors_are_reported_together(api):
    store = api.other_store(ships_to=["CA"])
    response = create(store, make_customer(store), province="ZZ", zip="abc")
    assert errors_of(response) == {"errors": {
        "country_code": ["is not a country the store ships to"],
        "province": ["is not a valid province or state of the country"],
        "zip": ["is not a valid United States zip code"],
    }}


def test_update_to_a_country_the_store_does_not_ship_to_is_refused(api):
    address = make_address(api)
    response = api.put(f"/addresses/{address.id}", json={"country_code": "NZ", "province": None, "zip": "1010"})
    assert errors_of(response) == {"errors": {"country_code": ["is not a country the store ships to"]}}


# --- province -------------------------------------------------------------------------------------

@pytest.mark.parametrize("country, zip_code", [("US", "94105"), ("CA", "M5V 3L9"), ("AU", "2000"),
                                               ("JP", "100-0001"), ("AE", ...)])
@pytest.mark.parametrize("province", [..., None, "", "  "])
def test_province_is_required_where_the_country_requires_it(vapi, country, zip_code, province):
    response = create(vapi, make_customer(vapi), country_code=country, zip=zip_code, province=province)
    assert errors_of(response) == {"errors": {"province": ["is required for this country"]}}


@pytest.mark.parametrize("country, province, zip_code", [("US", "ZZ", "94105"), ("US", "Ontario", "94105"),
                                                         ("CA", "CA", "M5V 3L9"), ("AE", "Dubai City", ...)])
def test_province_must_be_a_subdivision_of_the_country(vapi, country, province, zip_code):
    response = create(vapi, make_customer(vapi), country_code=country, province=province, zip=zip_code)
    assert errors_of(response) == {"errors": {"province": ["is not a valid province or state of the country"]}}


@pytest.mark.parametrize("sent, stored", [("CA", "California"), ("ca", "California"), ("US-CA", "California"),
                                          ("California", "California"), ("california", "California")])
def test_us_province_is_accepted_by_code_or_name_and_stored_as_the_name(vapi, sent, stored):
    assert created(vapi, make_customer(vapi), province=sent)["province"] == stored


@pytest.mark.parametrize("country, sent, stored, zip_code", [
    ("CA", "QC", "Quebec", "H2X 1Y4"), ("CA", "Québec", "Quebec", "H2X 1Y4"),
    ("AU", "NSW", "New South Wales", "2000"), ("AE", "DU", "Dubayy", ...),
])
def test_province_of_other_countries_is_stored_as_the_subdivision_name(api, country, sent, stored, zip_code):
    body = created(api, make_customer(api), country_code=country, province=sent, zip=zip_code)
    assert body["province"] == stored


@pytest.mark.parametrize("country, zip_code", [("DE", "10115"), ("FR", "75001"), ("GB", "SW1A 1AA")])
def test_province_is_optional_where_the_country_does_not_require_it(vapi, country, zip_code):
    assert created(vapi, make_customer(vapi), country_code=country, zip=zip_code, province=...)["province"] is None


def test_update_province_to_an_unknown_state_is_refused(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"province": "Atlantis"})
    assert errors_of(response) == {"errors": {"province": ["is not a valid province or state of the country"]}}


def test_update_removing_a_required_province_is_refused(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"province": None})
    assert errors_of(response) == {"errors": {"province": ["is required for this country"]}}


# --- zip ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("country, province", [("US", "CA"), ("DE", ...), ("GB", ...), ("CA", "ON"), ("FR", ...)])
@pytest.mark.parametrize("zip_code", [..., None, "", " "])
def test_zip_is_required_for_countries_with_postal_codes(vapi, country, province, zip_code):
    response = create(vapi, make_customer(vapi), country_code=country, province=province, zip=zip_code)
    assert errors_of(response) == {"errors": {"zip": ["is required for this country"]}}


@pytest.mark.parametrize("zip_code", [..., None, ""])
def test_address_in_a_country_without_postal_codes_is_created_without_zip(vapi, zip_code):
    body = created(vapi, make_customer(vapi), country_code="AE", province="DU", zip=zip_code)
    assert body["country_code"] == "AE"
    assert body["zip"] in (None, "")


@pytest.mark.parametrize("zip_code", ["9410", "941051", "9410a", "94105-12", "94105 1234", "941051234", "ABCDE"])
def test_us_zip_must_match_five_digits_with_optional_plus_four(vapi, zip_code):
    response = create(vapi, make_customer(vapi), zip=zip_code)
    assert errors_of(response) == {"errors": {"zip": ["is not a valid United States zip code"]}}


def test_us_zip_plus_four_is_accepted(vapi):
    assert created(vapi, make_customer(vapi), zip="94105-1420")["zip"] == "94105-1420"


@pytest.mark.parametrize("zip_code", ["SW1A 1AA", "sw1a 1aa", "SW1A1AA", "EC1A 1BB", "M1 1AE", "B33 8TH",
                                      "CR2 6XH", "DN55 1PT", "GIR 0AA"])
def test_uk_postcode_in_the_standard_pattern_is_accepted(vapi, zip_code):
    assert created(vapi, make_customer(vapi), country_code="GB", province=..., zip=zip_code)["zip"] == zip_code


@pytest.mark.parametrize("zip_code", ["12345", "SW1A", "SW1A 1A", "QW1A 1AA", "SW1A 1AAA", "1AA SW1"])
def test_uk_postcode_outside_the_pattern_is_refused(vapi, zip_code):
    response = create(vapi, make_customer(vapi), country_code="GB", province=..., zip=zip_code)
    assert errors_of(response) == {"errors": {"zip": ["is not a valid United Kingdom postcode"]}}


def test_zip_pattern_is_not_applied_to_other_countries(api):
    assert created(api, make_customer(api), country_code="DE", province=..., zip="D-10115")["zip"] == "D-10115"


def test_us_zip_that_does_not_exist_is_refused(vapi):
    response = create(vapi, make_customer(vapi), zip="00000")
    assert errors_of(response) == {"errors": {"zip": ["does not exist"]}}


def test_us_zip_of_another_state_is_refused_on_zip(vapi):
    response = create(vapi, make_customer(vapi), province="NY", zip="94105")
    assert errors_of(response) == {"errors": {"zip": ["does not belong to New York"]}}


def test_us_zip_of_the_state_is_accepted(vapi):
    body = created(vapi, make_customer(vapi), province="NY", zip="10001", city="New York")
    assert (body["province"], body["zip"]) == ("New York", "10001")


def test_update_of_the_state_alone_is_checked_against_the_stored_zip(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"province": "NY"})
    assert errors_of(response) == {"errors": {"zip": ["does not belong to New York"]}}


def test_update_of_the_zip_alone_is_checked_against_the_stored_state(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"zip": "10001"})
    assert errors_of(response) == {"errors": {"zip": ["does not belong to California"]}}


def test_update_of_state_and_zip_together_is_accepted(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"province": "NY", "zip": "10001", "city": "New York"})
    assert response.status_code == 200, response.text
    assert (response.json()["address"]["province"], response.json()["address"]["zip"]) == ("New York", "10001")


def test_update_removing_a_required_zip_is_refused(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"zip": None})
    assert errors_of(response) == {"errors": {"zip": ["is required for this country"]}}


@pytest.mark.parametrize("body", [
    {"country_code": "CA", "province": "ON"},
    {"country_code": "CA", "province": "ON", "zip": "94105"},
    {"country_code": "DE", "province": None},
    {"country_code": "DE", "zip": "94105 "},  # the same zip with a space (found by an audit)
])
def test_update_changing_the_country_without_changing_zip_is_refused(vapi, body):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json=body)
    assert errors_of(response) == {"errors": {"zip": ["must be changed when the country changes"]}}
    assert vapi.get(f"/addresses/{address.id}").json()["address"]["country_code"] == "US"


@pytest.mark.parametrize("zip_sent", [None, ""])
def test_a_move_between_two_countries_without_postal_codes_takes_an_empty_zip(vapi, zip_sent):
    """Found by an audit: HK to AE with `zip` null or empty was refused as the same zip, so the
    only way was a made-up postcode for a country that has none."""
    store = vapi.other_store(ships_to=["US", "HK", "AE"])
    address = make_address(store, country_code="HK", province=None, zip=None, city="Hong Kong")
    response = store.put(f"/addresses/{address.id}", json={"country_code": "AE", "province": "Dubai", "zip": zip_sent})
    assert response.status_code == 200, response.text
    assert (response.json()["address"]["country_code"], response.json()["address"]["zip"]) == ("AE", zip_sent)
    left_out = store.put(f"/addresses/{address.id}", json={"country_code": "HK", "province": None})
    assert errors_of(left_out) == {"errors": {"zip": ["must be changed when the country changes"]}}


def test_2021_01_update_changing_country_by_name_without_changing_zip_is_refused(api):
    address = make_address(api)
    response = api.put(f"/addresses/{address.id}", version=V01, json={"country": "Canada", "province": "ON"})
    assert errors_of(response) == {"errors": {"zip": ["must be changed when the country changes"]}}


def test_update_sending_the_same_country_needs_no_zip_change(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"country_code": "us", "city": "SF"})
    assert response.status_code == 200, response.text
    assert response.json()["address"]["city"] == "SF"


# --- presentment currency -------------------------------------------------------------------------

def test_presentment_currency_defaults_to_the_store_currency(vapi):
    store = vapi.other_store(currency="EUR")
    assert created(store, make_customer(store))["presentment_currency"] == "EUR"


@pytest.mark.parametrize("sent", ["CAD", "cad"])
def test_presentment_currency_may_be_an_enabled_currency(vapi, sent):
    store = vapi.other_store(presentment_currencies=["CAD"])
    assert created(store, make_customer(store), presentment_currency=sent)["presentment_currency"] == "CAD"


def test_presentment_currency_may_be_the_store_currency(vapi):
    store = vapi.other_store(presentment_currencies=["CAD"])
    assert created(store, make_customer(store), presentment_currency="USD")["presentment_currency"] == "USD"


@pytest.mark.parametrize("store_options", [{}, {"presentment_currencies": ["CAD"]}])
def test_presentment_currency_not_enabled_for_the_store_is_refused(vapi, store_options):
    store = vapi.other_store(**store_options)
    response = create(store, make_customer(store), presentment_currency="EUR")
    assert errors_of(response) == {"errors": {"presentment_currency": ["is not a currency enabled for the store"]}}


def test_presentment_currency_that_is_not_a_currency_code_is_refused(api):
    response = create(api, make_customer(api), presentment_currency="DOLLARS")
    assert errors_of(response) == {"errors": {"presentment_currency": ["must be a 3-letter currency code"]}}


# --- discounts (2021-11 body) ---------------------------------------------------------------------

def _discount_view(api, discount_id, code, value="10", value_type="percentage"):
    return [{"id": discount_id, "code": code, "value": value, "value_type": value_type}]


def test_create_with_a_discount_by_id_applies_it(api):
    discount = make_discount(api, code="TENOFF")
    body = created(api, make_customer(api), discounts=[{"id": discount}])
    assert body["discounts"] == _discount_view(api, discount, "TENOFF")


def test_create_with_a_discount_by_code_applies_it(api):
    discount = make_discount(api, code="BYCODE")
    body = created(api, make_customer(api), discounts=[{"code": "BYCODE"}])
    assert body["discounts"] == _discount_view(api, discount, "BYCODE")


def test_only_the_first_of_several_discounts_applies(api):
    first, second = make_discount(api, code="FIRST"), make_discount(api, code="SECOND", value="20")
    body = created(api, make_customer(api), discounts=[{"id": first}, {"id": second}])
    assert body["discounts"] == _discount_view(api, first, "FIRST")


def test_only_the_first_discount_is_looked_up_the_rest_are_ignored(api):
    first = make_discount(api, code="ONLY")
    body = created(api, make_customer(api), discounts=[{"id": first}, {"code": "NO-SUCH-CODE"}])
    assert body["discounts"] == _discount_view(api, first, "ONLY")


@pytest.mark.parametrize("ref", [{"id": 987654321}, {"code": "NO-SUCH-CODE"}])
def test_unknown_discount_is_refused(api, ref):
    response = create(api, make_customer(api), discounts=[ref])
    assert errors_of(response) == {"errors": {"discounts": ["discount not found"]}}
    assert api.get("/addresses").json()["addresses"] == []


def test_another_stores_discount_is_refused_as_unknown(api):
    foreign = make_discount(api.other_store(), code="THEIRS")
    response = create(api, make_customer(api), discounts=[{"id": foreign}])
    assert errors_of(response) == {"errors": {"discounts": ["discount not found"]}}


@pytest.mark.parametrize("status", ["disabled", "fully_disabled"])
def test_disabled_discount_is_refused(api, status):
    discount = make_discount(api, status=status)
    response = create(api, make_customer(api), discounts=[{"id": discount}])
    # NOTE: issue 9, the refusal names why (tests/api/test_discounts_apply.py has every reason).
    why = "discount is disabled" if status == "disabled" else "discount is fully disabled"
    assert errors_of(response) == {"errors": {"discounts": [why]}}


def test_discount_that_has_ended_or_not_started_is_refused(api):
    from datetime import timedelta
    now = api.clock.now()
    ended = make_discount(api, ends_at=now - timedelta(days=1))
    future = make_discount(api, starts_at=now + timedelta(days=1))
    for discount, why in ((ended, "discount has ended"), (future, "discount has not started yet")):
        response = create(api, make_customer(api), discounts=[{"id": discount}])
        assert errors_of(response) == {"errors": {"discounts": [why]}}


def test_discount_reference_without_id_or_code_is_refused(api):
    response = create(api, make_customer(api), discounts=[{}])
    assert errors_of(response) == {"errors": {"discounts": ["each discount needs an id or a code"]}}


def test_update_with_discounts_sets_the_discount(api):
    discount = make_discount(api, code="LATER")
    address = make_address(api)
    response = api.put(f"/addresses/{address.id}", json={"discounts": [{"code": "LATER"}]})
    assert response.status_code == 200, response.text
    assert response.json()["address"]["discounts"] == _discount_view(api, discount, "LATER")


def test_update_with_an_empty_discounts_array_removes_the_discount(api):
    discount = make_discount(api)
    address = make_address(api, discounts=[{"id": discount}])
    response = api.put(f"/addresses/{address.id}", json={"discounts": []})
    assert response.status_code == 200, response.text
    assert response.json()["address"]["discounts"] == []
    assert api.get(f"/addresses/{address.id}", version=V01).json()["address"]["discount_id"] is None
    assert address_events(api, address.id)[-1] == ("address/updated", address.id)


def test_update_without_discounts_keeps_the_discount(api):
    discount = make_discount(api, code="KEEP")
    address = make_address(api, discounts=[{"id": discount}])
    response = api.put(f"/addresses/{address.id}", json={"city": "SF"})
    assert response.json()["address"]["discounts"] == _discount_view(api, discount, "KEEP")


def test_update_with_a_disabled_discount_is_refused_and_keeps_the_old_one(api):
    kept = make_discount(api, code="OLD")
    disabled = make_discount(api, status="disabled")
    address = make_address(api, discounts=[{"id": kept}])
    response = api.put(f"/addresses/{address.id}", json={"discounts": [{"id": disabled}]})
    assert errors_of(response) == {"errors": {"discounts": ["discount is disabled"]}}
    assert api.get(f"/addresses/{address.id}").json()["address"]["discounts"] == _discount_view(api, kept, "OLD")


def test_update_with_an_unknown_discount_is_refused(api):
    address = make_address(api)
    response = api.put(f"/addresses/{address.id}", json={"discounts": [{"id": 987654321}]})
    assert errors_of(response) == {"errors": {"discounts": ["discount not found"]}}


def test_2021_01_address_body_ignores_discounts(api):
    discount = make_discount(api)
    body = created(api, make_customer(api), V01, discounts=[{"id": discount}])
    assert body["discount_id"] is None


def test_fixed_amount_discount_value_on_the_address_is_money_with_minor_digits(api):
    discount = make_discount(api, code="FIVE", discount_type="fixed_amount", value="5")
    body = created(api, make_customer(api), discounts=[{"id": discount}])
    assert body["discounts"] == [{"id": discount, "code": "FIVE", "value": "5.00", "value_type": "fixed_amount"}]


# --- payment method -------------------------------------------------------------------------------

def test_payment_method_of_the_customer_is_accepted(api):
    customer = make_customer(api)
    payment_method = make_payment_method(api, customer)
    assert created(api, customer, payment_method_id=payment_method)["payment_method_id"] == payment_method


def test_payment_method_of_another_customer_is_refused(api):
    customer, other = make_customer(api), make_customer(api)
    payment_method = make_payment_method(api, other)
    response = create(api, customer, payment_method_id=payment_method)
    assert errors_of(response) == {"errors": {"payment_method_id": ["payment method not found for this customer"]}}


def test_unknown_payment_method_is_refused(api):
    response = create(api, make_customer(api), payment_method_id=987654321)
    assert errors_of(response) == {"errors": {"payment_method_id": ["payment method not found for this customer"]}}


def test_another_stores_payment_method_is_refused(api):
    other = api.other_store()
    payment_method = make_payment_method(other, make_customer(other))
    response = create(api, make_customer(api), payment_method_id=payment_method)
    assert errors_of(response) == {"errors": {"payment_method_id": ["payment method not found for this customer"]}}


def test_update_payment_method_must_belong_to_the_address_customer(api):
    customer, other = make_customer(api), make_customer(api)
    address = make_address(api, customer)
    mine, theirs = make_payment_method(api, customer), make_payment_method(api, other)
    refused = api.put(f"/addresses/{address.id}", json={"payment_method_id": theirs})
    assert errors_of(refused) == {"errors": {"payment_method_id": ["payment method not found for this customer"]}}
    accepted = api.put(f"/addresses/{address.id}", json={"payment_method_id": mine})
    assert accepted.status_code == 200
    assert accepted.json()["address"]["payment_method_id"] == mine
    cleared = api.put(f"/addresses/{address.id}", json={"payment_method_id": None})
    assert cleared.json()["address"]["payment_method_id"] is None


# --- shipping lines override ----------------------------------------------------------------------

@pytest.mark.parametrize("sent, shown", [("5", "5.00"), (5, "5.00"), ("4.5", "4.50"), ("7.555", "7.56"),
                                         ("0", "0.00"), ("12.50", "12.50"),
                                         # A zero is unsigned (found by an audit: "-0.00" was shown).
                                         ("-0.00", "0.00"), ("-0", "0.00")])
def test_shipping_line_prices_are_normalized_to_two_decimals(vapi, sent, shown):
    body = created(vapi, make_customer(vapi), shipping_lines_override=[{"code": "c", "price": sent, "title": "T"}])
    assert body["shipping_lines_override"] == [{"code": "c", "price": shown, "title": "T"}]


def test_shipping_line_prices_follow_the_presentment_currency_minor_digits(api):
    store = api.other_store(currency="JPY", ships_to=["JP"])
    body = created(store, make_customer(store), country_code="JP", province="Tokyo", zip="100-0001",
                   shipping_lines_override=[{"code": "c", "price": "500.4", "title": "T"}])
    assert body["shipping_lines_override"] == [{"code": "c", "price": "500", "title": "T"}]


def test_replaced_shipping_override_is_kept_as_conserved(api):
    address = make_address(api, shipping_lines_override=[{"code": "old", "price": Decimal("5"), "title": "Old"}])
    response = api.put(f"/addresses/{address.id}",
                       json={"shipping_lines_override": [{"code": "new", "price": "7", "title": "New"}]})
    assert response.status_code == 200, response.text
    body = response.json()["address"]
    assert body["shipping_lines_override"] == [{"code": "new", "price": "7.00", "title": "New"}]
    assert body["shipping_lines_conserved"] == [{"code": "old", "price": "5.00", "title": "Old"}]


def test_removed_shipping_override_is_kept_as_conserved_and_rates_go_back_to_null(api):
    address = make_address(api, shipping_lines_override=[{"code": "old", "price": Decimal("5"), "title": "Old"}])
    body = api.put(f"/addresses/{address.id}", json={"shipping_lines_override": None}).json()["address"]
    assert body["shipping_lines_override"] is None
    assert body["shipping_lines_conserved"] == [{"code": "old", "price": "5.00", "title": "Old"}]


def test_2021_01_original_shipping_lines_is_an_alias_of_the_override_both_ways(api):
    address = make_address(api, shipping_lines_override=[{"code": "old", "price": Decimal("5"), "title": "Old"}])
    body = api.put(f"/addresses/{address.id}", version=V01,
                   json={"original_shipping_lines": [{"code": "new", "price": "6", "title": "New"}]}).json()["address"]
    assert body["shipping_lines_override"] == [{"code": "new", "price": "6.00", "title": "New"}]
    assert body["original_shipping_lines"] == [{"code": "new", "price": "6.00", "title": "New"}]
    assert "shipping_lines_conserved" not in body


def test_resending_the_same_shipping_override_conserves_nothing_and_records_no_event(api):
    address = make_address(api, shipping_lines_override=[{"code": "c", "price": Decimal("5"), "title": "T"}])
    body = api.put(f"/addresses/{address.id}",
                   json={"shipping_lines_override": [{"code": "c", "price": "5.00", "title": "T"}]}).json()["address"]
    assert body["shipping_lines_conserved"] == []
    assert address_events(api, address.id) == [("address/created", address.id)]


def test_first_shipping_override_on_an_address_without_one_conserves_nothing(api):
    address = make_address(api)
    body = api.put(f"/addresses/{address.id}",
                   json={"shipping_lines_override": [{"code": "c", "price": "5", "title": "T"}]}).json()["address"]
    assert body["shipping_lines_conserved"] == []
    assert body["shipping_lines_override"] == [{"code": "c", "price": "5.00", "title": "T"}]


def test_rules_apply_to_2021_01_create_as_to_2021_11(api):
    customer = make_customer(api)
    for version in (V01, V11):
        response = create(api, customer, version, province="NY")
        assert errors_of(response) == {"errors": {"zip": ["does not belong to New York"]}}


@pytest.mark.parametrize("price", ["-50", "-0.004", -5])
def test_a_negative_shipping_override_is_refused(vapi, price):
    """A shipping price is no discount (found by an audit: -50 made a free charge)."""
    address = make_address(vapi)
    name = "shipping_lines_override" if vapi.version == V11 else "original_shipping_lines"
    response = vapi.put(f"/addresses/{address.id}", json={name: [{"code": "o", "price": price, "title": "Neg"}]})
    assert errors_of(response) == {"errors": {name: {"0": {"price": ["must not be negative"]}}}}
    assert vapi.get(f"/addresses/{address.id}").json()["address"][name] in (None, [])
    made = vapi.put(f"/addresses/{address.id}", json={name: [{"code": "o", "price": "0", "title": "Free"}]})
    assert made.status_code == 200, made.text


def test_setting_a_discount_through_the_body_needs_write_discounts_as_applying_it_does(api):
    """docs/scopes.md: the `discounts` array does what apply_discount and remove_discount do.
    Found by an audit: a `write_customers` token put a 50 % code on an address, and learned
    which codes exist from the 422 of an unknown one."""
    discount = make_discount(api, code="HALF", value="50", discount_type="percentage")
    customers_only = api.token_with("write_customers")
    refused = "This token lacks the scope changing an address's discount needs: write_discounts"
    customer = make_customer(api)

    def create_as(token, **fields):
        return api.post("/addresses", json={"customer_id": customer.id, **us_fields(), **fields}, token=token,
                        version=V11)

    for ref in ({"code": "HALF"}, {"id": discount}, {"code": "NO-SUCH-CODE"}):
        response = create_as(customers_only, discounts=[ref])
        assert response.status_code == 403 and response.json() == {"errors": refused}, response.text
    assert api.get("/addresses", version=V11).json()["addresses"] == []
    # Without a discount, or with `[]`, a create needs no more than its own scope.
    made = create_as(customers_only, discounts=[])
    assert made.status_code == 201, made.text
    address = made.json()["address"]
    for ref in ({"code": "half"}, {"id": discount}):
        response = api.put(f"/addresses/{address['id']}", version=V11, json={"discounts": [ref]}, token=customers_only)
        assert response.status_code == 403 and response.json() == {"errors": refused}, response.text
    assert api.get(f"/addresses/{address['id']}", version=V11).json()["address"]["discounts"] == []
    assert address_events(api, address["id"]) == [("address/created", address["id"])]
    # With the scope it is set; then the same discount sent back (by id, by code in any case),
    # or the rest of the address alone, is no change and needs no more.
    both = api.token_with("write_customers", "write_discounts")
    assert api.put(f"/addresses/{address['id']}", version=V11, json={"discounts": [{"code": "HALF"}]},
                   token=both).status_code == 200
    shown = api.get(f"/addresses/{address['id']}", version=V11).json()["address"]
    for body in ({"discounts": shown["discounts"]}, {"discounts": [{"code": " half "}]},
                 {"discounts": [{"id": discount}], "address2": "Flat 2"}, {"address2": "Flat 3"}):
        response = api.put(f"/addresses/{address['id']}", version=V11, json=body, token=customers_only)
        assert response.status_code == 200, (body, response.text)
    # Removing it or replacing it is a change: refused.
    other = make_discount(api, code="OTHER")
    for body in ({"discounts": []}, {"discounts": [{"id": other}]}, {"discounts": [{"code": "OTHER"}]}):
        response = api.put(f"/addresses/{address['id']}", version=V11, json=body, token=customers_only)
        assert response.status_code == 403 and response.json() == {"errors": refused}, (body, response.text)
    assert api.get(f"/addresses/{address['id']}", version=V11).json()["address"]["discounts"][0]["id"] == discount
