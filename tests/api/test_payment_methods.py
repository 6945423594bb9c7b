"""Contract tests of payment methods (decisions §6.1, §6.12): 2021-11 `/payment_methods`, the
deprecated 2021-01 `GET /customers/{id}/payment_sources`, the customer fields derived from
payment methods and charges, the address reference rule, includes, scopes, events and
migration 0005. Both databases (the `api` fixture)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, select, update
from sqlalchemy.exc import IntegrityError

from rebill.db.engine import normalize_url
from rebill.db.migrate import alembic_config
from rebill.domain.payment_method import repository as pm_repo
from rebill.domain.payment_method import service as pm_service
from rebill.domain.payment_method.model import PaymentMethodCreate
from rebill.domain.unit import Unit
from rebill.models import charges, payment_methods
from tests.api.test_includes_query_count import counting
from tests.api.test_real_fields import BOOL, DT_OFFSET, INT, NULL, OBJ, STR, assert_fields
from tests.builders import (
    charges_of,
    events_of,
    make_address,
    make_customer,
    make_payment_method,
    make_subscription,
)
from tests.conftest import fresh_database_url, make_api
from tests.unit.test_migrations import _insert, _reflected

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
TOPIC = "customer/payment_method_updated"
BILLING = {"address1": "1 Infinite Loop", "address2": None, "city": "Cupertino", "company": None,
           "country_code": "US", "first_name": "Ada", "last_name": "Lovelace", "phone": "+14085550100",
           "province": "California", "zip": "95014"}
DETAILS = {"brand": "visa", "exp_month": 12, "exp_year": 2030, "last4": "4242"}


def fmt11(api: Any) -> str:
    return api.clock.now().strftime("%Y-%m-%dT%H:%M:%S+00:00")


def body(customer: Any, **overrides: Any) -> dict[str, Any]:
    return {"customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_name": "stripe",
            "processor_customer_token": "cus_123", "processor_payment_method_token": "pm_456",
            "billing_address": dict(BILLING), "payment_details": dict(DETAILS), **overrides}


def create(api: Any, customer: Any, **overrides: Any) -> dict[str, Any]:
    response = api.post("/payment_methods", json=body(customer, **overrides), version=V11)
    assert response.status_code == 201, response.text
    return response.json()["payment_method"]


def fetch(api: Any, payment_method_id: int) -> dict[str, Any]:
    response = api.get(f"/payment_methods/{payment_method_id}", version=V11)
    assert response.status_code == 200, response.text
    return response.json()["payment_method"]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def defaults(api: Any, customer: Any) -> dict[int, bool]:
    listed = api.get("/payment_methods", params={"customer_id": customer.id}, version=V11).json()
    return {m["id"]: m["default"] for m in listed["payment_methods"]}


def topics(api: Any, customer: Any) -> list[str]:
    return [t for t, _ in events_of(api, customer.id, "customer") if t == TOPIC]


def set_status(api: Any, payment_method_id: int, status: str, reason: str | None = None) -> None:
    """What a charge's outcome does to a method (decisions §6.12); no endpoint sets it."""
    with api.db.write() as conn:
        pm_repo.update_payment_method(conn, api.store.id, payment_method_id,
                                      {"status": status, "status_reason": reason})


def put_charge_in_error(api: Any, address: Any) -> None:
    """No charge reaches `error` through these endpoints: the row is set directly."""
    make_subscription(api, address)
    [charge] = charges_of(api, address.id)
    with api.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge.id).values(status="error"))


# --- create, get: success bodies ---------------------------------------------------------------

def test_create_answers_201_with_every_field_of_the_payment_method(api):
    customer = make_customer(api)
    response = api.post("/payment_methods", json=body(customer))
    assert response.status_code == 201, response.text
    method = response.json()["payment_method"]
    assert method == {
        "id": method["id"],
        "customer_id": customer.id,
        "billing_address": {**BILLING, "country": "United States", "company_name": None, "name": "Ada Lovelace"},
        "created_at": fmt11(api),
        "default": True,
        "payment_details": DETAILS,
        "payment_type": "CREDIT_CARD",
        "processor_customer_token": "cus_123",
        "processor_name": "stripe",
        "processor_payment_method_token": "pm_456",
        "status": "unvalidated",
        "status_reason": None,
        "updated_at": fmt11(api),
        "include": {},
    }
    assert isinstance(method["id"], int)


def test_get_answers_the_body_create_answered(api):
    created = create(api, make_customer(api))
    response = api.get(f"/payment_methods/{created['id']}")
    assert response.status_code == 200
    assert response.json() == {"payment_method": created}


def test_a_minimal_method_shows_every_field_with_nulls_for_what_was_not_given(api):
    customer = make_customer(api)
    response = api.post("/payment_methods", json={"customer_id": customer.id, "payment_type": "PAYPAL",
                                                  "processor_customer_token": "cus_9"})
    assert response.status_code == 201, response.text
    method = response.json()["payment_method"]
    assert method["billing_address"] == {**dict.fromkeys(BILLING), "country": None, "company_name": None, "name": None}
    assert method["payment_details"] == dict.fromkeys(DETAILS)
    assert (method["processor_payment_method_token"], method["processor_customer_token"]) == (None, "cus_9")


def test_processor_name_is_optional_and_names_the_sandbox_gateway(api):
    customer = make_customer(api)
    assert create(api, customer, processor_name=None)["processor_name"] == "sandbox"
    sent = body(customer)
    del sent["processor_name"]
    assert api.post("/payment_methods", json=sent).json()["payment_method"]["processor_name"] == "sandbox"


@pytest.mark.parametrize("token", ["pm_declined", "tok_EXPIRED_card", "needs_update", "processor_error"])
def test_creating_a_method_always_succeeds_as_unvalidated_whatever_its_sandbox_token(api, token):
    method = create(api, make_customer(api), processor_payment_method_token=token)
    assert (method["status"], method["status_reason"]) == ("unvalidated", None)


@pytest.mark.parametrize("sent", ["credit_card", "Credit_Card", " CREDIT_CARD "])
def test_payment_type_is_accepted_in_any_case_and_shown_upper_case(api, sent):
    assert create(api, make_customer(api), payment_type=sent)["payment_type"] == "CREDIT_CARD"


@pytest.mark.parametrize("payment_type", ["CREDIT_CARD", "PAYPAL", "APPLE_PAY", "GOOGLE_PAY", "SEPA_DEBIT"])
def test_every_payment_type_of_the_decisions_is_accepted(api, payment_type):
    assert create(api, make_customer(api), payment_type=payment_type)["payment_type"] == payment_type


def test_billing_address_takes_a_country_name_and_shows_name_and_code(api):
    sent = {"first_name": "Grace", "country": "germany"}
    method = create(api, make_customer(api), billing_address=sent)
    assert method["billing_address"] == {**dict.fromkeys(BILLING), "first_name": "Grace", "country_code": "DE",
                                         "country": "Germany", "company_name": None, "name": "Grace"}


def test_company_name_follows_company_and_include_is_always_an_object(api):
    method = create(api, make_customer(api), billing_address={**BILLING, "company": "Analytical Engines"})
    assert method["billing_address"]["company_name"] == "Analytical Engines"
    # NOTE: 03-real-fields, `include` is on every record, also in lists and without ?include=.
    listed = api.get("/payment_methods", params={"customer_id": method["customer_id"]}).json()["payment_methods"]
    assert [m["include"] for m in listed] == [{}]


def test_unknown_keys_in_the_body_and_its_objects_are_ignored(api):
    method = create(api, make_customer(api), colour="red", billing_address={"zip": "1", "planet": "Mars"},
                    payment_details={"last4": "0005", "cvc": "123"})
    assert method["billing_address"]["zip"] == "1" and "planet" not in method["billing_address"]
    assert method["payment_details"] == {**dict.fromkeys(DETAILS), "last4": "0005"}


def test_payment_method_has_every_real_field_of_spec_03(api):
    customer = make_customer(api)
    method = create(api, customer)
    address = make_address(api, customer, payment_method_id=method["id"])
    one = api.get(f"/payment_methods/{method['id']}", params={"include": "addresses"}).json()["payment_method"]
    assert [a["id"] for a in one["include"]["addresses"]] == [address.id]
    expected = [
        ("billing_address", {OBJ}),
        *[(f"billing_address.{name}", {STR, NULL})
          for name in ("address1", "address2", "city", "company", "country", "country_code", "first_name",
                       "last_name", "phone", "province", "zip")],
        ("created_at", {DT_OFFSET}),  # spec 03: offset or naive; decisions §2.4: offset
        ("customer_id", {INT}),
        ("default", {BOOL}),
        ("id", {INT}),
        ("include", {OBJ}),
        ("payment_details", {OBJ}),
        ("payment_details.brand", {STR, NULL}),
        ("payment_details.exp_month", {INT, NULL}),
        ("payment_details.exp_year", {INT, NULL}),
        ("payment_details.last4", {STR, NULL}),
        ("payment_type", {STR}),
        ("processor_customer_token", {STR, NULL}),
        ("processor_name", {STR}),
        ("processor_payment_method_token", {STR, NULL}),
        ("status", {STR}),  # spec 03 saw only null; decisions §6.1 gives the values
        ("status_reason", {STR, NULL}),
        ("updated_at", {DT_OFFSET}),
    ]
    assert_fields(one, expected)


# --- create: bad input -------------------------------------------------------------------------

def test_create_without_any_field_names_every_required_one(api):
    assert errors_of(api.post("/payment_methods", json={})) == {
        "customer_id": ["is required"], "payment_type": ["is required"],
        "processor_payment_method_token": ["is required"]}


def test_create_needs_one_of_the_two_tokens_and_either_will_do(api):
    customer = make_customer(api)
    response = api.post("/payment_methods", json=body(customer, processor_customer_token=None,
                                                      processor_payment_method_token=None))
    assert errors_of(response) == {"processor_payment_method_token": ["is required"]}
    assert create(api, customer, processor_customer_token=None)["processor_payment_method_token"] == "pm_456"


def test_create_with_nulls_in_required_fields_names_them(api):
    response = api.post("/payment_methods", json=body(make_customer(api), customer_id=None, payment_type=None))
    assert errors_of(response) == {"customer_id": ["is required"], "payment_type": ["is required"]}


@pytest.mark.parametrize("field,value,message", [
    ("customer_id", "x", "must be an integer"),
    ("customer_id", True, "must be an integer"),
    ("customer_id", 2**64, "is out of range"),
    ("payment_type", 5, "must be a string"),
    ("payment_type", "CASH", "must be one of: CREDIT_CARD, PAYPAL, APPLE_PAY, GOOGLE_PAY, SEPA_DEBIT"),
    ("processor_name", "", "cannot be blank"),
    ("processor_name", "x" * 33, "is too long (at most 32 characters)"),
    ("processor_name", 7, "must be a string"),
    ("processor_customer_token", ["cus"], "must be a string"),
    ("processor_payment_method_token", " ", "cannot be blank"),
    ("processor_payment_method_token", "pm\x00", "must not contain NUL characters"),
    ("default", "yes", "must be a boolean"),
    ("billing_address", "1 Main St", "must be an object"),
    ("payment_details", [DETAILS], "must be an object"),
])
def test_create_with_a_wrongly_typed_field_answers_422_naming_it(api, field, value, message):
    response = api.post("/payment_methods", json=body(make_customer(api), **{field: value}))
    assert errors_of(response) == {field: [message]}


@pytest.mark.parametrize("field,value,message", [
    ("exp_month", 13, "must be from 1 to 12"),
    ("exp_month", 0, "must be from 1 to 12"),
    ("exp_month", "x", "must be an integer"),
    ("exp_year", 27, "must be from 1000 to 9999"),
    ("last4", "42", "must be 4 digits"),
    ("last4", 4242, "must be a string"),
    ("brand", {"name": "visa"}, "must be a string"),
])
def test_payment_details_are_checked_field_by_field(api, field, value, message):
    response = api.post("/payment_methods", json=body(make_customer(api), payment_details={**DETAILS, field: value}))
    assert errors_of(response) == {"payment_details": {field: [message]}}


@pytest.mark.parametrize("field,value,message", [
    ("country_code", "ZZ", "is not a valid country code"),
    ("country_code", "Z1", "must be a 2-letter country code"),
    ("country", "Atlantis", "is not a known country"),
    ("zip", 94105, "must be a string"),
    ("phone", "1" * 65, "is too long (at most 64 characters)"),
])
def test_billing_address_is_checked_field_by_field(api, field, value, message):
    response = api.post("/payment_methods", json=body(make_customer(api), billing_address={field: value}))
    assert errors_of(response) == {"billing_address": {field: [message]}}


def test_billing_country_and_country_code_must_agree(api):
    response = api.post("/payment_methods", json=body(make_customer(api), billing_address={
        "country_code": "US", "country": "France"}))
    assert errors_of(response) == {"billing_address": {"country": ["conflicts with country_code"]}}


def test_create_for_an_unknown_customer_answers_422_and_records_nothing(api):
    sent = body(make_customer(api), customer_id=987654321)
    before = len(events_of(api))
    response = api.post("/payment_methods", json=sent)
    assert errors_of(response) == {"customer_id": ["customer not found"]}
    assert len(events_of(api)) == before


def test_create_for_another_stores_customer_answers_422_as_for_an_unknown_one(api):
    other = api.other_store()
    response = api.post("/payment_methods", json=body(make_customer(other)))
    assert errors_of(response) == {"customer_id": ["customer not found"]}


@pytest.mark.parametrize("raw", [b"[]", b"\"x\"", b"nope"])
def test_create_with_a_body_that_is_no_json_object_answers_415(api, raw):
    response = api.request("POST", "/payment_methods", content=raw, headers={"Content-Type": "application/json"})
    assert errors_of(response, 415) == "The request body must be a JSON object"


# --- defaults ----------------------------------------------------------------------------------

def test_a_customers_first_method_becomes_its_default_even_when_default_false_is_sent(api):
    assert create(api, make_customer(api), default=False)["default"] is True


def test_a_later_method_is_not_the_default_unless_asked(api):
    customer = make_customer(api)
    first, second = create(api, customer), create(api, customer)
    assert defaults(api, customer) == {first["id"]: True, second["id"]: False}


def test_default_true_on_create_moves_the_default_to_the_new_method(api):
    customer = make_customer(api)
    first = create(api, customer)
    api.clock.advance(minutes=1)
    second = create(api, customer, default=True)
    assert defaults(api, customer) == {first["id"]: False, second["id"]: True}
    # The former default changed too, so its updated_at moved.
    assert fetch(api, first["id"])["updated_at"] == fmt11(api)


def test_default_true_on_update_moves_the_default_with_one_event(api):
    customer = make_customer(api)
    first, second, third = create(api, customer), create(api, customer), create(api, customer)
    before = topics(api, customer)
    response = api.put(f"/payment_methods/{third['id']}", json={"default": True})
    assert response.status_code == 200, response.text
    assert response.json()["payment_method"]["default"] is True
    assert defaults(api, customer) == {first["id"]: False, second["id"]: False, third["id"]: True}
    assert topics(api, customer) == [*before, TOPIC]


def test_exactly_one_method_of_a_customer_is_the_default_and_other_customers_keep_theirs(api):
    customer, other = make_customer(api), make_customer(api)
    theirs = create(api, other)
    for _ in range(3):
        create(api, customer, default=True)
    assert list(defaults(api, customer).values()).count(True) == 1
    assert fetch(api, theirs["id"])["default"] is True


def test_default_false_on_the_default_answers_422_and_changes_nothing(api):
    customer = make_customer(api)
    only = create(api, customer)
    before = topics(api, customer)
    response = api.put(f"/payment_methods/{only['id']}", json={"default": False, "processor_name": "adyen"})
    assert errors_of(response) == {"default": ["cannot be unset; make another payment method the default"]}
    assert fetch(api, only["id"]) == only
    assert topics(api, customer) == before


def test_default_false_or_null_on_a_method_that_is_no_default_changes_nothing(api):
    customer = make_customer(api)
    create(api, customer)
    second = create(api, customer)
    for value in (False, None):
        response = api.put(f"/payment_methods/{second['id']}", json={"default": value})
        assert response.status_code == 200 and response.json()["payment_method"] == second


def test_the_database_holds_one_default_per_customer(api):
    customer = make_customer(api)
    create(api, customer)
    now = api.clock.now()
    with pytest.raises(IntegrityError), api.db.write() as conn:
        pm_repo.insert_payment_method(conn, {
            "store_id": api.store.id, "customer_id": customer.id, "billing_address": None, "is_default": True,
            "payment_type": "PAYPAL", "payment_details": None, "processor_name": "sandbox",
            "processor_customer_token": "cus", "processor_payment_method_token": None, "status": "unvalidated",
            "status_reason": None, "created_at": now, "updated_at": now})


def test_concurrent_creates_for_one_customer_all_succeed_with_exactly_one_default(api):
    customer = make_customer(api)
    results: list[Any] = []
    start = threading.Barrier(4, timeout=10)

    def work() -> None:
        start.wait()
        try:
            with api.db.write() as conn:
                made = pm_service.create(Unit(conn, api.store, api.clock.now()), PaymentMethodCreate(
                    customer_id=customer.id, payment_type="CREDIT_CARD", processor_customer_token="cus",
                    default=True))
            results.append(made.id)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            results.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(isinstance(r, int) for r in results) and len(results) == 4, results
    assert sorted(defaults(api, customer)) == sorted(results)
    assert list(defaults(api, customer).values()).count(True) == 1


# --- update ------------------------------------------------------------------------------------

def test_update_changes_the_fields_sent_and_keeps_the_others(api):
    customer = make_customer(api)
    method = create(api, customer)
    api.clock.advance(minutes=5)
    response = api.put(f"/payment_methods/{method['id']}", json={
        "payment_details": {"brand": "mastercard", "exp_month": 1, "exp_year": 2031, "last4": "5454"}})
    assert response.status_code == 200, response.text
    assert response.json()["payment_method"] == {
        **method, "payment_details": {"brand": "mastercard", "exp_month": 1, "exp_year": 2031, "last4": "5454"},
        "updated_at": fmt11(api)}


def test_update_replaces_the_billing_address_and_payment_details_whole(api):
    method = create(api, make_customer(api))
    response = api.put(f"/payment_methods/{method['id']}", json={"billing_address": {"zip": "10115"},
                                                                  "payment_details": {"brand": "amex"}})
    updated = response.json()["payment_method"]
    assert updated["billing_address"] == {**dict.fromkeys(BILLING), "zip": "10115", "country": None,
                                          "company_name": None, "name": None}
    assert updated["payment_details"] == {**dict.fromkeys(DETAILS), "brand": "amex"}
    cleared = api.put(f"/payment_methods/{method['id']}", json={"billing_address": None}).json()["payment_method"]
    assert cleared["billing_address"] == {**dict.fromkeys(BILLING), "country": None, "company_name": None, "name": None}


def test_changing_a_token_makes_an_invalid_method_unvalidated_again(api):
    customer = make_customer(api)
    method = create(api, customer)
    set_status(api, method["id"], "invalid", "card expired")
    assert fetch(api, method["id"])["status"] == "invalid"
    response = api.put(f"/payment_methods/{method['id']}", json={"processor_payment_method_token": "pm_new"})
    assert (response.json()["payment_method"]["status"], response.json()["payment_method"]["status_reason"]) == (
        "unvalidated", None)


def test_changing_only_the_billing_address_keeps_the_status(api):
    method = create(api, make_customer(api))
    set_status(api, method["id"], "valid")
    response = api.put(f"/payment_methods/{method['id']}", json={"billing_address": {"zip": "1"}})
    assert response.json()["payment_method"]["status"] == "valid"


def test_status_and_customer_are_not_writable(api):
    customer, other = make_customer(api), make_customer(api)
    method = create(api, customer)
    response = api.put(f"/payment_methods/{method['id']}", json={"status": "valid", "customer_id": other.id,
                                                                  "status_reason": "trust me"})
    assert response.status_code == 200 and response.json()["payment_method"] == method


def test_an_update_that_changes_nothing_records_no_event_and_keeps_updated_at(api):
    customer = make_customer(api)
    method = create(api, customer)
    before = topics(api, customer)
    api.clock.advance(minutes=5)
    response = api.put(f"/payment_methods/{method['id']}", json={
        "payment_type": "credit_card", "processor_name": "stripe", "default": True,
        "billing_address": BILLING, "payment_details": DETAILS})
    assert response.json()["payment_method"] == method
    assert topics(api, customer) == before


def test_a_method_sent_back_as_shown_is_no_change(api):
    """Its billing address and payment details shown with every field, null when not given,
    and the derived `country`, `name`, `company_name`, sent back: no event, same updated_at
    (found by a check: the shown nulls recorded an update)."""
    customer = make_customer(api)
    made = api.post("/payment_methods", json={
        "customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_payment_method_token": "pm_echo",
        "billing_address": {"address1": "1 Main St", "city": "Austin", "zip": "73301", "province": "Texas",
                            "country_code": "US", "first_name": "Ada", "last_name": "Byron"}})
    assert made.status_code == 201, made.text
    shown = made.json()["payment_method"]
    assert shown["payment_details"] == dict.fromkeys(DETAILS) and shown["billing_address"]["country"]
    before = topics(api, customer)
    api.clock.advance(minutes=5)
    reply = api.put(f"/payment_methods/{shown['id']}", json=shown)
    assert reply.status_code == 200, reply.text
    assert reply.json()["payment_method"] == shown
    assert topics(api, customer) == before
    # Nulls inside a document are the fields not given, also in a real change.
    changed = api.put(f"/payment_methods/{shown['id']}", json={"payment_details": {"brand": "visa", "last4": None}})
    assert changed.json()["payment_method"]["payment_details"] == {**dict.fromkeys(DETAILS), "brand": "visa"}


def test_update_cannot_leave_the_method_without_a_token(api):
    method = create(api, make_customer(api), processor_customer_token=None)
    response = api.put(f"/payment_methods/{method['id']}", json={"processor_payment_method_token": None})
    assert errors_of(response) == {"processor_payment_method_token": ["is required"]}
    swapped = api.put(f"/payment_methods/{method['id']}", json={"processor_payment_method_token": None,
                                                                 "processor_customer_token": "cus_2"})
    assert swapped.status_code == 200


def test_update_processor_name_null_names_the_sandbox_again(api):
    method = create(api, make_customer(api))
    response = api.put(f"/payment_methods/{method['id']}", json={"processor_name": None})
    assert response.json()["payment_method"]["processor_name"] == "sandbox"


@pytest.mark.parametrize("field,value,message", [
    ("payment_type", None, "cannot be null"),
    ("payment_type", "cash", "must be one of: CREDIT_CARD, PAYPAL, APPLE_PAY, GOOGLE_PAY, SEPA_DEBIT"),
    ("default", 1, "must be a boolean"),
    ("processor_customer_token", "", "cannot be blank"),
    ("billing_address", [], "must be an object"),
])
def test_update_with_a_bad_field_answers_422_naming_it_and_changes_nothing(api, field, value, message):
    method = create(api, make_customer(api))
    response = api.put(f"/payment_methods/{method['id']}", json={field: value, "processor_name": "x"})
    assert errors_of(response) == {field: [message]}
    assert fetch(api, method["id"]) == method


def test_update_of_an_unknown_or_another_stores_method_answers_404(api):
    other = api.other_store()
    theirs = make_payment_method(other, make_customer(other))
    for method_id in (987654321, theirs):
        assert errors_of(api.put(f"/payment_methods/{method_id}", json={"processor_name": "x"}), 404) == \
            NOT_FOUND["errors"]
    assert other.get(f"/payment_methods/{theirs}").json()["payment_method"]["processor_name"] == "sandbox"


# --- delete ------------------------------------------------------------------------------------

def test_delete_answers_204_with_no_body_and_the_method_is_gone(api):
    customer = make_customer(api)
    method = create(api, customer)
    response = api.delete(f"/payment_methods/{method['id']}")
    assert response.status_code == 204 and response.content == b""
    assert api.get(f"/payment_methods/{method['id']}").status_code == 404


def test_deleting_the_default_makes_the_oldest_remaining_method_the_default(api):
    customer = make_customer(api)
    first = create(api, customer)
    api.clock.advance(minutes=1)
    second = create(api, customer)
    api.clock.advance(minutes=1)
    third = create(api, customer, default=True)
    api.delete(f"/payment_methods/{first['id']}")  # not the default: nothing moves
    assert defaults(api, customer) == {second["id"]: False, third["id"]: True}
    create(api, customer)
    assert api.delete(f"/payment_methods/{third['id']}").status_code == 204
    assert defaults(api, customer)[second["id"]] is True
    assert list(defaults(api, customer).values()).count(True) == 1


def test_deleting_a_method_an_address_names_answers_422_naming_the_address(api):
    customer = make_customer(api)
    method = create(api, customer)
    address = make_address(api, customer, payment_method_id=method["id"])
    before = topics(api, customer)
    response = api.delete(f"/payment_methods/{method['id']}")
    assert errors_of(response) == {"addresses": [f"Payment method is used by address {address.id}"]}
    assert fetch(api, method["id"]) == method
    assert topics(api, customer) == before


def test_the_in_use_error_names_the_addresses(api):
    customer = make_customer(api)
    method = create(api, customer)
    used = [make_address(api, customer, payment_method_id=method["id"]).id for _ in range(12)]
    response = api.delete(f"/payment_methods/{method['id']}")
    shown = ", ".join(str(i) for i in used[:10])
    assert errors_of(response) == {"addresses": [f"Payment method is used by addresses {shown} and 2 more"]}


def test_only_an_explicit_address_reference_blocks_a_delete(api):
    customer = make_customer(api)
    default = create(api, customer)
    make_address(api, customer)  # paid with the default, but names no method
    assert api.delete(f"/payment_methods/{default['id']}").status_code == 204


def test_an_address_that_stops_naming_the_method_lets_it_be_deleted(api):
    customer = make_customer(api)
    method = create(api, customer)
    address = make_address(api, customer, payment_method_id=method["id"])
    assert api.put(f"/addresses/{address.id}", json={"payment_method_id": None}).status_code == 200
    assert api.delete(f"/payment_methods/{method['id']}").status_code == 204


def test_delete_of_an_unknown_or_another_stores_method_answers_404(api):
    other = api.other_store()
    theirs = make_payment_method(other, make_customer(other))
    for method_id in (987654321, theirs):
        assert errors_of(api.delete(f"/payment_methods/{method_id}"), 404) == "Not Found"
    assert other.get(f"/payment_methods/{theirs}").status_code == 200


def test_deleting_the_customer_deletes_its_methods(api):
    customer = make_customer(api)
    method = create(api, customer)
    assert api.delete(f"/customers/{customer.id}").status_code == 204
    assert api.get(f"/payment_methods/{method['id']}").status_code == 404


def test_a_delete_racing_a_new_address_reference_ends_with_one_of_them_never_a_500(api):
    customer = make_customer(api)
    for _ in range(3):
        method = make_payment_method(api, customer)
        address = make_address(api, customer)
        answers: dict[str, int] = {}
        start = threading.Barrier(2, timeout=10)

        def delete(method_id: int = method) -> None:
            start.wait()
            answers["delete"] = api.delete(f"/payment_methods/{method_id}").status_code

        def point(address_id: int = address.id, method_id: int = method) -> None:
            start.wait()
            answers["address"] = api.put(f"/addresses/{address_id}",
                                         json={"payment_method_id": method_id}).status_code

        threads = [threading.Thread(target=delete), threading.Thread(target=point)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(answers.values()) in ([200, 422], [204, 422]), answers
        kept = api.get(f"/addresses/{address.id}").json()["address"]["payment_method_id"]
        assert kept == (method if answers["address"] == 200 else None)


# --- get and 404s ------------------------------------------------------------------------------

def test_get_of_an_unknown_or_another_stores_method_answers_404(api):
    other = api.other_store()
    theirs = make_payment_method(other, make_customer(other))
    for method_id in (987654321, theirs):
        response = api.get(f"/payment_methods/{method_id}")
        assert response.status_code == 404 and response.json() == NOT_FOUND


@pytest.mark.parametrize("method,path,version", [
    ("GET", "/payment_methods/abc", V11), ("PUT", "/payment_methods/abc", V11),
    ("DELETE", "/payment_methods/abc", V11), ("GET", "/payment_methods/" + "9" * 19, V11),
    ("GET", "/customers/abc/payment_sources", V01), ("GET", "/customers/-1/payment_sources", V01)])
def test_a_path_id_that_is_no_id_answers_404(api, method, path, version):
    response = api.request(method, path, json={}, version=version)
    assert response.status_code == 404 and response.json() == NOT_FOUND


def test_get_with_an_unknown_include_answers_422(api):
    method = create(api, make_customer(api))
    response = api.get(f"/payment_methods/{method['id']}", params={"include": "addresses,customer"})
    assert errors_of(response) == {"include": ["Invalid value: customer. Must be one of addresses"]}


def test_update_with_a_body_that_is_no_json_object_answers_415_and_changes_nothing(api):
    method = create(api, make_customer(api))
    response = api.request("PUT", f"/payment_methods/{method['id']}", content=b"[1]",
                           headers={"Content-Type": "application/json"})
    assert errors_of(response, 415) == "The request body must be a JSON object"
    assert fetch(api, method["id"]) == method


# --- list --------------------------------------------------------------------------------------

def test_list_answers_the_stores_methods_newest_first_with_cursors(api):
    customer = make_customer(api)
    made = [create(api, customer)["id"] for _ in range(3)]
    other = api.other_store()
    make_payment_method(other, make_customer(other))
    response = api.get("/payment_methods")
    assert response.status_code == 200
    listed = response.json()
    assert [m["id"] for m in listed["payment_methods"]] == made[::-1]
    assert (listed["next_cursor"], listed["previous_cursor"]) == (None, None)
    assert listed["payment_methods"][0] == fetch(api, made[-1])


def test_list_pages_with_cursors_forwards_and_back(api):
    customer = make_customer(api)
    made = [create(api, customer)["id"] for _ in range(5)]
    first = api.get("/payment_methods", params={"limit": 2, "sort_by": "id-asc"}).json()
    assert [m["id"] for m in first["payment_methods"]] == made[:2]
    second = api.get("/payment_methods", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [m["id"] for m in second["payment_methods"]] == made[2:4]
    back = api.get("/payment_methods", params={"limit": 2, "cursor": second["previous_cursor"]}).json()
    assert [m["id"] for m in back["payment_methods"]] == made[:2]


def test_list_filters_by_customer_status_payment_type_and_ids(api):
    alice, bob = make_customer(api), make_customer(api)
    a1 = create(api, alice)["id"]
    a2 = create(api, alice, payment_type="PAYPAL")["id"]
    b1 = create(api, bob)["id"]
    set_status(api, a1, "invalid")

    def listed(**params: Any) -> list[int]:
        response = api.get("/payment_methods", params=params)
        assert response.status_code == 200, response.text
        return sorted(m["id"] for m in response.json()["payment_methods"])

    assert listed(customer_id=alice.id) == [a1, a2]
    assert listed(customer_id=bob.id) == [b1]
    assert listed(customer_id=alice.id, status="invalid") == [a1]
    assert listed(customer_id=alice.id, payment_type="paypal") == [a2]
    assert listed(ids=f"{a1},{b1}") == [a1, b1]
    assert listed(customer_id=987654321) == []


def test_list_of_another_stores_customer_is_empty(api):
    other = api.other_store()
    who = make_customer(other)
    make_payment_method(other, who)
    assert api.get("/payment_methods", params={"customer_id": who.id}).json()["payment_methods"] == []


@pytest.mark.parametrize("params,errors", [
    ({"customer_id": "x"}, {"customer_id": ["Invalid integer: x"]}),
    ({"ids": "1,a"}, {"ids": ["Invalid ids: 1,a. Must be comma-separated integers"]}),
    ({"status": "VALID"}, {"status": ["Invalid value: VALID. Must be one of unvalidated, valid, invalid, empty"]}),
    ({"payment_type": "cash"}, {"payment_type": [
        "Invalid value: cash. Must be one of CREDIT_CARD, PAYPAL, APPLE_PAY, GOOGLE_PAY, SEPA_DEBIT"]}),
    ({"sort_by": "title-asc"}, {"sort_by": [
        "Invalid value: title-asc. Must be one of id-asc, id-desc, created_at-asc, created_at-desc, "
        "updated_at-asc, updated_at-desc"]}),
    ({"include": "customer"}, {"include": ["Invalid value: customer. Must be one of addresses"]}),
    ({"limit": "0"}, {"limit": ["must be an integer from 1 to 250"]}),
    ({"cursor": "garbage"}, {"cursor": ["Invalid value"]}),
    ({"created_at_min": "yesterday"}, {"created_at_min": [
        "Invalid date: yesterday. Must be a valid ISO-8601 datetime string"]}),
])
def test_list_with_a_bad_parameter_answers_422_naming_it(api, params, errors):
    assert errors_of(api.get("/payment_methods", params=params)) == errors


def test_a_cursor_of_another_list_is_refused(api):
    customer = make_customer(api)
    for _ in range(3):
        make_address(api, customer)
    cursor = api.get("/addresses", params={"limit": 1}).json()["next_cursor"]
    assert errors_of(api.get("/payment_methods", params={"cursor": cursor})) == {"cursor": ["Invalid value"]}


# --- include -----------------------------------------------------------------------------------

def test_include_addresses_embeds_the_addresses_that_name_the_method(api):
    customer = make_customer(api)
    default, other = create(api, customer), create(api, customer)
    naming = make_address(api, customer, payment_method_id=other["id"])
    make_address(api, customer)  # paid with the default but names none: not embedded
    rows = {m["id"]: m for m in api.get("/payment_methods", params={"include": "addresses"}).json()["payment_methods"]}
    assert rows[default["id"]]["include"] == {"addresses": []}
    assert rows[other["id"]]["include"] == {"addresses": [api.get(f"/addresses/{naming.id}").json()["address"]]}
    one = api.get(f"/payment_methods/{other['id']}", params={"include": "addresses"}).json()["payment_method"]
    assert one["include"] == rows[other["id"]]["include"]
    assert fetch(api, other["id"])["include"] == {}  # 03-real-fields: on every record


def _seed_methods(api: Any, n: int) -> None:
    for i in range(n):
        customer = make_customer(api)
        method = make_payment_method(api, customer)
        make_address(api, customer, payment_method_id=method if i % 2 else None)


@pytest.fixture(scope="module")
def stores_of_5_and_20(client, database, clock):
    small, large = make_api(client, database, clock), make_api(client, database, clock)
    _seed_methods(small, 5)
    _seed_methods(large, 20)
    return small, large


def test_a_list_with_include_addresses_issues_the_same_statements_for_5_and_20_rows(stores_of_5_and_20):
    counts = []
    for store in stores_of_5_and_20:
        with counting(store.db) as statements:
            response = store.get("/payment_methods", params={"include": "addresses", "limit": 250})
        assert response.status_code == 200
        counts.append((len(response.json()["payment_methods"]), len(statements)))
    assert [rows for rows, _ in counts] == [5, 20]
    assert counts[0][1] == counts[1][1] <= 6, counts


def test_include_payment_methods_on_customers_and_addresses_is_one_statement_per_page(stores_of_5_and_20):
    for path, plural in (("/customers", "customers"), ("/addresses", "addresses")):
        counts = []
        for store in stores_of_5_and_20:
            with counting(store.db) as statements:
                response = store.get(path, params={"include": "payment_methods", "limit": 250})
            assert response.status_code == 200
            counts.append(len(statements))
            rows = response.json()[plural]
            assert all("payment_methods" in row["include"] for row in rows)
        assert counts[0] == counts[1], (path, counts)


def test_include_payment_methods_embeds_them_in_the_2021_11_shape(api):
    customer = make_customer(api)
    method = create(api, customer)
    address = make_address(api, customer, payment_method_id=method["id"])
    embedded = api.get(f"/customers/{customer.id}", params={"include": "payment_methods"}).json()["customer"]
    assert embedded["include"] == {"payment_methods": [method]}
    on_address = api.get(f"/addresses/{address.id}", params={"include": "payment_methods"}).json()["address"]
    assert on_address["include"] == {"payment_methods": [method]}


# --- versions, scopes --------------------------------------------------------------------------

@pytest.mark.parametrize("method,path", [("GET", "/payment_methods"), ("POST", "/payment_methods"),
                                         ("GET", "/payment_methods/1"), ("PUT", "/payment_methods/1"),
                                         ("DELETE", "/payment_methods/1")])
def test_payment_methods_answer_501_in_2021_01(api, method, path):
    response = api.request(method, path, json={}, version=V01)
    assert errors_of(response, 501) == "This resource is not implemented in the requested API version"


def test_payment_sources_answer_501_in_2021_11(api):
    response = api.get(f"/customers/{make_customer(api).id}/payment_sources", version=V11)
    assert response.status_code == 501


SCOPED = [("GET", "/payment_methods", "read_payment_methods"),
          ("GET", "/payment_methods/{id}", "read_payment_methods"),
          ("POST", "/payment_methods", "write_payment_methods"),
          ("PUT", "/payment_methods/{id}", "write_payment_methods"),
          ("DELETE", "/payment_methods/{id}", "write_payment_methods")]


@pytest.mark.parametrize("method,path,scope", SCOPED)
def test_a_token_without_the_scope_gets_403_naming_it(api, method, path, scope):
    customer = make_customer(api)
    method_id = make_payment_method(api, customer)
    token = api.token_with("read_customers", "write_customers")
    response = api.request(method, path.format(id=method_id), json=body(customer), token=token)
    assert errors_of(response, 403) == f"This token lacks the scope this endpoint needs: {scope}"
    assert fetch(api, method_id)["processor_name"] == "sandbox"


def test_the_read_scope_reads_but_does_not_write(api):
    customer = make_customer(api)
    method_id = make_payment_method(api, customer)
    token = api.token_with("read_payment_methods")
    assert api.get(f"/payment_methods/{method_id}", token=token).status_code == 200
    assert api.get("/payment_methods", token=token).status_code == 200
    assert api.delete(f"/payment_methods/{method_id}", token=token).status_code == 403


def test_the_write_scope_includes_the_read_scope(api):
    customer = make_customer(api)
    token = api.token_with("write_payment_methods")
    response = api.post("/payment_methods", json=body(customer), token=token)
    assert response.status_code == 201
    method_id = response.json()["payment_method"]["id"]
    assert api.get(f"/payment_methods/{method_id}", token=token).status_code == 200
    assert api.put(f"/payment_methods/{method_id}", json={"default": True}, token=token).status_code == 200
    assert api.delete(f"/payment_methods/{method_id}", token=token).status_code == 204


# --- events ------------------------------------------------------------------------------------

def test_create_update_and_delete_each_record_customer_payment_method_updated_for_the_customer(api):
    customer = make_customer(api)
    method = create(api, customer)
    assert events_of(api, customer.id, "customer")[-1] == (TOPIC, customer.id)
    api.put(f"/payment_methods/{method['id']}", json={"processor_name": "adyen"})
    api.delete(f"/payment_methods/{method['id']}")
    assert topics(api, customer) == [TOPIC] * 3


def test_a_refused_write_records_no_event(api):
    customer = make_customer(api)
    method = create(api, customer)
    make_address(api, customer, payment_method_id=method["id"])
    before = len(events_of(api))
    api.put(f"/payment_methods/{method['id']}", json={"default": False})
    api.delete(f"/payment_methods/{method['id']}")
    api.post("/payment_methods", json=body(customer, payment_type="CASH"))
    assert len(events_of(api)) == before


# --- 2021-01 payment sources -------------------------------------------------------------------

def test_payment_sources_show_the_customers_methods_in_the_old_shape_with_a_deprecation_header(api):
    customer = make_customer(api)
    method = create(api, customer, payment_details={**DETAILS, "cardholder_name": "A. Lovelace"})
    response = api.get(f"/customers/{customer.id}/payment_sources", version=V01)
    assert response.status_code == 200, response.text
    assert response.headers["Deprecation"] == "true"
    assert response.json() == {"payment_sources": [{
        "id": method["id"],
        "billing_address": {"id": method["id"], "address1": "1 Infinite Loop", "address2": None,
                            "city": "Cupertino", "company": None, "country": "United States", "first_name": "Ada",
                            "last_name": "Lovelace", "phone": "+14085550100", "province": "California",
                            "zip": "95014"},
        "card_brand": "visa",
        "card_exp_month": 12,
        "card_exp_year": 2030,
        "card_last4": "4242",
        "cardholder_name": "A. Lovelace",
        "customer_id": customer.id,
        "has_card_error_in_dunning": False,
        "payment_token": "pm_456",
        "payment_type": "credit",
        "processor_name": "stripe",
        "status": "active",
        "status_reason": None,
    }]}


def test_payment_sources_list_the_default_first_then_by_age(api):
    customer = make_customer(api)
    first = create(api, customer)["id"]
    second = create(api, customer)["id"]
    third = create(api, customer, default=True)["id"]
    sources = api.get(f"/customers/{customer.id}/payment_sources", version=V01).json()["payment_sources"]
    assert [s["id"] for s in sources] == [third, first, second]


@pytest.mark.parametrize("status,old", [("unvalidated", "active"), ("valid", "active"), ("invalid", "failed"),
                                        ("empty", "failed")])
def test_payment_source_status_is_active_or_failed_in_lower_case(api, status, old):
    customer = make_customer(api)
    method_id = create(api, customer)["id"]
    set_status(api, method_id, status, "why" if old == "failed" else None)
    [source] = api.get(f"/customers/{customer.id}/payment_sources", version=V01).json()["payment_sources"]
    assert (source["status"], source["status_reason"]) == (old, "why" if old == "failed" else None)


@pytest.mark.parametrize("payment_type,details,old", [
    ("CREDIT_CARD", {}, "credit"), ("CREDIT_CARD", {"funding_type": "debit"}, "debit"), ("PAYPAL", {}, "paypal"),
    ("APPLE_PAY", {}, "apple_pay"), ("GOOGLE_PAY", {}, "google_pay"), ("SEPA_DEBIT", {}, "sepa_debit")])
def test_payment_source_payment_type_is_the_old_lower_case_name(api, payment_type, details, old):
    customer = make_customer(api)
    create(api, customer, payment_type=payment_type, payment_details=details)
    [source] = api.get(f"/customers/{customer.id}/payment_sources", version=V01).json()["payment_sources"]
    assert source["payment_type"] == old


def test_payment_source_cardholder_name_falls_back_to_the_billing_name(api):
    customer = make_customer(api)
    create(api, customer, billing_address={"first_name": "Grace", "last_name": "Hopper"})
    [source] = api.get(f"/customers/{customer.id}/payment_sources", version=V01).json()["payment_sources"]
    assert source["cardholder_name"] == "Grace Hopper"


def test_payment_sources_carry_the_customers_card_error_in_dunning(api):
    customer = make_customer(api)
    create(api, customer)
    put_charge_in_error(api, make_address(api, customer))
    [source] = api.get(f"/customers/{customer.id}/payment_sources", version=V01).json()["payment_sources"]
    assert source["has_card_error_in_dunning"] is True


def test_payment_sources_of_a_customer_without_methods_are_empty(api):
    response = api.get(f"/customers/{make_customer(api).id}/payment_sources", version=V01)
    assert response.json() == {"payment_sources": []}


def test_payment_sources_of_an_unknown_or_another_stores_customer_answer_404_still_deprecated(api):
    other = api.other_store()
    theirs = make_customer(other)
    make_payment_method(other, theirs)
    for customer_id in (987654321, theirs.id):
        response = api.get(f"/customers/{customer_id}/payment_sources", version=V01)
        assert response.status_code == 404 and response.json() == NOT_FOUND
        assert response.headers["Deprecation"] == "true"


def test_payment_sources_need_the_payment_methods_read_scope(api):
    customer = make_customer(api)
    denied = api.get(f"/customers/{customer.id}/payment_sources", version=V01,
                     token=api.token_with("read_customers"))
    assert errors_of(denied, 403) == "This token lacks the scope this endpoint needs: read_payment_methods"
    allowed = api.get(f"/customers/{customer.id}/payment_sources", version=V01,
                      token=api.token_with("read_payment_methods"))
    assert allowed.status_code == 200


def test_payment_sources_have_every_field_of_spec_03(api):
    customer = make_customer(api)
    create(api, customer)
    make_payment_method(api, customer, payment_type="PAYPAL", payment_details=None, billing_address=None)
    sources = api.get(f"/customers/{customer.id}/payment_sources", version=V01).json()["payment_sources"]
    expected = [
        ("billing_address", {OBJ}),
        ("billing_address.id", {INT}),
        *[(f"billing_address.{name}", {STR, NULL})
          for name in ("address1", "address2", "city", "company", "country", "first_name", "last_name", "phone",
                       "province", "zip")],
        ("card_brand", {STR, NULL}), ("card_exp_month", {INT, NULL}), ("card_exp_year", {INT, NULL}),
        ("card_last4", {STR, NULL}), ("cardholder_name", {STR, NULL}), ("customer_id", {INT}),
        ("has_card_error_in_dunning", {BOOL}), ("payment_token", {STR, NULL}), ("payment_type", {STR}),
        ("processor_name", {STR}), ("status", {STR}), ("status_reason", {STR, NULL}),
    ]
    assert len(sources) == 2
    for source in sources:
        assert_fields(source, expected)


# --- customer fields derived from payment methods and charges ----------------------------------

def _customer(api: Any, customer: Any, version: str) -> dict[str, Any]:
    response = api.get(f"/customers/{customer.id}", version=version)
    assert response.status_code == 200, response.text
    return response.json()["customer"]


@pytest.mark.parametrize("statuses,expected", [
    ((), False), (("unvalidated",), True), (("valid",), True), (("invalid",), False), (("empty",), False),
    (("invalid", "unvalidated"), True), (("invalid", "empty"), False)])
def test_has_valid_payment_method_is_true_while_a_valid_or_unvalidated_method_exists(vapi, statuses, expected):
    customer = make_customer(vapi)
    for status in statuses:
        make_payment_method(vapi, customer, status=status)
    assert _customer(vapi, customer, vapi.version)["has_valid_payment_method"] is expected


def test_the_dunning_flag_is_true_while_one_of_the_customers_charges_is_in_error(vapi):
    flag = "has_payment_method_in_dunning" if vapi.version == V11 else "has_card_error_in_dunning"
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    make_subscription(vapi, address)
    assert _customer(vapi, customer, vapi.version)[flag] is False  # a queued charge is no error
    [charge] = charges_of(vapi, address.id)
    with vapi.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge.id).values(status="error"))
    assert _customer(vapi, customer, vapi.version)[flag] is True
    assert _customer(vapi, make_customer(vapi), vapi.version)[flag] is False
    with vapi.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge.id).values(status="success"))
    assert _customer(vapi, customer, vapi.version)[flag] is False


def test_reason_payment_method_not_valid_explains_why_no_method_is_valid(api):
    customer = make_customer(api)
    assert _customer(api, customer, V01)["reason_payment_method_not_valid"] is None  # no method at all
    method_id = make_payment_method(api, customer)
    assert _customer(api, customer, V01)["reason_payment_method_not_valid"] is None  # unvalidated: usable
    set_status(api, method_id, "invalid", "CARD_EXPIRED: the card has expired")
    assert _customer(api, customer, V01)["reason_payment_method_not_valid"] == "CARD_EXPIRED: the card has expired"
    set_status(api, method_id, "empty")
    assert _customer(api, customer, V01)["reason_payment_method_not_valid"] == "payment method is empty"
    make_payment_method(api, customer)
    assert _customer(api, customer, V01)["reason_payment_method_not_valid"] is None


def test_processor_fields_of_the_customer_come_from_its_default_method(api):
    customer = make_customer(api)
    assert (_customer(api, customer, V01)["processor_type"], _customer(api, customer, V01)["stripe_customer_token"]) \
        == (None, None)
    create(api, customer, processor_name="Stripe", processor_customer_token="cus_stripe")
    old = _customer(api, customer, V01)
    assert (old["processor_type"], old["stripe_customer_token"], old["braintree_customer_token"]) == (
        "Stripe", "cus_stripe", None)
    create(api, customer, processor_name="braintree", processor_customer_token="cus_bt", default=True)
    head = _customer(api, customer, V11)
    assert (head["braintree_customer_token"], head["paypal_customer_token"]) == ("cus_bt", None)
    assert _customer(api, customer, V01)["stripe_customer_token"] is None


def test_the_two_authorize_net_profile_ids_come_from_an_authorize_net_default_method(api):
    """spec 02 Customer (2021-01): "two authorize-type profile ids", shown null until the
    default method is Authorize.Net's: its customer profile and its payment profile."""
    customer = make_customer(api)
    empty = _customer(api, customer, V01)
    assert (empty["authorizedotnet_profile_id"], empty["authorizedotnet_payment_profile_id"]) == (None, None)
    create(api, customer, processor_name="AuthorizeDotNet", processor_customer_token="1504372",
           processor_payment_method_token="1503945")
    old = _customer(api, customer, V01)
    assert (old["authorizedotnet_profile_id"], old["authorizedotnet_payment_profile_id"]) == ("1504372", "1503945")
    assert old["stripe_customer_token"] is None
    assert "authorizedotnet_profile_id" not in _customer(api, customer, V11)  # 2021-01 fields only
    create(api, customer, processor_name="stripe", processor_customer_token="cus_s", default=True)
    again = _customer(api, customer, V01)
    assert (again["authorizedotnet_profile_id"], again["authorizedotnet_payment_profile_id"]) == (None, None)


def test_a_processor_type_the_customer_was_given_wins_over_its_methods(api):
    response = api.post("/customers", version=V01, json={
        "email": "pt@example.com", "first_name": "A", "last_name": "B", "processor_type": "paypal",
        "billing_address1": "1 Main St", "billing_city": "Springfield", "billing_country": "US",
        "billing_first_name": "A", "billing_last_name": "B", "billing_province": "IL", "billing_zip": "62701"})
    assert response.status_code == 200, response.text
    customer_id = response.json()["customer"]["id"]
    api.post("/payment_methods", json={"customer_id": customer_id, "payment_type": "CREDIT_CARD",
                                       "processor_name": "stripe", "processor_customer_token": "cus"})
    assert api.get(f"/customers/{customer_id}", version=V01).json()["customer"]["processor_type"] == "paypal"


@pytest.fixture(scope="module")
def customers_of_5_and_20(client, database, clock):
    stores = []
    for n in (5, 20):
        store = make_api(client, database, clock)
        for i in range(n):
            customer = make_customer(store)
            if i % 2:
                make_payment_method(store, customer, status="invalid" if i % 3 else "valid")
            if i % 4 == 0:
                put_charge_in_error(store, make_address(store, customer))
        stores.append(store)
    return stores


@pytest.mark.parametrize("version", [V01, V11])
def test_customer_lists_derive_the_payment_fields_without_a_query_per_row(customers_of_5_and_20, version):
    counts, flagged = [], []
    for store in customers_of_5_and_20:
        with counting(store.db) as statements:
            response = store.get("/customers", params={"limit": 250}, version=version)
        assert response.status_code == 200
        counts.append(len(statements))
        rows = response.json()["customers"]
        flag = "has_payment_method_in_dunning" if version == V11 else "has_card_error_in_dunning"
        flagged.append(sum(row[flag] for row in rows))
    assert counts[0] == counts[1], counts
    assert flagged == [2, 5]


# --- addresses: payment_method_id --------------------------------------------------------------

def test_an_address_may_name_only_a_method_of_its_own_customer_on_update(api):
    customer, other = make_customer(api), make_customer(api)
    address = make_address(api, customer)
    other_store = api.other_store()
    foreign = make_payment_method(other_store, make_customer(other_store))
    for method_id in (make_payment_method(api, other), foreign, 987654321):
        response = api.put(f"/addresses/{address.id}", json={"payment_method_id": method_id})
        assert errors_of(response) == {"payment_method_id": ["payment method not found for this customer"]}
    assert api.get(f"/addresses/{address.id}").json()["address"]["payment_method_id"] is None


def test_an_address_may_name_a_method_of_its_customer_that_is_not_the_default(api):
    customer = make_customer(api)
    method = create(api, customer)
    second = create(api, customer)
    response = api.post("/addresses", json={
        "customer_id": customer.id, "address1": "101 Market St", "city": "San Francisco", "country_code": "US",
        "province": "CA", "zip": "94105", "first_name": "Ada", "last_name": "Lovelace", "phone": "",
        "payment_method_id": second["id"]})
    assert response.status_code == 201, response.text
    assert response.json()["address"]["payment_method_id"] == second["id"]
    assert defaults(api, customer) == {method["id"]: True, second["id"]: False}


# --- migration 0005 ----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0005_leaves_each_customer_one_default_the_oldest(backend, tmp_path):
    with fresh_database_url(backend, tmp_path) as url:
        config = alembic_config(url)
        command.upgrade(config, "0004")
        engine = create_engine(normalize_url(url))
        try:
            old = _reflected(engine)
            with engine.begin() as conn:
                store_id = _insert(conn, old["stores"])
                two_defaults = _insert(conn, old["customers"], store_id=store_id, email_key="a", hash="a")
                no_default = _insert(conn, old["customers"], store_id=store_id, email_key="b", hash="b")

                def method(customer_id: int, is_default: bool, minute: int) -> int:
                    at = datetime(2026, 1, 1, 12, minute)
                    return _insert(conn, old["payment_methods"], store_id=store_id, customer_id=customer_id,
                                   is_default=is_default, created_at=at, updated_at=at)

                kept, dropped = method(two_defaults, True, 1), method(two_defaults, True, 2)
                younger, oldest = method(no_default, False, 5), method(no_default, False, 3)
            command.upgrade(config, "0005")
            with engine.connect() as conn:
                found = dict(conn.execute(select(old["payment_methods"].c.id,
                                                 old["payment_methods"].c.is_default)).all())
            assert [found[i] for i in (kept, dropped, younger, oldest)] == [True, False, False, True]
            command.downgrade(config, "0004")
            command.upgrade(config, "head")
        finally:
            engine.dispose()


def test_the_payment_methods_table_is_the_one_the_repository_reads():
    # The repository's struct reads every column of the table (db/rows.py columns_for).
    from rebill.domain.payment_method.model import PaymentMethod
    assert list(PaymentMethod.__struct_fields__) == [c.name for c in payment_methods.columns]
