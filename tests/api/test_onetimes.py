"""Contract tests of one-time items (decisions §5.6, §5.16; spec 03 "onetime"): 2021-11 creates
through `POST /onetimes`, 2021-01 through `POST /addresses/{id}/onetimes`; get, update,
delete, list and the 2021-01 count; one line on the charge of their date."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.api.test_real_fields import ARR, BOOL, DT_NAIVE, DT_OFFSET, INT, NULL, OBJ, STR, assert_fields
from tests.api.test_subscriptions import (
    NOT_FOUND,
    NOT_IN_VERSION,
    V01,
    V11,
    charges_of,
    day,
    errors_of,
    line_ids,
    make_catalog,
    stamp,
    topics,
)
from tests.builders import events_of, make_address, make_customer, make_onetime, make_subscription

ONETIME_2021_11 = [
    ("address_id", {INT}), ("created_at", {DT_OFFSET}), ("customer_id", {INT}), ("external_product_id", {OBJ}),
    ("external_product_id.ecommerce", {STR, NULL}), ("external_variant_id", {OBJ}),
    ("external_variant_id.ecommerce", {STR, NULL}), ("id", {INT}), ("is_cancelled", {BOOL}),
    ("next_charge_scheduled_at", {DT_OFFSET, NULL}), ("price", {STR}), ("product_title", {STR}),
    ("properties", {ARR}), ("properties[].name", {STR}), ("properties[].value", {STR}), ("quantity", {INT}),
    ("sku", {STR, NULL}), ("sku_override", {BOOL}), ("updated_at", {DT_OFFSET}), ("variant_title", {STR, NULL}),
]
ONETIME_2021_01 = [
    ("address_id", {INT}), ("created_at", {DT_NAIVE}), ("customer_id", {INT}), ("id", {INT}),
    ("next_charge_scheduled_at", {DT_NAIVE, NULL}), ("platform_product_id", {INT, STR, NULL}),
    ("platform_variant_id", {INT, STR, NULL}), ("price", {STR}), ("product_title", {STR}), ("properties", {ARR}),
    ("properties[].name", {STR}), ("properties[].value", {STR}), ("quantity", {INT}),
    ("service_product_id", {INT, STR, NULL}), ("sku", {STR, NULL}), ("status", {STR}), ("updated_at", {DT_NAIVE}),
    ("variant_title", {STR, NULL}),
]


def onetime_body(api: Any, **overrides: Any) -> dict[str, Any]:
    body = {"product_title": "Mug", "variant_title": "Blue", "price": "8", "quantity": 2,
            "next_charge_scheduled_at": day(api, 5), **overrides}
    return {key: value for key, value in body.items() if value is not None}


def create_onetime(api: Any, address: Any = None, *, version: str | None = None, **overrides: Any) -> Any:
    """The version's create request; answers the response."""
    version = version or api.version
    address = address or make_address(api)
    if version == V11:
        return api.post("/onetimes", json={"address_id": address.id, **onetime_body(api, **overrides)}, version=V11)
    return api.post(f"/addresses/{address.id}/onetimes", json=onetime_body(api, **overrides), version=V01)


def made(api: Any, address: Any = None, **overrides: Any) -> dict[str, Any]:
    response = create_onetime(api, address, **overrides)
    assert response.status_code == (201 if api.version == V11 else 200), response.text
    return response.json()["onetime"]


# Create ------------------------------------------------------------------------------------------

def test_create_in_2021_11_answers_201_with_nested_ids_and_a_datetime_next_date(api):
    address = make_address(api)
    onetime = made(api, address, external_product_id={"ecommerce": "900"}, external_variant_id={"ecommerce": "901"},
                   sku="MUG-B", properties=[{"name": "engraving", "value": "Ada"}])
    now = stamp(V11, api)
    assert onetime == {
        "id": onetime["id"], "address_id": address.id, "customer_id": address.customer_id, "created_at": now,
        "external_product_id": {"ecommerce": "900"}, "external_variant_id": {"ecommerce": "901"},
        "is_cancelled": False, "next_charge_scheduled_at": f"{day(api, 5)}T00:00:00+00:00",
        "presentment_currency": "USD", "price": "8.00", "product_title": "Mug",
        "properties": [{"name": "engraving", "value": "Ada"}], "quantity": 2, "sku": "MUG-B", "sku_override": False,
        "updated_at": now, "variant_title": "Blue"}
    assert_fields(onetime, ONETIME_2021_11)
    assert api.get(f"/onetimes/{onetime['id']}").json() == {"onetime": onetime}


def test_create_in_2021_01_answers_200_under_the_address_with_flat_ids_and_naive_datetimes(api):
    api.version = V01
    address = make_address(api)
    onetime = made(api, address, platform_product_id="900", properties=[{"name": "a", "value": "b"}])
    now = stamp(V01, api)
    assert onetime == {
        "id": onetime["id"], "address_id": address.id, "customer_id": address.customer_id, "created_at": now,
        "next_charge_scheduled_at": f"{day(api, 5)}T00:00:00", "platform_product_id": 900,
        "platform_variant_id": None, "presentment_currency": "USD", "price": "8.00", "product_title": "Mug",
        "properties": [{"name": "a", "value": "b"}], "quantity": 2, "service_product_id": None, "sku": None,
        "sku_override": False, "status": "ONETIME", "updated_at": now, "variant_title": "Blue"}
    assert_fields(onetime, ONETIME_2021_01)
    assert api.get(f"/onetimes/{onetime['id']}").json() == {"onetime": onetime}


def test_create_puts_one_onetime_line_on_the_charge_of_its_date_and_records_events(vapi):
    address = make_address(vapi)
    sub = make_subscription(vapi, address)  # due in 10 days
    onetime = made(vapi, address, next_charge_scheduled_at=day(vapi, 10))
    assert line_ids(vapi, address.id) == [(day(vapi, 10), [sub.id, onetime["id"]])]
    (charge,) = charges_of(vapi, address.id)
    assert [line["purchase_item_type"] for line in charge.line_items] == ["subscription", "onetime"]
    assert topics(vapi)[-2:] == ["onetime/created", "charge/updated"]


def test_a_onetime_item_on_its_own_date_makes_its_own_charge_and_leaves_the_customer_inactive(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    onetime = made(api, address)
    assert line_ids(api, address.id) == [(day(api, 5), [onetime["id"]])]
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "INACTIVE"


def test_create_takes_defaults_from_a_catalog_variant(vapi):
    product_id, _ = make_catalog(vapi)
    ids = ({"external_product_id": {"ecommerce": product_id}, "external_variant_id": {"ecommerce": f"{product_id}-2"}}
           if vapi.version == V11 else {"platform_product_id": product_id, "platform_variant_id": f"{product_id}-2"})
    onetime = made(vapi, product_title=None, variant_title=None, price=None, **ids)
    assert (onetime["product_title"], onetime["variant_title"], onetime["price"], onetime["sku"]) == (
        "Coffee", "1 kg", "40.00", "COF-1K")


@pytest.mark.parametrize("values,errors", [
    ({"next_charge_scheduled_at": None}, {"next_charge_scheduled_at": ["is required"]}),
    ({"product_title": None, "price": None}, {"product_title": ["is required (or a product of the catalog)"],
                                              "price": ["is required (or a product of the catalog with a price)"]}),
    ({"quantity": 0}, {"quantity": ["must be from 1 to 1000000"]}),
    ({"price": "8.001"}, {"price": ["has too many decimal places for USD (at most 2)"]}),
    ({"price": "-1"}, {"price": ["must not be negative"]}),
    ({"quantity": "x", "next_charge_scheduled_at": "soon", "properties": {}},
     {"quantity": ["must be an integer"], "next_charge_scheduled_at": ["must be a date (YYYY-MM-DD)"],
      "properties": ["must be an array"]}),
])
def test_create_rules_answer_422_naming_the_field(vapi, values, errors):
    assert errors_of(create_onetime(vapi, **values)) == errors


def test_a_next_date_in_the_past_answers_422(vapi):
    response = create_onetime(vapi, next_charge_scheduled_at=day(vapi, -1))
    assert errors_of(response) == {"next_charge_scheduled_at": ["must not be in the past"]}


def test_2021_11_create_needs_an_address_of_the_store(api):
    assert errors_of(api.post("/onetimes", json=onetime_body(api))) == {"address_id": ["is required"]}
    for address_id in (make_address(api.other_store()).id, 999_999_999):
        response = api.post("/onetimes", json={"address_id": address_id, **onetime_body(api)})
        assert errors_of(response) == {"address_id": ["address not found"]}


def test_2021_01_create_under_an_unknown_or_another_stores_address_answers_404(api):
    for address_id in (make_address(api.other_store()).id, 999_999_999):
        response = api.post(f"/addresses/{address_id}/onetimes", json={}, version=V01)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_each_version_creates_through_its_own_endpoint_only(api):
    address = make_address(api)
    for method, path, version in (("POST", "/onetimes", V01), ("POST", f"/addresses/{address.id}/onetimes", V11),
                                  ("GET", "/onetimes/count", V11)):
        response = api.request(method, path, json={} if method == "POST" else None, version=version)
        assert (response.status_code, response.json()) == (501, NOT_IN_VERSION), (path, version)


# Get, update, delete -------------------------------------------------------------------------------

def test_an_unknown_another_stores_or_subscription_id_answers_404(vapi):
    foreign = make_onetime(vapi.other_store())
    sub = make_subscription(vapi)
    for ident in (foreign.id, sub.id, 999_999_999):
        for method in ("GET", "PUT", "DELETE"):
            response = vapi.request(method, f"/onetimes/{ident}", json={"quantity": 2} if method == "PUT" else None)
            assert (response.status_code, response.json()) == (404, NOT_FOUND), (ident, method)


def test_update_changes_the_item_and_its_charge(vapi):
    address = make_address(vapi)
    onetime = made(vapi, address)
    vapi.clock.advance(seconds=1)
    response = vapi.put(f"/onetimes/{onetime['id']}", json={"quantity": 3, "price": "2.5",
                                                            "next_charge_scheduled_at": day(vapi, 7)})
    assert response.status_code == 200, response.text
    updated = response.json()["onetime"]
    assert (updated["quantity"], updated["price"]) == (3, "2.50")
    assert updated["updated_at"] == stamp(vapi.version, vapi)
    assert line_ids(vapi, address.id) == [(day(vapi, 7), [onetime["id"]])]
    assert charges_of(vapi, address.id)[0].total_line_items_price == 7.5
    assert topics(vapi, onetime["id"])[-1] == "onetime/updated"


def test_an_update_that_changes_nothing_records_no_event(api):
    onetime = made(api)
    before = events_of(api)
    api.clock.advance(seconds=1)
    response = api.put(f"/onetimes/{onetime['id']}", json={"quantity": 2, "price": "8.00"})
    assert response.json()["onetime"]["updated_at"] == onetime["updated_at"]
    assert events_of(api) == before


@pytest.mark.parametrize("values,errors", [
    ({"next_charge_scheduled_at": None}, {"next_charge_scheduled_at": ["cannot be null"]}),
    ({"quantity": 0}, {"quantity": ["must be from 1 to 1000000"]}),
    ({"price": "1.001"}, {"price": ["has too many decimal places for USD (at most 2)"]}),
    ({"product_title": ""}, {"product_title": ["cannot be blank"]}),
    ({"quantity": "x"}, {"quantity": ["must be an integer"]}),
])
def test_update_rules_answer_422(vapi, values, errors):
    onetime = made(vapi)
    assert errors_of(vapi.put(f"/onetimes/{onetime['id']}", json=values)) == errors


def test_update_to_a_past_date_answers_422(vapi):
    onetime = made(vapi)
    response = vapi.put(f"/onetimes/{onetime['id']}", json={"next_charge_scheduled_at": day(vapi, -1)})
    assert errors_of(response) == {"next_charge_scheduled_at": ["must not be in the past"]}


def test_update_to_another_catalog_variant_takes_its_titles(api):
    product_id, _ = make_catalog(api)
    onetime = made(api, external_product_id={"ecommerce": product_id})
    response = api.put(f"/onetimes/{onetime['id']}", json={"external_variant_id": {"ecommerce": f"{product_id}-2"}})
    assert response.json()["onetime"]["variant_title"] == "1 kg"


def test_delete_answers_204_or_200_removes_the_line_and_records_the_event(api):
    for version, status in ((V11, 204), (V01, 200)):
        api.version = version
        address = make_address(api)
        onetime = made(api, address)
        response = api.delete(f"/onetimes/{onetime['id']}")
        assert response.status_code == status
        assert (response.content == b"") if version == V11 else (response.json() == {})
        assert api.get(f"/onetimes/{onetime['id']}").status_code == 404
        assert charges_of(api, address.id) == []
        assert topics(api)[-2:] == ["onetime/deleted", "charge/deleted"]


# List and count --------------------------------------------------------------------------------------

@pytest.fixture
def items(api):
    customer = make_customer(api)
    a1, a2 = make_address(api, customer), make_address(api)
    o1 = make_onetime(api, a1, external_product_id="900", external_variant_id="901")
    o2 = make_onetime(api, a2, external_product_id="902", external_variant_id="903")
    make_subscription(api, a1)
    make_onetime(api.other_store())
    return (a1, a2), (o1.id, o2.id)


def listed(api: Any, **params: Any) -> list[int]:
    response = api.get("/onetimes", params=params)
    assert response.status_code == 200, response.text
    return [o["id"] for o in response.json()["onetimes"]]


def test_list_shows_the_stores_one_time_items_only_newest_first(vapi, items):
    (a1, a2), (o1, o2) = items
    assert listed(vapi) == [o2, o1]
    assert listed(vapi, sort_by="id-asc") == [o1, o2]
    body = vapi.get("/onetimes").json()
    assert set(body) == ({"onetimes", "next_cursor", "previous_cursor"} if vapi.version == V11 else {"onetimes"})


def test_list_filters(vapi, items):
    (a1, a2), (o1, o2) = items
    assert listed(vapi, address_id=a1.id) == [o1]
    assert listed(vapi, address_ids=f"{a1.id},{a2.id}") == [o2, o1]
    assert listed(vapi, customer_id=a2.customer_id) == [o2]
    assert listed(vapi, ids=str(o2)) == [o2]
    if vapi.version == V11:
        assert listed(vapi, external_variant_id="903") == [o2]
        assert listed(vapi, is_cancelled="false") == [o2, o1]
        assert listed(vapi, is_cancelled="true") == []
    else:
        assert listed(vapi, platform_variant_id="903") == [o2]
        assert listed(vapi, product_id="900") == [o1]


def test_list_refuses_bad_filters_and_include(vapi, items):
    assert set(errors_of(vapi.get("/onetimes", params={"ids": "x"}))) == {"ids"}
    assert set(errors_of(vapi.get("/onetimes", params={"sort_by": "price-asc"}))) == {"sort_by"}
    assert set(errors_of(vapi.get("/onetimes", params={"include": "customer"}))) == {"include"}


def test_count_in_2021_01_takes_the_list_filters(api, items):
    (a1, a2), (o1, o2) = items

    def count(**params: Any) -> int:
        response = api.get("/onetimes/count", params=params, version=V01)
        assert response.status_code == 200, response.text
        return response.json()["count"]
    assert count() == 2
    assert count(address_id=a1.id) == 1
    assert count(customer_id=a2.customer_id) == 1
    assert count(ids=f"{o1},{o2}") == 2
    assert count(platform_variant_id="901") == 1
    assert count(created_at_min=api.clock.now().isoformat()) == 2


# Scopes ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,version,scope", [
    ("GET", "/onetimes", V11, "read_subscriptions"), ("GET", "/onetimes/1", V01, "read_subscriptions"),
    ("GET", "/onetimes/count", V01, "read_subscriptions"), ("POST", "/onetimes", V11, "write_subscriptions"),
    ("POST", "/addresses/1/onetimes", V01, "write_subscriptions"), ("PUT", "/onetimes/1", V11, "write_subscriptions"),
    ("DELETE", "/onetimes/1", V01, "write_subscriptions"),
])
def test_a_token_without_the_scope_answers_403(api, method, path, version, scope):
    token = api.token_with("read_customers" if scope.startswith("read") else "read_subscriptions")
    response = api.request(method, path, json={} if method in ("POST", "PUT") else None, version=version, token=token)
    assert (response.status_code, response.json()) == (
        403, {"errors": f"This token lacks the scope this endpoint needs: {scope}"})


def test_update_to_a_product_outside_the_catalog_keeps_the_titles(api):
    onetime = made(api)
    response = api.put(f"/onetimes/{onetime['id']}", json={"external_product_id": {"ecommerce": "777"}})
    assert response.status_code == 200, response.text
    assert (response.json()["onetime"]["product_title"], response.json()["onetime"]["variant_title"]) == ("Mug",
                                                                                                        "Blue")


def test_2021_01_status_is_taken_as_shown_and_another_is_refused(api):
    """Found by an audit: `{"status": "CANCELLED"}` answered 200 and the item stayed on its
    charge, to be billed; a one-time item goes by its delete."""
    address = make_address(api)
    item = make_onetime(api, address)
    path = f"/onetimes/{item.id}"
    shown = api.get(path, version=V01).json()["onetime"]
    assert shown["status"] == "ONETIME"
    told = len(events_of(api))
    assert api.put(path, json={"status": "ONETIME"}, version=V01).status_code == 200
    assert events_of(api)[told:] == []
    refused = api.put(path, json={"status": "CANCELLED", "quantity": 2}, version=V01)
    assert (refused.status_code, refused.json()) == (422, {"errors": {"status": [
        f"is not changed by an update; DELETE /onetimes/{item.id} removes the one-time item"]}})
    assert api.get(path, version=V01).json()["onetime"]["quantity"] == shown["quantity"]
    assert api.put(path, json={"status": "DONE"}, version=V01).json() == {"errors": {"status": [
        "must be ONETIME or CANCELLED"]}}
    # 2021-11 shows `is_cancelled`: the same rule under its name.
    assert api.put(path, json={"is_cancelled": False}, version=V11).status_code == 200
    refused = api.put(path, json={"is_cancelled": True}, version=V11)
    assert (refused.status_code, refused.json()) == (422, {"errors": {"is_cancelled": [
        f"is not changed by an update; DELETE /onetimes/{item.id} removes the one-time item"]}})
    assert events_of(api)[told:] == []


@pytest.mark.parametrize("version", [V01, V11])
def test_an_update_moves_no_one_time_item_to_another_address(api, version):
    """Found by an audit: `{"address_id": B}` answered 200 and the item stayed on A. The
    address it is on, sent back as shown, passes."""
    customer = make_customer(api)
    address, other = make_address(api, customer), make_address(api, customer)
    item = make_onetime(api, address)
    path = f"/onetimes/{item.id}"
    told = len(events_of(api))
    refused = api.put(path, json={"address_id": other.id, "quantity": 2}, version=version)
    assert (refused.status_code, refused.json()) == (422, {"errors": {"address_id": [
        "is not changed by an update; a one-time item is deleted and made again on the other address"]}})
    assert events_of(api)[told:] == []
    shown = api.get(path, version=version).json()["onetime"]
    assert (shown["address_id"], shown["quantity"]) == (address.id, item.quantity)
    kept = api.put(path, json={"address_id": address.id, "quantity": 2}, version=version)
    assert kept.status_code == 200 and kept.json()["onetime"]["quantity"] == 2


def test_create_and_update_name_every_bad_field_at_once(api):
    """decisions §2.3 (found by an audit: a zero quantity, then the missing title, then a past
    date took a request each, where a subscription's create names them together)."""
    address = make_address(api)
    past = (api.clock.now().date() - timedelta(days=1)).isoformat()
    reply = api.post("/onetimes", json={"address_id": address.id, "price": "5.00", "quantity": 0,
                                        "next_charge_scheduled_at": past}, version=V11)
    assert reply.status_code == 422, reply.text
    assert set(reply.json()["errors"]) == {"quantity", "next_charge_scheduled_at", "product_title"}
    item = make_onetime(api, address)
    reply = api.put(f"/onetimes/{item.id}", json={"quantity": 0, "next_charge_scheduled_at": past,
                                                  "price": "5.001"}, version=V11)
    assert reply.status_code == 422, reply.text
    assert set(reply.json()["errors"]) == {"quantity", "next_charge_scheduled_at", "price"}
