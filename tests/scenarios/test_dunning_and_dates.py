"""A subscription and the charge in error that holds it (decisions §6.3, §6.4, §5.16; found by
a conformance audit): activating a subscription that its last failed retry cancelled gives it
a queued charge again, and a next date set while a charge in error holds the subscription is
refused, naming the charge, instead of showing a date no charge has."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import update

from rebill.domain.charge.model import item_ids
from rebill.models import stores
from tests.api.test_charges import only
from tests.api.test_charges_skip import next_date, skip_date
from tests.builders import charges_of
from tests.scenarios.conftest import advance, pay_with, subscriber


def _dunning(api, action):
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(
            dunning={"first_retry_days": 1, "retry_every_days": 2, "max_attempts": 3, "on_max_retries": action}))


def _new_card(api):
    pay_with(api, "pm_new_card")


def test_a_subscription_cancelled_by_its_last_retry_is_charged_again_once_activated(api, at):
    _dunning(api, "cancel_subscriptions")
    at(date(2027, 1, 20))
    address, subscription = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    assert advance(api, to="2027-02-10")["failed"] == 3  # Feb 1, 2 and 4: closed
    [closed] = charges_of(api, address.id)
    assert (closed.status, closed.error_type, closed.retry_date) == ("error", "CLOSED_MAX_RETRIES_REACHED", None)
    assert api.get(f"/subscriptions/{subscription.id}").json()["subscription"]["status"] == "cancelled"

    _new_card(api)
    reply = api.post(f"/subscriptions/{subscription.id}/activate", json={})
    assert reply.status_code == 200, reply.text
    item = reply.json()["subscription"]
    assert item["status"] == "active" and item["next_charge_scheduled_at"].startswith("2027-02-11")
    assert item["has_queued_charges"] is True
    # It left the closed charge, which held nothing else (so it is gone, charge/deleted), and
    # a queued charge on the restored date follows.
    [queued] = charges_of(api, address.id)
    assert (queued.status, queued.scheduled_at, item_ids(queued.line_items)) == \
        ("queued", date(2027, 2, 11), [subscription.id])
    assert advance(api, to="2027-02-12")["paid"] == 1
    after = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert after["status"] == "active" and after["has_queued_charges"] is True
    assert after["next_charge_scheduled_at"] > "2027-02-12"


def test_a_closed_charge_holding_two_subscriptions_keeps_the_one_not_activated(api, at):
    from tests.builders import make_subscription

    _dunning(api, "cancel_subscriptions")
    at(date(2027, 1, 20))
    address, first = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1), price="10.00")
    second = make_subscription(api, address, next_charge_scheduled_at=date(2027, 2, 1), price="7.00")
    assert advance(api, to="2027-02-10")["failed"] == 3
    [closed] = charges_of(api, address.id)
    assert sorted(item_ids(closed.line_items)) == sorted([first.id, second.id])
    assert api.post(f"/subscriptions/{first.id}/activate", json={}).status_code == 200
    by_status = {c.status: c for c in charges_of(api, address.id)}
    assert by_status["error"].id == closed.id and item_ids(by_status["error"].line_items) == [second.id]
    assert by_status["error"].subtotal_price < closed.subtotal_price  # its money without the first
    assert item_ids(by_status["queued"].line_items) == [first.id]


@pytest.mark.parametrize("how", ["set_next_charge_date", "update", "change_address"])
def test_a_next_date_is_refused_while_a_charge_in_retry_holds_the_subscription(api, at, how):
    at(date(2027, 1, 10))
    address, subscription = subscriber(api, token="pm_insufficient_funds", next_charge_scheduled_at=date(2027, 1, 12))
    assert advance(api, to="2027-01-12")["failed"] == 1
    [charge] = charges_of(api, address.id)
    assert charge.status == "error" and charge.retry_date == date(2027, 1, 13)
    if how == "set_next_charge_date":
        reply, field = api.post(f"/subscriptions/{subscription.id}/set_next_charge_date",
                                json={"date": "2027-01-20"}), "date"
    elif how == "update":
        reply, field = api.put(f"/subscriptions/{subscription.id}",
                               json={"next_charge_scheduled_at": "2027-01-20"}), "next_charge_scheduled_at"
    else:
        reply, field = api.post(f"/subscriptions/{subscription.id}/change_address",
                                json={"address_id": address.id, "next_charge_scheduled_at": "2027-01-20"}), \
            "next_charge_scheduled_at"
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {field: [f"purchase item {subscription.id} waits for the retry of charge "
                                              f"{charge.id}"]}
    item = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert item["next_charge_scheduled_at"].startswith("2027-01-12")
    # The retry pays it and the cadence goes on from the charge's date (decisions §6.3).
    _new_card(api)
    assert advance(api, to="2027-01-14")["paid"] == 1
    after = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert after["next_charge_scheduled_at"].startswith("2027-02-12")


def test_with_do_nothing_a_next_date_names_the_closed_charge_to_process(api, at):
    _dunning(api, "do_nothing")
    at(date(2027, 1, 20))
    address, subscription = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    assert advance(api, to="2027-02-10")["failed"] == 3
    [closed] = charges_of(api, address.id)
    reply = api.post(f"/subscriptions/{subscription.id}/set_next_charge_date", json={"date": "2027-03-01"})
    assert reply.status_code == 422
    assert reply.json()["errors"] == {"date": [f"purchase item {subscription.id} is held by charge {closed.id}, "
                                               "whose last retry failed: process that charge first"]}


def test_a_renewal_passes_over_a_date_skipped_ahead(api, at):
    """Skipping a later date (POST /addresses/{id}/charges/skip) and then paying the current
    charge: the subscription's next date is the first cadence date not skipped, the date of its
    queued charge."""
    at(date(2027, 1, 10))
    address, sub = subscriber(api, order_interval_unit="day", charge_interval_frequency=7, order_interval_frequency=7,
                              next_charge_scheduled_at=date(2027, 1, 17))
    first = date(2027, 1, 17)
    ahead = skip_date(api, address.id, {"date": (first + timedelta(days=7)).isoformat(), "subscription_ids": [sub.id]})
    assert ahead.status_code == 200, ahead.text
    assert advance(api, to=first.isoformat())["paid"] == 1
    after = first + timedelta(days=14)
    assert next_date(api, sub.id).startswith(after.isoformat())
    assert only(api, address.id).scheduled_at == after
    assert only(api, address.id, "skipped").scheduled_at == first + timedelta(days=7)


def _closed_and_processed_again(api, at, action):
    """A premium store (processing needs tier A) whose card always fails: its charge closed after
    the last retry, with the store's ``action``, then processed by hand and failing again.
    Returns the store, the address, the subscription, the closed charge and the process's answer."""
    tier = api.other_store(plan_tier="premium_a")
    _dunning(tier, action)
    at(date(2027, 1, 20))
    address, subscription = subscriber(tier, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    assert advance(tier, to="2027-02-10")["failed"] == 3
    [closed] = charges_of(tier, address.id)
    reply = tier.post(f"/charges/{closed.id}/process", json={})
    assert reply.status_code == 200, reply.text
    return tier, address, subscription, closed, reply.json()["charge"]


def test_a_closed_charge_processed_by_hand_and_failing_again_is_not_told_closed_twice(api, at):
    """decisions §6.4: `charge/max_retries_reached` and the store's action come when the last
    allowed attempt fails, once (found by an audit: every later failed manual process of the
    closed charge told it again)."""
    from sqlalchemy import func, select

    from rebill.models import events

    tier, _, _, closed, charge = _closed_and_processed_again(api, at, "do_nothing")
    assert (charge["status"], charge["error_type"], charge["charge_attempts"]) == \
        ("error", "CLOSED_MAX_RETRIES_REACHED", 4)
    with tier.db.read() as conn:
        told = conn.execute(select(func.count()).select_from(events).where(
            events.c.store_id == tier.store.id, events.c.topic == "charge/max_retries_reached",
            events.c.resource_id == closed.id)).scalar()
        failed = conn.execute(select(func.count()).select_from(events).where(
            events.c.store_id == tier.store.id, events.c.topic == "charge/failed",
            events.c.resource_id == closed.id)).scalar()
    assert (told, failed) == (1, 4)


def test_a_closed_charge_whose_subscriptions_it_cancelled_fails_again_and_stays(api, at):
    """decisions §6.4: "a processing call can still retry it afterwards" (found by an audit: the
    failed retry took the subscriptions its max-retries action had cancelled for ones cancelled
    while it was paid, emptied the charge and deleted it, answering 404)."""
    tier, address, subscription, closed, charge = _closed_and_processed_again(api, at, "cancel_subscriptions")
    assert (charge["id"], charge["status"], charge["charge_attempts"]) == (closed.id, "error", 4)
    [still] = charges_of(tier, address.id)
    assert still.id == closed.id and item_ids(still.line_items) == [subscription.id]
    assert still.total_price == closed.total_price
    _new_card(tier)
    paid = tier.post(f"/charges/{closed.id}/process", json={})
    assert paid.status_code == 200 and paid.json()["charge"]["status"] == "success", paid.text


def _in_retry(api, at, **kw):
    at(date(2027, 1, 10))
    address, subscription = subscriber(api, token="pm_insufficient_funds", next_charge_scheduled_at=date(2027, 1, 12),
                                       **kw)
    assert advance(api, to="2027-01-12")["failed"] == 1
    [charge] = charges_of(api, address.id)
    assert charge.status == "error"
    return address, subscription, charge


def test_expiring_the_only_subscription_of_a_charge_in_retry_deletes_the_charge(api, at):
    at(date(2027, 1, 1))
    address, subscription = subscriber(api, next_charge_scheduled_at=date(2027, 1, 5), order_interval_unit="day",
                                       order_interval_frequency=7, charge_interval_frequency=7)
    assert advance(api, to="2027-01-05")["paid"] == 1  # one charge made
    pay_with(api, "pm_insufficient_funds")
    assert advance(api, to="2027-01-12")["failed"] == 1
    [retry] = [c for c in charges_of(api, address.id) if c.status == "error"]
    reply = api.put(f"/subscriptions/{subscription.id}", json={"expire_after_specific_number_of_charges": 1})
    assert reply.status_code == 200 and reply.json()["subscription"]["status"] == "expired", reply.text
    assert [c.id for c in charges_of(api, address.id) if c.status == "error"] == []
    _new_card(api)
    assert advance(api, to="2027-01-20")["paid"] == 0  # its retry date passed: nothing billed
    assert api.get(f"/charges/{retry.id}").status_code == 404


def test_a_new_cadence_is_refused_while_a_retry_holds_the_subscription(api, at):
    address, subscription, charge = _in_retry(api, at)
    reply = api.put(f"/subscriptions/{subscription.id}", json={
        "charge_interval_frequency": 2, "order_interval_frequency": 2, "order_interval_unit": "week"})
    assert reply.status_code == 422, reply.text
    [messages] = reply.json()["errors"].values()
    assert messages == [f"purchase item {subscription.id} waits for the retry of charge {charge.id}"]


def test_a_new_quantity_is_what_the_retry_bills(api, at):
    """Found by an audit: the retry billed the old line, unless another item's cancel happened
    to compute the charge again."""
    address, subscription, charge = _in_retry(api, at, price="10.00")
    reply = api.put(f"/subscriptions/{subscription.id}", json={"quantity": 3})
    assert reply.status_code == 200, reply.text
    [again] = charges_of(api, address.id)
    assert again.id == charge.id and again.status == "error"
    assert again.line_items[0]["quantity"] == 3 and again.subtotal_price == 3 * charge.subtotal_price
    _new_card(api)
    assert advance(api, to="2027-01-14")["paid"] == 1  # the retry
    paid = api.get(f"/charges/{charge.id}").json()["charge"]
    assert paid["status"] == "success" and paid["total_price"] == f"{again.total_price:.2f}"


@pytest.mark.parametrize("order_day", [None, 1])
def test_activated_onto_tomorrow_the_cadence_runs_from_that_date(api, at, order_day):
    """Found by an audit: activated after its date had passed, a monthly subscription was
    charged tomorrow (the 6th) and then renewed on its old anchor day (the 1st), 26 days later.
    A new date is the cadence's from then on, as any date set by hand (its order day too)."""
    at(date(2027, 1, 20))
    address, subscription = subscriber(api, next_charge_scheduled_at=date(2027, 2, 1),
                                       **({"order_day_of_month": order_day} if order_day else {}))
    assert api.post(f"/subscriptions/{subscription.id}/cancel", json={"cancellation_reason": "x"}).status_code == 200
    advance(api, to="2027-02-05")
    reply = api.post(f"/subscriptions/{subscription.id}/activate", json={})
    assert reply.status_code == 200, reply.text
    shown = reply.json()["subscription"]
    assert shown["next_charge_scheduled_at"].startswith("2027-02-06")
    assert shown["order_day_of_month"] == (6 if order_day else None)
    assert advance(api, to="2027-02-06")["paid"] == 1
    after = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert after["next_charge_scheduled_at"].startswith("2027-03-06")
    assert [c.scheduled_at for c in charges_of(api, address.id) if c.status == "queued"] == [date(2027, 3, 6)]


def test_activated_onto_its_old_date_keeps_its_cadence(api, at):
    at(date(2027, 1, 20))
    address, subscription = subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    api.post(f"/subscriptions/{subscription.id}/cancel", json={"cancellation_reason": "x"})
    advance(api, to="2027-01-25")
    assert api.post(f"/subscriptions/{subscription.id}/activate", json={}).status_code == 200
    assert advance(api, to="2027-02-01")["paid"] == 1
    after = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert after["next_charge_scheduled_at"].startswith("2027-03-01")


def test_a_deferred_regeneration_writes_on_the_store_clock(api, at):
    """Found by an audit: after `commit=false`, the regeneration 5 s later stamped the charge's
    `updated_at` and its `charge/updated` event with the real time on a store whose clock was
    ahead, before the charge's own creation, so `updated_at_min` syncs never saw the change."""
    from rebill.jobs import regenerate
    at(date(2027, 1, 20))
    address, subscription = subscriber(api, next_charge_scheduled_at=date(2027, 3, 1))
    advance(api, to="2027-02-10")
    reply = api.put(f"/subscriptions/{subscription.id}", json={"quantity": 2}, params={"commit": "false"})
    assert reply.status_code == 200, reply.text
    api.clock.advance(seconds=6)  # the real clock: the 5-second window is real waiting
    assert regenerate.run_due(api.db, api.clock, store_id=api.store.id) == 1
    [charge] = charges_of(api, address.id)
    assert charge.total_price == 25 and charge.updated_at.date() == date(2027, 2, 10)
    events = api.get("/events", params={"object_type": "charge", "object_id": charge.id}).json()["events"]
    updated = [e for e in events if e["verb"] == "updated"]
    assert updated and all(e["created_at"].startswith("2027-02-10") for e in updated)
    changed = api.get("/charges", params={"updated_at_min": "2027-02-10"}).json()["charges"]
    assert [c["id"] for c in changed] == [charge.id]


def test_a_run_until_a_past_date_still_retries_the_charges_whose_retry_date_has_come(api, at):
    """decisions §6.12: `--until` bounds the queued charges; errored ones are due on their retry
    date (found by an audit: `rebill bill --until` before today left a due retry alone)."""
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    _dunning(api, "cancel_subscriptions")
    at(date(2027, 1, 20))
    address, _ = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    later, _ = subscriber(api, token="pm_ok", next_charge_scheduled_at=date(2027, 2, 2))
    assert advance(api, to="2027-02-01")["failed"] == 1
    [failed] = charges_of(api, address.id)
    assert (failed.status, failed.retry_date) == ("error", date(2027, 2, 2))
    at(date(2027, 2, 2))
    _new_card(api)
    summary = billing.run_store(api.db, SandboxGateway(api.db, api.clock.now), api.store, api.clock.now,
                                until=date(2027, 2, 1))
    assert summary.processed == 1 and summary.paid == 1  # the retry; not the queued charge of Feb 2
    assert [c.status for c in charges_of(api, address.id) if c.id == failed.id] == ["success"]
    assert [c.status for c in charges_of(api, later.id)] == ["queued"]
    assert billing.count_due(api.db, api.store, api.clock.now(), date(2027, 2, 1)) == 0


def test_a_closed_charge_paid_later_records_no_empty_update_of_its_cancelled_subscription(api, at):
    """The charge still pays for it (its count and restore date move, which no version shows): no
    `subscription/updated` with `updated_attributes: []` (found by an audit)."""
    from sqlalchemy import select

    from rebill.models import events
    _dunning(api, "cancel_subscriptions")
    at(date(2027, 1, 20))
    address, subscription = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    assert advance(api, to="2027-02-10")["failed"] == 3
    [closed] = charges_of(api, address.id)
    _new_card(api)
    with api.db.read() as conn:
        last = conn.execute(select(events.c.id).order_by(events.c.id.desc()).limit(1)).scalar_one()
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    [paid] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [closed.id], api.clock.now())
    assert [c.status for c in charges_of(api, address.id) if c.id == closed.id] == ["success"]
    with api.db.read() as conn:
        recorded = conn.execute(select(events.c.topic, events.c.updated_attributes).where(
            events.c.id > last, events.c.resource_id == subscription.id,
            events.c.topic.like("subscription/%"))).all()
    assert recorded == []
