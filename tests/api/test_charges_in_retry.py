"""A charge in retry keeps its items for the retry (decisions §6.3), but an item cancelled or
deleted leaves it (decisions §5.16): a retry must never take money for it
(domain/charge/errored.py). Both versions, both databases."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.builders import (
    charges_of,
    events_of,
    make_address,
    make_customer,
    make_payment_method,
    make_subscription,
)


@pytest.fixture
def tier_a(vapi):
    store = vapi.other_store(plan_tier="premium_a")
    store.version = vapi.version
    return store


def _in_retry(api):
    """A charge of two subscriptions (9.00 and 3.00) whose payment failed."""
    customer = make_customer(api)
    method = make_payment_method(api, customer, processor_payment_method_token="pm_declined")
    address = make_address(api, customer)
    first = make_subscription(api, address, price=Decimal("9.00"))
    second = make_subscription(api, address, price=Decimal("3.00"))
    [charge] = charges_of(api, address.id)
    reply = api.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200 and reply.json()["charge"]["status"].lower() == "error", reply.text
    return address, charge.id, first, second, method


def _charge(api, charge_id):
    return api.get(f"/charges/{charge_id}", version="2021-11").json()["charge"]


def _cancel(api, subscription_id):
    reply = api.post(f"/subscriptions/{subscription_id}/cancel", json={"cancellation_reason": "too much tea"})
    assert reply.status_code == 200, reply.text


def test_a_cancelled_subscription_leaves_its_charge_in_retry_which_costs_the_rest(tier_a):
    address, charge_id, first, second, _ = _in_retry(tier_a)
    before = _charge(tier_a, charge_id)
    assert before["subtotal_price"] == "12.00"
    _cancel(tier_a, first.id)
    after = _charge(tier_a, charge_id)
    assert [line["purchase_item_id"] for line in after["line_items"]] == [second.id]
    assert after["subtotal_price"] == "3.00"
    # Still in retry, as it was: status, attempts and retry date stay.
    assert (after["status"], after["charge_attempts"], after["retry_date"]) == (
        "error", before["charge_attempts"], before["retry_date"])
    assert ("charge/updated", charge_id) in events_of(tier_a, charge_id)
    # The subscription filter no longer finds the charge through the cancelled item.
    listed = tier_a.get("/charges", params={"purchase_item_id": first.id}, version="2021-11").json()["charges"]
    assert charge_id not in [c["id"] for c in listed]


def test_the_retry_then_takes_only_what_is_left(tier_a):
    from sqlalchemy import select

    from rebill.models import sandbox_payments
    address, charge_id, first, _, method = _in_retry(tier_a)
    _cancel(tier_a, first.id)
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    paid = tier_a.post(f"/charges/{charge_id}/process", json={}, version="2021-11")
    assert paid.status_code == 200 and paid.json()["charge"]["status"] == "success", paid.text
    with tier_a.db.read() as conn:
        amounts = list(conn.execute(select(sandbox_payments.c.amount).where(
            sandbox_payments.c.store_id == tier_a.store.id, sandbox_payments.c.operation == "charge")
            .order_by(sandbox_payments.c.id)).scalars())
    assert amounts[-1] == Decimal(300)  # minor units: 3.00, not 12.00


def test_a_charge_in_retry_left_with_nothing_is_deleted(tier_a):
    address, charge_id, first, second, _ = _in_retry(tier_a)
    _cancel(tier_a, first.id)
    assert tier_a.delete(f"/subscriptions/{second.id}").status_code in (200, 204)
    assert tier_a.get(f"/charges/{charge_id}").status_code == 404
    assert ("charge/deleted", charge_id) in events_of(tier_a, charge_id)
    assert [c.status for c in charges_of(tier_a, address.id)] == []
