"""Processed charges fall out of sight 90 x 24 h after `processed_at` (decisions §6.9, §6.12):
in get, list, count, include, process and refund; their orders stay visible."""

from __future__ import annotations

from datetime import date

from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription


def test_a_paid_charge_disappears_after_ninety_days_and_its_orders_stay(vapi, at):
    at(date(2027, 3, 1))
    customer = make_customer(vapi)
    make_payment_method(vapi, customer, processor_payment_method_token="pm_ok")
    address = make_address(vapi, customer)
    make_subscription(vapi, address, next_charge_scheduled_at=date(2027, 3, 2),
                      expire_after_specific_number_of_charges=1)
    [charge] = charges_of(vapi, address.id)
    assert vapi.post("/store/clock/advance", json={"days": 1}).status_code == 200
    assert vapi.get(f"/charges/{charge.id}").json()["charge"]["status"].lower() == "success"
    # Exactly 90 x 24 h after it was paid: still there.
    vapi.post("/store/clock/advance", json={"days": 90})
    assert vapi.get(f"/charges/{charge.id}").status_code == 200
    vapi.post("/store/clock/advance", json={"days": 1})
    assert vapi.get(f"/charges/{charge.id}").status_code == 404
    listed = vapi.get("/charges", params={"address_id": address.id}).json()["charges"]
    assert charge.id not in [c["id"] for c in listed]
    if vapi.version == "2021-01":
        assert vapi.get("/charges/count", params={"address_id": address.id}).json()["count"] == 0
    assert vapi.post(f"/charges/{charge.id}/refund", json={"full_refund": True}).status_code == 404
    orders = vapi.get("/orders", params={"address_id": address.id}).json()["orders"]
    assert len(orders) == 1
