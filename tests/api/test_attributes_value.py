"""An attribute or property sent without `value` is answered with `"value": null`, never
without the key (spec 03 lists `order_attributes[].value`, `note_attributes[].value` and
`properties[].value` in every reply; found by a conformance audit): in both versions, on the
address, its charge, and a subscription's properties."""

from __future__ import annotations

from typing import Any

from tests.api.test_subscriptions import sub_body
from tests.builders import make_address, make_customer


def test_an_address_attribute_without_value_renders_value_null_in_both_versions(api: Any) -> None:
    customer = make_customer(api)
    body = {"customer_id": customer.id, "address1": "101 Market St", "city": "San Francisco",
            "country_code": "US", "province": "CA", "zip": "94105", "first_name": "Ada", "last_name": "L",
            "phone": "+14155550100", "order_attributes": [{"name": "n"}, {"name": "m", "value": "v"}]}
    created = api.post("/addresses", json=body, version="2021-11")
    assert created.status_code == 201, created.text
    expected = [{"name": "n", "value": None}, {"name": "m", "value": "v"}]
    assert created.json()["address"]["order_attributes"] == expected
    address_id = created.json()["address"]["id"]
    old = api.get(f"/addresses/{address_id}", version="2021-01").json()["address"]
    assert old["note_attributes"] == expected and old["cart_attributes"] == expected
    # A PUT's list is a whole list: its items get the key too.
    updated = api.put(f"/addresses/{address_id}", json={"order_attributes": [{"name": "x"}]}, version="2021-11")
    assert updated.json()["address"]["order_attributes"] == [{"name": "x", "value": None}]


def test_a_subscription_property_without_value_renders_value_null_on_it_and_its_charge(api: Any) -> None:
    address = make_address(api)
    reply = api.post("/subscriptions", json=sub_body(api, address.id, properties=[{"name": "grind"}]))
    assert reply.status_code == 201, reply.text
    assert reply.json()["subscription"]["properties"] == [{"name": "grind", "value": None}]
    [charge] = api.get("/charges", params={"address_id": address.id}).json()["charges"]
    assert charge["line_items"][0]["properties"] == [{"name": "grind", "value": None}]
