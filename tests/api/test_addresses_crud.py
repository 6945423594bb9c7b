"""Address create / get / update / delete in both versions: bodies, statuses, version gating,
tenancy, scopes, events (spec 01 and 02 Addresses, decisions §1.1, §2.1-§2.4, §2.10, §8.1)."""

from __future__ import annotations

import pytest

from tests.api.test_addresses_support import (
    NAIVE_TS,
    NOT_FOUND,
    OFFSET_TS,
    V01,
    V11,
    address_events,
    clock_kept,
    create,
    created,
    fmt01,
    fmt11,
    us_fields,
)
from tests.builders import make_address, make_customer, make_discount, make_payment_method

# --- success bodies -------------------------------------------------------------------------------

def test_create_2021_11_answers_201_with_every_field_of_the_address(api):
    customer = make_customer(api)
    payment_method = make_payment_method(api, customer)
    discount = make_discount(api, code="WELCOME10", value="10", discount_type="percentage")
    body = {
        "customer_id": customer.id, **us_fields(), "address2": "Suite 5", "company": "Analytical Engines",
        "order_note": "leave at the door", "order_attributes": [{"name": "gift", "value": "yes"}],
        "payment_method_id": payment_method, "presentment_currency": "USD",
        "shipping_lines_override": [{"code": "std", "price": "4.5", "title": "Standard"}],
        "discounts": [{"id": discount}],
    }
    response = api.post("/addresses", json=body)
    assert response.status_code == 201, response.text
    address = response.json()["address"]
    now = fmt11(api.clock.now())
    assert address == {
        "id": address["id"],
        "address1": "101 Market St",
        "address2": "Suite 5",
        "city": "San Francisco",
        "company": "Analytical Engines",
        "country_code": "US",
        "created_at": now,
        "customer_id": customer.id,
        "discounts": [{"id": discount, "code": "WELCOME10", "value": "10", "value_type": "percentage"}],
        "first_name": "Ada",
        "last_name": "Lovelace",
        "order_attributes": [{"name": "gift", "value": "yes"}],
        "order_note": "leave at the door",
        "payment_method_id": payment_method,
        "phone": "+14155550100",
        "presentment_currency": "USD",
        "province": "California",
        "shipping_lines_conserved": [],
        "shipping_lines_override": [{"code": "std", "price": "4.50", "title": "Standard"}],
        "updated_at": now,
        "zip": "94105",
    }
    assert isinstance(address["id"], int)
    assert OFFSET_TS.match(address["created_at"]) and OFFSET_TS.match(address["updated_at"])


def test_create_2021_11_defaults_optional_fields_to_null_or_empty_and_currency_to_the_store_one(api):
    customer = make_customer(api)
    address = created(api, customer, V11)
    assert {k: address[k] for k in ("address2", "company", "order_note", "payment_method_id",
                                    "shipping_lines_override")} == dict.fromkeys(
        ("address2", "company", "order_note", "payment_method_id", "shipping_lines_override"))
    assert address["discounts"] == [] and address["order_attributes"] == []
    assert address["shipping_lines_conserved"] == []
    assert address["presentment_currency"] == "USD"


def test_get_2021_11_answers_the_same_body_as_create(api):
    customer = make_customer(api)
    address = created(api, customer, V11, order_note="n", order_attributes=[{"name": "a", "value": "b"}])
    response = api.get(f"/addresses/{address['id']}")
    assert response.status_code == 200
    assert response.json() == {"address": address}


def test_create_2021_01_under_the_customer_answers_200_with_every_2021_01_field(api):
    customer = make_customer(api)
    body = {**us_fields(), "address2": "Suite 5", "company": "Analytical Engines", "cart_note": "ring twice",
            "note_attributes": [{"name": "gift", "value": "yes"}],
            "shipping_lines_override": [{"code": "std", "price": "4", "title": "Standard"}]}
    del body["country_code"]
    body["country"] = "United States"
    response = api.post(f"/customers/{customer.id}/addresses", json=body, version=V01)
    assert response.status_code == 200, response.text
    address = response.json()["address"]
    now = fmt01(api.clock.now())
    assert address == {
        "id": address["id"],
        "address1": "101 Market St",
        "address2": "Suite 5",
        "cart_attributes": [{"name": "gift", "value": "yes"}],
        "cart_note": "ring twice",
        "city": "San Francisco",
        "company": "Analytical Engines",
        "country": "United States",
        "country_code": "US",
        "created_at": now,
        "customer_id": customer.id,
        "discount_id": None,
        "first_name": "Ada",
        "last_name": "Lovelace",
        "note_attributes": [{"name": "gift", "value": "yes"}],
        "original_shipping_lines": [{"code": "std", "price": "4.00", "title": "Standard"}],
        "phone": "+14155550100",
        "presentment_currency": "USD",
        "province": "California",
        "shipping_lines_override": [{"code": "std", "price": "4.00", "title": "Standard"}],
        "updated_at": now,
        "zip": "94105",
    }
    assert NAIVE_TS.match(address["created_at"]) and NAIVE_TS.match(address["updated_at"])


def test_2021_01_shows_no_payment_method_id_order_fields_or_discounts_array(api):
    customer = make_customer(api)
    payment_method = make_payment_method(api, customer)
    address = make_address(api, customer, payment_method_id=payment_method)
    body = api.get(f"/addresses/{address.id}", version=V01).json()["address"]
    for head_only in ("payment_method_id", "discounts", "order_note", "order_attributes",
                      "shipping_lines_conserved"):
        assert head_only not in body


def test_2021_01_shows_the_address_discount_as_discount_id(api):
    discount = make_discount(api)
    address = make_address(api, discounts=[{"id": discount}])
    assert api.get(f"/addresses/{address.id}", version=V01).json()["address"]["discount_id"] == discount


@pytest.mark.parametrize("sent, code, name", [
    ({"country": "Canada", "province": "QC", "zip": "H2X 1Y4"}, "CA", "Canada"),
    ({"country": "united kingdom", "province": None, "zip": "SW1A 1AA"}, "GB", "United Kingdom"),
    ({"country_code": "DE", "province": None, "zip": "10115"}, "DE", "Germany"),
    ({"country_code": "fr", "province": None, "zip": "75001"}, "FR", "France"),
])
def test_2021_01_accepts_country_name_or_country_code_and_answers_both(api, sent, code, name):
    customer = make_customer(api)
    fields = {**us_fields(), **sent}
    if "country" in sent:
        del fields["country_code"]
    response = api.post(f"/customers/{customer.id}/addresses", json=fields, version=V01)
    assert response.status_code == 200, response.text
    address = response.json()["address"]
    assert (address["country_code"], address["country"]) == (code, name)


def test_2021_01_a_null_country_name_beside_a_code_is_no_value(api):
    """Found by an audit: `country: null` beside `country_code: "US"` answered 422 "country is
    required" (and the other way round); a null alias is the alias not sent."""
    customer = make_customer(api)
    for nulled, kept in (("country", "country_code"), ("country_code", "country")):
        fields = {**us_fields(), nulled: None, kept: "US"}
        response = api.post(f"/customers/{customer.id}/addresses", json=fields, version=V01)
        assert response.status_code == 200, response.text
        assert response.json()["address"]["country_code"] == "US"
    address_id = response.json()["address"]["id"]
    moved = api.put(f"/addresses/{address_id}", version=V01,
                    json={"country": None, "country_code": "CA", "zip": "K1A 0B1", "province": "ON"})
    assert moved.status_code == 200, moved.text
    # Both null is still no country.
    both = api.put(f"/addresses/{address_id}", version=V01, json={"country": None, "country_code": None})
    assert both.status_code == 422


def test_2021_01_cart_note_and_note_attributes_are_the_order_note_and_order_attributes_of_2021_11(api):
    customer = make_customer(api)
    address = created(api, customer, V01, cart_note="fragile", note_attributes=[{"name": "k", "value": "v"}])
    head = api.get(f"/addresses/{address['id']}", version=V11).json()["address"]
    assert head["order_note"] == "fragile"
    assert head["order_attributes"] == [{"name": "k", "value": "v"}]


def test_2021_01_deprecated_cart_attributes_is_accepted_as_note_attributes(api):
    customer = make_customer(api)
    address = created(api, customer, V01, cart_attributes=[{"name": "k", "value": "v"}])
    assert address["note_attributes"] == [{"name": "k", "value": "v"}]
    assert address["cart_attributes"] == [{"name": "k", "value": "v"}]


def test_2021_11_order_fields_written_are_read_back_in_2021_01_names(api):
    customer = make_customer(api)
    address = created(api, customer, V11, order_note="n1", order_attributes=[{"name": "a", "value": "1"}])
    old = api.get(f"/addresses/{address['id']}", version=V01).json()["address"]
    assert (old["cart_note"], old["note_attributes"]) == ("n1", [{"name": "a", "value": "1"}])


def test_2021_01_create_ignores_a_customer_id_in_the_body_the_path_names_the_owner(api):
    owner, other = make_customer(api), make_customer(api)
    address = created(api, owner, V01, customer_id=other.id)
    assert address["customer_id"] == owner.id


def test_create_2021_11_with_empty_phone_is_allowed(api):
    assert created(api, make_customer(api), V11, phone="")["phone"] == ""


def test_create_2021_01_with_empty_phone_is_allowed(api):
    assert created(api, make_customer(api), V01, phone="")["phone"] == ""


# --- version gating -------------------------------------------------------------------------------

@pytest.mark.parametrize("method, path, version", [
    ("POST", "/addresses", V01),
    ("POST", "/customers/{customer}/addresses", V11),
    ("GET", "/customers/{customer}/addresses", V11),
    ("GET", "/addresses/count", V11),
    ("POST", "/addresses/validate", V11),
])
def test_endpoint_of_the_other_version_answers_501(api, method, path, version):
    customer = make_customer(api)
    body = {**us_fields(), "customer_id": customer.id} if method == "POST" else None
    response = api.request(method, path.format(customer=customer.id), json=body, version=version)
    assert response.status_code == 501
    assert isinstance(response.json()["errors"], str)
    assert response.headers["X-Service-Version"] == version


def test_2021_11_create_does_not_write_anything_when_answering_501_in_2021_01(api):
    customer = make_customer(api)
    api.post("/addresses", json={**us_fields(), "customer_id": customer.id}, version=V01)
    assert api.get("/addresses", version=V11).json()["addresses"] == []


# --- update ---------------------------------------------------------------------------------------

def test_update_changes_only_the_sent_fields_and_moves_updated_at(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer, address2="Apt 1", company="ACME")
    with clock_kept(vapi) as clock:
        clock.advance(minutes=5)
        response = vapi.put(f"/addresses/{address.id}", json={"address1": "1 Ferry Building", "first_name": "Grace"})
        assert response.status_code == 200, response.text
        body = response.json()["address"]
        fmt = fmt11 if vapi.version == V11 else fmt01
        assert body["address1"] == "1 Ferry Building" and body["first_name"] == "Grace"
        assert (body["address2"], body["company"], body["last_name"], body["zip"]) == (
            "Apt 1", "ACME", "Lovelace", "94105")
        assert body["updated_at"] == fmt(clock.now())
        assert body["created_at"] == fmt(address.created_at)
        assert vapi.get(f"/addresses/{address.id}").json()["address"] == body


def test_update_2021_01_takes_cart_note_and_note_attributes(api):
    address = make_address(api)
    response = api.put(f"/addresses/{address.id}", version=V01,
                       json={"cart_note": "hi", "note_attributes": [{"name": "x", "value": "y"}]})
    assert response.status_code == 200, response.text
    head = api.get(f"/addresses/{address.id}", version=V11).json()["address"]
    assert (head["order_note"], head["order_attributes"]) == ("hi", [{"name": "x", "value": "y"}])


@pytest.mark.parametrize("version", [V11, V01])
def test_update_keeps_the_presentment_currency_it_was_created_with(api, version):
    # Spec 01 leaves the currency out of the update body, spec 02 takes every create field:
    # the address's charges and codes are in its currency, so the value it has is accepted
    # and another is refused, never a 200 for a change that was not made.
    store = api.other_store(presentment_currencies=["CAD"])
    address = make_address(store, make_customer(store))
    before = store.get(f"/addresses/{address.id}", version=version).json()["address"]
    same = store.put(f"/addresses/{address.id}", json={"presentment_currency": "usd"}, version=version)
    assert same.status_code == 200, same.text
    assert same.json()["address"] == before  # nothing changed, not even updated_at
    for sent, problem in (("CAD", "cannot be changed once the address is created"),
                          ("XX", "must be a 3-letter currency code"), (None, "cannot be null")):
        refused = store.put(f"/addresses/{address.id}", json={"presentment_currency": sent, "address2": "Unit 9"},
                            version=version)
        assert refused.status_code == 422, refused.text
        assert refused.json() == {"errors": {"presentment_currency": [problem]}}
    assert store.get(f"/addresses/{address.id}", version=version).json()["address"] == before


@pytest.mark.parametrize("version", [V11, V01])
def test_update_keeps_the_customer_it_was_created_for(api, version):
    """Found by an audit: another customer's id answered 200 and the address stayed its own
    customer's. The customer it has, sent back (a GET body), passes."""
    owner, other = make_customer(api), make_customer(api)
    address = make_address(api, owner)
    before = api.get(f"/addresses/{address.id}", version=version).json()["address"]
    refused = api.put(f"/addresses/{address.id}", json={"customer_id": other.id, "address2": "Unit 9"},
                      version=version)
    assert refused.status_code == 422, refused.text
    assert refused.json() == {"errors": {"customer_id": ["cannot be changed once the address is created"]}}
    assert api.get(f"/addresses/{address.id}", version=version).json()["address"] == before
    back = api.put(f"/addresses/{address.id}", json={**before, "address2": "Unit 9"}, version=version)
    assert back.status_code == 200, back.text
    assert (back.json()["address"]["customer_id"], back.json()["address"]["address2"]) == (owner.id, "Unit 9")
    for bad, said in (("x", "must be an integer"), (None, "cannot be null"), (2**70, "is out of range")):
        refused = api.put(f"/addresses/{address.id}", json={"customer_id": bad}, version=version)
        assert refused.status_code == 422 and list(refused.json()["errors"]) == ["customer_id"], refused.text


def test_update_can_clear_optional_fields_with_null(api):
    address = make_address(api, address2="Apt 1", company="ACME", order_note="n")
    body = api.put(f"/addresses/{address.id}", json={"address2": None, "company": None, "order_note": None}).json()
    assert (body["address"]["address2"], body["address"]["company"], body["address"]["order_note"]) == (
        None, None, None)


def test_update_changing_country_together_with_zip_is_accepted(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"country_code": "CA", "province": "ON", "zip": "M5V 3L9"})
    assert response.status_code == 200, response.text
    body = response.json()["address"]
    assert (body["country_code"], body["province"], body["zip"]) == ("CA", "Ontario", "M5V 3L9")


def test_update_2021_01_changing_country_by_name_together_with_zip_is_accepted(api):
    address = make_address(api)
    response = api.put(f"/addresses/{address.id}", version=V01,
                       json={"country": "Canada", "province": "Ontario", "zip": "M5V 3L9"})
    assert response.status_code == 200, response.text
    body = response.json()["address"]
    assert (body["country_code"], body["country"], body["province"]) == ("CA", "Canada", "Ontario")


def test_update_with_an_empty_body_changes_nothing(vapi):
    address = make_address(vapi)
    before = vapi.get(f"/addresses/{address.id}").json()
    with clock_kept(vapi) as clock:
        clock.advance(minutes=1)
        response = vapi.put(f"/addresses/{address.id}", json={})
    assert response.status_code == 200
    assert response.json() == before


# --- delete ---------------------------------------------------------------------------------------

def test_delete_2021_11_answers_204_with_no_body_and_the_address_is_gone(api):
    address = make_address(api)
    response = api.delete(f"/addresses/{address.id}")
    assert response.status_code == 204
    assert response.content == b""
    assert api.get(f"/addresses/{address.id}").status_code == 404


def test_delete_2021_01_answers_200_with_an_empty_object_and_the_address_is_gone(api):
    address = make_address(api)
    response = api.delete(f"/addresses/{address.id}", version=V01)
    assert response.status_code == 200
    assert response.json() == {}
    assert api.get(f"/addresses/{address.id}", version=V01).status_code == 404


def test_delete_twice_answers_404_the_second_time(vapi):
    address = make_address(vapi)
    assert vapi.delete(f"/addresses/{address.id}").status_code in (200, 204)
    response = vapi.delete(f"/addresses/{address.id}")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_delete_leaves_the_customers_other_addresses(api):
    customer = make_customer(api)
    keep, drop = make_address(api, customer), make_address(api, customer)
    api.delete(f"/addresses/{drop.id}")
    assert [a["id"] for a in api.get("/addresses", params={"customer_id": customer.id}).json()["addresses"]] == [
        keep.id]


# --- not found, tenancy, bad bodies ---------------------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_unknown_address_id_answers_404_not_found(vapi, method):
    response = vapi.request(method, "/addresses/987654321", json={} if method == "PUT" else None)
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_another_stores_address_answers_404_and_is_left_untouched(vapi, method):
    other = vapi.other_store()
    foreign = make_address(other)
    response = vapi.request(method, f"/addresses/{foreign.id}",
                            json={"first_name": "Mallory"} if method == "PUT" else None)
    assert (response.status_code, response.json()) == (404, NOT_FOUND)
    still = other.get(f"/addresses/{foreign.id}", version=V11)
    assert still.status_code == 200
    assert still.json()["address"]["first_name"] == "Ada"


def test_2021_01_create_under_an_unknown_customer_answers_404(api):
    response = api.post("/customers/987654321/addresses", json={**us_fields()}, version=V01)
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_2021_01_create_under_an_unknown_customer_answers_404_even_with_a_bad_body(api):
    response = api.post("/customers/987654321/addresses", json={}, version=V01)
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_2021_01_create_under_another_stores_customer_answers_404_and_creates_nothing(api):
    other = api.other_store()
    foreign = make_customer(other)
    response = api.post(f"/customers/{foreign.id}/addresses", json={**us_fields()}, version=V01)
    assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert other.get("/addresses", version=V11).json()["addresses"] == []
    assert api.get("/addresses", version=V11).json()["addresses"] == []


def test_2021_11_create_for_another_stores_customer_is_refused_on_customer_id(api):
    foreign = make_customer(api.other_store())
    response = api.post("/addresses", json={**us_fields(), "customer_id": foreign.id})
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["customer_id"]
    assert api.get("/addresses").json()["addresses"] == []


def test_2021_11_create_for_an_unknown_customer_is_refused_on_customer_id(api):
    response = api.post("/addresses", json={**us_fields(), "customer_id": 987654321})
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["customer_id"]


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"', b"42"])
def test_create_with_a_body_that_is_not_a_json_object_answers_415(vapi, raw):
    customer = make_customer(vapi)
    path = "/addresses" if vapi.version == V11 else f"/customers/{customer.id}/addresses"
    response = vapi.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 415
    assert isinstance(response.json()["errors"], str)


def test_update_with_a_body_that_is_not_a_json_object_answers_415_and_changes_nothing(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", content=b'{"city": ',
                        headers={"Content-Type": "application/json"})
    assert response.status_code == 415
    assert vapi.get(f"/addresses/{address.id}").json()["address"]["city"] == "San Francisco"


def test_unknown_fields_in_the_body_are_ignored(vapi):
    customer = make_customer(vapi)
    response = create(vapi, customer, favourite_colour="blue")
    assert response.status_code in (200, 201), response.text
    assert "favourite_colour" not in response.json()["address"]


# --- scopes ---------------------------------------------------------------------------------------

def test_read_customers_token_can_read_addresses(vapi):
    address = make_address(vapi)
    token = vapi.token_with("read_customers")
    assert vapi.get(f"/addresses/{address.id}", token=token).status_code == 200
    assert vapi.get("/addresses", token=token).status_code == 200


def test_read_customers_token_can_count_and_validate_in_2021_01(api):
    token = api.token_with("read_customers")
    assert api.get("/addresses/count", token=token, version=V01).status_code == 200
    validate = api.post("/addresses/validate", token=token, version=V01,
                        json={"address1": "101 Market St", "city": "San Francisco", "state": "CA",
                              "zipcode": "94105"})
    assert validate.status_code == 200


def test_read_customers_token_gets_403_on_every_address_write_and_nothing_changes(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    token = vapi.token_with("read_customers")
    create_path = "/addresses" if vapi.version == V11 else f"/customers/{customer.id}/addresses"
    assert create(vapi, customer).status_code in (200, 201)  # the all-scopes token can
    before = vapi.get("/addresses").json()
    assert vapi.post(create_path, json={**us_fields(), "customer_id": customer.id}, token=token).status_code == 403
    assert vapi.put(f"/addresses/{address.id}", json={"city": "Oakland"}, token=token).status_code == 403
    assert vapi.delete(f"/addresses/{address.id}", token=token).status_code == 403
    assert vapi.get("/addresses").json() == before


def test_read_store_only_token_gets_403_on_address_reads(vapi):
    address = make_address(vapi)
    token = vapi.token_with("read_store")
    assert vapi.get("/addresses", token=token).status_code == 403
    assert vapi.get(f"/addresses/{address.id}", token=token).status_code == 403


def test_write_customers_token_can_also_read_addresses(vapi):
    address = make_address(vapi)
    token = vapi.token_with("write_customers")
    assert vapi.get(f"/addresses/{address.id}", token=token).status_code == 200
    assert vapi.put(f"/addresses/{address.id}", json={"city": "San Francisco"}, token=token).status_code == 200


def test_missing_token_answers_401(api):
    response = api.client.get("/addresses", headers={"X-Service-Version": V11})
    assert response.status_code == 401


# --- events ---------------------------------------------------------------------------------------

def test_create_records_address_created_with_the_id(vapi):
    customer = make_customer(vapi)
    address = created(vapi, customer)
    assert address_events(vapi, address["id"]) == [("address/created", address["id"])]


def test_update_records_address_updated_with_the_id(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"city": "San Francisco", "address1": "1 Main St"})
    assert response.status_code == 200
    assert address_events(vapi, address.id) == [("address/created", address.id), ("address/updated", address.id)]


def test_delete_records_address_deleted_with_the_id(vapi):
    address = make_address(vapi)
    vapi.delete(f"/addresses/{address.id}")
    assert address_events(vapi, address.id) == [("address/created", address.id), ("address/deleted", address.id)]


@pytest.mark.parametrize("same", [
    {"city": "San Francisco"},
    {"province": "CA"},  # the code of the stored "California"
    {"zip": "94105", "country_code": "US"},
    {"discounts": []},
    {"first_name": "Ada", "last_name": "Lovelace", "phone": "+14155550100"},
])
def test_update_that_changes_nothing_records_no_event_and_keeps_updated_at(api, same):
    address = make_address(api)
    with clock_kept(api) as clock:
        clock.advance(minutes=3)
        response = api.put(f"/addresses/{address.id}", json=same)
    assert response.status_code == 200, response.text
    assert response.json()["address"]["updated_at"] == fmt11(address.updated_at)
    assert address_events(api, address.id) == [("address/created", address.id)]


def test_refused_create_records_no_event(api):
    customer = make_customer(api)
    assert create(api, customer, zip="00000").status_code == 422
    assert address_events(api) == []


def test_refused_update_records_no_event_and_changes_nothing(vapi):
    address = make_address(vapi)
    response = vapi.put(f"/addresses/{address.id}", json={"address1": "2 New St", "zip": "10001"})
    assert response.status_code == 422
    assert vapi.get(f"/addresses/{address.id}").json()["address"]["address1"] == "101 Market St"
    assert address_events(vapi, address.id) == [("address/created", address.id)]
