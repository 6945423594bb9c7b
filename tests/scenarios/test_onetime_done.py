"""A one-time item is one line on the charge of its date, then done (decisions §5.6; found by
an audit): once paid it cannot change; while the charge holding it waits for a retry, a change
would show what the retry will not bill; a next date onto a date it skipped would leave it on
the skipped charge only. Each is refused with 422 and nothing changes."""

from __future__ import annotations

from datetime import date

from rebill.domain.charge.model import item_ids
from tests.builders import charges_of, events_of, make_address, make_customer, make_onetime, make_payment_method
from tests.scenarios.conftest import advance, pay_with


def _buyer(api, token="pm_ok"):
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    return make_address(api, customer)


def _updated(api, onetime_id):
    return [topic for topic, resource in events_of(api) if topic == "onetime/updated" and resource == onetime_id]


def test_a_paid_one_time_item_cannot_change(api, at):
    at(date(2027, 1, 10))
    address = _buyer(api)
    item = make_onetime(api, address, next_charge_scheduled_at=date(2027, 1, 12), price="4.00")
    assert advance(api, to="2027-01-12")["paid"] == 1
    told = _updated(api, item.id)  # its status became processed
    for body in ({"next_charge_scheduled_at": "2027-02-01"}, {"quantity": 5}, {"price": "9.99"}):
        reply = api.put(f"/onetimes/{item.id}", json=body)
        assert reply.status_code == 422, reply.text
        assert reply.json()["errors"] == {next(iter(body)): ["the one-time item is processed: it was charged and "
                                                             "is done"]}
    shown = api.get(f"/onetimes/{item.id}").json()["onetime"]
    assert (shown["quantity"], shown["price"]) == (1, "4.00")
    assert _updated(api, item.id) == told and [c.status for c in charges_of(api, address.id)] == ["success"]
    # Sending back what it shows is no change, its date (now past) too, in both versions (found
    # by an audit: the date answered "must not be in the past").
    assert api.put(f"/onetimes/{item.id}", json={"quantity": 1, "price": "4.00"}).status_code == 200
    advance(api, to="2027-01-20")
    for version in ("2021-11", "2021-01"):
        shown = api.get(f"/onetimes/{item.id}", version=version).json()["onetime"]
        reply = api.put(f"/onetimes/{item.id}", version=version,
                        json={"next_charge_scheduled_at": shown["next_charge_scheduled_at"], "quantity": 1})
        assert reply.status_code == 200, reply.text
    assert _updated(api, item.id) == told


def test_a_one_time_item_waiting_for_a_retry_cannot_change(api, at):
    at(date(2027, 1, 10))
    address = _buyer(api, token="pm_insufficient_funds")
    item = make_onetime(api, address, next_charge_scheduled_at=date(2027, 1, 12), price="10.00")
    assert advance(api, to="2027-01-12")["failed"] == 1
    [charge] = charges_of(api, address.id)
    assert charge.status == "error"
    for body in ({"next_charge_scheduled_at": "2027-02-05", "price": "12.00"}, {"price": "12.00"}):
        # The date when it is among the changes, else the field changed.
        reply = api.put(f"/onetimes/{item.id}", json=body)
        assert reply.status_code == 422, reply.text
        assert reply.json()["errors"] == {next(iter(body)): [
            f"purchase item {item.id} waits for the retry of charge {charge.id}"]}
    pay_with(api, "pm_ok")
    assert advance(api, to="2027-01-14")["paid"] == 1
    shown = api.get(f"/onetimes/{item.id}").json()["onetime"]
    assert shown["price"] == "10.00" and shown["next_charge_scheduled_at"].startswith("2027-01-12")
    assert [(c.status, c.total_price) for c in charges_of(api, address.id)][0][0] == "success"


def test_a_skipped_one_time_item_moved_leaves_its_skip_and_may_move_back(api, at):
    """One item, one date (decisions §5.6): moved off the date it skipped, it is queued on the new
    one alone, its skip gone (found by an audit: it sat on both charges), so moving it back is a
    move like any other, not onto a date it skipped."""
    at(date(2027, 1, 10))
    address = _buyer(api)
    item = make_onetime(api, address, next_charge_scheduled_at=date(2027, 1, 22))
    [charge] = charges_of(api, address.id)
    assert api.post(f"/charges/{charge.id}/skip", json={}).status_code == 200
    moved = api.put(f"/onetimes/{item.id}", json={"next_charge_scheduled_at": "2027-01-23"})
    assert moved.status_code == 200, moved.text
    assert [(c.status, c.scheduled_at, item_ids(c.line_items)) for c in charges_of(api, address.id)] == [
        ("queued", date(2027, 1, 23), [item.id])]
    back = api.put(f"/onetimes/{item.id}", json={"next_charge_scheduled_at": "2027-01-22"})
    assert back.status_code == 200, back.text
    assert [(c.status, c.scheduled_at, item_ids(c.line_items)) for c in charges_of(api, address.id)] == [
        ("queued", date(2027, 1, 22), [item.id])]
