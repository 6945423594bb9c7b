"""The deprecated processor token fields of a 2021-01 customer body (spec 02 Customers: "deprecated
token fields"; a tokenized customer, not card data; a write permission on payments only when
payment token data is created or changed): `stripe_customer_token`, `braintree_customer_token`,
`paypal_customer_token` on `POST /customers` and `PUT /customers/{id}`, kept on the customer's
payment method of that processor (decisions §6.1, §6.12; docs/api-choices.md, Customers), read
back in 2021-01 and as a payment method in 2021-11. 2021-11 customers take none of them. Both
databases (the `api` fixture)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import update

from rebill.domain.payment import processors
from rebill.domain.payment.vault import Vault
from rebill.domain.payment_method import repository as pm_repo
from rebill.models import payment_methods as payment_methods_table
from tests.api.test_customers import V01, V11, create_body, errors_of
from tests.builders import events_of, make_customer, make_payment_method
from tests.scenarios.test_schedule_writes import _same_as_get

PROCESSORS = ("stripe", "braintree", "paypal")
TYPES = {"stripe": "CREDIT_CARD", "braintree": "CREDIT_CARD", "paypal": "PAYPAL"}
TOPIC = "customer/payment_method_updated"
REFUSED = {"errors": "This token lacks the scope a customer token needs: write_payment_methods"}
CARD_DATA = "must be a tokenized customer, not card data"


def field(processor: str) -> str:
    return f"{processor}_customer_token"


def methods_of(api: Any, customer_id: int) -> list[dict[str, Any]]:
    """The customer's payment methods as 2021-11 shows them, oldest first."""
    response = api.get("/payment_methods", params={"customer_id": customer_id, "sort_by": "id-asc"}, version=V11)
    assert response.status_code == 200, response.text
    return response.json()["payment_methods"]


def customer01(api: Any, customer_id: int) -> dict[str, Any]:
    response = api.get(f"/customers/{customer_id}", version=V01)
    assert response.status_code == 200, response.text
    return response.json()["customer"]


def tokens_shown(customer: dict[str, Any]) -> dict[str, Any]:
    return {p: customer[field(p)] for p in PROCESSORS}


def customers_named(api: Any, email: str) -> list[Any]:
    response = api.get("/customers", params={"email": email}, version=V01)
    assert response.status_code == 200, response.text
    return response.json()["customers"]


def billed_customer(api: Any) -> Any:
    """A customer with the billing address a 2021-01 body requires, so what it reads it can send back."""
    billing = {k: v for k, v in create_body(V01).items() if k.startswith("billing_") and k != "billing_country"}
    return make_customer(api, **billing, billing_country_code="US")


def customers_only(api: Any) -> str:
    """A token that may write customers, not payment methods."""
    return api.token_with("write_customers")


# Create ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("processor", PROCESSORS)
def test_a_customer_created_with_a_token_has_it_as_its_default_payment_method(api: Any, processor: str) -> None:
    token = f"{processor}-cust-{uuid.uuid4().hex[:8]}"
    response = api.post("/customers", json=create_body(V01, **{field(processor): token}), version=V01)
    assert response.status_code == 200, response.text
    made = response.json()["customer"]
    assert tokens_shown(made) == {p: token if p == processor else None for p in PROCESSORS}
    assert made["has_valid_payment_method"] is True
    assert made["reason_payment_method_not_valid"] is None
    assert made["processor_type"] == processor
    # The answer is read back once a method exists: it is what a GET answers.
    _same_as_get(api, response, "customer", V01)
    [method] = methods_of(api, made["id"])
    assert {k: method[k] for k in ("customer_id", "default", "payment_type", "processor_name",
                                   "processor_customer_token", "processor_payment_method_token", "status",
                                   "status_reason")} == {
        "customer_id": made["id"], "default": True, "payment_type": TYPES[processor], "processor_name": processor,
        "processor_customer_token": token, "processor_payment_method_token": None, "status": "unvalidated",
        "status_reason": None}
    head = api.get(f"/customers/{made['id']}", version=V11).json()["customer"]
    assert head["has_valid_payment_method"] is True
    for name in ("braintree", "paypal"):  # 2021-11 shows these two (docs/api-choices.md, Customers)
        assert head[field(name)] == (token if name == processor else None)


def test_a_customer_created_without_a_token_still_answers_what_it_wrote(api: Any) -> None:
    response = api.post("/customers", json=create_body(V01, stripe_customer_token=None), version=V01)
    assert response.status_code == 200, response.text
    made = response.json()["customer"]
    assert tokens_shown(made) == dict.fromkeys(PROCESSORS)
    assert made["has_valid_payment_method"] is False
    assert methods_of(api, made["id"]) == []
    _same_as_get(api, response, "customer", V01)


def test_two_tokens_at_once_make_two_methods_the_first_processor_the_default_and_one_event(api: Any) -> None:
    # Written in the order stripe, braintree, paypal, whatever the body's order.
    response = api.post("/customers", json=create_body(V01, paypal_customer_token="PAYER-2",
                                                       stripe_customer_token="cus_two"), version=V01)
    assert response.status_code == 200, response.text
    made = response.json()["customer"]
    assert tokens_shown(made) == {"stripe": "cus_two", "braintree": None, "paypal": None}
    methods = methods_of(api, made["id"])
    assert [(m["processor_name"], m["processor_customer_token"], m["default"], m["payment_type"])
            for m in methods] == [("stripe", "cus_two", True, "CREDIT_CARD"), ("paypal", "PAYER-2", False, "PAYPAL")]
    assert events_of(api, made["id"], "customer") == [("customer/created", made["id"]), (TOPIC, made["id"])]


def test_creating_with_a_token_records_the_payment_method_event_after_the_customer(api: Any) -> None:
    made = api.post("/customers", json=create_body(V01, braintree_customer_token="bt_1"), version=V01).json()
    customer_id = made["customer"]["id"]
    assert events_of(api, customer_id, "customer") == [("customer/created", customer_id), (TOPIC, customer_id)]


# Update ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("processor", PROCESSORS)
def test_an_update_with_a_token_makes_the_first_method_the_default(api: Any, processor: str) -> None:
    customer = make_customer(api)
    response = api.put(f"/customers/{customer.id}", json={field(processor): "tok_new"}, version=V01)
    assert response.status_code == 200, response.text
    updated = response.json()["customer"]
    assert updated[field(processor)] == "tok_new"
    assert updated["has_valid_payment_method"] is True
    assert updated == customer01(api, customer.id)
    [method] = methods_of(api, customer.id)
    assert (method["processor_name"], method["processor_customer_token"], method["default"],
            method["payment_type"], method["status"]) == (processor, "tok_new", True, TYPES[processor], "unvalidated")
    # Only the payment method changed: no customer/updated, the customer's updated_at stays.
    assert events_of(api, customer.id, "customer") == [("customer/created", customer.id), (TOPIC, customer.id)]
    assert updated["updated_at"] == customer01(api, customer.id)["updated_at"]


@pytest.mark.parametrize("processor", PROCESSORS)
def test_an_update_replaces_the_token_of_the_processors_method_and_it_is_unvalidated_again(
        api: Any, processor: str) -> None:
    customer = make_customer(api)
    method_id = make_payment_method(api, customer, processor_name=processor, processor_customer_token="old",
                                    processor_payment_method_token="pm_kept", status="invalid",
                                    status_reason="card expired")
    assert customer01(api, customer.id)["has_valid_payment_method"] is False
    before = len(events_of(api, customer.id, "customer"))
    api.clock.advance(minutes=5)
    response = api.put(f"/customers/{customer.id}", json={field(processor): "new", "first_name": "Grace"},
                       version=V01)
    assert response.status_code == 200, response.text
    updated = response.json()["customer"]
    assert (updated[field(processor)], updated["first_name"]) == ("new", "Grace")
    assert updated["has_valid_payment_method"] is True
    assert updated["reason_payment_method_not_valid"] is None
    [method] = methods_of(api, customer.id)
    assert method["id"] == method_id
    # As `PUT /payment_methods/{id}` with that one token: its other fields are kept.
    assert (method["processor_customer_token"], method["processor_payment_method_token"], method["status"],
            method["status_reason"], method["default"]) == ("new", "pm_kept", "unvalidated", None, True)
    assert method["payment_details"]["last4"] == "4242"
    assert events_of(api, customer.id, "customer")[before:] == [("customer/updated", customer.id), (TOPIC, customer.id)]


def test_sending_the_token_the_method_holds_changes_nothing_and_needs_no_payment_scope(api: Any) -> None:
    customer = billed_customer(api)
    make_payment_method(api, customer, processor_name="stripe", processor_customer_token="cus_same")
    shown = customer01(api, customer.id)
    before = len(events_of(api, customer.id, "customer"))
    [method] = methods_of(api, customer.id)
    api.clock.advance(minutes=5)
    # A client that sends back what it read, with a token that may not write payment methods
    # (what else that writes back, `processor_type` and `analytics_data`, is the customer's own).
    response = api.put(f"/customers/{customer.id}", json=shown, version=V01, token=customers_only(api))
    assert response.status_code == 200, response.text
    assert tokens_shown(response.json()["customer"]) == tokens_shown(shown)
    assert methods_of(api, customer.id) == [method]
    assert TOPIC not in [t for t, _ in events_of(api, customer.id, "customer")[before:]]
    # The token alone: nothing at all.
    again = len(events_of(api, customer.id, "customer"))
    response = api.put(f"/customers/{customer.id}", json={"stripe_customer_token": "cus_same"}, version=V01,
                       token=customers_only(api))
    assert response.status_code == 200, response.text
    assert methods_of(api, customer.id) == [method]
    assert len(events_of(api, customer.id, "customer")) == again


def test_null_gives_no_token_it_removes_none_and_needs_no_payment_scope(api: Any) -> None:
    customer = make_customer(api)
    make_payment_method(api, customer, processor_name="stripe", processor_customer_token="cus_kept")
    [method] = methods_of(api, customer.id)
    before = len(events_of(api, customer.id, "customer"))
    body = {field(p): None for p in PROCESSORS}
    response = api.put(f"/customers/{customer.id}", json=body, version=V01, token=customers_only(api))
    assert response.status_code == 200, response.text
    assert tokens_shown(response.json()["customer"]) == {"stripe": "cus_kept", "braintree": None, "paypal": None}
    assert methods_of(api, customer.id) == [method]
    assert len(events_of(api, customer.id, "customer")) == before
    created = api.post("/customers", json=create_body(V01, **body), version=V01, token=customers_only(api))
    assert created.status_code == 200, created.text
    assert methods_of(api, created.json()["customer"]["id"]) == []


def test_a_default_method_of_another_processor_stays_the_default(api: Any) -> None:
    customer = make_customer(api)
    default_id = make_payment_method(api, customer, processor_name="sandbox", processor_customer_token="cus_sb")
    response = api.put(f"/customers/{customer.id}", json={"stripe_customer_token": "cus_other"}, version=V01)
    assert response.status_code == 200, response.text
    updated = response.json()["customer"]
    # The 2021-01 fields show the default method's token: the default is the sandbox method still.
    assert tokens_shown(updated) == dict.fromkeys(PROCESSORS)
    assert updated["has_valid_payment_method"] is True
    assert updated["processor_type"] == "sandbox"
    methods = methods_of(api, customer.id)
    assert [(m["id"] == default_id, m["processor_name"], m["processor_customer_token"], m["default"])
            for m in methods] == [(True, "sandbox", "cus_sb", True), (False, "stripe", "cus_other", False)]


def test_a_non_default_method_of_the_processor_is_the_one_updated(api: Any) -> None:
    customer = make_customer(api)
    make_payment_method(api, customer, processor_name="sandbox", processor_customer_token="cus_sb")
    older = make_payment_method(api, customer, processor_name="Stripe", processor_customer_token="cus_a")
    make_payment_method(api, customer, processor_name="stripe", processor_customer_token="cus_b")
    response = api.put(f"/customers/{customer.id}", json={"stripe_customer_token": "cus_c"}, version=V01)
    assert response.status_code == 200, response.text
    by_id = {m["id"]: m for m in methods_of(api, customer.id)}
    assert len(by_id) == 3
    assert by_id[older]["processor_customer_token"] == "cus_c"
    assert sorted(m["processor_customer_token"] for m in by_id.values()) == ["cus_b", "cus_c", "cus_sb"]
    assert [m["processor_name"] for m in by_id.values() if m["default"]] == ["sandbox"]


def test_another_customers_method_is_untouched(api: Any) -> None:
    first, second = make_customer(api), make_customer(api)
    make_payment_method(api, first, processor_name="stripe", processor_customer_token="cus_first")
    [theirs] = methods_of(api, first.id)
    before = events_of(api, first.id, "customer")
    api.clock.advance(minutes=5)
    response = api.put(f"/customers/{second.id}", json={"stripe_customer_token": "cus_first"}, version=V01)
    assert response.status_code == 200, response.text
    assert methods_of(api, first.id) == [theirs]
    assert events_of(api, first.id, "customer") == before
    [mine] = methods_of(api, second.id)
    assert (mine["customer_id"], mine["processor_customer_token"], mine["default"]) == (second.id, "cus_first", True)


def test_another_stores_customer_is_not_found_and_gets_no_method(api: Any) -> None:
    other = api.other_store()
    theirs = make_customer(other)
    response = api.put(f"/customers/{theirs.id}", json={"stripe_customer_token": "cus_x"}, version=V01)
    assert response.status_code == 404, response.text
    with api.db.read() as conn:
        assert pm_repo.of_customers(conn, other.store.id, [theirs.id]) == []


# The payments scope -------------------------------------------------------------------------

@pytest.mark.parametrize("processor", PROCESSORS)
def test_creating_with_a_token_needs_the_payment_methods_write_scope_and_writes_nothing_without(
        api: Any, processor: str) -> None:
    before = events_of(api)
    body = create_body(V01, **{field(processor): "cus_denied"})
    for token in (customers_only(api), api.token_with("write_customers", "read_payment_methods")):
        response = api.post("/customers", json=body, version=V01, token=token)
        assert response.status_code == 403, response.text
        assert response.json() == REFUSED
    assert customers_named(api, body["email"]) == []
    assert events_of(api) == before
    allowed = api.token_with("write_customers", "write_payment_methods")
    response = api.post("/customers", json=body, version=V01, token=allowed)
    assert response.status_code == 200, response.text
    assert response.json()["customer"][field(processor)] == "cus_denied"


@pytest.mark.parametrize("processor", PROCESSORS)
def test_updating_a_token_needs_the_payment_methods_write_scope_and_changes_nothing_without(
        api: Any, processor: str) -> None:
    customer = make_customer(api)
    make_payment_method(api, customer, processor_name=processor, processor_customer_token="cus_old")
    shown, methods, before = customer01(api, customer.id), methods_of(api, customer.id), events_of(api)
    api.clock.advance(minutes=5)
    response = api.put(f"/customers/{customer.id}", json={field(processor): "cus_new", "first_name": "Grace"},
                       version=V01, token=customers_only(api))
    assert response.status_code == 403, response.text
    assert response.json() == REFUSED
    # Nothing of the request was kept: neither the customer's own field nor the token.
    assert customer01(api, customer.id) == shown
    assert methods_of(api, customer.id) == methods
    assert events_of(api) == before
    # A new method needs it as well.
    fresh = make_customer(api)
    response = api.put(f"/customers/{fresh.id}", json={field(processor): "cus_new"}, version=V01,
                       token=customers_only(api))
    assert response.status_code == 403, response.text
    assert methods_of(api, fresh.id) == []
    # The customer fields alone still need only the customers scope.
    response = api.put(f"/customers/{customer.id}", json={"first_name": "Grace"}, version=V01,
                       token=customers_only(api))
    assert response.status_code == 200, response.text


# Validation -----------------------------------------------------------------------------------

CARD_NUMBERS = ("4242424242424242", "4242 4242 4242 4242", "4242-4242-4242-4242", " 4111111111111 ",
                "4000 0000 0000 0000 002", "378282246310005")
NOT_CARD_NUMBERS = ("123456789012", "12345678901234567890", "cus_4242424242424242", "4242424242424242x",
                    "42424242-42424242-4242")


@pytest.mark.parametrize("value", CARD_NUMBERS)
def test_a_value_that_reads_as_a_card_number_is_refused_naming_the_field(api: Any, value: str) -> None:
    body = create_body(V01, stripe_customer_token=value)
    assert errors_of(api.post("/customers", json=body, version=V01)) == {"stripe_customer_token": [CARD_DATA]}
    assert customers_named(api, body["email"]) == []
    customer = make_customer(api)
    response = api.put(f"/customers/{customer.id}", json={"paypal_customer_token": value, "email": "bad"},
                       version=V01)
    assert errors_of(response) == {"paypal_customer_token": [CARD_DATA], "email": ["is invalid"]}
    assert methods_of(api, customer.id) == []


@pytest.mark.parametrize("value", NOT_CARD_NUMBERS)
def test_other_values_are_tokens(api: Any, value: str) -> None:
    customer = make_customer(api)
    response = api.put(f"/customers/{customer.id}", json={"braintree_customer_token": value}, version=V01)
    assert response.status_code == 200, response.text
    assert response.json()["customer"]["braintree_customer_token"] == value


@pytest.mark.parametrize(("value", "message"), [
    ("", "cannot be blank"), ("   ", "cannot be blank"), (123, "must be a string"),
    (4242424242424242, "must be a string"), (True, "must be a string"), ({"id": "cus_1"}, "must be a string"),
    (["cus_1"], "must be a string"), ("x" * 256, "is too long (at most 255 characters)"),
])
def test_a_blank_or_non_string_token_is_refused(api: Any, value: Any, message: str) -> None:
    body = create_body(V01, braintree_customer_token=value)
    assert errors_of(api.post("/customers", json=body, version=V01)) == {"braintree_customer_token": [message]}
    assert customers_named(api, body["email"]) == []
    customer = make_customer(api)
    response = api.put(f"/customers/{customer.id}", json={"stripe_customer_token": value}, version=V01)
    assert errors_of(response) == {"stripe_customer_token": [message]}
    assert methods_of(api, customer.id) == []


def test_a_bad_token_is_a_422_before_the_scope_is_asked(api: Any) -> None:
    body = create_body(V01, stripe_customer_token="4242424242424242")
    response = api.post("/customers", json=body, version=V01, token=customers_only(api))
    assert errors_of(response) == {"stripe_customer_token": [CARD_DATA]}


def test_a_stripe_store_takes_its_methods_through_payment_methods_only(api: Any) -> None:
    """A Stripe store's methods are checked with Stripe before they are saved (issue 16), which a
    customer write does not do: a token it would write is refused, naming the field."""
    with api.db.write() as conn:
        processors.choose_stripe(conn, api.store, api.clock.now(), Vault(Fernet.generate_key().decode()),
                                 secret_key=f"sk_test_{uuid.uuid4().hex}", webhook_secret=None,
                                 authorize_only=False, api_base="http://127.0.0.1:9")
    body = create_body(V01, stripe_customer_token="cus_stripe")
    errors = errors_of(api.post("/customers", json=body, version=V01))
    assert list(errors) == ["stripe_customer_token"] and "Stripe" in errors["stripe_customer_token"][0]
    assert customers_named(api, body["email"]) == []
    customer = make_customer(api)
    errors = errors_of(api.put(f"/customers/{customer.id}", json={"paypal_customer_token": "P-1"}, version=V01))
    assert list(errors) == ["paypal_customer_token"]
    assert methods_of(api, customer.id) == []
    # A token the customer's method already holds writes nothing, so it is no refusal.
    make_payment_method(api, customer, processor_name="stripe", processor_customer_token="cus_s",
                        processor_payment_method_token="pm_s")
    response = api.put(f"/customers/{customer.id}", json={"stripe_customer_token": "cus_s"}, version=V01)
    assert response.status_code == 200, response.text


# 2021-11 is unchanged -------------------------------------------------------------------------

def test_2021_11_customers_ignore_the_token_fields_as_before(api: Any) -> None:
    tokens = {"stripe_customer_token": "4242424242424242", "braintree_customer_token": 123,
              "paypal_customer_token": "PAYER-1"}
    token = customers_only(api)
    response = api.post("/customers", json=create_body(V11, **tokens), version=V11, token=token)
    assert response.status_code == 201, response.text
    made = response.json()["customer"]
    assert (made["braintree_customer_token"], made["paypal_customer_token"]) == (None, None)
    assert made["has_valid_payment_method"] is False
    assert methods_of(api, made["id"]) == []
    response = api.put(f"/customers/{made['id']}", json={**tokens, "first_name": "Grace"}, version=V11, token=token)
    assert response.status_code == 200, response.text
    assert response.json()["customer"]["first_name"] == "Grace"
    assert methods_of(api, made["id"]) == []
    assert [t for t, _ in events_of(api, made["id"], "customer")] == ["customer/created", "customer/updated"]


def test_the_2021_01_document_declares_the_token_fields_and_2021_11_none(api: Any) -> None:
    for version, declared in ((V01, True), (V11, False)):
        document = api.client.get("/openapi.json", params={"version": version}).json()
        for method, path in (("post", "/customers"), ("put", "/customers/{customer_id}")):
            body = document["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
            body = document["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]] if "$ref" in body else body
            for processor in PROCESSORS:
                assert (field(processor) in body["properties"]) is declared, (version, method, processor)


def test_a_method_whose_status_a_charge_set_follows_the_existing_rules(api: Any) -> None:
    """`has_valid_payment_method` and the reason follow the methods (decisions §6.12): a token
    written on a method that a charge made invalid makes it unvalidated, so valid again."""
    customer = make_customer(api)
    api.put(f"/customers/{customer.id}", json={"stripe_customer_token": "cus_1"}, version=V01)
    [method] = methods_of(api, customer.id)
    with api.db.write() as conn:
        conn.execute(update(payment_methods_table).where(payment_methods_table.c.id == method["id"])
                     .values(status="invalid", status_reason="card declined"))
    shown = customer01(api, customer.id)
    assert (shown["has_valid_payment_method"], shown["reason_payment_method_not_valid"]) == (False, "card declined")
    assert shown["stripe_customer_token"] == "cus_1"
    updated = api.put(f"/customers/{customer.id}", json={"stripe_customer_token": "cus_2"}, version=V01).json()
    assert (updated["customer"]["has_valid_payment_method"],
            updated["customer"]["reason_payment_method_not_valid"]) == (True, None)


def test_twenty_token_writes_at_once_leave_one_method_holding_a_token_one_of_them_sent(api: Any) -> None:
    """Twenty `PUT /customers/{id}` with a Stripe token each, at once (both databases): every
    answer is 200 or a 409 lost race, never a 500, and the customer ends with one Stripe
    method, the default, holding the token of a write that answered 200."""
    from tests.builders import concurrently

    customer = make_customer(api)
    api.version = V01
    replies = concurrently(api, [("PUT", f"/customers/{customer.id}", {"stripe_customer_token": f"cus_{n}"})
                                 for n in range(20)])
    statuses = [r.status_code for r in replies]
    assert set(statuses) <= {200, 409}, [r.text for r in replies if r.status_code not in (200, 409)]
    assert 200 in statuses
    stripe = [m for m in methods_of(api, customer.id) if m["processor_name"] == "stripe"]
    assert len(stripe) == 1 and stripe[0]["default"] is True
    won = {f"cus_{n}" for n, r in enumerate(replies) if r.status_code == 200}
    assert stripe[0]["processor_customer_token"] in won
    assert customer01(api, customer.id)["stripe_customer_token"] == stripe[0]["processor_customer_token"]


# The same rule on the endpoints that replaced these fields (found by an audit: a card number
# was stored through them and shown back in 2021-01 as `stripe_customer_token`).
TOKEN_CARD_DATA = "must be a payment processor's token, not card data"


@pytest.mark.parametrize("name", ["processor_customer_token", "processor_payment_method_token"])
@pytest.mark.parametrize("value", ["4242424242424242", "4242 4242 4242 4242", "4111-1111-1111-1111"])
def test_a_payment_method_token_that_reads_as_a_card_number_is_refused(api: Any, name: str, value: str) -> None:
    customer = make_customer(api)
    body = {"customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_name": "stripe",
            "processor_payment_method_token": "pm_ok", name: value}
    response = api.post("/payment_methods", json=body, version=V11)
    assert errors_of(response) == {name: [TOKEN_CARD_DATA]}
    assert methods_of(api, customer.id) == []
    method_id = make_payment_method(api, customer)
    changed = api.put(f"/payment_methods/{method_id}", json={name: value}, version=V11)
    assert errors_of(changed) == {name: [TOKEN_CARD_DATA]}
    kept = methods_of(api, customer.id)[0]
    assert (kept["processor_customer_token"], kept["processor_payment_method_token"]) == ("cus_1", "pm_ok")
    # Tokens with digits in them, as processors make them, are no card number.
    fine = api.put(f"/payment_methods/{method_id}", json={name: "cus_4242424242424242"}, version=V11)
    assert fine.status_code == 200, fine.text
