"""The test clock (decisions §6.11, §6.12): a sandbox store moves its clock forward and
everything that falls due on the way runs, in order; other stores keep the real time."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from tests.builders import charges_of, events_of, make_address, make_customer, make_subscription
from tests.scenarios.conftest import subscriber as _subscriber


def _advance(api, **body):
    return api.post("/store/clock/advance", json=body)


def test_a_monthly_subscription_renews_for_a_year_as_the_clock_moves(api, at):
    at(date(2027, 1, 20))
    address, subscription = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    reply = _advance(api, to="2028-01-15")
    assert reply.status_code == 200, reply.text
    clock = reply.json()["store_clock"]
    assert clock["today"] == "2028-01-15" and clock["paid"] == 12 and clock["failed"] == 0
    paid = [c.scheduled_at for c in charges_of(api, address.id) if c.status == "success"]
    assert paid == [date(2027, m, 1) for m in range(2, 13)] + [date(2028, 1, 1)]
    item = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert item["next_charge_scheduled_at"].startswith("2028-02-01")
    # The store's "today" moved: a date the real clock still calls future is past for it.
    refused = api.post(f"/subscriptions/{subscription.id}/set_next_charge_date", json={"date": "2027-06-01"})
    assert refused.status_code == 422


def test_a_declined_card_goes_through_every_retry_while_the_clock_moves(api, at):
    at(date(2027, 1, 20))
    address, subscription = _subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    clock = _advance(api, days=50).json()["store_clock"]  # to Mar 11: the eighth attempt is Mar 10
    assert clock["failed"] == 8
    [charge] = [c for c in charges_of(api, address.id) if c.status == "error"]
    assert charge.error_type == "CLOSED_MAX_RETRIES_REACHED" and charge.charge_attempts == 8
    assert api.get(f"/subscriptions/{subscription.id}").json()["subscription"]["status"] == "cancelled"


@pytest.mark.parametrize("action, status", [("do_nothing", "active"), ("cancel_subscriptions", "cancelled"),
                                            ("cancel_subscriptions_and_customer", "cancelled")])
def test_the_stores_action_runs_when_the_last_retry_fails(api, at, action, status):
    from sqlalchemy import update

    from rebill.models import stores
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(
            dunning={"first_retry_days": 1, "retry_every_days": 2, "max_attempts": 3, "on_max_retries": action}))
    at(date(2027, 1, 20))
    address, subscription = _subscriber(api, token="needs_update", next_charge_scheduled_at=date(2027, 2, 1))
    assert _advance(api, days=20).json()["store_clock"]["failed"] == 3
    item = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert item["status"] == status and item["max_retries_reached"] is True


def test_a_card_updated_mid_dunning_pays_on_the_next_retry(api, at):
    from sqlalchemy import update

    from rebill.models import payment_methods
    at(date(2027, 1, 20))
    address, _ = _subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    assert _advance(api, to="2027-02-03").json()["store_clock"]["failed"] == 2  # Feb 1 and Feb 2
    with api.db.write() as conn:
        conn.execute(update(payment_methods).where(payment_methods.c.store_id == api.store.id)
                     .values(processor_payment_method_token="pm_new_card"))
    clock = _advance(api, to="2027-02-10").json()["store_clock"]
    assert clock["paid"] == 1  # the retry of Feb 8
    [charge] = [c for c in charges_of(api, address.id) if c.scheduled_at == date(2027, 2, 1)]
    assert charge.status == "success" and charge.charge_attempts == 3


def test_only_a_sandbox_store_moves_its_clock_and_the_403_comes_before_validation(api):
    live = api.other_store(sandbox=False)
    reply = live.post("/store/clock/advance", json={"days": "not a number"})
    assert reply.status_code == 403
    assert "sandbox" in str(reply.json()["errors"])
    # Before the body is read too (found by an audit: a body that was no object answered 415).
    for raw in (b"notjson", b"[]"):
        odd = live.post("/store/clock/advance", content=raw, headers={"Content-Type": "application/json"})
        assert odd.status_code == 403, odd.text


@pytest.mark.parametrize("body, field", [
    ({"days": 0}, "days"), ({"days": -3}, "days"), ({"days": "two"}, "days"), ({"days": 1.5}, "days"),
    ({"to": "2020-01-01"}, "to"), ({"to": "someday"}, "to"), ({}, "days"), ({"days": 1, "to": "2099-01-01"}, "days"),
    ({"days": 10**30}, "days"),
])
def test_bad_advances_are_refused_and_move_nothing(api, body, field):
    before = api.post("/store/clock/advance", json={"days": 1}).json()["store_clock"]["today"]
    reply = _advance(api, **body)
    assert reply.status_code == 422, reply.text
    assert field in reply.json()["errors"]
    after = _advance(api, days=1).json()["store_clock"]["today"]
    assert date.fromisoformat(after) == date.fromisoformat(before) + timedelta(days=1)


def test_other_stores_keep_the_real_time(api):
    other = api.other_store()
    _advance(api, days=30)
    made = other.post("/customers", json={"email": f"rt{other.store.id}@example.com", "first_name": "R",
                                          "last_name": "T"}).json()["customer"]
    assert made["created_at"].startswith(api.clock.now().date().isoformat())
    mine = api.post("/customers", json={"email": f"tc{api.store.id}@example.com", "first_name": "T",
                                        "last_name": "C"}).json()["customer"]
    assert mine["created_at"].startswith((api.clock.now() + timedelta(days=30)).date().isoformat())


def test_advancing_needs_the_write_orders_scope(api):
    reply = api.post("/store/clock/advance", json={"days": 1}, token=api.token_with("read_orders"))
    assert reply.status_code == 403


# One advance at a time -------------------------------------------------------------------------

def test_an_advance_while_another_holds_the_clock_answers_409_and_the_advances_add_up(api, at):
    # Found by an audit: two advances of 3 days sent at once both answered 200 and the clock
    # moved 3 days (each walked from the same start). Now the second one meets the first's hold.
    from rebill.domain.billing import travel
    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.errors import Conflict

    at(date(2027, 1, 20))
    address, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 1, 22))
    refused = []

    def meanwhile(day: date) -> None:
        if not refused:  # at the first stop of the first advance
            refused.append(_advance(api, days=3))
            with pytest.raises(Conflict):
                travel.advance(api.db, SandboxGateway(api.db, api.clock.now), api.clock.now, api.store.id, days=3)

    now, summary = travel.advance(api.db, SandboxGateway(api.db, api.clock.now), api.clock.now, api.store.id,
                                  days=3, progress=meanwhile)
    assert (refused[0].status_code, refused[0].json()) == (409, {
        "errors": "The store's test clock is already moving: try again once that advance has answered"})
    assert now.date() == date(2027, 1, 23) and summary.paid == 1
    # Released when it ends: the next advance moves on from where the first stopped.
    assert _advance(api, days=3).json()["store_clock"]["today"] == "2027-01-26"
    assert [c.status for c in charges_of(api, address.id)].count("success") == 1


def test_a_hold_left_by_a_dead_advance_lapses(api, at):
    from sqlalchemy import update

    from rebill.domain.billing.travel import LEASE
    from rebill.models import stores
    at(date(2027, 1, 20))
    with api.db.write() as conn:  # an advance whose process died at its last stop
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(
            clock_moving_until=api.clock.now() + LEASE))
    assert _advance(api, days=1).status_code == 409
    assert api.get("/store").status_code == 200  # the rest of the store goes on
    api.clock.advance(LEASE + timedelta(seconds=1))
    reply = _advance(api, days=1)
    assert reply.status_code == 200 and reply.json()["store_clock"]["today"] == "2027-01-21"


def test_an_advance_that_lost_its_hold_stops_and_leaves_the_new_holders_alone(api, at):
    # Found by a review: a walk whose lease lapsed (a stop longer than the lease) went on
    # renewing the lease and, at its end, freed the hold of the advance that took over.
    from sqlalchemy import select, update

    from rebill.domain.billing import travel
    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.errors import Conflict
    from rebill.models import stores

    at(date(2027, 1, 20))
    address, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 1, 22))
    theirs = api.clock.now() + travel.LEASE + timedelta(minutes=1)
    stops = []

    def taken_over(day: date) -> None:
        stops.append(day)
        if len(stops) == 1:  # another advance took the clock after this one's lease lapsed
            with api.db.write() as conn:
                conn.execute(update(stores).where(stores.c.id == api.store.id).values(clock_moving_until=theirs))

    with pytest.raises(Conflict):
        travel.advance(api.db, SandboxGateway(api.db, api.clock.now), api.clock.now, api.store.id, days=40,
                       progress=taken_over)
    assert len(stops) == 1  # it stopped at its next stop, where the clock stays
    with api.db.read() as conn:
        held = conn.execute(select(stores.c.clock_moving_until).where(stores.c.id == api.store.id)).scalar()
    assert held == theirs
    # Nothing after its first stop ran: no charge of a later date was paid.
    assert [c.status for c in charges_of(api, address.id) if c.scheduled_at > stops[0]] == ["queued"]


def test_twenty_advances_at_once_each_200_moved_the_clock_and_each_loser_is_409(api, at):
    from tests.builders import concurrently

    at(date(2027, 1, 20))
    address, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 1, 22))
    replies = concurrently(api, [("POST", "/store/clock/advance", {"days": 3})] * 20)
    statuses = sorted(r.status_code for r in replies)
    moved = statuses.count(200)
    assert moved >= 1 and set(statuses) <= {200, 409}, statuses
    for reply in replies:
        if reply.status_code == 409:
            assert reply.json() == {"errors": "The store's test clock is already moving: try again once that "
                                              "advance has answered"}
    # Every 200 was three days of the clock: none lost, none doubled.
    today = _advance(api, days=1).json()["store_clock"]["today"]
    assert today == (date(2027, 1, 20) + timedelta(days=3 * moved + 1)).isoformat()
    assert [c.status for c in charges_of(api, address.id) if c.scheduled_at == date(2027, 1, 22)] == ["success"]


@pytest.mark.parametrize("body", [{"days": 3}, {"to": "2027-03-15"}])
def test_a_walk_across_the_change_to_summer_time_stops_on_every_date_of_the_store(api, body):
    """decisions §6.12, one advance steps day by day, a date comes at the store's midnight: on
    the spring-forward day (23 hours in New York) a walk of 24-hour steps begun at 23:52 skipped
    the store's March 14, and paid its charge on the 15th (found by an audit)."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo
    ny = api.other_store(timezone="America/New_York")
    api.clock.set(datetime(2027, 3, 13, 4, 52, tzinfo=UTC))  # 23:52 on March 12 in New York
    address, _ = _subscriber(ny, next_charge_scheduled_at=date(2027, 3, 13), order_interval_unit="day",
                             order_interval_frequency=1, charge_interval_frequency=1)
    reply = ny.post("/store/clock/advance", json=body)
    assert reply.status_code == 200, reply.text
    paid = [c for c in charges_of(ny, address.id) if c.status == "success"]
    # Each charge on its own date of the store, each once.
    assert [(c.scheduled_at, c.processed_at.astimezone(ZoneInfo("America/New_York")).date()) for c in paid] == [
        (date(2027, 3, day), date(2027, 3, day)) for day in range(13, 16 if "to" in body else 17)]


def _cancelling_customers(api):
    """Three attempts, then `cancel_subscriptions_and_customer`."""
    from sqlalchemy import update

    from rebill.models import stores
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(dunning={
            "first_retry_days": 1, "retry_every_days": 2, "max_attempts": 3,
            "on_max_retries": "cancel_subscriptions_and_customer"}))


def test_cancel_subscriptions_and_customer_cancels_every_subscription_of_the_customer(api, at):
    """decisions §6.4 (found by an audit: the action did what `cancel_subscriptions` does, and the
    customer's subscription at another address went on being billed)."""

    from rebill.jobs import regenerate
    from tests.builders import make_address, make_customer, make_subscription
    _cancelling_customers(api)
    at(date(2027, 1, 20))
    customer = make_customer(api)
    customer_id = customer.id
    address, failing = _subscriber(api, token="needs_update", customer=customer,
                                   next_charge_scheduled_at=date(2027, 2, 1))
    elsewhere = make_address(api, customer)
    later = make_subscription(api, elsewhere, next_charge_scheduled_at=date(2027, 6, 1))
    # To the third attempt's stop (Feb 4) and no further: the walk's last stop.
    assert _advance(api, to="2027-02-04").json()["store_clock"]["failed"] == 3
    for sub_id, flag in ((failing.id, True), (later.id, False)):
        shown = api.get(f"/subscriptions/{sub_id}").json()["subscription"]
        assert (shown["status"], shown["cancellation_reason"], shown["max_retries_reached"]) == (
            "cancelled", "max retries reached", flag)
    customer = api.get(f"/customers/{customer_id}", version="2021-01").json()["customer"]
    assert customer["status"] == "INACTIVE"
    # The other address's queued charge goes with its regeneration, deferred as after a
    # commit=false update; until then it shows uncommitted changes (and is regenerated if paid).
    [waiting] = charges_of(api, elsewhere.id)
    assert waiting.has_uncommitted_changes
    api.clock.advance(seconds=10)
    regenerate.run_due(api.db, api.clock)
    assert charges_of(api, elsewhere.id) == []


def test_an_advance_runs_the_deferred_regenerations_a_billing_run_left_before_its_next_look(api, at):
    """The same deferral, then the clock moved on before 5 seconds of real time: the advance
    runs it before it looks at what is due (travel._regenerate), not the real-time job."""
    _cancelling_customers(api)
    at(date(2027, 1, 20))
    customer = make_customer(api)
    _subscriber(api, token="needs_update", customer=customer, next_charge_scheduled_at=date(2027, 2, 1))
    elsewhere = make_address(api, customer)
    make_subscription(api, elsewhere, next_charge_scheduled_at=date(2027, 6, 1))
    assert _advance(api, to="2027-02-04").json()["store_clock"]["failed"] == 3
    assert [c.has_uncommitted_changes for c in charges_of(api, elsewhere.id)] == [True]
    assert _advance(api, days=1).status_code == 200
    assert charges_of(api, elsewhere.id) == []


def test_two_charges_of_a_customer_closing_in_one_run_both_stay_closed_with_their_flags(api, at):
    """Found by an audit: the first charge's customer cancel took the second's subscription out
    of it (a charge in retry lets a cancelled subscription go) and deleted it, empty: a closed
    charge lost, its subscription without `max_retries_reached`. Each closing charge marks its
    own first; the customer's cancel then leaves them to their charges."""

    from tests.builders import make_address, make_customer, make_subscription
    _cancelling_customers(api)
    at(date(2027, 1, 20))
    customer = make_customer(api)
    first_address, first = _subscriber(api, token="needs_update", customer=customer,
                                       next_charge_scheduled_at=date(2027, 2, 1))
    second_address = make_address(api, customer)  # paid with the customer's default method
    second = make_subscription(api, second_address, next_charge_scheduled_at=date(2027, 2, 1))
    assert _advance(api, days=20).json()["store_clock"]["failed"] == 6
    closed = [c for a in (first_address, second_address) for c in charges_of(api, a.id)]
    assert [(c.status, c.error_type) for c in closed] == [("error", "CLOSED_MAX_RETRIES_REACHED")] * 2
    for sub in (first, second):
        shown = api.get(f"/subscriptions/{sub.id}").json()["subscription"]
        assert (shown["status"], shown["max_retries_reached"]) == ("cancelled", True)
    topics = [t for t, _ in events_of(api) if t in ("charge/deleted", "charge/max_retries_reached")]
    assert topics == ["charge/max_retries_reached"] * 2


def test_a_deferral_is_one_row_per_address_and_a_later_one_moves_it_on(api, at):
    """`pending.defer` is one upsert (found by a review: its UPDATE-then-INSERT, run by the
    billing run without the address's lock, could break the key beside a commit=false update)."""
    from datetime import datetime, timezone

    from sqlalchemy import select

    from rebill.domain.schedule import pending
    from rebill.models import pending_regenerations
    from tests.builders import make_address
    address = make_address(api)
    first = datetime(2027, 1, 1, 12, 0, tzinfo=timezone.utc)
    with api.db.write() as conn:
        pending.defer(conn, api.store.id, address.id, first)
        pending.defer(conn, api.store.id, address.id, first + timedelta(seconds=3))
    with api.db.read() as conn:
        rows = conn.execute(select(pending_regenerations.c.due_at).where(
            pending_regenerations.c.address_id == address.id)).scalars().all()
    assert rows == [first + timedelta(seconds=3) + pending.WINDOW]


def _paid_on(api, address_id):
    """(scheduled date, the store's date it was paid) of each paid charge of the address."""
    return [(c.scheduled_at, c.processed_at.date()) for c in charges_of(api, address_id) if c.status == "success"]


def test_an_advance_right_after_a_commit_false_date_change_bills_on_the_date_shown(api, at):
    """Found by an audit: the deferred regeneration (decisions §5.3) waits 5 seconds of real
    time, and an advance sent within them billed the charge on its old date (the 25th)."""
    at(date(2027, 1, 10))
    address, subscription = _subscriber(api, next_charge_scheduled_at=date(2027, 1, 25))
    moved = api.put(f"/subscriptions/{subscription.id}?commit=false", json={"next_charge_scheduled_at": "2027-01-20"})
    assert moved.status_code == 200, moved.text
    assert [c.scheduled_at for c in charges_of(api, address.id)] == [date(2027, 1, 25)]  # still deferred
    assert _advance(api, to="2027-02-01").status_code == 200
    assert _paid_on(api, address.id) == [(date(2027, 1, 20), date(2027, 1, 20))]
    item = api.get(f"/subscriptions/{subscription.id}").json()["subscription"]
    assert item["next_charge_scheduled_at"].startswith("2027-02-20")


def test_an_advance_right_after_a_commit_false_cadence_change_bills_every_date_of_it(api, at):
    """A weekly subscription made every 3 days with commit=false, then an advance at once: a
    charge on each of its dates (the audit saw 3 of 7, the first paid 12 days late)."""
    at(date(2027, 1, 10))
    address, subscription = _subscriber(api, next_charge_scheduled_at=date(2027, 1, 25), order_interval_unit="week",
                                        order_interval_frequency=1, charge_interval_frequency=1)
    changed = api.put(f"/subscriptions/{subscription.id}?commit=false", json={
        "order_interval_unit": "day", "order_interval_frequency": 3, "charge_interval_frequency": 3})
    assert changed.status_code == 200, changed.text
    first = date.fromisoformat(changed.json()["subscription"]["next_charge_scheduled_at"][:10])
    assert first < date(2027, 1, 25)
    assert _advance(api, to="2027-02-01").status_code == 200
    dates = [first + timedelta(days=3 * n) for n in range(10) if first + timedelta(days=3 * n) <= date(2027, 2, 1)]
    assert _paid_on(api, address.id) == [(d, d) for d in dates]
