"""A charge in retry keeps its address (found by an audit): moving a subscription it holds to
another address (change_address, a merge) would leave the retry billing and shipping it to the
old address, deleted perhaps, while the subscription shows the new one. Refused with 422 naming
the charge, as a next date is; once the retry is paid, the move goes through."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace

from tests.builders import charges_of, make_address
from tests.scenarios.conftest import advance, pay_with, subscriber


def _failed(api, at):
    at(date(2027, 1, 10))
    source, sub = subscriber(api, token="pm_insufficient_funds", next_charge_scheduled_at=date(2027, 1, 12))
    assert advance(api, to="2027-01-12")["failed"] == 1
    [charge] = charges_of(api, source.id)
    assert charge.status == "error"
    target = make_address(api, SimpleNamespace(id=source.customer_id))  # the same customer's
    return source, sub, charge, target


def _pay_again(api):
    pay_with(api, "pm_ok")
    assert advance(api, to="2027-01-14")["paid"] == 1


def test_change_address_waits_for_the_retry(api, at):
    source, sub, charge, target = _failed(api, at)
    reply = api.post(f"/subscriptions/{sub.id}/change_address", json={"address_id": target.id})
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"address_id": [f"purchase item {sub.id} waits for the retry of charge {charge.id}"]}
    assert api.get(f"/subscriptions/{sub.id}").json()["subscription"]["address_id"] == source.id
    _pay_again(api)
    moved = api.post(f"/subscriptions/{sub.id}/change_address", json={"address_id": target.id})
    assert moved.status_code == 200, moved.text


def test_a_merge_waits_for_the_retry_and_deletes_nothing(api, at):
    source, sub, charge, target = _failed(api, at)
    reply = api.post("/addresses/merge", json={"target_address": {"id": target.id},
                                              "source_addresses": [{"id": source.id}],
                                              "delete_source_addresses": True})
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"source_addresses": {"0": {"id": [
        f"purchase item {sub.id} waits for the retry of charge {charge.id}"]}}}
    assert api.get(f"/addresses/{source.id}").status_code == 200
    assert api.get(f"/subscriptions/{sub.id}").json()["subscription"]["address_id"] == source.id
    _pay_again(api)
    merged = api.post("/addresses/merge", json={"target_address": {"id": target.id},
                                               "source_addresses": [{"id": source.id}],
                                               "delete_source_addresses": True})
    assert merged.status_code == 200, merged.text
    assert api.get(f"/addresses/{source.id}").status_code == 404
