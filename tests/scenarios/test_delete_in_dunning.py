"""An address or a customer deleted while one of its charges waits for a retry (decisions §6.5):
the charge goes with it, as its queued and skipped charges do, and nothing is billed later for
a deleted address (found by an audit: the retry paid 5.00 and made an order for a deleted
address and item)."""

from __future__ import annotations

from datetime import date

import pytest

from tests.builders import charges_of, make_customer, make_onetime
from tests.scenarios.conftest import advance, pay_with, subscriber


@pytest.mark.parametrize("what", ["address", "customer"])
def test_a_charge_in_retry_goes_with_its_deleted_address_or_customer(api, at, what):
    at(date(2027, 1, 10))
    customer = make_customer(api)
    address, subscription = subscriber(api, token="pm_declined", customer=customer,
                                       next_charge_scheduled_at=date(2027, 1, 12))
    make_onetime(api, address, next_charge_scheduled_at=date(2027, 1, 12))
    assert advance(api, to="2027-01-12")["failed"] == 1
    [errored] = [c for c in charges_of(api, address.id) if c.status == "error"]
    assert api.post(f"/subscriptions/{subscription.id}/cancel", json={"cancellation_reason": "x"}).status_code == 200
    path = f"/addresses/{address.id}" if what == "address" else f"/customers/{customer.id}"
    assert api.delete(path).status_code == 204
    assert charges_of(api, address.id) == []
    assert api.get(f"/charges/{errored.id}").status_code == 404
    pay_with(api, "pm_ok")  # a card that would pay now
    moved = advance(api, to="2027-02-20")
    assert (moved["paid"], moved["failed"]) == (0, 0)
    assert api.get("/orders", params={"customer_id": customer.id}).json()["orders"] == []
    deleted = [e for e in api.get("/events", params={"object_type": "charge", "object_id": errored.id}
                                  ).json()["events"] if e["verb"] == "deleted"]
    assert len(deleted) == 1
