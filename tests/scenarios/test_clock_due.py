"""A test clock advance stops only where something is due (domain/billing/due.py), and does
the same work at the same moments, in the same order, as a walk of one day at a time; by
hours it runs what falls due at the hour it falls due (decisions §6.11, §6.12)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

import pytest
from sqlalchemy import select, update

from rebill.domain.billing import due, travel
from rebill.domain.billing import run as billing
from rebill.domain.payment.gateway import GatewayUnavailable
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.domain.store import clock as store_clock
from rebill.models import charges, events, orders, stores
from tests.builders import charges_of
from tests.scenarios.conftest import advance as _advance
from tests.scenarios.conftest import subscriber as _subscriber

START = date(2027, 1, 20)  # at() puts the clock at noon UTC
NOON = time(12, tzinfo=timezone.utc)


def _noon(day: date) -> datetime:
    return datetime.combine(day, NOON)


def _events(api, *topics):
    stmt = select(events.c.topic, events.c.created_at).where(events.c.store_id == api.store.id)
    if topics:
        stmt = stmt.where(events.c.topic.in_(topics))
    with api.db.read() as conn:
        return [tuple(row) for row in conn.execute(stmt.order_by(events.c.id))]


def _offset(api):
    with api.db.read() as conn:
        return conn.execute(select(stores.c.clock_offset_seconds).where(stores.c.id == api.store.id)).scalar()


def _quiet(api):
    """The store tells no upcoming charges (those are stops of their own, tested below), so the
    stops counted are the payments' alone."""
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(upcoming_notice_days=0))


@pytest.fixture
def counted(monkeypatch, api):
    """Counts the advance's looks (``due.next_due``) and billing runs, with the store's time
    of each run (the store quiet: ``_quiet``)."""
    _quiet(api)
    seen = {"looks": 0, "runs": []}
    look, run_store = due.next_due, billing.run_store

    def counting_look(unit, *sources):
        seen["looks"] += 1
        return look(unit, *sources)

    def counting_run(db, gateway, store, now, **kw):
        seen["runs"].append(now())
        return run_store(db, gateway, store, now, **kw)
    monkeypatch.setattr(due, "next_due", counting_look)
    monkeypatch.setattr(billing, "run_store", counting_run)
    return seen


def test_a_hundred_years_on_an_empty_store_is_one_look_and_no_billing_run(api, counted):
    clock = _advance(api, days=36_500)
    assert counted == {"looks": 1, "runs": []}
    assert clock["today"] == (api.clock.now() + timedelta(days=36_500)).date().isoformat()


def test_a_hundred_years_by_hours_on_an_empty_store_is_one_look_and_no_billing_run(api, counted):
    clock = _advance(api, hours=travel.MOST_HOURS)
    assert counted == {"looks": 1, "runs": []}
    assert clock["now"].startswith((api.clock.now() + timedelta(days=36_500)).date().isoformat())


def test_advances_stop_a_century_before_the_calendars_end_and_the_store_still_works_there(api):
    """Found by an audit: repeated advances reached 9999-12-31, and then the next advance, the
    delivery schedule, a subscription create and the billing run answered 500."""
    moves = 0
    while True:
        reply = api.post("/store/clock/advance", json={"days": 36_500})
        if reply.status_code != 200:
            break
        moves += 1
        assert moves < 100
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"]["days"][0].startswith("would take the store's today past 9899-12-31")
    for body in ({"to": "9999-12-31"}, {"hours": 876_000}):
        refused = api.post("/store/clock/advance", json=body)
        assert refused.status_code == 422, refused.text
    assert api.post("/store/clock/advance", json={"to": "9899-12-31"}).status_code == 200
    assert api.post("/store/clock/advance", json={"days": 1}).status_code == 422
    from tests.builders import make_address
    address = make_address(api)
    made = api.post("/subscriptions", json={"address_id": address.id, "product_title": "Late", "price": "1.00",
                                            "order_interval_unit": "month", "order_interval_frequency": 1,
                                            "charge_interval_frequency": 1})
    assert made.status_code == 201, made.text
    schedule = api.get(f"/customers/{address.customer_id}/delivery_schedule")
    assert schedule.status_code == 200, schedule.text


def test_a_monthly_subscription_is_billed_on_its_dates_at_the_walks_moments_with_one_run_each(api, at, counted):
    at(START)
    address, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    clock = _advance(api, to="2028-01-15")
    assert clock["paid"] == 12
    months = [date(2027, m, 1) for m in range(2, 13)] + [date(2028, 1, 1)]
    # A step is 24 h from the start (noon UTC): each charge is paid at noon of its date, as
    # the day-by-day walk paid it, and the advance stopped on those days only.
    assert counted["runs"] == [_noon(day) for day in months]
    paid = [(c.scheduled_at, c.processed_at) for c in charges_of(api, address.id) if c.status == "success"]
    assert paid == [(day, _noon(day)) for day in months]
    with api.db.read() as conn:
        made = conn.execute(select(orders.c.scheduled_at, orders.c.processed_at).where(
            orders.c.store_id == api.store.id).order_by(orders.c.id)).all()
    assert [tuple(row) for row in made] == [(day, _noon(day)) for day in months]
    assert [c.scheduled_at for c in charges_of(api, address.id) if c.status == "queued"] == [date(2028, 2, 1)]


def test_a_declined_charge_is_retried_on_its_dunning_days_and_nowhere_else(api, at, counted):
    at(START)
    _, subscription = _subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    clock = _advance(api, days=60)
    assert clock["failed"] == 8
    # NOTE: decisions §6.12, attempts on D, D+1, D+7, ..., D+37.
    days = [date(2027, 2, 1) + timedelta(days=n) for n in (0, 1, 7, 13, 19, 25, 31, 37)]
    assert [at for _, at in _events(api, "charge/failed")] == [_noon(day) for day in days]
    assert counted["runs"] == [_noon(day) for day in days]
    assert api.get(f"/subscriptions/{subscription.id}").json()["subscription"]["status"] == "cancelled"


def test_an_uncaptured_authorization_is_told_6_days_after_it_was_made(api, at, counted):
    at(START)
    _subscriber(api, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=2))
    _advance(api, days=20)
    authorized = _noon(START + timedelta(days=2))
    assert _events(api, "charge/uncaptured") == [("charge/uncaptured", authorized + timedelta(days=6))]
    # Its capture window closes the moment after 7 x 24 h: the walk's next stop (a day's) closes
    # it, once (sweep.py ``close_lapsed``).
    closed = authorized + timedelta(days=8)
    assert _events(api, "charge/authorization_lapsed") == [("charge/authorization_lapsed", closed)]
    assert counted["runs"] == [authorized, authorized + timedelta(days=6), closed]


def test_a_prepaid_charges_orders_are_processed_on_their_dates(api, at, counted):
    at(START)
    day = START + timedelta(days=3)
    _subscriber(api, next_charge_scheduled_at=day, charge_interval_frequency=3, order_interval_frequency=1)
    _advance(api, days=75)
    dates = [day, date(2027, 2, 23), date(2027, 3, 23)]
    with api.db.read() as conn:
        made = conn.execute(select(orders.c.scheduled_at, orders.c.status, orders.c.processed_at).where(
            orders.c.store_id == api.store.id).order_by(orders.c.id)).all()
    assert [tuple(row) for row in made] == [(d, "success", _noon(d)) for d in dates]
    assert counted["runs"] == [_noon(d) for d in dates]


def _story(api):
    """Every kind of due work the billing run does, from START: payments, retries, prepaid
    orders, an authorization left uncaptured."""
    _subscriber(api, next_charge_scheduled_at=START + timedelta(days=2))
    _subscriber(api, token="pm_declined", next_charge_scheduled_at=START + timedelta(days=3))
    _subscriber(api, next_charge_scheduled_at=START + timedelta(days=4), charge_interval_frequency=3,
                order_interval_frequency=1)
    _subscriber(api, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=5))
    _subscriber(api, next_charge_scheduled_at=START)  # due already when the advance starts


def _history(api):
    """The store's charges, orders and events as times and states (ids differ per store)."""
    with api.db.read() as conn:
        made = conn.execute(select(charges.c.scheduled_at, charges.c.status, charges.c.processed_at,
                                   charges.c.authorized_at, charges.c.charge_attempts, charges.c.retry_date,
                                   charges.c.error_type, charges.c.total_price)
                            .where(charges.c.store_id == api.store.id).order_by(charges.c.id)).all()
        sent = conn.execute(select(orders.c.scheduled_at, orders.c.status, orders.c.processed_at)
                            .where(orders.c.store_id == api.store.id).order_by(orders.c.id)).all()
    return [tuple(r) for r in made], [tuple(r) for r in sent], _events(api)


def _bill_now(api, run_store):
    store = api.store
    return run_store(api.db, SandboxGateway(api.db, api.clock.now), store,
                     store_clock.clock_for(store, api.clock.now))


def test_one_advance_does_what_a_walk_of_one_day_at_a_time_with_a_run_each_day_does(api, at, monkeypatch):
    run_store = billing.run_store
    at(START)
    walked = api.other_store()
    jumped = api.other_store()
    _story(walked)
    _story(jumped)
    for _ in range(120):
        _advance(walked, days=1)
        _bill_now(walked, run_store)  # the old walk's run on every day, due or not
    runs = []
    monkeypatch.setattr(billing, "run_store", lambda *a, **kw: runs.append(1) or run_store(*a, **kw))
    clock = _advance(jumped, days=120)
    assert clock["today"] == (START + timedelta(days=120)).isoformat()
    assert _history(jumped) == _history(walked)
    topics = {topic for topic, _ in _events(jumped)}
    assert {"charge/paid", "charge/failed", "charge/max_retries_reached", "order/processed",
            "charge/uncaptured"} <= topics
    assert len(runs) < 60  # stops on the days something was due (notices included), not 120
    # Nothing due was left behind: a billing run now finds nothing to do.
    before = _history(jumped)
    assert _bill_now(jumped, run_store).processed == 0
    assert _history(jumped) == before


def test_by_hours_a_date_is_billed_at_midnight_in_the_stores_timezone(api, at, counted):
    at(START)  # noon UTC, 07:00 in New York
    shop = api.other_store(timezone="America/New_York")
    _quiet(shop)
    address, _ = _subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1))
    assert _advance(shop, hours=16)["paid"] == 0  # 04:00 UTC, 23:00 in New York
    clock = _advance(shop, hours=2)
    # `now` in UTC as every 2021-11 datetime (decisions §2.4), `today` the store's own date.
    assert clock["paid"] == 1 and clock["now"] == f"{START + timedelta(days=1)}T06:00:00+00:00"
    assert clock["today"] == (START + timedelta(days=1)).isoformat()
    midnight = datetime(2027, 1, 21, 5, tzinfo=timezone.utc)  # midnight in New York
    [paid] = [c for c in charges_of(shop, address.id) if c.status == "success"]
    assert paid.processed_at == midnight
    assert counted["runs"] == [midnight]
    assert counted["looks"] == 3  # the first advance's one, then one before and one after the stop
    old = shop.post("/store/clock/advance", json={"hours": 1}, version="2021-01").json()["store_clock"]
    assert old["now"] == f"{START + timedelta(days=1)}T07:00:00"  # 2021-01: no offset


def test_by_hours_an_authorization_is_told_uncaptured_at_the_hour_it_turns_6_days_old(api, at, counted):
    at(START)
    _subscriber(api, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=1))
    _advance(api, hours=12)  # midnight: authorized
    authorized = datetime.combine(START + timedelta(days=1), time(0), tzinfo=timezone.utc)
    _advance(api, hours=6 * 24 - 1)
    assert _events(api, "charge/uncaptured") == []
    _advance(api, hours=1)
    assert _events(api, "charge/uncaptured") == [("charge/uncaptured", authorized + timedelta(days=6))]
    assert counted["runs"] == [authorized, authorized + timedelta(days=6)]
    # Its capture window closes the moment after 7 x 24 h: by hours, at the hour after.
    _advance(api, hours=25)
    closed = authorized + timedelta(days=7, hours=1)
    assert _events(api, "charge/authorization_lapsed") == [("charge/authorization_lapsed", closed)]
    assert counted["runs"] == [authorized, authorized + timedelta(days=6), closed]


def test_the_progress_callback_hears_each_stop_and_the_end(api, at):
    at(START)
    _quiet(api)
    _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    heard = []
    travel.advance(api.db, SandboxGateway(api.db, api.clock.now), api.clock.now, api.store.id, to=date(2027, 4, 15),
                   progress=heard.append)
    assert heard == [date(2027, 2, 1), date(2027, 3, 1), date(2027, 4, 1), date(2027, 4, 15)]


def test_an_abandoned_claim_is_finished_at_the_next_step(api, at, counted):
    at(START)
    address, _ = _subscriber(api, next_charge_scheduled_at=START + timedelta(days=30))
    [queued] = charges_of(api, address.id)
    with api.db.write() as conn:  # a manual process that died after its claim
        conn.execute(update(charges).where(charges.c.id == queued.id)
                     .values(claimed_by="dead-run", claimed_at=api.clock.now()))
    assert _advance(api, days=3)["paid"] == 1
    assert counted["runs"] == [_noon(START + timedelta(days=1))]
    [paid] = [c for c in charges_of(api, address.id) if c.id == queued.id]
    assert paid.status == "success" and paid.claimed_by is None


class _Unreachable:
    name = "sandbox"

    def charge(self, payment):
        raise GatewayUnavailable("no answer")


def test_work_a_run_cannot_finish_is_tried_at_each_step_and_the_advance_still_ends(api, at, counted):
    at(START)
    address, _ = _subscriber(api, next_charge_scheduled_at=START + timedelta(days=1))
    now, summary = travel.advance(api.db, _Unreachable(), api.clock.now, api.store.id, days=5)
    assert now == _noon(START + timedelta(days=5)) and summary.processed == 0
    # The claim stays (no answer is known); each later day asks again, as the walk did.
    assert counted["runs"] == [_noon(START + timedelta(days=n)) for n in range(1, 6)]
    [charge] = charges_of(api, address.id)
    assert charge.status == "queued" and charge.claimed_by is not None


@pytest.mark.parametrize("body, message", [
    ({"hours": 0}, "must be a whole number of hours, at least 1"),
    ({"hours": -5}, "must be a whole number of hours, at least 1"),
    ({"hours": travel.MOST_HOURS + 1}, f"must be at most {travel.MOST_HOURS}"),
    ({"hours": True}, "must be an integer"),
    ({"hours": 1.5}, "must be an integer"),
    ({"hours": "two"}, "must be an integer"),
    ({"hours": 10**30}, "is out of range"),
])
def test_bad_hours_are_refused_with_the_field_named_and_move_nothing(api, body, message):
    reply = api.post("/store/clock/advance", json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json() == {"errors": {"hours": [message]}}
    assert _offset(api) == 0


@pytest.mark.parametrize("body", [{"days": 1, "hours": 2}, {"to": "2099-01-01", "hours": 2},
                                  {"days": 1, "to": "2099-01-01", "hours": 2}])
def test_hours_with_days_or_to_is_refused_naming_each(api, body):
    reply = api.post("/store/clock/advance", json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json() == {"errors": {name: ["give one of days, to or hours"] for name in body}}
    assert _offset(api) == 0


def test_hours_null_counts_as_not_sent(api):
    assert _advance(api, days=2, hours=None)["today"] == (api.clock.now() + timedelta(days=2)).date().isoformat()


def test_a_keyed_advance_whose_answer_was_lost_is_not_run_again_with_nothing_due(api, monkeypatch):
    """Found by an audit: a keyed advance with nothing due moved the clock in transactions that
    never marked its key (no unit, no event), so after a lost answer the repeat, a minute on,
    moved the clock a second time. The move marks it: the repeat answers 409, one day moved."""
    from rebill.api import idempotency

    async def lost(*args, **kwargs):
        return None
    keyed = {"Idempotency-Key": "advance-lost"}
    with monkeypatch.context() as patched:
        patched.setattr(idempotency, "finish_soon", lost)  # the process died before storing the answer
        assert api.post("/store/clock/advance", json={"days": 1}, headers=keyed).status_code == 200
    moved = _offset(api)
    api.clock.advance(timedelta(seconds=61))
    again = api.post("/store/clock/advance", json={"days": 1}, headers=keyed)
    assert again.status_code == 409 and "answer was lost" in again.json()["errors"], again.text
    assert _offset(api) == moved
