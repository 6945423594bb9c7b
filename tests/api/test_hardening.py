"""Bad input of every odd kind answers 422 in the error shape, never 500, and both
databases answer the same (decisions §2.3, §2.5, §3.3). Found by review."""

import base64

import msgspec
import pytest

from tests.api.test_addresses_support import V01, V11, create, us_fields
from tests.builders import events_of, make_address, make_customer


def _errors(response, status=422):
    assert response.status_code == status, response.text
    return response.json()["errors"]


@pytest.mark.parametrize("param", ["limit", "page"])
@pytest.mark.parametrize("value", ["²", "٣", "1.5", "-1"])
def test_limit_and_page_take_ascii_digits_only(api, param, value):
    assert set(_errors(api.get("/customers", params={param: value}))) == {param}


@pytest.mark.parametrize("value", ["--5", "²", "٩", "5-"])
def test_integer_body_fields_take_ascii_digits_only(api, value):
    body = {**us_fields(), "customer_id": value}
    assert _errors(api.post("/addresses", json=body)) == {"customer_id": ["must be an integer"]}


@pytest.mark.parametrize("value", ["--5", "٣"])
def test_integer_query_filters_take_ascii_digits_only(api, value):
    assert _errors(api.get("/addresses", params={"customer_id": value})) == {
        "customer_id": [f"Invalid integer: {value}"]}


@pytest.mark.parametrize("value", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00"])
def test_datetime_filter_past_the_calendar_answers_422(api, value):
    assert _errors(api.get("/customers", params={"created_at_min": value})) == {
        "created_at_min": [f"Invalid date: {value}. Must be a valid ISO-8601 datetime string"]}


def test_a_money_value_beyond_twelve_digits_answers_422(api):
    customer = make_customer(api)
    body = {**us_fields(), "customer_id": customer.id,
            "shipping_lines_override": [{"code": "x", "price": "1e30", "title": "Too much"}]}
    assert _errors(api.post("/addresses", json=body)) == {
        "shipping_lines_override": {"0": {"price": ["is out of range"]}}}


def test_a_list_of_more_than_1000_ids_answers_422(api):
    ids = ",".join(str(n) for n in range(1, 1002))
    assert _errors(api.get("/customers", params={"ids": ids})) == {
        "ids": ["Invalid ids: at most 1000 ids at a time"]}


def _cursor(plural, raw, boundary):
    payload = msgspec.json.encode({"r": plural, "q": raw, "p": boundary})
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode()


@pytest.mark.parametrize("raw,boundary", [
    ({"sort_by": "updated_at-desc"}, ["garbage", 1, False]),
    ({"sort_by": "updated_at-desc"}, ["2026-01-15T12:00:00", 1, False]),  # no zone: not ours
    ({"sort_by": "updated_at-desc"}, [5, 1, False]),
    ({}, [1, 2**63, False]),
    ({}, [1, 1, "yes"]),
    ({}, [1]),
    ({}, {"a": 1}),
    ({"sort_by": 5}, [1, 1, False]),
])
def test_a_tampered_cursor_answers_422_invalid_value(api, raw, boundary):
    make_customer(api)
    response = api.get("/customers", params={"cursor": _cursor("customers", raw, boundary)})
    assert _errors(response) == {"cursor": ["Invalid value"]}


def test_nul_characters_are_refused_in_strings_objects_and_filters_on_both_databases(vapi):
    body = {"email": "nul@example.com", "first_name": "A\u0000B", "last_name": "L",
            "analytics_data": {"utm_params": [{"x": "\u0000"}]}}
    errors = _errors(vapi.post("/customers", json=body))
    assert errors["first_name"] == ["must not contain NUL characters"]
    assert errors["analytics_data"] == ["must not contain NUL characters"]
    assert _errors(vapi.get("/customers", params={"email": "a\u0000b"})) == {
        "email": ["Invalid value: must not contain NUL characters"]}


def test_non_ascii_digits_in_a_us_zip_are_refused_not_a_crash(api):
    customer = make_customer(api)
    assert _errors(create(api, customer, V11, zip="٩٤١٠٥")) == {"zip": ["is not a valid United States zip code"]}
    verdict = api.post("/addresses/validate", version=V01,
                       json={"address1": "1 Main", "city": "SF", "state": "CA", "zipcode": "٩٤١٠٥"})
    assert verdict.status_code == 200 and verdict.json()["errors"] == {"zipcode": ["does not exist"]}


@pytest.mark.parametrize("country,zip_code", [("US", "94105\n"), ("GB", "SW1A 1AA\n")])
def test_zips_are_matched_whole_and_stored_without_surrounding_space(api, country, zip_code):
    customer = make_customer(api)
    fields = {"country_code": country, "zip": zip_code}
    if country == "GB":
        fields.update(province=..., city="London")
    response = create(api, customer, V11, **fields)
    assert response.status_code == 201, response.text
    assert response.json()["address"]["zip"] == zip_code.strip()
    assert _errors(create(api, customer, V11, zip="94105\nX")) == {"zip": ["is not a valid United States zip code"]}


def test_a_country_change_drops_the_old_province_unless_a_new_one_is_sent(api):
    address = make_address(api)
    moved = api.put(f"/addresses/{address.id}", json={"country_code": "GB", "zip": "SW1A 1AA"})
    assert moved.status_code == 200 and moved.json()["address"]["province"] is None
    other = make_address(api)
    assert _errors(api.put(f"/addresses/{other.id}", json={"country_code": "CA", "zip": "K1A 0B1"})) == {
        "province": ["is required for this country"]}
    canada = api.put(f"/addresses/{other.id}", json={"country_code": "CA", "zip": "K1A 0B1", "province": "ON"})
    assert canada.json()["address"]["province"] == "Ontario"


def test_2021_01_keeps_user_text_that_looks_like_a_datetime(api):
    customer = make_customer(api, first_name="2026-01-15T12:00:00+00:00")
    body = api.get(f"/customers/{customer.id}", version=V01).json()["customer"]
    assert body["first_name"] == "2026-01-15T12:00:00+00:00"
    assert not body["created_at"].endswith("+00:00")


def test_an_alias_and_its_successor_that_disagree_answer_422(api):
    customer = make_customer(api)
    body = {k: v for k, v in us_fields().items()}
    body.update(country="Canada")
    assert _errors(api.post(f"/customers/{customer.id}/addresses", json=body, version=V01)) == {
        "country": ["conflicts with country_code"]}
    body = {**us_fields(), "note_attributes": [{"name": "a", "value": "1"}],
            "cart_attributes": [{"name": "b", "value": "2"}]}
    assert _errors(api.post(f"/customers/{customer.id}/addresses", json=body, version=V01)) == {
        "cart_attributes": ["conflicts with note_attributes"]}


def test_an_alias_that_agrees_with_its_successor_is_accepted(api):
    customer = make_customer(api)
    body = {**us_fields(), "country": "United States", "note_attributes": [{"name": "a", "value": "1"}],
            "cart_attributes": [{"name": "a", "value": "1"}]}
    response = api.post(f"/customers/{customer.id}/addresses", json=body, version=V01)
    assert response.status_code == 200, response.text
    assert response.json()["address"]["note_attributes"] == [{"name": "a", "value": "1"}]


def test_2021_01_errors_keep_the_name_the_caller_sent(api):
    customer = make_customer(api)
    by_code = {**us_fields(country_code="NZ", zip="6011", province=...)}
    by_code = {k: v for k, v in by_code.items() if v is not ...}
    assert set(_errors(api.post(f"/customers/{customer.id}/addresses", json=by_code, version=V01))) == {"country_code"}
    by_name = {k: v for k, v in by_code.items() if k != "country_code"} | {"country": "New Zealand"}
    assert set(_errors(api.post(f"/customers/{customer.id}/addresses", json=by_name, version=V01))) == {"country"}


def test_a_customer_update_that_changes_nothing_records_no_event_and_keeps_updated_at(api):
    customer = make_customer(api)
    api.clock.advance(seconds=30)
    try:
        response = api.put(f"/customers/{customer.id}",
                           json={"first_name": customer.first_name, "email": customer.email})
    finally:
        api.clock.advance(seconds=-30)
    assert response.status_code == 200
    assert response.json()["customer"]["updated_at"] == customer.updated_at.isoformat()
    assert [t for t, _ in events_of(api, customer.id)] == ["customer/created"]


def test_deleting_a_customer_records_an_event_for_each_address_it_removes(api):
    customer = make_customer(api)
    first, second = make_address(api, customer), make_address(api, customer)
    assert api.delete(f"/customers/{customer.id}").status_code == 204
    deleted = [rid for topic, rid in events_of(api) if topic == "address/deleted"]
    assert sorted(deleted) == sorted([first.id, second.id])
