"""Review of the subscription area against the spec: each test holds one discrepancy found
and fixed (decisions §5, 03-real-fields)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from rebill.domain.billing import run as billing
from rebill.domain.payment.sandbox import SandboxGateway
from tests.api.test_subscriptions import create_sub, day, errors_of, today
from tests.builders import charges_of, make_address, make_customer, make_payment_method


def _pay_next(api: Any, address_id: int) -> None:
    """Pay the address's earliest queued charge through the billing run's own path."""
    charge = next(c for c in charges_of(api, address_id) if c.status == "queued")
    [paid] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge.id], api.clock.now())
    assert paid.status == "success", paid


def _paying_address(api: Any) -> Any:
    customer = make_customer(api)
    make_payment_method(api, customer)
    return make_address(api, customer)


# decisions §5.4: prepaid items are not skippable -------------------------------------------------

def test_a_prepaid_subscription_shows_is_skippable_false(vapi):
    sub = create_sub(vapi, charge_interval_frequency=3)
    assert sub["is_skippable"] is False
    assert vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]["is_skippable"] is False


def test_a_subscription_that_is_not_prepaid_keeps_its_own_is_skippable(vapi):
    assert create_sub(vapi)["is_skippable"] is True
    assert create_sub(vapi, is_skippable=False)["is_skippable"] is False


# decisions §5.5: the limit of charges reached on update ----------------------------------------

def test_lowering_the_charge_limit_to_the_charges_made_expires_the_subscription(vapi):
    address = _paying_address(vapi)
    sub = create_sub(vapi, address, next_charge_scheduled_at=day(vapi, 0), expire_after_specific_number_of_charges=5)
    _pay_next(vapi, address.id)
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"expire_after_specific_number_of_charges": 1})
    assert response.status_code == 200, response.text
    updated = response.json()["subscription"]
    assert (updated["status"].lower(), updated["next_charge_scheduled_at"], updated["has_queued_charges"]) == \
        ("expired", None, False)
    assert [c.status for c in charges_of(vapi, address.id)] == ["success"]
    # Its last active subscription gone, the customer is inactive again (decisions §5.16).
    customer = vapi.get(f"/customers/{address.customer_id}", version="2021-01").json()["customer"]
    assert (customer["status"], customer["number_active_subscriptions"]) == ("INACTIVE", 0)


# decisions §5.16: the creation date of an interval change is the store's date ------------------

def test_an_interval_change_counts_from_the_creation_date_in_the_stores_timezone(api):
    # 2026-01-15T12:00Z is already 16 January in Auckland (UTC+13): the store's creation date.
    auckland = api.other_store(timezone="Pacific/Auckland")
    local_today = today(api) + timedelta(days=1)
    sub = create_sub(auckland, next_charge_scheduled_at=(local_today + timedelta(days=20)).isoformat())
    response = auckland.put(f"/subscriptions/{sub['id']}", json={
        "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "week"})
    assert response.status_code == 200, response.text
    assert response.json()["subscription"]["next_charge_scheduled_at"] == (local_today + timedelta(weeks=1)).isoformat()


# decisions §5.5: a subscription that has had its charges cannot come back ----------------------

def test_activating_a_cancelled_subscription_that_has_had_all_its_charges_answers_422(vapi):
    address = _paying_address(vapi)
    sub = create_sub(vapi, address, next_charge_scheduled_at=day(vapi, 0), expire_after_specific_number_of_charges=5)
    _pay_next(vapi, address.id)
    assert vapi.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "moving"}).status_code == 200
    assert vapi.put(f"/subscriptions/{sub['id']}", json={"expire_after_specific_number_of_charges": 1}).status_code == 200
    assert errors_of(vapi.post(f"/subscriptions/{sub['id']}/activate")) == {
        "status": ["the subscription has had its 1 charges (expire_after_specific_number_of_charges)"]}
    assert vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]["status"].lower() == "cancelled"


def test_a_change_of_an_item_read_before_it_moved_answers_409_and_changes_nothing(api, monkeypatch):
    """Item services read the item, lock its address and read it again: one that moved to
    another address in between is a lost race (409), never a change replanned at the wrong
    address (found by a PostgreSQL stress run)."""
    from rebill.domain.subscription import service as sub_service
    from tests.builders import make_address as _address
    from tests.builders import make_customer as _customer
    from tests.builders import make_subscription as _subscription
    customer = _customer(api)
    home, other = _address(api, customer), _address(api, customer)
    sub = _subscription(api, home)
    real, reads = sub_service.get, []

    def get(unit, item_id, kind="subscription"):
        found = real(unit, item_id, kind)
        reads.append(found.address_id)
        if len(reads) == 1:  # between the first read and the lock, the item moves
            moved = api.post(f"/subscriptions/{item_id}/change_address", json={"address_id": other.id})
            assert moved.status_code == 200, moved.text
        return found
    if api.db.engine.dialect.name == "sqlite":
        pytest.skip("SQLite: one writer at a time, the move cannot come between the read and the lock")
    monkeypatch.setattr(sub_service, "get", get)
    reply = api.delete(f"/subscriptions/{sub.id}")
    monkeypatch.undo()
    assert reply.status_code == 409, reply.text
    assert api.get(f"/subscriptions/{sub.id}").json()["subscription"]["address_id"] == other.id
