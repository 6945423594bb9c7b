"""The billing run's sweeps (domain/billing/sweep.py) read what is due, then change it in a later
statement; on PostgreSQL a request or another run may change those rows in between (the
statement waits for their row locks, then sees them as committed). Each change asks again what
made its rows due. Found by an audit on PostgreSQL; here the stale read is made by replacing the
first look with one taken before the change, on both databases."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from rebill.domain.billing import sweep
from rebill.domain.unit import Unit
from rebill.models import charges, events, orders, stores
from tests.api.test_charges_money_back import _processed
from tests.api.test_orders import prepaid
from tests.builders import events_of


def _topic_count(api, topic, resource_id):
    with api.db.read() as conn:
        return len(list(conn.execute(select(events.c.id).where(
            events.c.store_id == api.store.id, events.c.topic == topic, events.c.resource_id == resource_id))))


def test_an_order_moved_later_while_its_release_waited_stays_queued(api, monkeypatch):
    """A delayed order answered 200 with its new date was sent at once."""
    first, second, _ = prepaid(api)  # second: a week from today
    api.clock.advance(timedelta(days=7))  # its date has come...
    later = (api.clock.now() + timedelta(days=7)).date().isoformat()
    moved = api.put(f"/orders/{second.id}", json={"scheduled_at": later})  # ... and it is moved on
    assert moved.status_code == 200, moved.text
    monkeypatch.setattr(sweep, "_due_orders", lambda unit: [second.id])  # read before the move
    with api.db.write() as conn:
        assert sweep.release_queued_orders(Unit(conn, api.store, api.clock.now())) == []
    body = api.get(f"/orders/{second.id}", version="2021-11").json()["order"]
    assert (body["status"], body["scheduled_at"][:10]) == ("queued", later)
    assert ("order/processed", second.id) not in events_of(api, second.id)


def test_an_order_moved_out_of_the_notice_window_while_its_notice_waited_is_told_later(api, monkeypatch):
    """Moved 24 days ahead while the run waited, it was told then, and marked told for the new date."""
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(upcoming_notice_days=3))
    _, second, _ = prepaid(api)  # a week from today
    api.clock.advance(timedelta(days=5))  # two days ahead: within the notice
    later = (api.clock.now() + timedelta(days=24)).date().isoformat()
    assert api.put(f"/orders/{second.id}", json={"scheduled_at": later}).status_code == 200
    real = sweep._untold
    monkeypatch.setattr(sweep, "_untold", lambda unit, table: [second.id] if table is orders else real(unit, table))
    with api.db.write() as conn:
        _, told = sweep.tell_upcoming(Unit(conn, api.store, api.clock.now()))
    assert told == [] and _topic_count(api, "order/upcoming", second.id) == 0
    with api.db.read() as conn:
        assert conn.execute(select(orders.c.upcoming_told_for).where(orders.c.id == second.id)).scalar() is None


def test_an_authorization_told_by_another_run_meanwhile_is_not_told_again(api, monkeypatch):
    """Overlapping runs told one authorization three times, each having read it untold."""
    tier_a = api.other_store(plan_tier="premium_a")
    pending = _processed(tier_a, token="authorize_only")
    assert pending["status"].lower() == "pending"
    tier_a.clock.advance(timedelta(days=6, hours=1))
    with tier_a.db.write() as conn:  # the other run
        assert sweep.flag_uncaptured(Unit(conn, tier_a.store, tier_a.clock.now())) == [pending["id"]]
    real, calls = sweep._uncaptured, []

    def read_before_the_other_run_committed(unit):
        calls.append(1)
        return [pending["id"]] if len(calls) == 1 else real(unit)
    monkeypatch.setattr(sweep, "_uncaptured", read_before_the_other_run_committed)
    with tier_a.db.write() as conn:
        assert sweep.flag_uncaptured(Unit(conn, tier_a.store, tier_a.clock.now())) == []
    assert _topic_count(tier_a, "charge/uncaptured", pending["id"]) == 1


def test_a_lapse_closed_by_another_run_or_captured_meanwhile_is_not_closed_again(api, monkeypatch):
    """The lapse sweep (close_lapsed) reads, locks, then reads again, as flag_uncaptured: an
    authorization another run closed meanwhile, or one captured meanwhile, is not told again."""
    tier_a = api.other_store(plan_tier="premium_a")
    pending = _processed(tier_a, token="authorize_only")
    captured = _processed(tier_a, token="authorize_only")
    tier_a.clock.advance(timedelta(days=7, seconds=2))  # both windows closed
    assert tier_a.post(f"/charges/{captured['id']}/capture_payment", json={}).status_code == 422  # too late
    with tier_a.db.write() as conn:  # as if captured by a request that won the race meanwhile
        conn.execute(update(charges).where(charges.c.id == captured["id"]).values(status="success"))
    with tier_a.db.write() as conn:  # the other run
        assert sweep.close_lapsed(Unit(conn, tier_a.store, tier_a.clock.now())) == [pending["id"]]
    real, calls = sweep._lapsed, []

    def read_before_the_other_run_committed(unit):
        calls.append(1)
        return [(pending["id"], 0), (captured["id"], 0)] if len(calls) == 1 else real(unit)
    monkeypatch.setattr(sweep, "_lapsed", read_before_the_other_run_committed)
    with tier_a.db.write() as conn:
        assert sweep.close_lapsed(Unit(conn, tier_a.store, tier_a.clock.now())) == []
    assert _topic_count(tier_a, sweep.LAPSED, pending["id"]) == 1
    assert _topic_count(tier_a, sweep.LAPSED, captured["id"]) == 0
