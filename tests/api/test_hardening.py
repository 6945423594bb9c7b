"""Bad input of every odd kind answers 422 in the error shape, never 500, and both
databases answer the same (decisions §2.3, §2.5, §3.3). Found by review."""

import asyncio
import base64
import re
from datetime import timedelta, timezone
from decimal import Decimal

import msgspec
import pytest

from rebill.api.call import Services
from rebill.api.fields import Field, Schema
from rebill.api.routing import Api
from rebill.api.versions import VERSIONS
from rebill.app import RESOURCES
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.errors import ValidationFailed
from rebill.http.auth import TokenResolver
from rebill.http.context import RequestContext
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


@pytest.mark.parametrize("price,message", [
    ("1000000000000", "is out of range"),
    (1e30, "is out of range"),  # a JSON number: read through its repr, 1e+30
    (10**400, "is out of range"),  # a JSON integer literal of 401 digits
    ("999999999999.5", "is out of range"),  # would round up to 13 digits at 0 minor digits
    ("999999999999.995", "is out of range"),  # ... or at 2
    ("1e30", "must be a decimal number as a string"),
    ("1E+999999999", "must be a decimal number as a string"),
    ("١٢", "must be a decimal number as a string"),  # Arabic-Indic digits
    ("1_000", "must be a decimal number as a string"),
    (" 12", "must be a decimal number as a string"),
    ("12.", "must be a decimal number as a string"),
    ("NaN", "must be a decimal number as a string"),
    ("Infinity", "must be a decimal number as a string"),
    (True, "must be a decimal number as a string"),
])
def test_a_shipping_price_is_a_plain_decimal_of_at_most_twelve_digits(api, price, message):
    customer = make_customer(api)
    body = {**us_fields(), "customer_id": customer.id,
            "shipping_lines_override": [{"code": "x", "price": price, "title": "Too much"}]}
    assert _errors(api.post("/addresses", json=body)) == {
        "shipping_lines_override": {"0": {"price": [message]}}}


@pytest.mark.parametrize("price,shown", [(12.5, "12.50"), ("999999999999.49", "999999999999.49"),
                                         ("0007.10", "7.10"), (1e-7, "0.00")])
def test_a_shipping_price_within_the_limits_is_kept_exactly(api, price, shown):
    customer = make_customer(api)
    body = {**us_fields(), "customer_id": customer.id,
            "shipping_lines_override": [{"code": "x", "price": price, "title": "T"}]}
    response = api.post("/addresses", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["address"]["shipping_lines_override"][0]["price"] == shown


# Money fields (kind "money") ------------------------------------------------------------------

AMOUNT = Schema(Field("amount", "money"), Field("jpy", "money", decimals=0), Field("kwd", "money", decimals=3),
                Field("any", "money", decimals=None), Field("delta", "money", signed=True))


@pytest.mark.parametrize("name,value,message", [
    ("amount", "1E+999999999", "must be a decimal number as a string"),
    ("amount", "1e3", "must be a decimal number as a string"),
    ("amount", "١٢", "must be a decimal number as a string"),
    ("amount", "1_000", "must be a decimal number as a string"),
    ("amount", "+5", "must be a decimal number as a string"),
    ("amount", ".5", "must be a decimal number as a string"),
    ("amount", "1.2.3", "must be a decimal number as a string"),
    ("amount", [], "must be a decimal number as a string"),
    ("amount", False, "must be a decimal number as a string"),
    ("amount", "-5", "must not be negative"),
    ("amount", -5, "must not be negative"),
    ("amount", "1000000000000", "is out of range"),
    ("amount", 10**400, "is out of range"),
    ("amount", 1e16, "is out of range"),
    ("amount", "999999999999.995", "has too many decimal places (at most 2)"),
    ("amount", 0.1 + 0.2, "has too many decimal places (at most 2)"),
    ("jpy", "12.5", "has too many decimal places (at most 0)"),
    ("kwd", "1.2345", "has too many decimal places (at most 3)"),
    ("any", "-1", "must not be negative"),
    ("any", "1000000000000.5", "is out of range"),
    ("delta", "--1", "must be a decimal number as a string"),
    ("delta", "-1000000000000", "is out of range"),
])
def test_a_money_field_says_what_is_wrong(name, value, message):
    with pytest.raises(ValidationFailed) as refused:
        AMOUNT.parse({name: value})
    assert refused.value.errors == {name: [message]}


@pytest.mark.parametrize("name,value,expected", [
    ("amount", "12.50", Decimal("12.5")),
    ("amount", 12.5, Decimal("12.5")),
    ("amount", 12, Decimal("12")),
    ("amount", 12.0, Decimal("12")),
    ("amount", "999999999999.99", Decimal("999999999999.99")),
    ("amount", "0", Decimal("0")),
    ("jpy", "1200.00", Decimal("1200")),
    ("kwd", "1.234", Decimal("1.234")),
    ("any", "1.23456", Decimal("1.23456")),
    ("delta", "-1.25", Decimal("-1.25")),
])
def test_a_money_field_takes_plain_decimals_exactly(name, value, expected):
    clean = AMOUNT.parse({name: value})[name]
    assert clean == expected and str(clean) == str(expected)


# Integers of thousands of digits ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["9" * 5000, "-" + "9" * 20, "9223372036854775808"])
def test_an_integer_string_of_thousands_of_digits_answers_out_of_range(api, value):
    body = {**us_fields(), "customer_id": value}
    assert _errors(api.post("/addresses", json=body)) == {"customer_id": ["is out of range"]}


def test_an_integer_string_with_thousands_of_leading_zeros_is_its_value(api):
    customer = make_customer(api)
    response = api.post("/addresses", json={**us_fields(), "customer_id": "0" * 5000 + str(customer.id)})
    assert response.status_code == 201, response.text
    assert response.json()["address"]["customer_id"] == customer.id


def test_a_json_integer_literal_of_hundreds_of_digits_in_a_field_answers_out_of_range(api):
    raw = b'{"customer_id": ' + b"9" * 400 + b', "address1": "x"}'
    response = api.post("/addresses", content=raw, headers={"Content-Type": "application/json"})
    assert _errors(response)["customer_id"] == ["is out of range"]


@pytest.mark.parametrize("literal", [b"9" * 5000, b"-" + b"9" * 5000, b"1e400", b"-1e400"])
def test_a_json_number_past_any_float_or_of_thousands_of_digits_answers_422_naming_the_body(api, literal):
    raw = b'{"email": "n@example.com", "analytics_data": {"n": ' + literal + b"}}"
    response = api.post("/customers", content=raw, headers={"Content-Type": "application/json"})
    assert _errors(response) == {"body": ["has a number out of range"]}


@pytest.mark.parametrize("value", ["9" * 5000, "-" + "9" * 5000, "9223372036854775808"])
def test_an_integer_filter_of_thousands_of_digits_answers_422(api, value):
    assert _errors(api.get("/addresses", params={"customer_id": value})) == {
        "customer_id": [f"Invalid integer: {value}"]}


@pytest.mark.parametrize("value", ["9" * 5000, "1," + "9" * 5000, "9223372036854775808"])
def test_an_ids_filter_of_thousands_of_digits_answers_422(api, value):
    assert _errors(api.get("/customers", params={"ids": value})) == {
        "ids": [f"Invalid ids: {value}. Must be comma-separated integers"]}


def test_an_ids_filter_with_thousands_of_leading_zeros_is_its_value(api):
    customer = make_customer(api)
    listed = api.get("/customers", params={"ids": "0" * 5000 + str(customer.id)})
    assert listed.status_code == 200, listed.text
    assert [c["id"] for c in listed.json()["customers"]] == [customer.id]


# Nesting, UTF-8 -------------------------------------------------------------------------------

TOO_DEEP = {"body": ["is nested too deeply (at most 32 levels)"]}


def _nested(levels: int) -> bytes:
    """A JSON value nesting ``levels`` arrays and objects, alternately."""
    opening = b"".join(b'{"a": ' if n % 2 else b"[" for n in range(levels))
    closing = b"".join(b"}" if n % 2 else b"]" for n in reversed(range(levels)))
    return opening + b"1" + closing


def _post_raw(api, path, raw):
    return api.post(path, content=raw, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("levels", [33, 1000, 100_000])
def test_json_nested_too_deeply_in_a_field_answers_422_naming_the_limit(api, levels):
    raw = b'{"email": "deep@example.com", "first_name": "A", "last_name": "B", "analytics_data": {"x": '
    raw += _nested(levels - 2) + b"}}"
    assert _errors(_post_raw(api, "/customers", raw)) == TOO_DEEP


@pytest.mark.parametrize("body", [b'{"a": ' + b"[" * 1000 + b"]" * 1000 + b"}",
                                  b'{"a": ' + b"[" * 1000 + b"}",  # unbalanced
                                  b'{"a": ' + b"[" * 100_000])  # truncated: the decoder's own guard
def test_json_nested_too_deeply_in_the_body_answers_422_on_every_write(api, body):
    """Every operation that reads a body, in a version it exists in, read from the route table
    (by a store of the tier it needs: a store without it is refused before the body is read)."""
    from rebill.app import RESOURCES
    writes = [op for module in RESOURCES for op in module.endpoints.operations if op.method in ("POST", "PUT", "DELETE")]
    assert len(writes) > 30
    tier_b = api.other_store(plan_tier="premium_b")
    for op in writes:
        path = re.sub(r"\{[^}]+\}", "1", op.path)
        store = api if op.store_check is None else tier_b
        response = store.request(op.method, path, content=body, headers={"Content-Type": "application/json"},
                                 version=sorted(op.versions)[0])
        # An async batch's tasks take the three levels of their wrapper on top (api-choices, Nesting).
        assert _errors(response) == {"body": [f"is nested too deeply (at most {op.body_nesting} levels)"]}, (
            op.method, op.path)


def test_json_nested_exactly_32_levels_is_accepted_and_brackets_in_strings_do_not_count(api):
    raw = (b'{"email": "d32@example.com", "first_name": "A", "last_name": "B", "analytics_data": '
           b'{"s": "' + b"[{" * 500 + b'\\"[", "x": ' + _nested(30) + b"}}")
    response = _post_raw(api, "/customers", raw)
    assert response.status_code == 201, response.text
    stored = response.json()["customer"]["analytics_data"]
    assert stored["s"] == "[{" * 500 + '"['


@pytest.mark.parametrize("raw", [b'{"email": "u@example.com", "first_name": "A\xff"}',
                                 b'{"email": "u@example.com", "first_name": "A\xed\xa0\x80"}',
                                 b'{"\xc3": 1}'])
def test_invalid_utf8_inside_a_json_string_answers_422_naming_the_body(vapi, raw):
    assert _errors(_post_raw(vapi, "/customers", raw)) == {"body": ["is not valid UTF-8"]}


def test_free_form_json_comes_back_as_written_on_both_databases(api):
    """Found by an audit: on PostgreSQL (jsonb) a GET listed an object's keys by length, at every
    level, and wrote `1e16` as an integer of 17 digits; the create's answer and SQLite kept them."""
    raw = (b'{"email": "order@example.com", "first_name": "A", "last_name": "B", "analytics_data": '
           b'{"zzz": 1, "a": {"y": 2, "b": [3, {"q": 1, "c": 2}]}, "big": 1e16, "one": 1.5, '
           b'"utm_params": [{"utm_source": "x", "utm_campaign": "y", "utm_medium": "e"}]}}')
    made = _post_raw(api, "/customers", raw)
    assert made.status_code in (200, 201), made.text
    customer_id = made.json()["customer"]["id"]
    got = api.get(f"/customers/{customer_id}")
    text = got.content.decode()
    assert '"zzz":1,"a":{"y":2,"b":[3,{"q":1,"c":2}]},"big":1e16,"one":1.5,' in text, text
    assert '{"utm_source":"x","utm_campaign":"y","utm_medium":"e"}' in text, text
    listed = api.get("/customers", params={"email": "order@example.com"}).json()["customers"]
    assert listed[0]["analytics_data"] == got.json()["customer"]["analytics_data"]


@pytest.mark.parametrize("query, name", [("email=a%FFZZ@ex.com", "email"), ("email=%ED%A0%80", "email"),
                                         ("limit=5&em%FFail=x", "em\ufffdail"), ("email=%C3", "email")])
def test_a_query_value_that_is_not_utf8_answers_422_naming_it(vapi, query, name):
    """Found by an audit: the stray byte became U+FFFD, and the filter matched a customer whose
    e-mail holds that character, instead of saying the value was wrong."""
    customer = make_customer(vapi, email="a\ufffdZZ@ex.com")
    assert customer.email == "a\ufffdZZ@ex.com"
    assert _errors(vapi.get(f"/customers?{query}")) == {name: ["is not valid UTF-8"]}
    found = vapi.get("/customers?email=a%EF%BF%BDZZ@ex.com&sort_by=id-asc")  # the character itself, in UTF-8
    assert found.status_code == 200 and [c["id"] for c in found.json()["customers"]] == [customer.id]
    assert vapi.get("/customers?email=caf%C3%A9%40ex.com").status_code == 200


@pytest.mark.parametrize("raw", [b'{"email": "u@example.com", "first_name": "A\\ud83d"}',
                                 b'{"email": "u@example.com", "first_name": "\\udc00z"}',
                                 b'{"\\ud800": 1}', b'{"a": {"b": ["\\ud83d"]}}'])
def test_an_escaped_lone_surrogate_in_an_object_answers_422_naming_it(vapi, raw):
    """The body is a JSON object by the grammar; its string cannot be text (found by an audit:
    it answered 415 "not a JSON object", telling the client to fix the wrong thing)."""
    assert _errors(_post_raw(vapi, "/customers", raw)) == {
        "body": ["has a \\u escape that is no character (a lone UTF-16 surrogate)"]}


@pytest.mark.parametrize("raw", [b'["\\ud800"]', b"\xef\xbb\xbf{}", '{"a": 1}'.encode("utf-16"), b'{"a": NaN}'])
def test_what_is_no_json_object_still_answers_415(vapi, raw):
    response = _post_raw(vapi, "/customers", raw)
    assert response.status_code == 415, response.text


def test_analytics_data_nested_to_the_limit_is_checked_for_nul_without_recursion(api):
    raw = (b'{"email": "nul32@example.com", "first_name": "A", "last_name": "B", "analytics_data": {"x": '
           + _nested(30).replace(b"1", b'"\\u0000"') + b"}}")
    assert _errors(_post_raw(api, "/customers", raw)) == {"analytics_data": ["must not contain NUL characters"]}


def test_a_list_of_more_than_1000_ids_answers_422(api):
    ids = ",".join(str(n) for n in range(1, 1002))
    assert _errors(api.get("/customers", params={"ids": ids})) == {
        "ids": ["Invalid ids: at most 1000 ids at a time"]}


def _cursor(plural, raw, boundary):
    """A cursor as the 2021-11 list at /{plural} makes them, with a boundary of our choosing."""
    from rebill.api.listing import cursor_key
    payload = msgspec.json.encode({"r": cursor_key(plural, "2021-11", f"/{plural}"), "q": raw, "p": boundary})
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
    ({"sort_by": "updated_at-desc"}, ["0001-01-01T00:00:00+05:00", 1, False]),  # no UTC value
    ({"sort_by": "updated_at-asc"}, ["9999-12-31T23:00:00-05:00", 1, True]),
    ({"sort_by": "updated_at-desc"}, [[[[["deep"]]]], 1, False]),
])
def test_a_tampered_cursor_answers_422_invalid_value(api, raw, boundary):
    make_customer(api)
    response = api.get("/customers", params={"cursor": _cursor("customers", raw, boundary)})
    assert _errors(response) == {"cursor": ["Invalid value"]}


@pytest.mark.parametrize("payload", [b'{"r": "customers 2021-11 /customers", "q": {}, "p": ' + b"[" * 1000 + b"]" * 1000 + b"}",
                                     b"[" * 20_000, b'{"r": "customers 2021-11 /customers", "q": {}, "p": [1, ' + b"9" * 5000 + b"]}"])
def test_a_cursor_nested_too_deeply_or_with_a_huge_number_answers_422_invalid_value(api, payload):
    cursor = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
    assert _errors(api.get("/customers", params={"cursor": cursor})) == {"cursor": ["Invalid value"]}


def test_a_cursor_with_a_non_utc_boundary_is_read_in_utc(api):
    first, second = make_customer(api), make_customer(api)
    boundary = second.updated_at.astimezone(timezone(timedelta(hours=5))).isoformat()
    cursor = _cursor("customers", {"sort_by": "updated_at-desc"}, [boundary, second.id, False])
    listed = api.get("/customers", params={"cursor": cursor})
    assert listed.status_code == 200, listed.text
    assert [c["id"] for c in listed.json()["customers"]] == [first.id]


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
    assert verdict.status_code == 200 and verdict.json()["errors"] == {
        "zipcode": ["is not a valid United States zip code"]}  # what the create says (the zip rule first)


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
    assert [t for t, _ in events_of(api, customer.id, "customer")] == ["customer/created"]


def test_deleting_a_customer_records_an_event_for_each_address_it_removes(api):
    customer = make_customer(api)
    first, second = make_address(api, customer), make_address(api, customer)
    assert api.delete(f"/customers/{customer.id}").status_code == 204
    deleted = [rid for topic, rid in events_of(api) if topic == "address/deleted"]
    assert sorted(deleted) == sorted([first.id, second.id])


# Request targets that are no path -------------------------------------------------------------


def _asgi(app, method, path, headers=()):
    """One request straight through the ASGI app: httpx would normalize the path."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers], "client": ("127.0.0.1", 5000),
             "server": ("rebill.test", 80)}
    asyncio.run(app(scope, receive, send))
    start, body = sent
    assert start["type"] == "http.response.start" and body["type"] == "http.response.body"
    return start["status"], dict(start["headers"]), msgspec.json.decode(body["body"])


TARGET = {"errors": "The request target must be a path starting with /"}


@pytest.mark.parametrize("method,path", [("OPTIONS", "*"), ("GET", "*"), ("GET", ""), ("POST", "customers"),
                                         ("GET", "http://rebill.test/customers")])
@pytest.mark.parametrize("authenticated", [True, False])
def test_a_request_target_that_is_no_path_answers_400(app, api, method, path, authenticated):
    headers = [("X-Service-Access-Token", api.token), ("X-Service-Version", V11)] if authenticated else []
    status, headers, body = _asgi(app, method, path, headers)
    assert (status, body) == (400, TARGET)
    assert headers[b"x-request-id"] and headers[b"x-service-version"]


@pytest.mark.parametrize("path", ["*", "", "customers"])
def test_the_router_answers_404_for_a_target_that_is_no_path(api, path):
    """Behind the edge too: the router never indexes past a path that has no segment."""
    router = Api([op for module in RESOURCES for op in module.endpoints.operations],
                 Services(db=api.db, clock=api.clock, verifier=OfflineZipVerifier(), gateway=None))
    token, store = asyncio.run(TokenResolver(api.db, ttl=0).resolve(api.token))
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "OPTIONS", "path": path, "query_string": b"", "headers": [],
             "rebill": RequestContext(store, token, VERSIONS[V11], [(b"x-request-id", b"1" * 32)])}
    asyncio.run(router(scope, receive, send))
    assert sent[0]["status"] == 404
    assert msgspec.json.decode(sent[1]["body"]) == {"errors": "Not Found"}


@pytest.mark.parametrize("method,path,allow", [("OPTIONS", "/customers", "GET, HEAD, POST"),
                                               ("OPTIONS", "/", "GET, HEAD"),
                                               ("HEAD", "/addresses/validate", "POST")])
def test_head_and_options_on_a_known_path_answer_405_with_allow(api, method, path, allow):
    response = api.request(method, path, version=V01)
    assert response.status_code == 405
    assert response.headers["Allow"] == allow
    if method != "HEAD":
        assert response.json() == {"errors": "Method Not Allowed"}


def test_a_token_longer_than_any_token_is_refused_without_a_look_up_or_a_cache_entry(api, monkeypatch):
    """Found by an audit: random 60 KB tokens were each looked up and kept in the cache of
    unknown tokens, 550 MB of a process after 9,500 requests."""
    from rebill.http import auth
    resolver = TokenResolver(api.db, ttl=3600)
    looked: list[str] = []
    real = resolver._lookup
    monkeypatch.setattr(resolver, "_lookup", lambda raw: looked.append(raw) or real(raw))
    huge = "rb_" + "x" * 60_000
    for raw in (huge, "y" * (auth.MAX_TOKEN_LENGTH + 1)):
        assert asyncio.run(resolver.resolve(raw)) is None
    assert looked == [] and resolver._cache == {}
    assert asyncio.run(resolver.resolve(api.token)) is not None and looked == [api.token]
    # Through the API: 401 in the spec's shape.
    response = api.get("/customers", token=huge[:8000])
    assert response.status_code == 401 and response.json() == {"errors": "Invalid or missing API token"}
