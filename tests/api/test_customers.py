"""Contract tests of the customer endpoints: create, retrieve, update, delete, scopes, tenancy
and events, in both API versions (spec 02 Customers, spec 01 shared rules, decisions §1-§3).

Listing, filters, sorting, include and count live in ``test_customers_list.py``; the helpers
below are shared with it.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import update
from starlette.testclient import TestClient

from rebill.models import customers as customers_table
from tests.builders import events_of, make_address, make_customer, make_payment_method

V01, V11 = "2021-01", "2021-11"
OFFSET_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
NOT_FOUND = {"errors": "Not Found"}
NOT_AN_OBJECT = {"errors": "The request body must be a JSON object"}

V01_REQUIRED = ("billing_address1", "billing_city", "billing_country", "billing_first_name",
                "billing_last_name", "billing_province", "billing_zip", "email", "first_name", "last_name")
V11_REQUIRED = ("email", "first_name", "last_name")

_emails = itertools.count(1)


# Helpers (imported by the other test_customers_* modules) ----------------------------------

def stamp(version: str, when: datetime) -> str:
    """A datetime as the version renders it (decisions §2.4)."""
    text = when.replace(microsecond=0).isoformat()
    return text[:-6] if version == V01 else text


def created_status(version: str) -> int:
    return 201 if version == V11 else 200


def create_body(version: str, **overrides: Any) -> dict[str, Any]:
    """A minimal valid create body for ``version``."""
    body: dict[str, Any] = {"email": f"buyer{next(_emails)}@example.com", "first_name": "Ada",
                            "last_name": "Lovelace"}
    if version == V01:
        body.update(billing_address1="101 Market St", billing_city="San Francisco",
                    billing_country="United States", billing_first_name="Ada",
                    billing_last_name="Lovelace", billing_province="CA", billing_zip="94105")
    body.update(overrides)
    return body


def create(api: Any, **overrides: Any) -> dict[str, Any]:
    """POST /customers in the api's version; returns the customer record."""
    response = api.post("/customers", json=create_body(api.version, **overrides))
    assert response.status_code == created_status(api.version), response.text
    return response.json()["customer"]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def set_columns(api: Any, customer_id: int, **values: Any) -> None:
    """Put a customer into a state the API cannot reach yet (status, backdated times)."""
    with api.db.write() as conn:
        conn.execute(update(customers_table).where(customers_table.c.id == customer_id).values(**values))


def lenient(api: Any) -> Any:
    """The same api, with a client that answers server crashes as 500 instead of raising."""
    client = TestClient(api.client.app, base_url="http://rebill.test", raise_server_exceptions=False)
    return dataclasses.replace(api, client=client)


def backend(api: Any) -> str:
    return api.db.engine.dialect.name


# Create: response shape ------------------------------------------------------------------

def test_create_answers_201_in_2021_11_with_every_head_field_typed_and_formatted(api):
    now = api.clock.now()
    response = api.post("/customers", json={"email": "ada@example.com", "first_name": "Ada",
                                            "last_name": "Lovelace", "phone": "+14155550100",
                                            "external_customer_id": {"ecommerce": "5501"}}, version=V11)
    assert response.status_code == 201, response.text
    customer = response.json()["customer"]
    assert type(customer["id"]) is int
    assert customer["analytics_data"] == {"utm_params": []}
    assert OFFSET_TS.match(customer["created_at"]) and customer["created_at"] == stamp(V11, now)
    assert customer["updated_at"] == customer["created_at"]
    assert customer["email"] == "ada@example.com"
    assert customer["external_customer_id"] == {"ecommerce": "5501"}
    assert customer["first_charge_processed_at"] is None
    assert customer["first_name"] == "Ada"
    assert customer["last_name"] == "Lovelace"
    assert customer["phone"] == "+14155550100"
    assert customer["has_payment_method_in_dunning"] is False
    assert customer["has_valid_payment_method"] is False
    assert isinstance(customer["hash"], str) and len(customer["hash"]) >= 8
    for count in ("orders_count", "subscriptions_active_count", "subscriptions_total_count"):
        assert type(customer[count]) is int and customer[count] == 0, count
    assert customer["tax_exempt"] is False
    # The 2021-11 names, never the 2021-01 ones (spec README: keep those names exactly).
    assert not {"platform_customer_id", "billing_country", "number_subscriptions"} & set(customer)


def test_create_answers_200_in_2021_01_with_billing_fields_status_and_naive_datetimes(api):
    now = api.clock.now()
    body = create_body(V01, email="ada@example.com", billing_address2="Suite 5", billing_company="ACME",
                       billing_phone="+14155550199", phone="+14155550100", accepts_marketing=True,
                       platform_customer_id="5501")
    response = api.post("/customers", json=body, version=V01)
    assert response.status_code == 200, response.text
    customer = response.json()["customer"]
    assert type(customer["id"]) is int
    assert NAIVE_TS.match(customer["created_at"]) and customer["created_at"] == stamp(V01, now)
    assert customer["updated_at"] == customer["created_at"]
    assert customer["first_charge_processed_at"] is None
    assert customer["email"] == "ada@example.com"
    assert (customer["first_name"], customer["last_name"], customer["phone"]) == ("Ada", "Lovelace", "+14155550100")
    assert customer["billing_address1"] == "101 Market St"
    assert customer["billing_address2"] == "Suite 5"
    assert customer["billing_city"] == "San Francisco"
    assert customer["billing_company"] == "ACME"
    assert customer["billing_country"] == "United States"
    assert customer["billing_first_name"] == "Ada"
    assert customer["billing_last_name"] == "Lovelace"
    assert customer["billing_phone"] == "+14155550199"
    assert customer["billing_province"] == "CA"
    assert customer["billing_zip"] == "94105"
    assert customer["platform_customer_id"] == "5501"
    assert customer["status"] == "INACTIVE"
    assert type(customer["number_active_subscriptions"]) is int and customer["number_active_subscriptions"] == 0
    assert type(customer["number_subscriptions"]) is int and customer["number_subscriptions"] == 0
    assert customer["has_card_error_in_dunning"] is False
    assert customer["has_valid_payment_method"] is False
    assert customer["accepts_marketing"] is True
    assert customer["processor_type"] is None
    assert customer["reason_payment_method_not_valid"] is None
    assert customer["analytics_data"] == {"utm_params": []}
    assert isinstance(customer["hash"], str) and customer["hash"]
    # The 2021-01 names, never the 2021-11 ones.
    assert not {"external_customer_id", "tax_exempt", "orders_count", "subscriptions_total_count",
                "has_payment_method_in_dunning"} & set(customer)


def test_processor_type_is_stored_on_create_and_update_in_2021_01(api):
    api.version = V01
    mine = create(api, processor_type="stripe")
    assert mine["processor_type"] == "stripe"
    after = api.put(f"/customers/{mine['id']}", json={"processor_type": "braintree"}).json()["customer"]
    assert after["processor_type"] == "braintree"


def test_platform_customer_id_renders_as_a_string_or_null_in_2021_01(api):
    api.version = V01
    assert create(api, platform_customer_id="77")["platform_customer_id"] == "77"
    assert create(api)["platform_customer_id"] is None


def test_external_customer_id_is_an_object_with_ecommerce_key_in_2021_11(api):
    assert create(api)["external_customer_id"] == {"ecommerce": None}


def test_billing_country_may_be_sent_as_a_name_or_code_and_renders_as_the_name(api):
    api.version = V01
    assert create(api, billing_country="Canada", billing_province="ON",
                  billing_zip="M5V 2T6")["billing_country"] == "Canada"
    assert create(api, billing_country="GB")["billing_country"] == "United Kingdom"


def test_each_customer_gets_its_own_hash(vapi):
    assert create(vapi)["hash"] != create(vapi)["hash"]


def test_created_customer_reads_back_identically(vapi):
    customer = create(vapi)
    response = vapi.get(f"/customers/{customer['id']}")
    assert response.status_code == 200
    assert response.json() == {"customer": customer}


def test_tax_exempt_and_analytics_data_are_stored_in_2021_11(api):
    analytics = {"utm_params": [{"utm_source": "newsletter", "utm_medium": "email"}]}
    customer = create(api, tax_exempt=True, analytics_data=analytics)
    assert customer["tax_exempt"] is True
    assert customer["analytics_data"] == analytics


def test_has_valid_payment_method_reflects_a_valid_payment_method(vapi):
    with_valid = make_customer(vapi)
    make_payment_method(vapi, with_valid, status="valid")
    with_invalid = make_customer(vapi)
    make_payment_method(vapi, with_invalid, status="invalid")
    assert vapi.get(f"/customers/{with_valid.id}").json()["customer"]["has_valid_payment_method"] is True
    assert vapi.get(f"/customers/{with_invalid.id}").json()["customer"]["has_valid_payment_method"] is False


# Create: validation ----------------------------------------------------------------------

def test_create_in_2021_11_requires_email_first_and_last_name(api):
    response = api.post("/customers", json={}, version=V11)
    assert errors_of(response) == {name: ["is required"] for name in V11_REQUIRED}


def test_create_in_2021_01_requires_the_billing_address_email_and_names(api):
    response = api.post("/customers", json={}, version=V01)
    assert errors_of(response) == {name: ["is required"] for name in V01_REQUIRED}


@pytest.mark.parametrize("missing", V01_REQUIRED)
def test_create_in_2021_01_names_each_missing_required_field(api, missing):
    body = create_body(V01)
    del body[missing]
    assert errors_of(api.post("/customers", json=body, version=V01)) == {missing: ["is required"]}


def test_create_in_2021_11_does_not_require_billing_fields(api):
    response = api.post("/customers", json={"email": "a@example.com", "first_name": "A", "last_name": "B"},
                        version=V11)
    assert response.status_code == 201, response.text


def test_required_fields_sent_as_null_are_missing(vapi):
    body = create_body(vapi.version, email=None, first_name=None)
    assert errors_of(vapi.post("/customers", json=body)) == {"email": ["is required"],
                                                              "first_name": ["is required"]}


def test_required_names_cannot_be_blank(vapi):
    body = create_body(vapi.version, first_name="  ", last_name="")
    assert errors_of(vapi.post("/customers", json=body)) == {"first_name": ["cannot be blank"],
                                                              "last_name": ["cannot be blank"]}


def test_required_billing_fields_cannot_be_blank_in_2021_01(api):
    body = create_body(V01, billing_address1="", billing_zip=" ")
    assert errors_of(api.post("/customers", json=body, version=V01)) == {
        "billing_address1": ["cannot be blank"], "billing_zip": ["cannot be blank"]}


def test_wrong_types_are_named_field_by_field_in_2021_11(api):
    body = create_body(V11, email=5, first_name=["Ada"], tax_exempt="yes", phone=14155550100,
                       external_customer_id="5501", analytics_data="utm")
    assert errors_of(api.post("/customers", json=body, version=V11)) == {
        "email": ["must be a string"],
        "first_name": ["must be a string"],
        "tax_exempt": ["must be a boolean"],
        "phone": ["must be a string"],
        "external_customer_id": ["must be an object"],
        "analytics_data": ["must be an object"],
    }


def test_wrong_types_are_named_field_by_field_in_2021_01(api):
    body = create_body(V01, email=5, accepts_marketing="yes", billing_zip=94105, platform_customer_id=True,
                       billing_country=1)
    assert errors_of(api.post("/customers", json=body, version=V01)) == {
        "email": ["must be a string"],
        "accepts_marketing": ["must be a boolean"],
        "billing_zip": ["must be a string"],
        "platform_customer_id": ["must be a non-empty string or number"],
        "billing_country": ["must be a string"],
    }


def test_email_alone_of_the_wrong_type_gives_the_exact_error(vapi):
    body = create_body(vapi.version, email=123)
    assert vapi.post("/customers", json=body).json() == {"errors": {"email": ["must be a string"]}}


def test_external_customer_id_ecommerce_must_be_a_string_or_number_in_2021_11(api):
    body = create_body(V11, external_customer_id={"ecommerce": True})
    assert errors_of(api.post("/customers", json=body, version=V11)) == {
        "external_customer_id": {"ecommerce": ["must be a non-empty string or number"]}}


@pytest.mark.parametrize("email", ["plainaddress", "ada@example", "ada lovelace@example.com", "@example.com",
                                   "ada@@example.com", "ada@exa mple.com",
                                   # Invisible characters: a look-alike of a taken e-mail (found by an audit).
                                   "ada@example.com\u200b", "a\u202e@example.com", "ada\u0007x@example.com",
                                   "ada\u2060@example.com"])
def test_an_invalid_email_is_refused(vapi, email):
    response = vapi.post("/customers", json=create_body(vapi.version, email=email))
    assert response.status_code == 422
    assert response.json() == {"errors": {"email": ["is invalid"]}}


def test_an_unusual_but_valid_email_is_accepted(vapi):
    assert create(vapi, email="first.last+tag@mail.example.co.uk")["email"] == "first.last+tag@mail.example.co.uk"


def test_email_is_stored_without_surrounding_whitespace(vapi):
    assert create(vapi, email="  ada@example.com ")["email"] == "ada@example.com"


def test_email_is_unique_per_store_case_insensitively(vapi):
    create(vapi, email="dup@example.com")
    for email in ("dup@example.com", "Dup@Example.COM", "  DUP@example.com  "):
        response = vapi.post("/customers", json=create_body(vapi.version, email=email))
        assert response.status_code == 422, email
        assert response.json() == {"errors": {"email": ["has already been taken"]}}
    listed = vapi.get("/customers").json()["customers"]
    assert [c["email"] for c in listed] == ["dup@example.com"]


def test_an_email_in_another_unicode_spelling_is_the_same_email(vapi):
    """Found by an audit: `ü` as one character and as `u` and a combining diaeresis made two
    customers of one e-mail (RFC 6532 recommends NFC)."""
    composed, decomposed = "m\u00fcnchen@b\u00fccher.de", "mu\u0308nchen@bu\u0308cher.de"
    made = create(vapi, email=composed)
    response = vapi.post("/customers", json=create_body(vapi.version, email=decomposed))
    assert response.json() == {"errors": {"email": ["has already been taken"]}}, response.text
    for spelling in (composed, decomposed, decomposed.upper()):
        found = vapi.get("/customers", params={"email": spelling}).json()["customers"]
        assert [c["id"] for c in found] == [made["id"]], spelling
    other = create(vapi)
    taken = vapi.put(f"/customers/{other['id']}", json={"email": decomposed})
    assert taken.json() == {"errors": {"email": ["has already been taken"]}}
    assert vapi.put(f"/customers/{made['id']}", json={"email": decomposed}).status_code == 200


def test_2021_01_billing_parts_cannot_make_a_fragment_of_an_address(api):
    """Found by an audit: a customer with no billing address (made in 2021-11) sent
    `billing_address1` alone got a fragment, which its queued charges then billed to."""
    customer = create(api)  # 2021-11: no billing address
    response = api.put(f"/customers/{customer['id']}", version=V01, json={"billing_address1": "9 Oak"})
    assert response.json() == {"errors": {name: ["is required"] for name in (
        "billing_city", "billing_country", "billing_first_name", "billing_last_name", "billing_province",
        "billing_zip")}}, response.text
    assert api.get(f"/customers/{customer['id']}", version=V01).json()["customer"]["billing_address1"] is None
    whole = {name: value for name, value in create_body(V01).items() if name.startswith("billing_")}
    response = api.put(f"/customers/{customer['id']}", version=V01, json=whole)
    assert response.status_code == 200 and response.json()["customer"]["billing_city"] == "San Francisco"
    shown = api.get(f"/customers/{customer['id']}", version=V01).json()["customer"]
    assert api.put(f"/customers/{customer['id']}", version=V01, json={"billing_phone": "555"}).status_code == 200
    echo = api.put(f"/customers/{customer['id']}", version=V01, json={k: v for k, v in shown.items()
                                                                       if k.startswith("billing_")})
    assert echo.status_code == 200, echo.text


def test_losing_the_email_race_to_a_concurrent_write_answers_422_and_stores_nothing(vapi, monkeypatch):
    """The check passed, then another write took the email first: the unique index decides."""
    from rebill.domain.customer import repository

    first = create(vapi, email="race@example.com")
    other = create(vapi, email="other@example.com")
    recorded = len(events_of(vapi))
    monkeypatch.setattr(repository, "email_taken", lambda *a, **kw: False)
    response = vapi.post("/customers", json=create_body(vapi.version, email="RACE@example.com"))
    assert response.json() == {"errors": {"email": ["has already been taken"]}}, response.text
    response = vapi.put(f"/customers/{other['id']}", json={"email": "race@example.com"})
    assert response.json() == {"errors": {"email": ["has already been taken"]}}, response.text
    assert len(events_of(vapi)) == recorded
    assert vapi.get(f"/customers/{other['id']}").json()["customer"]["email"] == "other@example.com"
    listed = [c["id"] for c in vapi.get("/customers").json()["customers"]]
    assert sorted(listed) == sorted([first["id"], other["id"]])
    monkeypatch.undo()
    assert create(vapi)["id"]  # the store's next write goes through: nothing was left half done


def test_the_same_email_may_exist_in_another_store(vapi):
    create(vapi, email="shared@example.com")
    other = vapi.other_store()
    assert create(other, email="shared@example.com")["email"] == "shared@example.com"


@pytest.mark.parametrize("raw", [b"[]", b'[{"email": "a@example.com"}]', b'"text"', b"42", b"null", b"true",
                                 b"{not json", b'{"email": '])
def test_a_body_that_is_not_a_json_object_answers_415(vapi, raw):
    response = vapi.post("/customers", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 415
    assert response.json() == NOT_AN_OBJECT
    assert vapi.get("/customers").json()["customers"] == []


def test_unknown_and_read_only_fields_in_the_body_are_ignored(vapi):
    now = vapi.clock.now()
    customer = create(vapi, id=1, hash="deadbeef", status="ACTIVE", created_at="2000-01-01T00:00:00",
                      orders_count=7, number_subscriptions=7, favourite_color="teal")
    assert customer["hash"] != "deadbeef"
    assert customer["created_at"] == stamp(vapi.version, now)
    assert "favourite_color" not in customer
    if vapi.version == V01:
        assert customer["status"] == "INACTIVE"
        assert customer["number_subscriptions"] == 0
    else:
        assert customer["orders_count"] == 0


def test_billing_country_with_an_unknown_name_is_refused_in_2021_01(api):
    response = api.post("/customers", json=create_body(V01, billing_country="Atlantis"), version=V01)
    errors = errors_of(response)
    assert set(errors) == {"billing_country"}
    assert errors["billing_country"] and all(isinstance(m, str) for m in errors["billing_country"])


def test_a_failed_create_stores_nothing_and_records_no_event(vapi):
    vapi.post("/customers", json=create_body(vapi.version, email="broken"))
    assert vapi.get("/customers").json()["customers"] == []
    assert events_of(vapi) == []


def test_an_invalid_email_is_reported_together_with_the_other_bad_fields(vapi):
    body = create_body(vapi.version, email="not-an-email")
    del body["last_name"]
    assert errors_of(vapi.post("/customers", json=body)) == {"email": ["is invalid"],
                                                              "last_name": ["is required"]}


@pytest.mark.parametrize("field,value", [
    ("email", "a" * 300 + "@example.com"),
    ("first_name", "A" * 300),
    ("phone", "1" * 100),
])
def test_an_overlong_value_is_stored_exactly_or_refused_by_field_never_a_500(request, vapi, field, value):
    api = lenient(vapi)
    response = api.post("/customers", json=create_body(api.version, **{field: value}))
    assert response.status_code in (created_status(api.version), 422), response.text
    if response.status_code == 422:
        assert set(response.json()["errors"]) == {field}
    else:
        assert response.json()["customer"][field] == value


# Retrieve --------------------------------------------------------------------------------

def test_get_unknown_customer_answers_404(vapi):
    response = vapi.get("/customers/987654321")
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


def test_get_non_numeric_customer_id_answers_404(vapi):
    response = vapi.get("/customers/abc")
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_another_stores_customer_answers_404_never_403(vapi, method):
    foreign = vapi.other_store()
    theirs = create(foreign)
    response = vapi.request(method, f"/customers/{theirs['id']}", json={"first_name": "Mallory"} if method == "PUT" else None)
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert foreign.get(f"/customers/{theirs['id']}").json() == {"customer": theirs}


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_an_out_of_range_customer_id_answers_404(vapi, method):
    api = lenient(vapi)
    response = api.request(method, "/customers/99999999999999999999", json={} if method == "PUT" else None)
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


# Update ----------------------------------------------------------------------------------

def test_update_changes_only_the_sent_fields(vapi):
    before = create(vapi, phone="+14155550100")
    response = vapi.put(f"/customers/{before['id']}", json={"first_name": "Grace"})
    assert response.status_code == 200, response.text
    after = response.json()["customer"]
    assert after["first_name"] == "Grace"
    assert {k: v for k, v in after.items() if k != "first_name"} == \
           {k: v for k, v in before.items() if k != "first_name"}
    assert vapi.get(f"/customers/{before['id']}").json() == {"customer": after}


def test_update_bumps_updated_at_and_keeps_created_at(vapi):
    before = create(vapi)
    later = vapi.clock.advance(seconds=90)
    after = vapi.put(f"/customers/{before['id']}", json={"last_name": "Hopper"}).json()["customer"]
    assert after["updated_at"] == stamp(vapi.version, later)
    assert after["updated_at"] != before["updated_at"]
    assert after["created_at"] == before["created_at"]


def test_an_empty_update_changes_nothing(vapi):
    before = create(vapi)
    vapi.clock.advance(seconds=30)
    response = vapi.put(f"/customers/{before['id']}", json={})
    assert response.status_code == 200
    assert response.json() == {"customer": before}
    assert events_of(vapi, before["id"]) == [("customer/created", before["id"])]


def test_update_sets_several_fields_at_once(vapi):
    customer = create(vapi)
    body = {"email": "grace@example.com", "first_name": "Grace", "last_name": "Hopper", "phone": "+15550001"}
    after = vapi.put(f"/customers/{customer['id']}", json=body).json()["customer"]
    assert {k: after[k] for k in body} == body


def test_update_can_clear_the_phone_with_null(vapi):
    customer = create(vapi, phone="+15550001")
    assert vapi.put(f"/customers/{customer['id']}", json={"phone": None}).json()["customer"]["phone"] is None


def test_update_refuses_an_email_another_customer_has_case_insensitively(vapi):
    create(vapi, email="taken@example.com")
    mine = create(vapi, email="mine@example.com")
    response = vapi.put(f"/customers/{mine['id']}", json={"email": "TAKEN@example.com"})
    assert response.status_code == 422
    assert response.json() == {"errors": {"email": ["has already been taken"]}}
    assert vapi.get(f"/customers/{mine['id']}").json()["customer"]["email"] == "mine@example.com"


def test_update_may_change_only_the_case_of_ones_own_email(vapi):
    mine = create(vapi, email="mine@example.com")
    response = vapi.put(f"/customers/{mine['id']}", json={"email": "Mine@Example.com"})
    assert response.status_code == 200, response.text
    assert response.json()["customer"]["email"] == "Mine@Example.com"


def test_update_may_take_an_email_used_in_another_store(vapi):
    create(vapi.other_store(), email="elsewhere@example.com")
    mine = create(vapi)
    response = vapi.put(f"/customers/{mine['id']}", json={"email": "elsewhere@example.com"})
    assert response.status_code == 200, response.text


def test_update_refuses_an_invalid_email(vapi):
    mine = create(vapi)
    response = vapi.put(f"/customers/{mine['id']}", json={"email": "nope"})
    assert response.json() == {"errors": {"email": ["is invalid"]}}
    assert response.status_code == 422


def test_update_refuses_null_or_blank_required_fields(vapi):
    mine = create(vapi)
    response = vapi.put(f"/customers/{mine['id']}", json={"email": None, "first_name": "", "last_name": 7})
    assert errors_of(response) == {"email": ["cannot be null"], "first_name": ["cannot be blank"],
                                   "last_name": ["must be a string"]}
    assert vapi.get(f"/customers/{mine['id']}").json() == {"customer": mine}


@pytest.mark.parametrize("raw", [b"[]", b"{oops"])
def test_update_with_a_body_that_is_not_a_json_object_answers_415(vapi, raw):
    mine = create(vapi)
    response = vapi.put(f"/customers/{mine['id']}", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 415
    assert response.json() == NOT_AN_OBJECT


def test_update_unknown_customer_answers_404(vapi):
    response = vapi.put("/customers/987654321", json={"first_name": "Grace"})
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


def test_update_accepts_external_customer_id_object_in_2021_11(api):
    mine = create(api)
    after = api.put(f"/customers/{mine['id']}", json={"external_customer_id": {"ecommerce": "9001"}})
    assert after.status_code == 200, after.text
    assert after.json()["customer"]["external_customer_id"] == {"ecommerce": "9001"}
    cleared = api.put(f"/customers/{mine['id']}", json={"external_customer_id": {"ecommerce": None}})
    assert cleared.json()["customer"]["external_customer_id"] == {"ecommerce": None}


def test_update_accepts_platform_customer_id_in_2021_01_and_it_shows_in_2021_11(api):
    api.version = V01
    mine = create(api)
    after = api.put(f"/customers/{mine['id']}", json={"platform_customer_id": "9001"})
    assert after.status_code == 200, after.text
    assert after.json()["customer"]["platform_customer_id"] == "9001"
    assert api.get(f"/customers/{mine['id']}", version=V11).json()["customer"]["external_customer_id"] == \
        {"ecommerce": "9001"}


def test_update_changes_the_billing_address_in_2021_01(api):
    api.version = V01
    mine = create(api)
    body = {"billing_address1": "1 Front St W", "billing_city": "Toronto", "billing_country": "Canada",
            "billing_province": "ON", "billing_zip": "M5J 2X6"}
    after = api.put(f"/customers/{mine['id']}", json=body).json()["customer"]
    assert {k: after[k] for k in body} == body
    assert after["billing_first_name"] == mine["billing_first_name"]


def test_billing_fields_update_one_by_one_and_resending_them_changes_nothing(api):
    customer = api.post("/customers", json=create_body(V01), version=V01).json()["customer"]
    path = f"/customers/{customer['id']}"
    after = api.put(path, json={"billing_city": "Toronto"}, version=V01).json()["customer"]
    assert after["billing_city"] == "Toronto"
    assert after["billing_address1"] == "101 Market St" and after["billing_country"] == "United States"
    recorded = len(events_of(api, customer["id"]))
    again = api.put(path, json={"billing_city": "Toronto"}, version=V01).json()["customer"]
    assert again["updated_at"] == after["updated_at"]
    assert len(events_of(api, customer["id"])) == recorded  # nothing changed, nothing recorded
    api.put(path, json={"billing_address2": "Suite 5"}, version=V01)
    cleared = api.put(path, json={"billing_address2": None}, version=V01).json()["customer"]
    assert cleared["billing_address2"] is None and cleared["billing_city"] == "Toronto"


def test_update_refuses_an_unknown_billing_country_in_2021_01(api):
    api.version = V01
    mine = create(api)
    response = api.put(f"/customers/{mine['id']}", json={"billing_country": "Atlantis"})
    assert set(errors_of(response)) == {"billing_country"}
    assert api.get(f"/customers/{mine['id']}").json()["customer"]["billing_country"] == "United States"


# Delete ----------------------------------------------------------------------------------

def test_delete_answers_204_with_no_body_in_2021_11(api):
    mine = create(api)
    response = api.delete(f"/customers/{mine['id']}", version=V11)
    assert response.status_code == 204
    assert response.content == b""


def test_delete_answers_200_with_an_empty_object_in_2021_01(api):
    api.version = V01
    mine = create(api)
    response = api.delete(f"/customers/{mine['id']}")
    assert response.status_code == 200
    assert response.json() == {}


def test_a_deleted_customer_is_gone(vapi):
    mine = create(vapi)
    keep = create(vapi)
    vapi.delete(f"/customers/{mine['id']}")
    assert vapi.get(f"/customers/{mine['id']}").json() == NOT_FOUND
    assert vapi.delete(f"/customers/{mine['id']}").status_code == 404
    assert [c["id"] for c in vapi.get("/customers").json()["customers"]] == [keep["id"]]


def test_delete_unknown_customer_answers_404(vapi):
    response = vapi.delete("/customers/987654321")
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


def test_deleting_a_customer_deletes_its_addresses(vapi):
    customer = make_customer(vapi)
    first, second = make_address(vapi, customer), make_address(vapi, customer)
    other = make_address(vapi)
    assert vapi.get(f"/addresses/{first.id}").status_code == 200
    vapi.delete(f"/customers/{customer.id}")
    for address in (first, second):
        response = vapi.get(f"/addresses/{address.id}")
        assert response.status_code == 404
        assert response.json() == NOT_FOUND
    assert vapi.get(f"/addresses/{other.id}").status_code == 200


def test_the_email_of_a_deleted_customer_can_be_used_again(vapi):
    mine = create(vapi, email="again@example.com")
    vapi.delete(f"/customers/{mine['id']}")
    assert create(vapi, email="again@example.com")["id"] != mine["id"]


# Events ----------------------------------------------------------------------------------

def test_create_update_delete_record_customer_events_with_the_id(vapi):
    customer = create(vapi)
    cid = customer["id"]
    assert events_of(vapi, cid) == [("customer/created", cid)]
    vapi.put(f"/customers/{cid}", json={"first_name": "Grace"})
    assert events_of(vapi, cid) == [("customer/created", cid), ("customer/updated", cid)]
    vapi.delete(f"/customers/{cid}")
    assert events_of(vapi, cid) == [("customer/created", cid), ("customer/updated", cid),
                                    ("customer/deleted", cid)]


def test_refused_writes_record_no_event(vapi):
    create(vapi, email="taken@example.com")
    mine = create(vapi)
    before = events_of(vapi)
    vapi.put(f"/customers/{mine['id']}", json={"email": "taken@example.com"})
    vapi.put(f"/customers/{mine['id']}", json={"first_name": ""})
    vapi.post("/customers", json={})
    assert events_of(vapi) == before


def test_deleting_a_customer_records_the_deletion_of_its_addresses(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    vapi.delete(f"/customers/{customer.id}")
    topics = events_of(vapi)
    assert ("address/deleted", address.id) in topics
    assert topics[-1] == ("customer/deleted", customer.id)


def test_events_are_recorded_in_the_acting_store_only(vapi):
    other = vapi.other_store()
    create(vapi)
    assert events_of(other) == []


# Scopes ----------------------------------------------------------------------------------

def test_read_customers_may_read_but_not_write(vapi):
    mine = create(vapi)
    token = vapi.token_with("read_customers")
    assert vapi.get("/customers", token=token).status_code == 200
    assert vapi.get(f"/customers/{mine['id']}", token=token).json() == {"customer": mine}
    refused = [
        vapi.post("/customers", json=create_body(vapi.version), token=token),
        vapi.put(f"/customers/{mine['id']}", json={"first_name": "Grace"}, token=token),
        vapi.delete(f"/customers/{mine['id']}", token=token),
    ]
    for response in refused:
        assert response.status_code == 403, response.text
        assert isinstance(response.json()["errors"], str)
    assert vapi.get(f"/customers/{mine['id']}").json() == {"customer": mine}
    assert len(vapi.get("/customers").json()["customers"]) == 1


def test_read_store_alone_may_not_read_customers(vapi):
    mine = create(vapi)
    token = vapi.token_with("read_store")
    for path in ("/customers", f"/customers/{mine['id']}"):
        response = vapi.get(path, token=token)
        assert response.status_code == 403, path
        assert isinstance(response.json()["errors"], str)


def test_read_store_alone_may_not_count_customers_in_2021_01(api):
    token = api.token_with("read_store")
    assert api.get("/customers/count", token=token, version=V01).status_code == 403


def test_write_customers_implies_read_customers(vapi):
    token = vapi.token_with("write_customers")
    response = vapi.post("/customers", json=create_body(vapi.version), token=token)
    assert response.status_code == created_status(vapi.version)
    cid = response.json()["customer"]["id"]
    assert vapi.get(f"/customers/{cid}", token=token).status_code == 200
    assert vapi.get("/customers", token=token).status_code == 200
    assert vapi.put(f"/customers/{cid}", json={"first_name": "Grace"}, token=token).status_code == 200
    assert vapi.delete(f"/customers/{cid}", token=token).status_code in (200, 204)


def test_a_scope_of_another_resource_does_not_grant_customer_writes(vapi):
    token = vapi.token_with("write_subscriptions", "read_customers")
    assert vapi.post("/customers", json=create_body(vapi.version), token=token).status_code == 403


def test_a_2021_01_customer_sent_back_as_shown_records_no_update(api):
    """Found by an audit: its first round trip stored the shown defaults over nulls (the
    analytics_data, the processor type of its default method), with a customer/updated event."""
    from tests.builders import events_of, make_payment_method
    api.version = V01
    made = create(api)
    make_payment_method(api, type("C", (), {"id": made["id"]})(), processor_name="stripe")
    shown = api.get(f"/customers/{made['id']}", version=V01).json()["customer"]
    assert shown["processor_type"] == "stripe" and shown["analytics_data"] == {"utm_params": []}
    before = events_of(api, made["id"])
    api.clock.advance(seconds=1)
    sent = {k: v for k, v in shown.items() if k not in ("id", "created_at", "updated_at")}
    reply = api.put(f"/customers/{made['id']}", version=V01, json=sent)
    assert reply.status_code == 200, reply.text
    assert reply.json()["customer"]["updated_at"] == shown["updated_at"]
    assert events_of(api, made["id"]) == before


def test_a_customer_with_no_billing_address_sent_back_in_2021_01_is_no_change(api):
    """Found by an audit: a customer made in 2021-11 (no billing address) read in 2021-01 and
    sent back as shown answered 422 `cannot be null` for the billing fields a create requires."""
    made = api.post("/customers", json={"email": "echo@example.com", "first_name": "A", "last_name": "B"})
    customer_id = made.json()["customer"]["id"]
    shown = api.get(f"/customers/{customer_id}", version=V01).json()["customer"]
    assert shown["billing_address1"] is None and shown["billing_country"] is None
    before = events_of(api, customer_id)
    api.clock.advance(seconds=1)
    reply = api.put(f"/customers/{customer_id}", version=V01, json=shown)
    assert reply.status_code == 200, reply.text
    assert reply.json()["customer"]["updated_at"] == shown["updated_at"]
    assert events_of(api, customer_id) == before


def test_a_required_billing_field_cannot_be_taken_away_in_2021_01(api):
    """Spec 02 Customers: a create requires them; a null over a value is refused, all at once,
    and changes nothing; a null over nothing and the optional ones pass."""
    api.version = V01
    made = create(api)
    shown = api.get(f"/customers/{made['id']}").json()["customer"]
    assert shown["billing_address1"] and shown["billing_country"]
    refused = api.put(f"/customers/{made['id']}", json={"billing_address1": None, "billing_country": None,
                                                        "billing_company": None, "first_name": "Changed"})
    assert refused.status_code == 422
    assert refused.json() == {"errors": {"billing_address1": ["cannot be null"], "billing_country": ["cannot be null"]}}
    assert api.get(f"/customers/{made['id']}").json()["customer"] == shown
    kept = api.put(f"/customers/{made['id']}", json={"billing_company": None, "billing_phone": None})
    assert kept.status_code == 200, kept.text
    # A create still requires them.
    body = {**create_body(V01), "billing_address1": None}
    assert api.post("/customers", json=body).json()["errors"]["billing_address1"] == ["is required"]


def test_a_customers_platform_id_may_be_sent_as_an_integer_as_every_platform_id(vapi):
    """Found by an audit: the customer's external id alone answered 422 "must be a string" to an
    integer, which every other platform id takes (docs/api-choices.md, External ids). It is
    kept as its text, and shown as spec 02 types it: a string."""
    sent = {"platform_customer_id": 4501} if vapi.version == V01 else {"external_customer_id": {"ecommerce": 4501}}
    made = create(vapi, **sent)
    shown = made["platform_customer_id"] if vapi.version == V01 else made["external_customer_id"]["ecommerce"]
    assert shown == "4501"
    name = "platform_customer_id" if vapi.version == V01 else "external_customer_id"
    found = vapi.get("/customers", params={name: "4501"}).json()["customers"]
    assert [c["id"] for c in found] == [made["id"]]
    changed = vapi.put(f"/customers/{made['id']}", json={name: 4502 if vapi.version == V01 else {"ecommerce": 4502}})
    assert changed.status_code == 200, changed.text
    for bad in (True, 1.5, "x" * 65, "é"):
        body = {name: bad} if vapi.version == V01 else {name: {"ecommerce": bad}}
        assert name in errors_of(vapi.put(f"/customers/{made['id']}", json=body)), bad


def test_an_external_customer_id_object_without_ecommerce_is_refused_and_changes_nothing(api):
    """Found by an audit: `{"shopify": "5"}` (or `{}`) answered 200 and wiped the stored id."""
    made = api.post("/customers", json=create_body(V11, external_customer_id={"ecommerce": "77"}), version=V11)
    assert made.status_code == 201, made.text
    customer_id = made.json()["customer"]["id"]
    for sent in ({"shopify": "5"}, {}):
        response = api.put(f"/customers/{customer_id}", json={"external_customer_id": sent}, version=V11)
        assert errors_of(response) == {"external_customer_id": ["must be an object with the key ecommerce"]}
        created = api.post("/customers", json=create_body(V11, external_customer_id=sent), version=V11)
        assert errors_of(created) == {"external_customer_id": ["must be an object with the key ecommerce"]}
    shown = api.get(f"/customers/{customer_id}", version=V11).json()["customer"]
    assert shown["external_customer_id"] == {"ecommerce": "77"}
    cleared = api.put(f"/customers/{customer_id}", json={"external_customer_id": {"ecommerce": None}}, version=V11)
    assert cleared.json()["customer"]["external_customer_id"] == {"ecommerce": None}
