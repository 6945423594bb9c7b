"""POST /addresses/validate (spec 02 Addresses, USA only; decisions §4.4 offline verifier)."""

from __future__ import annotations

import pytest

from tests.api.test_addresses_support import V01, V11
from tests.builders import make_customer

MARKET_ST = {"address1": "101 Market St", "city": "San Francisco", "state": "CA", "zipcode": "94105"}


def validate(api, body, **kw):
    return api.post("/addresses/validate", json=body, version=V01, **kw)


def test_valid_us_address_answers_city_state_state_name_zipcode_and_no_errors(api):
    response = validate(api, MARKET_ST)
    assert response.status_code == 200, response.text
    assert response.json() == {"city": "San Francisco", "errors": {}, "state": "CA", "state_name": "California",
                               "zipcode": "94105"}


@pytest.mark.parametrize("state", ["California", "california", "US-CA", "ca"])
def test_state_may_be_given_by_code_or_name_and_answers_the_code(api, state):
    body = validate(api, {**MARKET_ST, "state": state}).json()
    assert (body["state"], body["state_name"], body["errors"]) == ("CA", "California", {})


def test_zip_plus_four_is_checked_by_its_first_five_digits(api):
    body = validate(api, {**MARKET_ST, "zipcode": "94105-1420"}).json()
    assert body == {"city": "San Francisco", "errors": {}, "state": "CA", "state_name": "California",
                    "zipcode": "94105-1420"}


def test_unknown_zip_answers_an_error_on_zipcode(api):
    response = validate(api, {**MARKET_ST, "zipcode": "00000"})
    assert response.status_code == 200
    assert response.json() == {"city": None, "errors": {"zipcode": ["does not exist"]}, "state": "CA",
                               "state_name": "California", "zipcode": "00000"}


def test_zip_of_another_state_answers_an_error_on_zipcode(api):
    response = validate(api, {**MARKET_ST, "state": "NY"})
    assert response.status_code == 200
    body = response.json()
    assert body["errors"] == {"zipcode": ["does not belong to New York"]}
    assert (body["state"], body["state_name"], body["zipcode"]) == ("NY", "New York", "94105")


def test_unknown_state_answers_an_error_on_state_and_the_zips_state(api):
    """The state the zip gives, its code and its name together (found by an audit: the code
    with a null name); none without a zip that exists."""
    body = validate(api, {**MARKET_ST, "state": "Atlantis"}).json()
    assert body["errors"] == {"state": ["is not a United States state"]}
    assert (body["state"], body["state_name"]) == ("CA", "California")
    body = validate(api, {**MARKET_ST, "state": "Atlantis", "zipcode": "00000"}).json()
    assert (body["state"], body["state_name"]) == (None, None)


@pytest.mark.parametrize("zipcode,message", [
    ("abcde", "is not a valid United States zip code"), ("941", "is not a valid United States zip code"),
    ("94105abc", "is not a valid United States zip code"), ("941051420", "is not a valid United States zip code"),
    ("", "is required for this country")])
def test_malformed_zip_answers_the_message_an_address_create_gives(api, zipcode, message):
    """What this endpoint approves, an address create takes (found by an audit: a zip whose first
    five digits exist was approved whatever followed them, and creating it then failed)."""
    body = validate(api, {**MARKET_ST, "zipcode": zipcode}).json()
    assert body["errors"] == {"zipcode": [message]}
    created = api.post("/addresses", version=V11, json={
        "customer_id": make_customer(api).id, "address1": "1 Main", "city": "San Francisco", "province": "CA",
        "zip": zipcode, "country_code": "US", "first_name": "A", "last_name": "B", "phone": "555-0100"})
    assert created.status_code == 422 and created.json()["errors"].get("zip") == [message], created.text


def test_blank_street_and_city_are_named(api):
    body = validate(api, {**MARKET_ST, "address1": " ", "city": ""}).json()
    assert body["errors"] == {"address1": ["cannot be blank"], "city": ["cannot be blank"]}


def test_missing_fields_answer_422_naming_each(api):
    response = validate(api, {})
    assert response.status_code == 422
    assert response.json() == {"errors": {"address1": ["is required"], "city": ["is required"],
                                          "state": ["is required"], "zipcode": ["is required"]}}


@pytest.mark.parametrize("field", ["address1", "city", "state", "zipcode"])
def test_one_missing_field_answers_422_naming_it(api, field):
    body = {k: v for k, v in MARKET_ST.items() if k != field}
    response = validate(api, body)
    assert (response.status_code, response.json()) == (422, {"errors": {field: ["is required"]}})


@pytest.mark.parametrize("field", ["address1", "city", "state", "zipcode"])
def test_non_string_field_answers_422_naming_it(api, field):
    response = validate(api, {**MARKET_ST, field: 94105})
    assert (response.status_code, response.json()) == (422, {"errors": {field: ["must be a string"]}})


def test_body_that_is_not_a_json_object_answers_415(api):
    response = api.post("/addresses/validate", content=b"[]", version=V01,
                        headers={"Content-Type": "application/json"})
    assert response.status_code == 415


def test_validate_is_not_in_2021_11(api):
    response = api.post("/addresses/validate", json=MARKET_ST, version=V11)
    assert response.status_code == 501


def test_validate_needs_a_customers_scope(api):
    assert validate(api, MARKET_ST, token=api.token_with("read_store")).status_code == 403
    assert validate(api, MARKET_ST, token=api.token_with("read_customers")).status_code == 200


def test_validate_writes_no_address(api):
    validate(api, MARKET_ST)
    assert api.get("/addresses", version=V11).json()["addresses"] == []
