"""`charge/upcoming` and `order/upcoming` (issue 14): told the store's `upcoming_notice_days`
(default 3) before the date, once per date, again when the date moves; and a test clock
advance stops to tell them and sends the deliveries they make."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

from sqlalchemy import select, update

from rebill.models import charges, events, stores
from tests.builders import charges_of
from tests.receiver import Receiver
from tests.scenarios.conftest import advance, subscriber

START = date(2027, 1, 20)


def _told(api, topic):
    with api.db.read() as conn:
        return [tuple(row) for row in conn.execute(
            select(events.c.resource_id, events.c.created_at).where(
                events.c.store_id == api.store.id, events.c.topic == topic).order_by(events.c.id))]


def _noon(day: date) -> datetime:
    return datetime.combine(day, time(12), tzinfo=timezone.utc)


def _notice_days(api, days):
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(upcoming_notice_days=days))


def test_a_charge_is_told_upcoming_three_days_ahead_once(api, at):
    at(START)
    address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 2, 10))
    [queued] = charges_of(api, address.id)
    advance(api, days=15)  # Feb 4: six days ahead, not yet
    assert _told(api, "charge/upcoming") == []
    advance(api, days=3)  # Feb 7: three days ahead
    assert _told(api, "charge/upcoming") == [(queued.id, _noon(date(2027, 2, 7)))]
    advance(api, days=2)
    assert len(_told(api, "charge/upcoming")) == 1  # once per date


def test_the_notice_days_are_the_stores_and_zero_tells_nothing(api, at):
    at(START)
    _notice_days(api, 7)
    address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 2, 10))
    advance(api, to="2027-02-03")
    assert [at for _, at in _told(api, "charge/upcoming")] == [_noon(date(2027, 2, 3))]
    quiet = api.other_store()
    _notice_days(quiet, 0)
    subscriber(quiet, next_charge_scheduled_at=date(2027, 2, 10))
    advance(quiet, to="2027-02-20")
    assert _told(quiet, "charge/upcoming") == []


def test_a_charge_moved_to_another_date_is_told_again_for_it(api, at):
    at(START)
    address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 1, 22))
    advance(api, hours=1)  # within three days already: told at the first stop
    [first] = _told(api, "charge/upcoming")
    reply = api.post(f"/charges/{first[0]}/change_next_charge_date", json={"next_charge_date": "2027-02-15"},
                     version="2021-01")
    assert reply.status_code == 200, reply.text
    [moved] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    assert moved.id == first[0] and moved.scheduled_at == date(2027, 2, 15)  # the same charge, moved
    advance(api, to="2027-02-09")  # six days ahead
    assert len(_told(api, "charge/upcoming")) == 1
    advance(api, days=3)  # Feb 12
    assert _told(api, "charge/upcoming")[1] == (moved.id, datetime(2027, 2, 12, 13, tzinfo=timezone.utc))


def test_a_prepaid_charges_later_orders_are_told_upcoming(api, at):
    at(START)
    day = START + timedelta(days=2)
    subscriber(api, next_charge_scheduled_at=day, charge_interval_frequency=3, order_interval_frequency=1)
    advance(api, days=2)  # paid: three orders, the first processed, two queued a month apart
    advance(api, to="2027-02-19")  # the second order is on Feb 22
    assert [at for _, at in _told(api, "order/upcoming")] == [_noon(date(2027, 2, 19))]
    advance(api, to="2027-03-19")
    assert [at for _, at in _told(api, "order/upcoming")] == [_noon(date(2027, 2, 19)), _noon(date(2027, 3, 19))]


def test_an_advance_stops_for_a_notice_and_sends_its_delivery(api, at):
    at(START)
    receiver = Receiver().start()
    try:
        made = api.post("/webhooks", json={"address": receiver.url, "topic": "charge/upcoming"})
        assert made.status_code == 201, made.text
        address, _ = subscriber(api, next_charge_scheduled_at=date(2027, 2, 10))
        [queued] = charges_of(api, address.id)
        advance(api, to="2027-02-08")
        assert receiver.topics() == ["charge/upcoming"]
        body = receiver.received[0].json
        assert body["charge"]["id"] == queued.id and body["charge"]["status"] == "queued"
        assert body["charge"]["scheduled_at"].startswith("2027-02-10")
    finally:
        receiver.stop()


def test_a_billing_run_after_the_advance_finds_no_notice_left(api, at):
    at(START)
    subscriber(api, next_charge_scheduled_at=date(2027, 1, 21))
    subscriber(api, next_charge_scheduled_at=date(2027, 1, 25))
    advance(api, days=3)
    with api.db.read() as conn:
        untold = conn.execute(select(charges.c.id).where(
            charges.c.store_id == api.store.id, charges.c.status == "queued",
            charges.c.scheduled_at <= date(2027, 1, 26),
            (charges.c.upcoming_told_for.is_(None)) | (charges.c.upcoming_told_for != charges.c.scheduled_at))).all()
    assert untold == []


def test_two_runs_that_both_read_a_charge_untold_tell_it_once(api, at, monkeypatch):
    """Found by an audit on PostgreSQL: a worker's run and a clock advance's both read an order
    untold and both told it (three `order/upcoming` for one date). Only the rows a run marks
    are told; here the second run's look is made to see what the first already told."""
    from rebill.domain.billing import sweep
    from rebill.domain.unit import Unit
    at(START)
    address, _ = subscriber(api, next_charge_scheduled_at=START + timedelta(days=2))
    [queued] = charges_of(api, address.id)
    with api.db.write() as conn:
        assert sweep.tell_upcoming(Unit(conn, api.store, api.clock.now()))[0] == [queued.id]
    monkeypatch.setattr(sweep, "_untold", lambda unit, table: [queued.id] if table is charges else [])
    with api.db.write() as conn:
        assert sweep.tell_upcoming(Unit(conn, api.store, api.clock.now())) == ([], [])
    assert [resource for resource, _ in _told(api, "charge/upcoming")] == [queued.id]
