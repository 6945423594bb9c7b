"""The 2021-01 bulk endpoints `POST|PUT|DELETE /addresses/{id}/subscriptions-bulk` (decisions
§5.2, §5.16): 1 to 20 subscriptions of that address, all or nothing; one bad item answers 422
keyed by its index and nothing is written, no event recorded."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_subscriptions import MONTHLY, NOT_FOUND, V01, day, errors_of, line_ids, topics
from tests.builders import events_of, make_address, make_customer, make_subscription

BULK = "/addresses/{}/subscriptions-bulk"


def item(api: Any, **overrides: Any) -> dict[str, Any]:
    """A bulk create entry; an override of None leaves the field out."""
    entry = {"product_title": "Coffee", "price": "12.50", "quantity": 1, "next_charge_scheduled_at": day(api, 10),
             **MONTHLY, **overrides}
    return {key: value for key, value in entry.items() if value is not None}


def bulk(api: Any, method: str, address_id: int, entries: Any, **kw: Any) -> Any:
    body = {"subscriptions": entries} if entries is not ... else {}
    return api.request(method, BULK.format(address_id), json=body, version=V01, **kw)


def stored(api: Any, address_id: int) -> list[int]:
    response = api.get("/subscriptions", params={"address_id": address_id, "sort_by": "id-asc"}, version=V01)
    return [s["id"] for s in response.json()["subscriptions"]]


# POST ----------------------------------------------------------------------------------------------

def test_bulk_create_makes_every_subscription_on_the_address_in_request_order(api):
    address = make_address(api)
    response = bulk(api, "POST", address.id, [item(api, product_title="A"),
                                              item(api, product_title="B", platform_variant_id="77")])
    assert response.status_code == 200, response.text
    made = response.json()["subscriptions"]
    assert [s["product_title"] for s in made] == ["A", "B"]
    assert all(s["address_id"] == address.id and s["status"] == "ACTIVE" for s in made)
    assert made[1]["platform_variant_id"] == 77 and made[0]["order_interval_frequency"] == "1"
    assert stored(api, address.id) == [s["id"] for s in made]
    # One charge holds both (one replan for the whole request).
    assert line_ids(api, address.id) == [(day(api, 10), [s["id"] for s in made])]
    assert topics(api).count("subscription/created") == 2
    assert topics(api).count("charge/created") == 1


def test_bulk_create_ignores_an_address_id_in_the_items(api):
    address = make_address(api)
    response = bulk(api, "POST", address.id, [item(api, address_id=make_address(api).id)])
    assert response.json()["subscriptions"][0]["address_id"] == address.id


def test_bulk_create_takes_twenty_items(api):
    address = make_address(api)
    response = bulk(api, "POST", address.id, [item(api) for _ in range(20)])
    assert response.status_code == 200, response.text
    assert len(stored(api, address.id)) == 20


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
@pytest.mark.parametrize("entries,errors", [
    (..., {"subscriptions": ["is required"]}),
    ("x", {"subscriptions": ["must be an array"]}),
    ([], {"subscriptions": ["must hold 1 to 20 subscriptions"]}),
    ([{}] * 21, {"subscriptions": ["must hold 1 to 20 subscriptions"]}),
])
def test_bulk_bodies_need_1_to_20_objects(api, method, entries, errors):
    address = make_address(api)
    assert errors_of(bulk(api, method, address.id, entries)) == errors


@pytest.mark.parametrize("method,good,bad", [
    ("POST", lambda api, s: item(api), lambda api, s: item(api, quantity="x")),
    ("PUT", lambda api, s: {"id": s.id, "quantity": 2}, lambda api, s: {"id": s.id, "quantity": "x"}),
    ("DELETE", lambda api, s: {"id": s.id}, lambda api, s: {"id": "x"}),
])
def test_an_entry_that_is_no_object_is_named_with_every_other_bad_entry(api, method, good, bad):
    # decisions §2.3, every bad field named (found by an audit: an entry that was no object hid
    # the other entries' errors).
    address = make_address(api)
    subscription = make_subscription(api, address)
    before = events_of(api)
    response = bulk(api, method, address.id, [good(api, subscription), 5, bad(api, subscription), "y"])
    field = "id" if method == "DELETE" else "quantity"
    assert errors_of(response) == {"subscriptions": {"1": ["must be an object"], "2": {field: ["must be an integer"]},
                                                     "3": ["must be an object"]}}
    assert stored(api, address.id) == [subscription.id] and events_of(api) == before


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_a_bulk_update_or_delete_names_each_subscription_once(api, method):
    # Found by an audit: a repeated id was updated twice and listed twice (a delete answered
    # "not found on this address" for the second); the plans' bulk refuses it likewise.
    address = make_address(api)
    s1, s2 = make_subscription(api, address), make_subscription(api, address)
    before = events_of(api)
    entries = [{"id": s1.id, "quantity": 5}, {"id": s2.id, "quantity": 2}, {"id": str(s1.id), "quantity": 6}]
    if method == "DELETE":
        entries = [{"id": e["id"]} for e in entries]
    assert errors_of(bulk(api, method, address.id, entries)) == {
        "subscriptions": {"2": {"id": ["is duplicated in this request"]}}}
    assert stored(api, address.id) == [s1.id, s2.id] and events_of(api) == before
    assert api.get(f"/subscriptions/{s1.id}").json()["subscription"]["quantity"] == 1


def test_one_bad_item_of_a_bulk_create_writes_nothing_and_names_its_index(api):
    address = make_address(api)
    before = events_of(api)
    response = bulk(api, "POST", address.id, [item(api), item(api, quantity="x", price=None),
                                              item(api), item(api, order_interval_unit="year")])
    assert errors_of(response) == {"subscriptions": {"1": {"quantity": ["must be an integer"]}}}
    response = bulk(api, "POST", address.id, [item(api), item(api), item(api, order_interval_unit="year")])
    assert errors_of(response) == {"subscriptions": {"2": {"order_interval_unit": ["must be one of: day, week, month"]}}}
    assert stored(api, address.id) == []
    assert events_of(api) == before


def test_every_bad_entry_is_named_at_once_in_each_method(api):
    """Decisions §2.3 (found by an audit: the rules of each entry stopped at the first bad one)."""
    customer = make_customer(api)
    address, other = make_address(api, customer), make_address(api, customer)
    s1, s2, s3 = (make_subscription(api, address) for _ in range(3))
    stranger = make_subscription(api, other)
    before = events_of(api)
    response = bulk(api, "POST", address.id, [item(api), item(api, next_charge_scheduled_at=day(api, -1)),
                                              item(api, quantity=0), {}])
    assert errors_of(response) == {"subscriptions": {
        "1": {"next_charge_scheduled_at": ["must not be in the past"]},
        "2": {"quantity": ["must be from 1 to 1000000"]},
        "3": {"charge_interval_frequency": ["is required"], "order_interval_frequency": ["is required"],
              "order_interval_unit": ["is required"], "product_title": ["is required (or a product of the catalog)"],
              "price": ["is required (or a product of the catalog with a price)"]}}}
    response = bulk(api, "PUT", address.id, [{"id": s1.id, "quantity": 7}, {"id": s2.id, "quantity": 0},
                                             {"id": s3.id, "price": "1.001"}, {"id": stranger.id, "quantity": 2}])
    assert errors_of(response) == {"subscriptions": {
        "1": {"quantity": ["must be from 1 to 1000000"]}, "2": {"price": ["has too many decimal places for USD (at most 2)"]},
        "3": {"id": ["not found on this address"]}}}
    response = bulk(api, "DELETE", address.id, [{"id": s1.id}, {"id": stranger.id}, {"id": 999_999_999}])
    assert errors_of(response) == {"subscriptions": {"1": {"id": ["not found on this address"]},
                                                     "2": {"id": ["not found on this address"]}}}
    assert stored(api, address.id) == [s1.id, s2.id, s3.id] and events_of(api) == before
    assert api.get(f"/subscriptions/{s1.id}").json()["subscription"]["quantity"] == 1


def test_bulk_create_errors_use_the_2021_01_names(api):
    address = make_address(api)
    response = bulk(api, "POST", address.id, [item(api, platform_product_id="nope", product_title=None,
                                                   price=None)])
    body = errors_of(response)
    assert body == {"subscriptions": {"0": {"platform_product_id": ["not found in the catalog"]}}}


def test_bulk_create_refuses_a_past_date_in_any_item(api):
    address = make_address(api)
    response = bulk(api, "POST", address.id, [item(api), item(api, next_charge_scheduled_at=day(api, -1))])
    assert errors_of(response) == {"subscriptions": {"1": {"next_charge_scheduled_at": ["must not be in the past"]}}}
    assert stored(api, address.id) == []


# PUT -----------------------------------------------------------------------------------------------

def test_bulk_update_changes_each_subscription(api):
    address = make_address(api)
    s1, s2 = make_subscription(api, address), make_subscription(api, address)
    response = bulk(api, "PUT", address.id, [{"id": s1.id, "quantity": 3}, {"id": str(s2.id), "price": "9"}])
    assert response.status_code == 200, response.text
    changed = response.json()["subscriptions"]
    assert [(s["id"], s["quantity"], s["price"]) for s in changed] == [(s1.id, 3, "12.50"), (s2.id, 1, "9.00")]
    assert topics(api).count("subscription/updated") == 2


def test_a_bulk_update_moves_no_subscription_to_another_address(api):
    """Found by an audit: an entry's other `address_id` answered 200 and moved nothing."""
    customer = make_customer(api)
    address, other = make_address(api, customer), make_address(api, customer)
    sub = make_subscription(api, address)
    before = events_of(api, resource="subscription")
    response = bulk(api, "PUT", address.id, [{"id": sub.id, "quantity": 2, "address_id": other.id}])
    assert errors_of(response) == {"subscriptions": {"0": {"address_id": [
        f"is not changed by an update; POST /subscriptions/{sub.id}/change_address moves it"]}}}
    assert events_of(api, resource="subscription") == before and stored(api, other.id) == []
    same = bulk(api, "PUT", address.id, [{"id": sub.id, "quantity": 2, "address_id": address.id}])
    assert same.status_code == 200 and same.json()["subscriptions"][0]["quantity"] == 2


def test_one_bad_item_of_a_bulk_update_changes_nothing(api):
    address = make_address(api)
    s1, s2 = make_subscription(api, address), make_subscription(api, address)
    before = events_of(api)
    response = bulk(api, "PUT", address.id, [{"id": s1.id, "quantity": 3}, {"id": s2.id, "quantity": 0}])
    assert errors_of(response) == {"subscriptions": {"1": {"quantity": ["must be from 1 to 1000000"]}}}
    assert api.get(f"/subscriptions/{s1.id}").json()["subscription"]["quantity"] == 1
    assert events_of(api) == before


@pytest.mark.parametrize("entry,errors", [({"quantity": 2}, {"id": ["is required"]}),
                                          ({"id": "x", "quantity": 2}, {"id": ["must be an integer"]}),
                                          ({"id": False}, {"id": ["must be an integer"]}),
                                          ({"id": 1.5}, {"id": ["must be an integer"]}),
                                          ({"id": 1, "quantity": "x"}, {"quantity": ["must be an integer"]})])
def test_bulk_update_items_need_an_id_and_valid_fields(api, entry, errors):
    address = make_address(api)
    assert errors_of(bulk(api, "PUT", address.id, [entry])) == {"subscriptions": {"0": errors}}


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_an_item_of_another_address_store_or_unknown_answers_422_and_nothing_changes(api, method):
    customer = make_customer(api)
    address, other_address = make_address(api, customer), make_address(api, customer)
    mine = make_subscription(api, address)
    for stranger in (make_subscription(api, other_address).id, make_subscription(api.other_store()).id, 999_999_999):
        before = events_of(api)
        response = bulk(api, method, address.id, [{"id": mine.id, "quantity": 2}, {"id": stranger, "quantity": 2}])
        assert errors_of(response) == {"subscriptions": {"1": {"id": ["not found on this address"]}}}
        assert events_of(api) == before
        assert stored(api, address.id) == [mine.id]


# DELETE ----------------------------------------------------------------------------------------------

def test_bulk_delete_removes_every_subscription_and_answers_an_empty_object(api):
    address = make_address(api)
    s1, s2, s3 = (make_subscription(api, address) for _ in range(3))
    response = bulk(api, "DELETE", address.id, [{"id": s1.id}, {"id": str(s3.id)}])
    assert (response.status_code, response.json()) == (200, {})
    assert stored(api, address.id) == [s2.id]
    assert line_ids(api, address.id) == [(day(api, 10), [s2.id])]
    assert topics(api).count("subscription/deleted") == 2


def test_bulk_delete_of_every_subscription_deactivates_the_customer(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    subs = [make_subscription(api, address) for _ in range(2)]
    bulk(api, "DELETE", address.id, [{"id": s.id} for s in subs])
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "INACTIVE"
    assert topics(api)[-1:] == ["charge/deleted"] and "customer/deactivated" in topics(api)


@pytest.mark.parametrize("entry,errors", [({}, {"id": ["is required"]}), ({"id": "x"}, {"id": ["must be an integer"]}),
                                          ({"id": True}, {"id": ["must be an integer"]})])
def test_bulk_delete_items_need_an_integer_id(api, entry, errors):
    address = make_address(api)
    assert errors_of(bulk(api, "DELETE", address.id, [entry])) == {"subscriptions": {"0": errors}}


# The address of the path ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_an_unknown_or_another_stores_address_answers_404(api, method):
    for address_id in (make_address(api.other_store()).id, 999_999_999):
        entries = [item(api)] if method == "POST" else [{"id": 1}]
        response = bulk(api, method, address_id, entries)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_bulk_needs_write_subscriptions(api, method):
    address = make_address(api)
    response = bulk(api, method, address.id, [{"id": 1}], token=api.token_with("read_subscriptions"))
    assert response.status_code == 403
    assert response.json() == {"errors": "This token lacks the scope this endpoint needs: write_subscriptions"}


def test_bulk_update_with_commit_update_false_leaves_the_charges_flagged(api):
    from rebill.jobs import regenerate
    from tests.builders import charges_of
    address = make_address(api)
    sub = make_subscription(api, address)
    response = bulk(api, "PUT", address.id, [{"id": sub.id, "price": "20", "commit_update": False}])
    assert response.status_code == 200, response.text
    (charge,) = charges_of(api, address.id)
    assert charge.has_uncommitted_changes is True and charge.total_price == 12.5
    api.clock.advance(seconds=5)
    regenerate.run_due(api.db, api.clock, store_id=api.store.id)
    (charge,) = charges_of(api, address.id)
    assert charge.has_uncommitted_changes is False and charge.total_price == 20
