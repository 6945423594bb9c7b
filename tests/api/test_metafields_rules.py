"""The rules of metafields (spec 02 Metafields and Limits, decisions §7.2, §7.6): one test per
rule, named by it. Both versions share every rule; both databases."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_metafields import body, create, errors_of, fetch
from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_metafield,
    make_onetime,
    make_order,
    make_subscription,
)

V01, V11 = "2021-01", "2021-11"


def owner_of(api: Any, resource: str) -> int:
    """The id of a fresh record that can own metafields."""
    if resource == "store":
        return int(api.store.id)
    if resource == "customer":
        return int(make_customer(api).id)
    if resource == "address":
        return int(make_address(api).id)
    if resource == "subscription":
        return int(make_subscription(api).id)
    if resource == "charge":
        address = make_address(api)
        make_subscription(api, address)
        return int(charges_of(api, address.id)[0].id)
    if resource == "order":
        return int(make_order(api).id)
    raise AssertionError(resource)


# The owner -------------------------------------------------------------------------------

OWNERS = ["address", "store", "customer", "subscription", "order", "charge"]


@pytest.mark.parametrize("resource", OWNERS)
def test_every_owner_resource_can_own_metafields(vapi, resource):
    owner_id = owner_of(vapi, resource)
    created = create(vapi, owner_id, owner_resource=resource)
    assert (created["owner_resource"], created["owner_id"]) == (resource, str(owner_id))
    listed = vapi.get("/metafields", params={"owner_resource": resource, "owner_id": owner_id}).json()
    assert [m["id"] for m in listed["metafields"]] == [created["id"]]


@pytest.mark.parametrize("resource", OWNERS)
def test_the_owner_must_exist_in_the_store(vapi, resource):
    response = vapi.post("/metafields", json=body(999999999, owner_resource=resource))
    assert errors_of(response) == {"owner_id": [f"{resource} not found"]}


def test_the_store_owner_is_the_id_get_store_shows(vapi):
    other = vapi.other_store()
    response = vapi.post("/metafields", json=body(other.store.id, owner_resource="store"))
    assert errors_of(response) == {"owner_id": ["store not found"]}
    assert create(vapi, vapi.store.id, owner_resource="store")["owner_id"] == str(vapi.store.id)


def test_a_one_time_item_is_no_subscription_owner(vapi):
    onetime = make_onetime(vapi)
    response = vapi.post("/metafields", json=body(onetime.id, owner_resource="subscription"))
    assert errors_of(response) == {"owner_id": ["subscription not found"]}


def test_the_owner_of_another_store_is_not_found_for_every_owner_resource(vapi):
    other = vapi.other_store()
    for resource in ("customer", "address", "subscription"):
        response = vapi.post("/metafields", json=body(owner_of(other, resource), owner_resource=resource))
        assert errors_of(response) == {"owner_id": [f"{resource} not found"]}


# At most 50 per owner ---------------------------------------------------------------------


def test_an_owner_holds_at_most_50_metafields(vapi):
    customer = make_customer(vapi)
    made = [make_metafield(vapi, customer) for _ in range(50)]
    response = vapi.post("/metafields", json=body(customer.id, key="the-51st"))
    assert errors_of(response) == {"owner_id": ["already has 50 metafields, the most an owner can have"]}
    # Another owner is not affected, and a delete makes room again.
    create(vapi, make_customer(vapi).id, key="the-51st")
    assert vapi.delete(f"/metafields/{made[0].id}").status_code in (200, 204)
    create(vapi, customer.id, key="the-51st")


def test_moving_a_metafield_checks_the_new_owners_limit_of_50(vapi):
    full, other = make_customer(vapi), make_customer(vapi)
    for _ in range(50):
        make_metafield(vapi, full)
    moving = make_metafield(vapi, other)
    response = vapi.put(f"/metafields/{moving.id}", json={"metafield": {"owner_id": full.id}})
    assert errors_of(response) == {"owner_id": ["already has 50 metafields, the most an owner can have"]}
    assert fetch(vapi, moving.id)["owner_id"] == str(other.id)


# Moving the owner ------------------------------------------------------------------------


def test_a_put_that_moves_the_owner_checks_the_new_owner_exists(vapi):
    metafield = make_metafield(vapi)
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"owner_resource": "order"}})
    assert errors_of(response) == {"owner_id": ["order not found"]}
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"owner_id": 999999999}})
    assert errors_of(response) == {"owner_id": ["customer not found"]}


def test_a_put_may_move_a_metafield_to_another_owner(vapi):
    metafield = make_metafield(vapi)
    address = make_address(vapi)
    response = vapi.put(f"/metafields/{metafield.id}",
                        json={"metafield": {"owner_resource": "address", "owner_id": address.id}})
    assert response.status_code == 200, response.text
    assert (response.json()["metafield"]["owner_resource"], response.json()["metafield"]["owner_id"]) == \
        ("address", str(address.id))


# (owner, namespace, key) is unique --------------------------------------------------------


def test_owner_namespace_and_key_are_unique_and_a_duplicate_is_422_not_an_upsert(vapi):
    customer = make_customer(vapi)
    first = create(vapi, customer.id, value="gold")
    response = vapi.post("/metafields", json=body(customer.id, value="silver"))
    assert errors_of(response) == {"key": ["has already been taken for this owner and namespace"]}
    assert fetch(vapi, first["id"])["value"] == "gold"


def test_the_same_key_may_repeat_in_another_namespace_or_on_another_owner(vapi):
    customer = make_customer(vapi)
    create(vapi, customer.id)
    create(vapi, customer.id, namespace="other")
    create(vapi, make_customer(vapi).id)


def test_moving_onto_an_owner_that_has_the_same_namespace_and_key_is_422(vapi):
    one, two = make_customer(vapi), make_customer(vapi)
    make_metafield(vapi, one, key="tier")
    moving = make_metafield(vapi, two, key="tier")
    response = vapi.put(f"/metafields/{moving.id}", json={"metafield": {"owner_id": one.id}})
    assert errors_of(response) == {"key": ["has already been taken for this owner and namespace"]}


# value_type checks value ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["12", "-3", "+7", "0", "123456789012345678901234567890"])
def test_an_integer_value_is_an_optional_sign_and_digits(vapi, value):
    assert create(vapi, make_customer(vapi).id, value=value, value_type="integer")["value"] == value


@pytest.mark.parametrize("value", ["1.5", "abc", "", " 1", "1e3", "٣", "--1"])
def test_an_integer_value_that_does_not_parse_is_422(vapi, value):
    response = vapi.post("/metafields", json=body(make_customer(vapi).id, value=value, value_type="integer"))
    assert errors_of(response) == {"value": ["must be an integer (an optional sign and digits) for value_type integer"]}


def test_a_json_number_value_is_accepted_and_rendered_as_a_string(vapi):
    assert create(vapi, make_customer(vapi).id, value=42, value_type="integer")["value"] == "42"
    assert create(vapi, make_customer(vapi).id, value=-7, value_type="string")["value"] == "-7"


def test_a_fractional_or_boolean_json_value_is_refused(vapi):
    customer = make_customer(vapi)
    for value in (1.5, True):
        response = vapi.post("/metafields", json=body(customer.id, value=value, value_type="integer"))
        assert errors_of(response) == {"value": ["must be a string"]}


@pytest.mark.parametrize("value", ['{"a": [1, 2]}', "[]", '"text"', "3", "null", "true"])
def test_a_json_string_value_is_any_valid_json_text(vapi, value):
    assert create(vapi, make_customer(vapi).id, value=value, value_type="json_string")["value"] == value


@pytest.mark.parametrize("value", ["{a: 1}", "NaN", "", "[1,", "{'a': 1}"])
def test_a_json_string_value_that_is_not_json_is_422(vapi, value):
    response = vapi.post("/metafields", json=body(make_customer(vapi).id, value=value, value_type="json_string"))
    assert errors_of(response) == {"value": ["must be valid JSON for value_type json_string"]}


def test_a_json_string_value_nested_past_32_levels_is_422(vapi):
    value = "[" * 40 + "]" * 40
    response = vapi.post("/metafields", json=body(make_customer(vapi).id, value=value, value_type="json_string"))
    assert errors_of(response) == {"value": ["is nested too deeply (at most 32 levels)"]}


def test_a_string_value_takes_any_text(vapi):
    assert create(vapi, make_customer(vapi).id, value="{not json", value_type="string")["value"] == "{not json"


def test_changing_the_value_type_checks_the_stored_value(vapi):
    metafield = make_metafield(vapi, value="gold")
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"value_type": "integer"}})
    assert errors_of(response) == {"value": ["must be an integer (an optional sign and digits) for value_type integer"]}
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"value_type": "integer", "value": "5"}})
    assert response.json()["metafield"]["value_type"] == "integer"


def test_changing_the_value_checks_the_stored_value_type(vapi):
    metafield = make_metafield(vapi, value="{}", value_type="json_string")
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"value": "{"}})
    assert errors_of(response) == {"value": ["must be valid JSON for value_type json_string"]}
    assert fetch(vapi, metafield.id)["value"] == "{}"


# owner_resource is required on list -------------------------------------------------------


def test_owner_resource_is_required_on_the_list(vapi):
    make_metafield(vapi)
    assert errors_of(vapi.get("/metafields")) == {"owner_resource": ["is required"]}
    assert errors_of(vapi.get("/metafields", params={"owner_id": 1})) == {"owner_resource": ["is required"]}


def test_owner_resource_is_required_on_the_count_too(api):
    api.version = V01
    assert errors_of(api.get("/metafields/count")) == {"owner_resource": ["is required"]}


def test_a_cursor_carries_owner_resource_forward(api):
    customer = make_customer(api)
    for _ in range(3):
        make_metafield(api, customer)
    first = api.get("/metafields", params={"owner_resource": "customer", "owner_id": customer.id, "limit": 2})
    following = api.get("/metafields", params={"cursor": first.json()["next_cursor"]})
    assert following.status_code == 200, following.text
    assert len(following.json()["metafields"]) == 1
