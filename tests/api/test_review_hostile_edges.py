"""Hostile edge values that reached a 500 (review): the end of the calendar in the cadence
arithmetic, 32-bit columns on PostgreSQL, a null a bulk command cannot take. Each answers 422
naming the field and changes nothing. Both databases, as every API test."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription

V01, V11 = "2021-01", "2021-11"
LATE = "is too late: the charge after it would fall past 9999-12-31"
INT32 = 2**31 - 1
MONTHLY = {"charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}


def errors_of(response: Any) -> Any:
    assert response.status_code == 422, response.text
    return response.json()["errors"]


def subscription_body(address: Any, **overrides: Any) -> dict[str, Any]:
    return {"address_id": address.id, "product_title": "Tea", "price": "10.00", "quantity": 1, **MONTHLY,
            **overrides}


def queued(api: Any, address: Any) -> list[Any]:
    return [c for c in charges_of(api, address.id) if c.status == "queued"]


# The end of the calendar -------------------------------------------------------------------


@pytest.mark.parametrize("when,unit,frequency", [("9999-12-31", "month", 1), ("9999-12-01", "month", 1),
                                                 ("9999-11-15", "month", 3), ("9999-12-31", "day", 1),
                                                 ("9999-01-01", "day", 1000), ("9999-12-25", "week", 1)])
def test_a_next_charge_date_with_no_cadence_date_after_it_answers_422(vapi, when, unit, frequency):
    """Paying a charge moves the subscription one charge interval on: that date must exist."""
    customer = make_customer(vapi)
    address, other = make_address(vapi, customer), make_address(vapi, customer)
    body = subscription_body(address, next_charge_scheduled_at=when, order_interval_unit=unit,
                             charge_interval_frequency=frequency, order_interval_frequency=frequency)
    assert errors_of(vapi.post("/subscriptions", json=body)) == {"next_charge_scheduled_at": [LATE]}
    item = make_subscription(vapi, address)
    before = vapi.get(f"/subscriptions/{item.id}").json()
    assert errors_of(vapi.put(f"/subscriptions/{item.id}", json={"next_charge_scheduled_at": "9999-12-31"})) == {
        "next_charge_scheduled_at": [LATE]}
    assert errors_of(vapi.post(f"/subscriptions/{item.id}/set_next_charge_date", json={"date": "9999-12-31"})) == {
        "date": [LATE]}
    assert errors_of(vapi.post(f"/subscriptions/{item.id}/change_address",
                               json={"address_id": other.id, "next_charge_scheduled_at": "9999-12-31"})) == {
        "next_charge_scheduled_at": [LATE]}
    assert vapi.get(f"/subscriptions/{item.id}").json() == before
    # The last date that still has one after it is taken.
    assert vapi.post("/subscriptions", json={**body, "next_charge_scheduled_at": "9999-11-30", **MONTHLY}
                     ).status_code in (200, 201)


def test_an_interval_change_that_leaves_no_date_after_the_next_charge_answers_422(api):
    item = make_subscription(api, next_charge_scheduled_at=date(9999, 1, 1))
    sent = {"order_interval_unit": "day", "charge_interval_frequency": 1000, "order_interval_frequency": 1000,
            "next_charge_scheduled_at": "9999-01-01"}
    assert errors_of(api.put(f"/subscriptions/{item.id}", json=sent)) == {"next_charge_scheduled_at": [LATE]}
    assert api.get(f"/subscriptions/{item.id}").json()["subscription"]["order_interval_unit"] == "month"


def test_moving_a_charge_or_merging_addresses_to_the_last_day_answers_422(api):
    customer = make_customer(api)
    address, other = make_address(api, customer), make_address(api, customer)
    make_subscription(api, address)
    make_subscription(api, other)
    [charge] = queued(api, address)
    for method in ("POST", "PUT"):
        response = api.request(method, f"/charges/{charge.id}/change_next_charge_date",
                               json={"next_charge_date": "9999-12-31"}, version=V01)
        assert errors_of(response) == {"next_charge_date": [LATE]}
    body = {"target_address": {"id": other.id}, "source_addresses": [{"id": address.id}],
            "next_charge_date": "9999-12-31"}
    assert errors_of(api.post("/addresses/merge", json=body)) == {"next_charge_date": [LATE]}
    assert queued(api, address) == [charge]


def test_skipping_onto_the_end_of_the_calendar_answers_422_and_skips_nothing(vapi):
    """9999-11-30 has 9999-12-30 after it; skipping it would make 9999-12-30 the next charge,
    which has none after it."""
    address = make_address(vapi)
    item = make_subscription(vapi, address, next_charge_scheduled_at=date(9999, 11, 30))
    [charge] = queued(vapi, address)
    field = "subscription_id" if vapi.version == V01 else "purchase_item_ids"
    body = {"subscription_id": item.id} if vapi.version == V01 else {"purchase_item_ids": [item.id]}
    message = f"purchase item {item.id} cannot be skipped: its next charge would fall too close to 9999-12-31"
    assert errors_of(vapi.post(f"/charges/{charge.id}/skip", json=body)) == {field: [message]}
    if vapi.version == V11:
        sent = {"date": "9999-11-30", "purchase_item_ids": [item.id]}
        assert errors_of(vapi.post(f"/addresses/{address.id}/charges/skip", json=sent)) == {
            "purchase_item_ids": [message]}
    assert queued(vapi, address) == [charge]
    assert vapi.get(f"/subscriptions/{item.id}").json()["subscription"]["next_charge_scheduled_at"][:10] == "9999-11-30"


def test_skipping_a_date_near_the_end_of_the_calendar_is_not_a_500(api):
    """The dates of a cadence up to a skip date stop at 9999-12-31 instead of overflowing."""
    address = make_address(api)
    item = make_subscription(api, address, next_charge_scheduled_at=date(9999, 10, 15))
    sent = {"date": "9999-12-31", "purchase_item_ids": [item.id]}
    assert errors_of(api.post(f"/addresses/{address.id}/charges/skip", json=sent)) == {
        "date": [f"purchase item {item.id} is not charged on 9999-12-31"]}


def test_processing_the_charge_whose_next_date_would_pass_the_calendar_answers_422(api):
    """Paying 9999-11-30 moves the subscription to 9999-12-30; paying that one would need a
    2021-01-30 of year 10000: refused before any payment is asked for."""
    store = api.other_store(plan_tier="premium_a")
    customer = make_customer(store)
    make_payment_method(store, customer)
    address = make_address(store, customer)
    item = make_subscription(store, address, next_charge_scheduled_at=date(9999, 11, 30))
    [first] = queued(store, address)
    assert store.post(f"/charges/{first.id}/process").json()["charge"]["status"] == "success"
    [last] = queued(store, address)
    assert last.scheduled_at == date(9999, 12, 30)
    assert errors_of(store.post(f"/charges/{last.id}/process")) == {
        "scheduled_at": [f"purchase item {item.id} would have its next charge past 9999-12-31: "
                         "the charge cannot be processed"]}
    assert queued(store, address) == [last]


# 32-bit columns (PostgreSQL refuses what SQLite keeps) -------------------------------------


@pytest.mark.parametrize("value", [INT32 + 1, 2**63 - 1, str(INT32 + 1)])
def test_expire_after_past_32_bits_answers_422(vapi, value):
    address = make_address(vapi)
    message = {"expire_after_specific_number_of_charges": [f"must be at most {INT32}"]}
    body = subscription_body(address, expire_after_specific_number_of_charges=value)
    assert errors_of(vapi.post("/subscriptions", json=body)) == message
    item = make_subscription(vapi, address)
    assert errors_of(vapi.put(f"/subscriptions/{item.id}",
                              json={"expire_after_specific_number_of_charges": value})) == message
    assert vapi.post("/subscriptions", json={**body, "expire_after_specific_number_of_charges": INT32}
                     ).status_code in (200, 201)


def test_a_plan_cannot_hold_an_expiry_its_subscriptions_could_not_store(api):
    product = {"external_product_id": "7001", "title": "Coffee",
               "variants": [{"external_variant_id": "7001-1", "title": "1 kg", "price": "20.00"}]}
    assert api.post("/products", json=product).status_code == 201
    preferences = {**{"interval_unit": "month", "charge_interval_frequency": 1, "order_interval_frequency": 1},
                   "expire_after_specific_number_of_charges": INT32 + 1}
    body = {"external_product_id": "7001", "title": "Monthly", "type": "subscription",
            "subscription_preferences": preferences}
    assert errors_of(api.post("/plans", json=body)) == {
        "subscription_preferences": {"expire_after_specific_number_of_charges": [f"must be at most {INT32}"]}}


def test_the_weight_of_a_charge_past_32_bits_is_capped_not_a_500(api):
    """Each variant's grams fit the 32-bit column; their sum times the quantities need not."""
    product = {"external_product_id": "7001", "title": "Anvil", "variants": [
        {"external_variant_id": "7001-1", "title": "big", "price": "20.00", "grams": INT32}]}
    assert api.post("/products", json=product).status_code == 201
    address = make_address(api)
    body = subscription_body(address, external_product_id="7001", external_variant_id="7001-1", quantity=2)
    response = api.post("/subscriptions", json=body)
    assert response.status_code == 201, response.text
    [charge] = queued(api, address)
    assert charge.total_weight_grams == INT32


# A null the command cannot take, in a bulk item ----------------------------------------------


def test_a_null_list_in_a_bulk_created_plan_is_that_items_error(api):
    product = {"external_product_id": "7001", "title": "Coffee",
               "variants": [{"external_variant_id": "7001-1", "title": "1 kg", "price": "20.00"}]}
    assert api.post("/products", json=product).status_code == 201
    plan = {"external_product_id": "7001", "title": "Monthly", "type": "subscription",
            "subscription_preferences": {"interval_unit": "month", "charge_interval_frequency": 1,
                                         "order_interval_frequency": 1}}
    response = api.post("/plans/bulk_create", json={"plans": [plan, {**plan, "external_variant_ids": None}]})
    assert errors_of(response) == {"plans": {"1": {"external_variant_ids": ["cannot be null"]}}}
    assert api.get("/plans").json()["plans"] == []


def test_a_null_list_in_a_created_plan_names_the_field(api):
    """The command's own refusal names the field as sent (no stray backquote of msgspec's path)."""
    product = {"external_product_id": "7001", "title": "Coffee",
               "variants": [{"external_variant_id": "7001-1", "title": "1 kg", "price": "20.00"}]}
    assert api.post("/products", json=product).status_code == 201
    plan = {"external_product_id": "7001", "title": "Monthly", "type": "subscription", "external_variant_ids": None,
            "subscription_preferences": {"interval_unit": "month", "charge_interval_frequency": 1,
                                         "order_interval_frequency": 1}}
    assert errors_of(api.post("/plans", json=plan)) == {"external_variant_ids": ["cannot be null"]}
    # An update alike (it took the null as `[]`).
    created = api.post("/plans", json={**plan, "external_variant_ids": ["7001-1"]})
    assert created.status_code == 201, created.text
    plan_id = created.json()["plan"]["id"]
    assert errors_of(api.put(f"/plans/{plan_id}", json={"external_variant_ids": None})) == {
        "external_variant_ids": ["cannot be null"]}
    assert api.get(f"/plans/{plan_id}").json()["plan"]["external_variant_ids"] == ["7001-1"]


# Found by the edge audit of the eleventh session ---------------------------------------------


@pytest.mark.parametrize("value", ["12.3333333333333333333333333333333333333333333", "0.0000001", "33.333", 1e-7])
def test_a_percentage_code_takes_at_most_two_places_on_either_database(vapi, value):
    """45 digits overflowed the column on PostgreSQL (a 500; SQLite stored them), and a tiny value
    came back as `1E-7`, which no write takes."""
    body = ({"code": "P1", "discount_type": "percentage", "duration": "forever", "value": value}
            if vapi.version == V01 else {"code": "P1", "value_type": "percentage", "value": value})
    assert errors_of(vapi.post("/discounts", json=body)) == {"value": ["has too many decimal places (at most 2)"]}
    assert vapi.get("/discounts").json()["discounts"] == []


def test_a_percentage_is_shown_positional_and_sent_back_unchanged(api):
    reply = api.post("/discounts", json={"code": "P2", "value_type": "percentage", "value": 1e2})
    assert reply.status_code == 201, reply.text
    shown = reply.json()["discount"]
    assert shown["value"] in ("100", "100.0")
    again = api.put(f"/discounts/{shown['id']}", json={"value": shown["value"]})
    assert again.status_code == 200 and again.json()["discount"]["value"] == shown["value"]


@pytest.mark.parametrize("path", ["/customers%2F{id}", "/customers%2f{id}", "/addresses/{address}%2Fremove_discount"])
def test_an_encoded_slash_is_no_separator(api, path):
    """`/customers%2F25` read customer 25: a rule a proxy matched on the path as sent was bypassed
    (RFC 3986 §2.2)."""
    address = make_address(api)
    reply = api.request("GET" if "customers" in path else "POST",
                        path.format(id=address.customer_id, address=address.id), json=None)
    assert reply.status_code == 404 and reply.json() == {"errors": "Not Found"}
    assert api.get(f"/customers/{address.customer_id}").status_code == 200


def test_a_version_or_token_sent_twice_with_two_values_is_neither(api):
    """The last line won: `2021-11` then `2021-01` was served in 2021-01, a bad token then a good
    one was admitted. Two lines are their values joined (RFC 9110 §5.3): no version, no token."""
    customer = make_customer(api)
    path = f"/customers/{customer.id}"
    base = [("x-service-access-token", api.token)]
    def get(headers: list[tuple[str, str]]) -> Any:
        return api.client.get(path, headers=headers)
    twice = get([*base, ("x-service-version", "2021-11"), ("x-service-version", "2021-01")])
    assert twice.status_code == 426, twice.text
    same = get([*base, ("x-service-version", "2021-01"), ("x-service-version", "2021-01")])
    assert same.status_code == 200 and same.headers["x-service-version"] == "2021-01"
    for tokens in (["nope", api.token], [api.token, "nope"]):
        reply = get([("x-service-version", "2021-11"), *[("x-service-access-token", t) for t in tokens]])
        assert reply.status_code == 401, reply.text
    assert get([("x-service-version", "2021-11"), *base, *base]).status_code == 200


def test_an_idempotency_key_sent_twice_with_two_values_answers_422_and_creates_nothing(api):
    headers = [("x-service-access-token", api.token), ("x-service-version", "2021-11"),
               ("idempotency-key", "d1"), ("idempotency-key", "d2")]
    reply = api.client.post("/customers", json={"email": "twice@example.com"}, headers=headers)
    assert reply.status_code == 422 and reply.json() == {"errors": {"Idempotency-Key": ["must be sent once"]}}
    assert api.get("/customers", params={"email": "twice@example.com"}).json()["customers"] == []
