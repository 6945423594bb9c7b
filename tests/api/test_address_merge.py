"""`POST /addresses/merge` (spec 01 Addresses merge and Limits, decisions §5.14, §5.16,
docs/api-choices.md "Address merge and delivery schedule"): every purchase item of the sources
moves to the target with its skips, the charges follow, and any bad entry fails the whole merge
with nothing changed."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from rebill.domain.schedule.audit import differences
from rebill.domain.unit import Unit
from rebill.models import purchase_items, skips
from tests.builders import (
    charges_of,
    events_of,
    make_address,
    make_customer,
    make_onetime,
    make_subscription,
)

NOT_IN_VERSION = {"errors": "This resource is not implemented in the requested API version"}


def days(api: Any, n: int) -> date:
    return api.clock.now().date() + timedelta(days=n)


def weekly(api: Any, address: Any, *, on: int = 7, **overrides: Any) -> Any:
    """Day cadences keep date arithmetic free of month ends, whatever the shared clock says."""
    return make_subscription(api, address, **{"order_interval_unit": "day", "charge_interval_frequency": 7,
                                              "order_interval_frequency": 7, "next_charge_scheduled_at": days(api, on),
                                              **overrides})


def body(target: Any, *sources: Any, **extra: Any) -> dict[str, Any]:
    return {"target_address": {"id": target.id}, "source_addresses": [{"id": s.id} for s in sources], **extra}


def items_table(api: Any) -> list[tuple[Any, ...]]:
    """Every purchase item of the store as stored, and every skip."""
    with api.db.read() as conn:
        rows = conn.execute(select(purchase_items).where(purchase_items.c.store_id == api.store.id)
                            .order_by(purchase_items.c.id)).all()
        skipped = conn.execute(select(skips).where(skips.c.store_id == api.store.id).order_by(skips.c.id)).all()
    return [tuple(r) for r in rows] + [tuple(r) for r in skipped]


def subscription(api: Any, subscription_id: int) -> dict[str, Any]:
    return api.get(f"/subscriptions/{subscription_id}").json()["subscription"]


def assert_consistent(api: Any, *address_ids: int) -> None:
    with api.db.read() as conn:
        assert differences(Unit(conn, api.store, api.clock.now()), list(address_ids)) == []


def skip_on(api: Any, address: Any, when: date, *item_ids: int) -> None:
    reply = api.post(f"/addresses/{address.id}/charges/skip", json={"date": when.isoformat(),
                                                                    "purchase_item_ids": list(item_ids)})
    assert reply.status_code == 200, reply.text


# Moving ---------------------------------------------------------------------------------------

def test_merge_moves_every_subscription_and_onetime_of_the_sources_to_the_target(api):
    customer = make_customer(api)
    target, first, second = (make_address(api, customer) for _ in range(3))
    kept = weekly(api, target, on=3)
    moved = [weekly(api, first, on=5), weekly(api, second, on=6)]
    once = make_onetime(api, second, next_charge_scheduled_at=days(api, 4))

    reply = api.post("/addresses/merge", json=body(target, first, second))

    assert reply.status_code == 200, reply.text
    assert reply.json()["address"]["id"] == target.id
    assert reply.json()["address"]["customer_id"] == customer.id
    for item in moved:
        assert subscription(api, item.id)["address_id"] == target.id
    assert api.get(f"/onetimes/{once.id}").json()["onetime"]["address_id"] == target.id
    assert subscription(api, kept.id)["address_id"] == target.id
    # The charges followed: nothing queued on the sources, one charge per date on the target.
    assert charges_of(api, first.id) == [] and charges_of(api, second.id) == []
    queued = {c.scheduled_at: [line["purchase_item_id"] for line in c.line_items] for c in charges_of(api, target.id)}
    assert queued == {days(api, 3): [kept.id], days(api, 4): [once.id], days(api, 5): [moved[0].id],
                      days(api, 6): [moved[1].id]}
    assert_consistent(api, target.id, first.id, second.id)


def test_merge_joins_charges_of_the_same_date_into_one(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    mine, theirs = weekly(api, target, on=5), weekly(api, source, on=5)
    before = [c.id for c in charges_of(api, target.id)]

    assert api.post("/addresses/merge", json=body(target, source)).status_code == 200

    (charge,) = charges_of(api, target.id)
    assert charge.id == before[0]  # the target's charge of the date keeps its id
    assert [line["purchase_item_id"] for line in charge.line_items] == [mine.id, theirs.id]
    assert_consistent(api, target.id, source.id)


def test_skips_move_with_their_items(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    sub = weekly(api, source, on=7)
    skip_on(api, source, days(api, 14), sub.id)

    assert api.post("/addresses/merge", json=body(target, source)).status_code == 200

    skipped = [c for c in charges_of(api, target.id) if c.status == "skipped"]
    assert [(c.scheduled_at, [line["purchase_item_id"] for line in c.line_items]) for c in skipped] == [
        (days(api, 14), [sub.id])]
    assert charges_of(api, source.id) == []
    with api.db.read() as conn:
        assert conn.execute(select(skips.c.address_id).where(skips.c.purchase_item_id == sub.id)).scalars().all() == [
            target.id]
    assert_consistent(api, target.id, source.id)


def test_cancelled_subscriptions_move_too(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    sub = weekly(api, source)
    assert api.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "too much"}).status_code == 200

    assert api.post("/addresses/merge", json=body(target, source, next_charge_date=days(api, 2).isoformat())
                    ).status_code == 200

    moved = subscription(api, sub.id)
    assert (moved["address_id"], moved["status"], moved["next_charge_scheduled_at"]) == (target.id, "cancelled", None)


def test_events_one_updated_per_moved_item_and_charge_events_from_the_replan(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    sub, once = weekly(api, source), make_onetime(api, source, next_charge_scheduled_at=days(api, 7))
    (old_charge,) = charges_of(api, source.id)
    start = len(events_of(api))

    assert api.post("/addresses/merge", json=body(target, source)).status_code == 200

    recorded = events_of(api)[start:]
    (new_charge,) = charges_of(api, target.id)
    assert sorted(recorded) == sorted([("subscription/updated", sub.id), ("onetime/updated", once.id),
                                       ("charge/deleted", old_charge.id), ("charge/created", new_charge.id)])
    # NOTE: docs/api-choices.md, the target address itself does not change: no address event.
    assert not [topic for topic, _ in recorded if topic.startswith("address/")]


# next_charge_date ---------------------------------------------------------------------------------

def test_next_charge_date_applies_to_the_moved_subscriptions_only(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    kept = weekly(api, target, on=3)
    moved = weekly(api, source, on=5)
    once = make_onetime(api, source, next_charge_scheduled_at=days(api, 4))

    reply = api.post("/addresses/merge", json=body(target, source, next_charge_date=days(api, 9).isoformat()))

    assert reply.status_code == 200, reply.text
    assert subscription(api, moved.id)["next_charge_scheduled_at"] == days(api, 9).isoformat()
    assert subscription(api, kept.id)["next_charge_scheduled_at"] == days(api, 3).isoformat()
    assert api.get(f"/onetimes/{once.id}").json()["onetime"]["next_charge_scheduled_at"].startswith(
        days(api, 4).isoformat())
    assert [c.scheduled_at for c in charges_of(api, target.id)] == [days(api, 3), days(api, 4), days(api, 9)]
    assert_consistent(api, target.id, source.id)


def test_a_monthly_subscription_keeps_the_new_date_as_its_anchor(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    sub = make_subscription(api, source)
    when = days(api, 20)

    assert api.post("/addresses/merge", json=body(target, source, next_charge_date=when.isoformat())
                    ).status_code == 200

    with api.db.read() as conn:
        anchor = conn.execute(select(purchase_items.c.anchor_day).where(purchase_items.c.id == sub.id)).scalar_one()
    assert anchor == when.day


def test_next_charge_date_may_be_today_but_not_in_the_past(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    sub = weekly(api, source)
    before = items_table(api)

    reply = api.post("/addresses/merge", json=body(target, source, next_charge_date=days(api, -1).isoformat()))

    assert reply.status_code == 422
    assert reply.json() == {"errors": {"next_charge_date": ["must not be in the past"]}}
    assert items_table(api) == before
    assert api.post("/addresses/merge", json=body(target, source, next_charge_date=days(api, 0).isoformat())
                    ).status_code == 200
    assert subscription(api, sub.id)["next_charge_scheduled_at"] == days(api, 0).isoformat()


# Deleting the sources --------------------------------------------------------------------------

def test_delete_source_addresses_deletes_them_after_the_move(api):
    customer = make_customer(api)
    target, first, second = (make_address(api, customer) for _ in range(3))
    sub = weekly(api, first)

    reply = api.post("/addresses/merge", json=body(target, first, second, delete_source_addresses=True))

    assert reply.status_code == 200, reply.text
    assert api.get(f"/addresses/{first.id}").status_code == 404
    assert api.get(f"/addresses/{second.id}").status_code == 404
    assert subscription(api, sub.id)["address_id"] == target.id
    assert ("address/deleted", first.id) in events_of(api, first.id)
    assert ("address/deleted", second.id) in events_of(api, second.id)
    assert_consistent(api, target.id)


@pytest.mark.parametrize("flag", [False, None])
def test_without_the_flag_the_sources_stay_empty(api, flag):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    weekly(api, source)
    extra = {} if flag is None else {"delete_source_addresses": flag}

    assert api.post("/addresses/merge", json=body(target, source, **extra)).status_code == 200

    assert api.get(f"/addresses/{source.id}").status_code == 200
    assert api.get("/subscriptions", params={"address_id": source.id}).json()["subscriptions"] == []


# All or nothing ----------------------------------------------------------------------------------

def test_another_presentment_currency_fails_the_whole_merge_with_nothing_moved(client, database, clock):
    from tests.conftest import make_api
    api = make_api(client, database, clock, presentment_currencies=["EUR"])
    customer = make_customer(api)
    target = make_address(api, customer)
    same = make_address(api, customer)
    euros = make_address(api, customer, presentment_currency="EUR")
    weekly(api, same)
    weekly(api, euros)
    make_onetime(api, euros)
    before = (items_table(api), charges_of(api, target.id), charges_of(api, same.id), charges_of(api, euros.id))
    events_before = events_of(api)

    reply = api.post("/addresses/merge", json=body(target, same, euros, delete_source_addresses=True))

    assert reply.status_code == 422
    assert reply.json() == {"errors": {"source_addresses": {"1": {"id": [
        "address has another presentment currency (EUR; the target's is USD)"]}}}}
    assert (items_table(api), charges_of(api, target.id), charges_of(api, same.id), charges_of(api, euros.id)) == before
    assert events_of(api) == events_before
    assert api.get(f"/addresses/{same.id}").status_code == 200


def test_addresses_of_another_customer_cannot_be_merged(api):
    target = make_address(api)
    other = make_address(api)  # another customer
    weekly(api, other)
    before = items_table(api)

    reply = api.post("/addresses/merge", json=body(target, other))

    assert reply.status_code == 422
    assert reply.json() == {"errors": {"source_addresses": {"0": {"id": ["address belongs to another customer"]}}}}
    assert items_table(api) == before


def test_the_target_cannot_be_a_source_and_a_source_comes_once(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)

    reply = api.post("/addresses/merge", json=body(target, source, target, source))

    assert reply.status_code == 422
    assert reply.json() == {"errors": {"source_addresses": {
        "1": {"id": ["must not be the target address"]}, "2": {"id": ["is duplicated in this request"]}}}}


def test_unknown_and_other_stores_addresses_are_named(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    foreign = make_address(api.other_store())

    reply = api.post("/addresses/merge", json={"target_address": {"id": foreign.id},
                                               "source_addresses": [{"id": source.id}, {"id": 999_999_999}]})
    assert reply.status_code == 422
    assert reply.json() == {"errors": {"target_address": {"id": ["address not found"]},
                                       "source_addresses": {"1": {"id": ["address not found"]}}}}

    reply = api.post("/addresses/merge", json={"target_address": {"id": target.id},
                                               "source_addresses": [{"id": foreign.id}]})
    assert reply.json() == {"errors": {"source_addresses": {"0": {"id": ["address not found"]}}}}


# The body ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("sent", "errors"), [
    ({}, {"target_address": ["is required"], "source_addresses": ["is required"]}),
    ({"target_address": None, "source_addresses": None},
     {"target_address": ["is required"], "source_addresses": ["is required"]}),
    ({"target_address": 5, "source_addresses": {"id": 1}},
     {"target_address": ["must be an object"], "source_addresses": ["must be an array"]}),
    ({"target_address": {}, "source_addresses": [{}, 7, {"id": "x"}]},
     {"target_address": {"id": ["is required"]},
      "source_addresses": {"0": {"id": ["is required"]}, "1": ["must be an object"],
                           "2": {"id": ["must be an integer"]}}}),
    ({"target_address": {"id": 1}, "source_addresses": []}, {"source_addresses": ["cannot be empty"]}),
    ({"target_address": {"id": 1}, "source_addresses": [{"id": n} for n in range(2, 13)]},
     {"source_addresses": ["has too many items (at most 10)"]}),
    ({"target_address": {"id": 1}, "source_addresses": [{"id": 2}], "delete_source_addresses": "yes",
      "next_charge_date": "soon"},
     {"delete_source_addresses": ["must be a boolean"], "next_charge_date": ["must be a date (YYYY-MM-DD)"]}),
])
def test_bad_bodies_name_every_bad_field(api, sent, errors):
    reply = api.post("/addresses/merge", json=sent)
    assert reply.status_code == 422
    assert reply.json() == {"errors": errors}


def test_ten_sources_are_allowed(api):
    customer = make_customer(api)
    target = make_address(api, customer)
    sources = [make_address(api, customer) for _ in range(10)]
    subs = [weekly(api, s, on=1 + n) for n, s in enumerate(sources)]

    reply = api.post("/addresses/merge", json=body(target, *sources, delete_source_addresses=True))

    assert reply.status_code == 200, reply.text
    assert {subscription(api, s.id)["address_id"] for s in subs} == {target.id}
    assert len(charges_of(api, target.id)) == 10
    assert_consistent(api, target.id)


# Versions and scopes -------------------------------------------------------------------------------

def test_merge_is_a_2021_11_endpoint(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    reply = api.post("/addresses/merge", json=body(target, source), version="2021-01")
    assert reply.status_code == 501
    assert reply.json() == NOT_IN_VERSION


def test_merge_needs_write_customers(api):
    customer = make_customer(api)
    target, source = make_address(api, customer), make_address(api, customer)
    reading = api.post("/addresses/merge", json=body(target, source), token=api.token_with("read_customers"))
    assert reading.status_code == 403
    assert reading.json() == {"errors": "This token lacks the scope this endpoint needs: write_customers"}
    writing = api.post("/addresses/merge", json=body(target, source), token=api.token_with("write_customers"))
    assert writing.status_code == 200
