"""Contract tests of metafields (spec 02 Metafields, decisions §7.2, §7.6, 03-real-fields
"metafield"): every endpoint in both versions, its shapes, bad input with the exact error
bodies, unknown and other stores' ids, scopes and events. The rules live in
``test_metafields_rules.py``; cascades and includes in ``test_metafields_owners.py``. Both
databases (the `api` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_real_fields import DT_NAIVE, DT_OFFSET, STR, assert_fields
from tests.builders import events_of, make_customer, make_metafield

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
OWNERS = "address, charge, customer, order, store, subscription"
VALUE_TYPES = "integer, json_string, string"


def body(owner: int, /, **overrides: Any) -> dict[str, Any]:
    return {"metafield": {"owner_resource": "customer", "owner_id": owner, "namespace": "loyalty",
                          "key": "tier", "value": "gold", "value_type": "string", **overrides}}


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def create(api: Any, owner: Any, /, **overrides: Any) -> dict[str, Any]:
    response = api.post("/metafields", json=body(owner, **overrides))
    assert response.status_code == (201 if api.version == V11 else 200), response.text
    return response.json()["metafield"]


def fetch(api: Any, metafield_id: int) -> dict[str, Any]:
    response = api.get(f"/metafields/{metafield_id}")
    assert response.status_code == 200, response.text
    return response.json()["metafield"]


# Create ----------------------------------------------------------------------------------


def test_create_answers_201_in_2021_11_with_the_head_shape(api):
    customer = make_customer(api)
    now = api.clock.now().strftime("%Y-%m-%dT%H:%M:%S")
    created = create(api, customer.id, description="Loyalty tier")
    assert created == {"id": created["id"], "created_at": now + "+00:00", "description": "Loyalty tier",
                       "key": "tier", "namespace": "loyalty", "owner_id": str(customer.id),
                       "owner_resource": "customer", "updated_at": now + "+00:00", "value": "gold",
                       "value_type": "string"}
    assert fetch(api, created["id"]) == created


def test_create_answers_200_in_2021_01_with_naive_datetimes(api):
    api.version = V01
    customer = make_customer(api)
    created = create(api, customer.id)
    assert created["created_at"] == api.clock.now().strftime("%Y-%m-%dT%H:%M:%S")
    assert created["updated_at"] == created["created_at"]
    assert created["owner_id"] == str(customer.id)


def test_real_fields_of_both_versions(api):
    customer = make_customer(api)
    metafield = make_metafield(api, customer)
    expected = {"created_at": {DT_OFFSET}, "description": {STR}, "id": {"integer"}, "key": {STR},
                "namespace": {STR}, "owner_id": {STR}, "owner_resource": {STR}, "updated_at": {DT_OFFSET},
                "value": {STR}, "value_type": {STR}}
    assert_fields(fetch(api, metafield.id), list(expected.items()))
    api.version = V01
    assert_fields(fetch(api, metafield.id),
                  list({**expected, "created_at": {DT_NAIVE}, "updated_at": {DT_NAIVE}}.items()))


def test_description_renders_as_an_empty_string_when_not_given(vapi):
    customer = make_customer(vapi)
    assert create(vapi, customer.id)["description"] == ""
    assert create(vapi, customer.id, key="other", description=None)["description"] == ""


def test_create_takes_a_bare_body_too(vapi):
    customer = make_customer(vapi)
    response = vapi.post("/metafields", json=body(customer.id)["metafield"])
    assert response.status_code in (200, 201), response.text
    assert response.json()["metafield"]["key"] == "tier"


def test_create_records_metafield_created_in_the_same_transaction(vapi):
    created = create(vapi, make_customer(vapi).id)
    assert events_of(vapi, created["id"], "metafield") == [("metafield/created", created["id"])]


def test_create_without_fields_names_every_required_one(vapi):
    assert errors_of(vapi.post("/metafields", json={"metafield": {}})) == {
        name: ["is required"] for name in ("owner_resource", "owner_id", "namespace", "key", "value", "value_type")}
    assert errors_of(vapi.post("/metafields", json={})) == {
        name: ["is required"] for name in ("owner_resource", "owner_id", "namespace", "key", "value", "value_type")}


def test_create_with_wrongly_typed_fields_names_each(vapi):
    customer = make_customer(vapi)
    sent = body(customer.id, owner_resource="product", owner_id="abc", namespace=5, key="", value=[1],
                value_type="float", description=True)
    assert errors_of(vapi.post("/metafields", json=sent)) == {
        "owner_resource": [f"must be one of: {OWNERS}"],
        "owner_id": ["must be an integer"],
        "namespace": ["must be a string"],
        "key": ["cannot be blank"],
        "value": ["must be a string"],
        "value_type": [f"must be one of: {VALUE_TYPES}"],
        "description": ["must be a string"],
    }


def test_a_wrapper_that_is_not_an_object_answers_422(vapi):
    assert errors_of(vapi.post("/metafields", json={"metafield": "tier"})) == {"metafield": ["must be an object"]}


def test_null_in_required_fields_answers_422(vapi):
    customer = make_customer(vapi)
    sent = body(customer.id, namespace=None, value=None)
    assert errors_of(vapi.post("/metafields", json=sent)) == {"namespace": ["is required"], "value": ["is required"]}


def test_long_strings_answer_422_naming_the_field(vapi):
    customer = make_customer(vapi)
    sent = body(customer.id, key="k" * 256, value="v" * 65536)
    assert errors_of(vapi.post("/metafields", json=sent)) == {
        "key": ["is too long (at most 255 characters)"], "value": ["is too long (at most 65535 characters)"]}


def test_an_owner_id_given_as_a_numeric_string_is_read_as_the_integer(vapi):
    customer = make_customer(vapi)
    assert create(vapi, str(customer.id))["owner_id"] == str(customer.id)


# Read ------------------------------------------------------------------------------------


def test_get_an_unknown_id_answers_404(vapi):
    assert vapi.get("/metafields/999999999").json() == NOT_FOUND
    assert vapi.get("/metafields/999999999").status_code == 404


def test_another_stores_metafield_is_not_found_for_every_endpoint(vapi):
    other = vapi.other_store()
    theirs = make_metafield(other)
    assert vapi.get(f"/metafields/{theirs.id}").status_code == 404
    assert vapi.put(f"/metafields/{theirs.id}", json={"metafield": {"value": "x"}}).json() == NOT_FOUND
    assert vapi.delete(f"/metafields/{theirs.id}").status_code == 404
    assert fetch(other, theirs.id)["value"] == "gold"


def test_another_stores_owner_is_not_found_on_create(vapi):
    other = vapi.other_store()
    theirs = make_customer(other)
    assert errors_of(vapi.post("/metafields", json=body(theirs.id))) == {"owner_id": ["customer not found"]}
    response = vapi.get("/metafields", params={"owner_resource": "customer", "owner_id": theirs.id})
    assert response.json()["metafields"] == []


def test_the_list_shows_only_the_stores_own_metafields(vapi):
    other = vapi.other_store()
    make_metafield(other, owner_resource="store")
    mine = make_metafield(vapi, owner_resource="store")
    response = vapi.get("/metafields", params={"owner_resource": "store"})
    assert [m["id"] for m in response.json()["metafields"]] == [mine.id]


# Update ----------------------------------------------------------------------------------


def test_update_changes_the_value_and_records_metafield_updated(vapi):
    metafield = make_metafield(vapi)
    vapi.clock.advance(seconds=5)
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"value": "platinum", "description": "d"}})
    assert response.status_code == 200, response.text
    updated = response.json()["metafield"]
    assert (updated["value"], updated["description"]) == ("platinum", "d")
    assert updated["updated_at"] != updated["created_at"]
    assert events_of(vapi, metafield.id, "metafield")[-1] == ("metafield/updated", metafield.id)


def test_an_update_that_changes_nothing_records_no_event(vapi):
    metafield = make_metafield(vapi)
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"value": "gold"}})
    assert response.status_code == 200
    assert events_of(vapi, metafield.id, "metafield") == [("metafield/created", metafield.id)]


def test_update_ignores_namespace_and_key_which_name_the_metafield(vapi):
    metafield = make_metafield(vapi)
    response = vapi.put(f"/metafields/{metafield.id}", json={"metafield": {"namespace": "x", "key": "y"}})
    assert response.status_code == 200
    assert (response.json()["metafield"]["namespace"], response.json()["metafield"]["key"]) == \
        (metafield.namespace, metafield.key)


def test_update_with_wrongly_typed_fields_names_each_and_changes_nothing(vapi):
    metafield = make_metafield(vapi)
    sent = {"metafield": {"owner_resource": "shop", "owner_id": True, "value": {"a": 1}, "value_type": None}}
    assert errors_of(vapi.put(f"/metafields/{metafield.id}", json=sent)) == {
        "owner_resource": [f"must be one of: {OWNERS}"], "owner_id": ["must be an integer"],
        "value": ["must be a string"], "value_type": ["cannot be null"]}
    assert fetch(vapi, metafield.id)["value"] == "gold"


def test_update_an_unknown_id_answers_404(vapi):
    assert errors_of(vapi.put("/metafields/999999999", json={"metafield": {"value": "x"}}), 404) == "Not Found"


# Delete ----------------------------------------------------------------------------------


def test_delete_answers_204_in_2021_11_and_records_metafield_deleted(api):
    metafield = make_metafield(api)
    response = api.delete(f"/metafields/{metafield.id}")
    assert (response.status_code, response.content) == (204, b"")
    assert api.get(f"/metafields/{metafield.id}").status_code == 404
    assert events_of(api, metafield.id, "metafield")[-1] == ("metafield/deleted", metafield.id)


def test_delete_answers_200_empty_object_in_2021_01(api):
    api.version = V01
    metafield = make_metafield(api)
    response = api.delete(f"/metafields/{metafield.id}")
    assert (response.status_code, response.json()) == (200, {})


def test_delete_an_unknown_id_answers_404(vapi):
    assert errors_of(vapi.delete("/metafields/999999999"), 404) == "Not Found"


# List and count --------------------------------------------------------------------------


def test_the_list_filters_by_owner_and_namespace_newest_first(vapi):
    customer, other = make_customer(vapi), make_customer(vapi)
    first = make_metafield(vapi, customer, namespace="a")
    second = make_metafield(vapi, customer, namespace="b")
    make_metafield(vapi, other, namespace="a")
    params = {"owner_resource": "customer", "owner_id": customer.id}
    listed = vapi.get("/metafields", params=params).json()["metafields"]
    assert [m["id"] for m in listed] == [second.id, first.id]
    listed = vapi.get("/metafields", params={**params, "namespace": "a"}).json()["metafields"]
    assert [m["id"] for m in listed] == [first.id]


def test_the_list_pages_with_cursors_in_2021_11(api):
    customer = make_customer(api)
    made = [make_metafield(api, customer).id for _ in range(3)]
    response = api.get("/metafields", params={"owner_resource": "customer", "owner_id": customer.id, "limit": 2,
                                              "sort_by": "id-asc"})
    page = response.json()
    assert [m["id"] for m in page["metafields"]] == made[:2] and page["previous_cursor"] is None
    following = api.get("/metafields", params={"cursor": page["next_cursor"], "limit": 2}).json()
    assert [m["id"] for m in following["metafields"]] == made[2:]
    assert following["next_cursor"] is None


def test_the_list_pages_with_link_headers_in_2021_01(api):
    api.version = V01
    customer = make_customer(api)
    for _ in range(3):
        make_metafield(api, customer)
    response = api.get("/metafields", params={"owner_resource": "customer", "owner_id": customer.id, "limit": 2})
    assert set(response.json()) == {"metafields"}
    assert 'rel="next"' in response.headers["Link"]


def test_the_list_refuses_bad_filters_and_sorts(vapi):
    response = vapi.get("/metafields", params={"owner_resource": "shop", "owner_id": "x", "sort_by": "key-asc"})
    assert errors_of(response) == {
        "sort_by": ["Invalid value: key-asc. Must be one of id-asc, id-desc, updated_at-asc, updated_at-desc"]}
    response = vapi.get("/metafields", params={"owner_resource": "shop", "owner_id": "x"})
    assert errors_of(response) == {"owner_resource": ["Invalid value: shop. Must be one of "
                                                      "address, store, customer, subscription, order, charge"],
                                   "owner_id": ["Invalid integer: x"]}


def test_count_takes_the_list_filters_in_2021_01(api):
    api.version = V01
    customer = make_customer(api)
    make_metafield(api, customer, namespace="a")
    make_metafield(api, customer, namespace="b")
    make_metafield(api, owner_resource="store")
    params = {"owner_resource": "customer", "owner_id": customer.id}
    assert api.get("/metafields/count", params=params).json() == {"count": 2}
    assert api.get("/metafields/count", params={**params, "namespace": "a"}).json() == {"count": 1}
    assert api.get("/metafields/count", params={"owner_resource": "store"}).json() == {"count": 1}


def test_count_is_not_in_2021_11(api):
    assert errors_of(api.get("/metafields/count", params={"owner_resource": "store"}), 501) == \
        "This resource is not implemented in the requested API version"


# Scopes ----------------------------------------------------------------------------------

ENDPOINTS = [
    ("GET", "/metafields?owner_resource=store", "read_customers"),
    ("GET", "/metafields/{id}", "read_customers"),
    ("POST", "/metafields", "write_customers"),
    ("PUT", "/metafields/{id}", "write_customers"),
    ("DELETE", "/metafields/{id}", "write_customers"),
]


@pytest.mark.parametrize("method,path,scope", ENDPOINTS)
def test_a_token_without_the_scope_gets_403_naming_it_and_changes_nothing(vapi, method, path, scope):
    metafield = make_metafield(vapi)
    token = vapi.token_with("read_orders", "write_subscriptions")
    response = vapi.request(method, path.format(id=metafield.id), json=body(metafield.owner_id, value="x"),
                            token=token)
    assert errors_of(response, 403) == f"This token lacks the scope this endpoint needs: {scope}"
    assert fetch(vapi, metafield.id)["value"] == "gold"


def test_the_count_needs_the_read_scope(api):
    api.version = V01
    token = api.token_with("read_orders")
    response = api.get("/metafields/count", params={"owner_resource": "store"}, token=token)
    assert errors_of(response, 403) == "This token lacks the scope this endpoint needs: read_customers"


def test_the_read_scope_reads_but_does_not_write(vapi):
    metafield = make_metafield(vapi)
    token = vapi.token_with("read_customers")
    assert vapi.get(f"/metafields/{metafield.id}", token=token).status_code == 200
    assert vapi.get("/metafields", params={"owner_resource": "customer"}, token=token).status_code == 200
    assert vapi.delete(f"/metafields/{metafield.id}", token=token).status_code == 403
