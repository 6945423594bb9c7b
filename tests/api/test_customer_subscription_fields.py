"""What customers and addresses gained with subscriptions (decisions §4.7, §5.16; spec 02
Customers; spec 01 Including): subscription counts, the 2021-01 customer status, `include=
subscriptions`, the address `is_active` filter and the delete guards."""

from __future__ import annotations

import pytest

from tests.api.test_subscriptions import V01, V11, create_sub, errors_of, topics
from tests.builders import charges_of, events_of, make_address, make_customer, make_onetime, make_subscription

CANCEL = {"cancellation_reason": "x"}


@pytest.fixture
def customer_with_three(api):
    """A customer with two active subscriptions and a cancelled one on two addresses, and a
    one-time item (which counts as no subscription)."""
    customer = make_customer(api)
    a1, a2 = make_address(api, customer), make_address(api, customer)
    s1, s2, s3 = make_subscription(api, a1), make_subscription(api, a1), make_subscription(api, a2)
    assert api.post(f"/subscriptions/{s3.id}/cancel", json=CANCEL).status_code == 200
    make_onetime(api, a2)
    return customer, (a1, a2), (s1.id, s2.id, s3.id)


# Counts and status ---------------------------------------------------------------------------------

def test_2021_11_customer_counts_its_active_and_all_subscriptions(api, customer_with_three):
    customer, _, _ = customer_with_three
    record = api.get(f"/customers/{customer.id}", version=V11).json()["customer"]
    assert (record["subscriptions_active_count"], record["subscriptions_total_count"]) == (2, 3)
    listed = api.get("/customers", params={"ids": customer.id}, version=V11).json()["customers"][0]
    assert (listed["subscriptions_active_count"], listed["subscriptions_total_count"]) == (2, 3)


def test_2021_01_customer_shows_number_of_subscriptions_and_active_status(api, customer_with_three):
    customer, _, _ = customer_with_three
    record = api.get(f"/customers/{customer.id}", version=V01).json()["customer"]
    assert (record["number_active_subscriptions"], record["number_subscriptions"]) == (2, 3)
    assert record["status"] == "ACTIVE"


def test_a_customer_without_subscriptions_is_inactive_with_zero_counts(vapi):
    customer = make_customer(vapi)
    make_onetime(vapi, make_address(vapi, customer))
    record = vapi.get(f"/customers/{customer.id}").json()["customer"]
    if vapi.version == V11:
        assert (record["subscriptions_active_count"], record["subscriptions_total_count"]) == (0, 0)
    else:
        assert (record["number_active_subscriptions"], record["number_subscriptions"], record["status"]) == (
            0, 0, "INACTIVE")


def test_the_customer_status_follows_its_subscriptions_with_one_event_per_turn(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    first = create_sub(api, address)
    second = create_sub(api, address)
    api.post(f"/subscriptions/{first['id']}/cancel", json=CANCEL)
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "ACTIVE"
    api.post(f"/subscriptions/{second['id']}/cancel", json=CANCEL)
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "INACTIVE"
    api.post(f"/subscriptions/{first['id']}/activate")
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "ACTIVE"
    turns = [topic for topic, ident in events_of(api, customer.id) if topic.startswith("customer/")
             and topic != "customer/created"]
    assert turns == ["customer/activated", "customer/deactivated", "customer/activated"]


def test_2021_01_customer_status_filter_and_count_follow_subscriptions(api, customer_with_three):
    customer, _, _ = customer_with_three
    idle = make_customer(api)
    active = api.get("/customers", params={"status": "ACTIVE"}, version=V01).json()["customers"]
    assert [c["id"] for c in active] == [customer.id]
    inactive = api.get("/customers", params={"status": "INACTIVE"}, version=V01).json()["customers"]
    assert [c["id"] for c in inactive] == [idle.id]
    assert api.get("/customers/count", params={"status": "ACTIVE"}, version=V01).json() == {"count": 1}


# include=subscriptions ------------------------------------------------------------------------------

def test_include_subscriptions_on_customers_embeds_every_status_in_the_callers_shape(vapi, customer_with_three):
    customer, _, subs = customer_with_three
    for path in (f"/customers/{customer.id}", "/customers"):
        body = vapi.get(path, params={"include": "subscriptions"}).json()
        record = body["customer"] if "customer" in body else body["customers"][0]
        embedded = record["include"]["subscriptions"]
        assert sorted(s["id"] for s in embedded) == sorted(subs)
        for s in embedded:
            assert vapi.get(f"/subscriptions/{s['id']}").json()["subscription"] == s


def test_include_subscriptions_on_addresses_embeds_that_addresss_subscriptions(vapi, customer_with_three):
    _, (a1, a2), (s1, s2, s3) = customer_with_three
    one = vapi.get(f"/addresses/{a1.id}", params={"include": "subscriptions"}).json()["address"]
    assert sorted(s["id"] for s in one["include"]["subscriptions"]) == [s1, s2]
    listed = vapi.get("/addresses", params={"include": "subscriptions", "sort_by": "id-asc"}).json()["addresses"]
    assert [[s["id"] for s in a["include"]["subscriptions"]] for a in listed] == [[s1, s2], [s3]]
    assert listed[1]["include"]["subscriptions"][0]["status"] == ("cancelled" if vapi.version == V11 else "CANCELLED")


def test_include_subscriptions_of_a_customer_without_any_is_an_empty_list(vapi):
    customer = make_customer(vapi)
    record = vapi.get(f"/customers/{customer.id}", params={"include": "subscriptions"}).json()["customer"]
    assert record["include"]["subscriptions"] == []


# Addresses: is_active ---------------------------------------------------------------------------------

def test_is_active_filter_selects_addresses_with_an_active_subscription(api, customer_with_three):
    _, (a1, a2), _ = customer_with_three
    bare = make_address(api)
    active = api.get("/addresses", params={"is_active": "true"}, version=V11).json()["addresses"]
    assert [a["id"] for a in active] == [a1.id]
    inactive = api.get("/addresses", params={"is_active": "false"}, version=V11).json()["addresses"]
    assert [a["id"] for a in inactive] == [bare.id, a2.id]
    assert set(errors_of(api.get("/addresses", params={"is_active": "maybe"}, version=V11))) == {"is_active"}


# Delete guards -------------------------------------------------------------------------------------------

def test_an_address_with_an_active_subscription_cannot_be_deleted(vapi):
    address = make_address(vapi)
    make_subscription(vapi, address)
    before = events_of(vapi)
    response = vapi.delete(f"/addresses/{address.id}")
    assert response.status_code == 422
    assert response.json() == {"errors": {"subscriptions": ["Address has active subscriptions"]}}
    assert events_of(vapi) == before
    assert vapi.get(f"/addresses/{address.id}").status_code == 200


def test_deleting_an_address_deletes_its_cancelled_subscriptions_one_time_items_and_charges(vapi):
    address = make_address(vapi)
    sub = create_sub(vapi, address)
    onetime = make_onetime(vapi, address)
    vapi.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    response = vapi.delete(f"/addresses/{address.id}")
    assert response.status_code in (200, 204), response.text
    assert vapi.get(f"/subscriptions/{sub['id']}").status_code == 404
    assert vapi.get(f"/onetimes/{onetime.id}").status_code == 404
    assert charges_of(vapi, address.id) == []
    assert {"subscription/deleted", "onetime/deleted", "charge/deleted", "address/deleted"} <= set(topics(vapi))


def test_a_customer_with_an_active_subscription_cannot_be_deleted(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    sub = create_sub(vapi, address)
    response = vapi.delete(f"/customers/{customer.id}")
    assert response.status_code == 422
    assert response.json() == {"errors": {"subscriptions": ["Customer has active subscriptions"]}}
    assert vapi.get(f"/customers/{customer.id}").status_code == 200
    vapi.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    assert vapi.delete(f"/customers/{customer.id}").status_code in (200, 204)
    assert vapi.get(f"/subscriptions/{sub['id']}").status_code == 404
