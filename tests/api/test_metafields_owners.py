"""Metafields and their owners (decisions §7.6, spec 01 and 02 include tables): deleting an
owner deletes its metafields, each with its `metafield/deleted` event, in the owner's own
transaction; `include=metafields` embeds a record's metafields. Both databases."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

from rebill.models import events
from tests.api.test_orders import prepaid
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


def metafield_events(api: Any, topic: str = "metafield/deleted") -> list[tuple[int, Any]]:
    stmt = (select(events.c.resource_id, events.c.data)
            .where(events.c.store_id == api.store.id, events.c.topic == topic).order_by(events.c.id))
    with api.db.read() as conn:
        return [(row.resource_id, row.data) for row in conn.execute(stmt)]


def exists(api: Any, metafield_id: int) -> bool:
    return bool(api.get(f"/metafields/{metafield_id}").status_code == 200)


def deleted_ids(api: Any) -> set[int]:
    found = metafield_events(api)
    assert all(data == {"id": resource_id} for resource_id, data in found)
    return {resource_id for resource_id, _ in found}


# Deleting an owner deletes its metafields ---------------------------------------------------


def test_deleting_a_customer_deletes_its_metafields_and_those_of_its_addresses_with_events(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    bystander = make_metafield(vapi, make_customer(vapi))
    gone = [make_metafield(vapi, customer).id, make_metafield(vapi, address, owner_resource="address").id]
    assert vapi.delete(f"/customers/{customer.id}").status_code in (200, 204)
    assert not any(exists(vapi, m) for m in gone)
    assert deleted_ids(vapi) == set(gone)
    assert exists(vapi, bystander.id)


def test_deleting_an_address_deletes_its_metafields_and_those_of_its_subscriptions_and_charges(vapi):
    address = make_address(vapi)
    subscription = make_subscription(vapi, address)
    vapi.post(f"/subscriptions/{subscription.id}/cancel", json={"cancellation_reason": "moving"})
    make_onetime(vapi, address)
    [charge] = [c for c in charges_of(vapi, address.id) if c.status == "queued"]
    bystander = make_metafield(vapi, make_address(vapi), owner_resource="address")
    gone = [make_metafield(vapi, address, owner_resource="address").id,
            make_metafield(vapi, subscription, owner_resource="subscription").id,
            make_metafield(vapi, charge, owner_resource="charge").id]
    response = vapi.delete(f"/addresses/{address.id}")
    assert response.status_code in (200, 204), response.text
    assert not any(exists(vapi, m) for m in gone)
    assert deleted_ids(vapi) == set(gone)
    assert exists(vapi, bystander.id)


def test_deleting_a_subscription_deletes_its_metafields_with_events(vapi):
    address = make_address(vapi)
    subscription, other = make_subscription(vapi, address), make_subscription(vapi, address)
    gone = make_metafield(vapi, subscription, owner_resource="subscription")
    kept = make_metafield(vapi, other, owner_resource="subscription")
    assert vapi.delete(f"/subscriptions/{subscription.id}").status_code in (200, 204)
    assert not exists(vapi, gone.id)
    assert deleted_ids(vapi) == {gone.id}
    assert exists(vapi, kept.id)


def test_deleting_an_order_deletes_its_metafields_with_events(vapi):
    _, second, third = prepaid(vapi)
    gone = make_metafield(vapi, second, owner_resource="order")
    kept = make_metafield(vapi, third, owner_resource="order")
    assert vapi.delete(f"/orders/{second.id}").status_code in (200, 204)
    assert not exists(vapi, gone.id)
    assert deleted_ids(vapi) == {gone.id}
    assert exists(vapi, kept.id)


def test_a_charge_the_reconciler_deletes_loses_its_metafields_with_events(vapi):
    address = make_address(vapi)
    onetime = make_onetime(vapi, address)
    [charge] = charges_of(vapi, address.id)
    gone = make_metafield(vapi, charge, owner_resource="charge")
    kept = make_metafield(vapi, address, owner_resource="address")
    # The address's only item goes: its queued charge vanishes from the plan.
    assert vapi.delete(f"/onetimes/{onetime.id}").status_code in (200, 204)
    assert charges_of(vapi, address.id) == []
    assert not exists(vapi, gone.id)
    assert deleted_ids(vapi) == {gone.id}
    assert exists(vapi, kept.id)


def test_a_failed_owner_delete_keeps_its_metafields(vapi):
    address = make_address(vapi)
    make_subscription(vapi, address)  # active: the address cannot be deleted (decisions §4.7)
    metafield = make_metafield(vapi, address, owner_resource="address")
    assert vapi.delete(f"/addresses/{address.id}").status_code == 422
    assert exists(vapi, metafield.id)
    assert metafield_events(vapi) == []


def test_a_charge_kept_by_the_reconciler_keeps_its_metafields(vapi):
    address = make_address(vapi)
    make_subscription(vapi, address)
    [charge] = charges_of(vapi, address.id)
    metafield = make_metafield(vapi, charge, owner_resource="charge")
    make_onetime(vapi, address, next_charge_scheduled_at=charge.scheduled_at)  # joins the same charge
    assert [c.id for c in charges_of(vapi, address.id)] == [charge.id]
    assert exists(vapi, metafield.id)


# include=metafields -------------------------------------------------------------------------


def _include(vapi: Any, path: str, key: str) -> Any:
    response = vapi.get(path, params={"include": "metafields"})
    assert response.status_code == 200, response.text
    return response.json()[key]


def test_include_metafields_on_a_customer_embeds_its_own(vapi):
    customer = make_customer(vapi)
    mine = [make_metafield(vapi, customer).id for _ in range(2)]
    make_metafield(vapi, make_customer(vapi))
    record = _include(vapi, f"/customers/{customer.id}", "customer")
    assert [m["id"] for m in record["include"]["metafields"]] == mine
    assert record["include"]["metafields"][0]["owner_id"] == str(customer.id)


def test_include_metafields_on_a_customer_list_gives_each_record_its_own(vapi):
    customers = [make_customer(vapi) for _ in range(3)]
    owned = {c.id: make_metafield(vapi, c).id for c in customers[:2]}
    listed = _include(vapi, "/customers", "customers")
    assert {r["id"]: [m["id"] for m in r["include"]["metafields"]] for r in listed} == {
        **{c.id: [] for c in customers}, **{cid: [mid] for cid, mid in owned.items()}}


def test_include_metafields_on_a_subscription(vapi):
    subscription = make_subscription(vapi)
    metafield = make_metafield(vapi, subscription, owner_resource="subscription")
    make_metafield(vapi, SimpleNamespace(id=subscription.customer_id))  # the customer's, not the subscription's
    record = _include(vapi, f"/subscriptions/{subscription.id}", "subscription")
    assert [m["id"] for m in record["include"]["metafields"]] == [metafield.id]


def test_include_metafields_on_a_charge_and_its_list(vapi):
    address = make_address(vapi)
    make_subscription(vapi, address)
    [charge] = charges_of(vapi, address.id)
    metafield = make_metafield(vapi, charge, owner_resource="charge")
    record = _include(vapi, f"/charges/{charge.id}", "charge")
    assert [m["id"] for m in record["include"]["metafields"]] == [metafield.id]
    listed = vapi.get("/charges", params={"include": "metafields", "address_id": address.id}).json()["charges"]
    assert [[m["id"] for m in r["include"]["metafields"]] for r in listed] == [[metafield.id]]


def test_include_metafields_on_an_order(vapi):
    order = make_order(vapi)
    metafield = make_metafield(vapi, order, owner_resource="order")
    record = _include(vapi, f"/orders/{order.id}", "order")
    assert [m["id"] for m in record["include"]["metafields"]] == [metafield.id]


def test_included_metafields_use_the_callers_version(vapi):
    customer = make_customer(vapi)
    make_metafield(vapi, customer)
    [embedded] = _include(vapi, f"/customers/{customer.id}", "customer")["include"]["metafields"]
    assert embedded["created_at"].endswith("+00:00") == (vapi.version == V11)


@pytest.mark.parametrize("path", ["/addresses", "/payment_methods"])
def test_resources_whose_include_table_lacks_metafields_refuse_it(api, path):
    response = api.get(path, params={"include": "metafields"}, version=V11)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["include"]


def test_products_of_2021_01_cannot_own_metafields_so_their_include_is_not_available(api):
    response = api.get("/products", params={"include": "metafields"}, version=V01)
    assert response.json() == {"errors": {"include": ["metafields is not available yet"]}}
