"""A charge a billing run is paying holds its address's date (decisions §5.9, §6.3; found by an
audit on PostgreSQL): an item moved onto that date, or a code applied to or removed from that
charge, answers 409 instead of a second charge for the address and date (both were paid, with
two shipping fees) or a change the payment ignores."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import update

from rebill.models import charges
from tests.builders import charges_of, make_discount, make_onetime, make_subscription
from tests.scenarios.conftest import subscriber


def _claimed(api, charge_id):
    with api.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge_id)
                     .values(claimed_by="a-billing-run", claimed_at=api.clock.now()))


def _released(api, charge_id):
    with api.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge_id).values(claimed_by=None, claimed_at=None))


@pytest.mark.parametrize("how", ["set_next_charge_date", "update", "change_address", "onetime", "create"])
def test_nothing_joins_the_date_of_a_charge_being_paid(api, at, how):
    at(date(2027, 1, 10))
    address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 1, 12))
    [paying] = charges_of(api, address.id)
    later = make_subscription(api, address, next_charge_scheduled_at=date(2027, 1, 20))
    once = make_onetime(api, address, next_charge_scheduled_at=date(2027, 1, 20))
    _claimed(api, paying.id)
    when = "2027-01-12"
    if how == "set_next_charge_date":
        reply = api.post(f"/subscriptions/{later.id}/set_next_charge_date", json={"date": when})
    elif how == "update":
        reply = api.put(f"/subscriptions/{later.id}", json={"next_charge_scheduled_at": when})
    elif how == "change_address":
        reply = api.post(f"/subscriptions/{later.id}/change_address",
                         json={"address_id": address.id, "next_charge_scheduled_at": when})
    elif how == "onetime":
        reply = api.put(f"/onetimes/{once.id}", json={"next_charge_scheduled_at": when})
    else:
        reply = api.post("/onetimes", json={"address_id": address.id, "product_title": "Mug", "price": "3.00",
                                            "next_charge_scheduled_at": when})
    assert reply.status_code == 409, reply.text
    assert [c.id for c in charges_of(api, address.id) if c.scheduled_at == date(2027, 1, 12)] == [paying.id]
    _released(api, paying.id)  # the payment recorded (or given up): the same request goes through
    assert api.post(f"/subscriptions/{later.id}/set_next_charge_date", json={"date": when}).status_code == 200
    assert [c.id for c in charges_of(api, address.id) if c.scheduled_at == date(2027, 1, 12)] == [paying.id]


@pytest.mark.parametrize("action", ["apply_discount", "remove_discount"])
def test_a_code_is_neither_applied_to_nor_removed_from_a_charge_being_paid(api, at, action):
    at(date(2027, 1, 10))
    address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 1, 12))
    [paying] = charges_of(api, address.id)
    discount_id = make_discount(api)
    if action == "remove_discount":
        assert api.post(f"/charges/{paying.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    _claimed(api, paying.id)
    body = {"discount_id": discount_id} if action == "apply_discount" else {}
    reply = api.post(f"/charges/{paying.id}/{action}", json=body)
    assert reply.status_code == 409, reply.text
    [same] = charges_of(api, address.id)
    assert same.discount_id == (discount_id if action == "remove_discount" else None)


@pytest.mark.parametrize("how", ["change_address", "merge"])
def test_an_item_whose_charge_is_being_paid_does_not_move_to_another_address(api, at, how):
    """Found by an audit on PostgreSQL: moved while its charge was being paid, the item was on
    the failed charge's retry at its old address and on a new charge at its new one: both were
    paid for the same date. The move is a lost race now (409); once the payment is recorded the
    item moves, or (failed) waits for the retry there (422)."""
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    from tests.builders import make_address
    at(date(2027, 1, 10))
    home, item = subscriber(api, token="tok_declined", next_charge_scheduled_at=date(2027, 1, 10))
    customer = type("C", (), {"id": home.customer_id})()
    elsewhere = make_address(api, customer)
    [paying] = charges_of(api, home.id)
    _claimed(api, paying.id)

    def move():
        if how == "change_address":
            return api.post(f"/subscriptions/{item.id}/change_address", json={"address_id": elsewhere.id})
        return api.post("/addresses/merge", json={"target_address": {"id": elsewhere.id},
                                                  "source_addresses": [{"id": home.id}]})
    refused = move()
    assert refused.status_code == 409, refused.text
    assert api.get(f"/subscriptions/{item.id}").json()["subscription"]["address_id"] == home.id
    _released(api, paying.id)
    [failed] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [paying.id],
                               api.clock.now())
    assert failed.status == "error"
    assert move().status_code == 422  # waits for the retry at its address
    assert [c.id for c in charges_of(api, elsewhere.id)] == []


def test_a_batch_task_answers_409_as_its_request_would(api, at):
    """Found by an audit: an `onetime_create` task put an item on the date of a charge a billing
    run was paying (its request answers 409): a second queued charge beside it, and both were
    paid. The task answers 409 now; the batch's other tasks are made."""
    from tests.api.test_async_batches import run_one
    at(date(2027, 1, 10))
    address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 1, 12))
    other, _ = subscriber(api, next_charge_scheduled_at=date(2027, 1, 12))
    [paying] = charges_of(api, address.id)
    _claimed(api, paying.id)
    body = {"product_title": "Mug", "price": "3.00", "quantity": 1, "next_charge_scheduled_at": "2027-01-12"}
    ran = run_one(api, "onetime_create", [{**body, "address_id": address.id}, {**body, "address_id": other.id}])
    assert [t["result"]["status_code"] for t in ran] == [409, 201], ran
    assert [c.id for c in charges_of(api, address.id) if c.scheduled_at == date(2027, 1, 12)] == [paying.id]
    assert len([c for c in charges_of(api, other.id) if c.scheduled_at == date(2027, 1, 12)]) == 1
