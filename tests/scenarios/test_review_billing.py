"""Adversarial review of exactly once (decisions §6.3-§6.5, §6.7, §6.12): API writes made while
a billing run holds a charge (between its claim and the record of the gateway's answer), and
runs that race on a stale list of due charges. Money is counted in the sandbox gateway's
ledger, as a processor would count it."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import select, update

from rebill.domain.billing import claim as claims
from rebill.domain.billing import run as billing
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.models import charges, orders, payment_methods, purchase_items, sandbox_payments
from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_discount,
    make_payment_method,
    make_subscription,
)
from tests.scenarios.conftest import assert_schedule_consistent

START = date(2027, 3, 10)


@pytest.fixture
def tier_a(api):
    return api.other_store(plan_tier="premium_a")


def _gateway(api):
    return SandboxGateway(api.db, api.clock.now)


def _bill(api, gateway=None, **kw):
    return billing.run_store(api.db, gateway or _gateway(api), api.store, api.clock.now, **kw)


def _ledger(api):
    """Per charge reference, how many payments moved money."""
    with api.db.read() as conn:
        return Counter(conn.execute(select(sandbox_payments.c.reference).where(
            sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.operation == "charge",
            sandbox_payments.c.outcome.in_(("captured", "authorized")))).scalars())


def _attempts(api):
    with api.db.read() as conn:
        return Counter(conn.execute(select(sandbox_payments.c.reference).where(
            sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.operation == "charge")).scalars())


def _consistent_money(api):
    """Every payment that moved money is a paid (or pending) charge with its orders, and every
    paid charge has its payment and its orders; nothing is left claimed."""
    taken = _ledger(api)
    with api.db.read() as conn:
        rows = conn.execute(select(charges.c.id, charges.c.status, charges.c.claimed_by, charges.c.orders_count)
                            .where(charges.c.store_id == api.store.id)).all()
        made = Counter(conn.execute(select(orders.c.charge_id).where(orders.c.store_id == api.store.id,
                                                                     orders.c.charge_id.is_not(None))).scalars())
    assert set(taken.values()) <= {1}, taken
    for row in rows:
        assert row.claimed_by is None, row
        paid = row.status in ("success", "refunded", "partially_refunded")
        assert (f"charge {row.id}" in taken) == (paid or row.status == "pending"), row
        assert (made[row.id] > 0) == paid, (row, made[row.id])
        if paid:
            assert made[row.id] == row.orders_count, row


def _item(api, item_id):
    with api.db.read() as conn:
        return conn.execute(select(purchase_items).where(purchase_items.c.id == item_id)).first()


class _Meanwhile:
    """A gateway that, once the processor has answered the first payment and before the run
    records it, lets ``action`` run (an API write racing with the run)."""

    def __init__(self, inner, action):
        self.inner, self.name, self.action, self.replies = inner, inner.name, action, []

    def charge(self, payment):
        result = self.inner.charge(payment)
        if not self.replies:
            self.replies.append(self.action())
        return result


def _subscriber(api, token="pm_ok", **kw):
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    address = make_address(api, customer)
    return customer, address, make_subscription(api, address, next_charge_scheduled_at=START, **kw)


WRITES = {
    "quantity": lambda api, s, a, c, other: api.put(f"/subscriptions/{s.id}", json={"quantity": 3}),
    "price_uncommitted": lambda api, s, a, c, other: api.put(f"/subscriptions/{s.id}", json={"price": "30.00"},
                                                             params={"commit": "false"}),
    "next_date": lambda api, s, a, c, other: api.post(f"/subscriptions/{s.id}/set_next_charge_date",
                                                      json={"date": "2027-03-20"}),
    "cancel": lambda api, s, a, c, other: api.post(f"/subscriptions/{s.id}/cancel",
                                                   json={"cancellation_reason": "too much"}),
    "delete": lambda api, s, a, c, other: api.delete(f"/subscriptions/{s.id}"),
    "change_address": lambda api, s, a, c, other: api.post(f"/subscriptions/{s.id}/change_address",
                                                           json={"address_id": other.id}),
    "merge": lambda api, s, a, c, other: api.post("/addresses/merge", json={
        "target_address": {"id": other.id}, "source_addresses": [{"id": a.id}]}),
    "address_update": lambda api, s, a, c, other: api.put(f"/addresses/{a.id}", json={"address1": "1 Other St"}),
    "address_delete": lambda api, s, a, c, other: api.delete(f"/addresses/{a.id}"),
    "address_discount": lambda api, s, a, c, other: api.post(f"/addresses/{a.id}/apply_discount",
                                                             json={"discount_id": make_discount(api)}),
    "charge_discount": lambda api, s, a, c, other: api.post(f"/charges/{c}/apply_discount",
                                                            json={"discount_id": make_discount(api)}),
    "skip": lambda api, s, a, c, other: api.post(f"/charges/{c}/skip", json={}),
    "change_charge_date": lambda api, s, a, c, other: api.post(f"/charges/{c}/change_next_charge_date",
                                                               json={"next_charge_date": "2027-03-25"},
                                                               version="2021-01"),
    "process": lambda api, s, a, c, other: api.post(f"/charges/{c}/process", json={}),
    "onetime": lambda api, s, a, c, other: api.post("/onetimes", json={
        "address_id": a.id, "product_title": "Mug", "price": "8.00", "quantity": 1,
        "next_charge_scheduled_at": START.isoformat()}),
}


# NOTE: a queued charge a run holds cannot be skipped or moved: domain/charge/service.py
# answers 409 there, as an address delete does.
@pytest.mark.parametrize("write", sorted(WRITES))
def test_an_api_write_while_a_run_pays_a_charge_never_answers_500_nor_pays_or_advances_twice(tier_a, at, write):
    api = tier_a
    at(START)
    customer, address, subscription = _subscriber(api)
    other = make_address(api, customer)
    [charge] = charges_of(api, address.id)
    gateway = _Meanwhile(_gateway(api), lambda: WRITES[write](api, subscription, address, charge.id, other))
    summary = _bill(api, gateway)
    [reply] = gateway.replies
    assert reply.status_code < 500, reply.text
    # A one-time item added on the date of the charge being paid would be a second charge for
    # the address and date (decisions §5.9): it waits (409) until the payment is recorded.
    assert summary.paid == 1
    if write == "onetime":
        assert reply.status_code == 409, reply.text
    assert _ledger(api)[f"charge {charge.id}"] == 1
    paid = api.get(f"/charges/{charge.id}").json()["charge"]
    assert paid["status"] == "success"
    item = _item(api, subscription.id)
    if item is not None and item.status == "active":
        assert item.charges_count == 1
    _consistent_money(api)
    assert_schedule_consistent(api, address.id, other.id)
    # The next month is charged once (if the subscription is still there), never this one again.
    at(date(2027, 4, 25))
    _bill(api)
    _consistent_money(api)
    assert _ledger(api)[f"charge {charge.id}"] == 1
    item = _item(api, subscription.id)
    if item is not None and item.status == "active":
        assert item.charges_count == 2, item
    assert_schedule_consistent(api, address.id, other.id)


def _stale_list(monkeypatch, api, meanwhile):
    """The run reads its due charges, then ``meanwhile`` runs before it claims them (another run
    or a manual process finishing first), so it claims from a stale list."""
    real = claims.due
    done = []

    def due(conn, store_id, today, **kw):
        found = real(conn, store_id, today, **kw)
        if found and not done:
            done.append(True)
            meanwhile()
        return found
    monkeypatch.setattr(claims, "due", due)


@pytest.mark.parametrize("token", ["pm_declined", "processor_error"])
def test_a_run_with_a_stale_due_list_does_not_try_a_charge_another_run_just_failed_again(api, at, monkeypatch, token):
    at(START)
    _, address, _ = _subscriber(api, token=token)
    [charge] = charges_of(api, address.id)
    _stale_list(monkeypatch, api, lambda: billing.process(api.db, _gateway(api), api.store, [charge.id],
                                                          api.clock.now()))
    _bill(api)
    after = api.get(f"/charges/{charge.id}").json()["charge"]
    # NOTE: decisions §6.12, one attempt on D, the next on D+1: not two on D.
    assert after["charge_attempts"] == 1 and after["retry_date"].startswith("2027-03-11")
    assert _attempts(api)[f"charge {charge.id}"] == 1


def test_a_run_with_a_stale_due_list_does_not_try_a_closed_charge_a_ninth_time(api, at, monkeypatch):
    at(START)
    _, address, subscription = _subscriber(api, token="pm_declined")
    [charge] = charges_of(api, address.id)
    day = START
    for _ in range(7):  # attempts 1-7 on D, D+1, D+7, ..., D+31
        _bill(api)
        retry = api.get(f"/charges/{charge.id}").json()["charge"]["retry_date"]
        day = date.fromisoformat(retry[:10])
        at(day)
    _stale_list(monkeypatch, api, lambda: _bill_real(api, charge.id))
    _bill(api)
    after = api.get(f"/charges/{charge.id}").json()["charge"]
    assert after["charge_attempts"] == 8 and after["error_type"] == "CLOSED_MAX_RETRIES_REACHED"
    assert _attempts(api)[f"charge {charge.id}"] == 8


def _bill_real(api, charge_id):
    billing.process(api.db, _gateway(api), api.store, [charge_id], api.clock.now())


class _Died(BaseException):
    """The process dies (SIGKILL): no cleanup, no release of the claim."""


class _DiesAfter:
    """The processor does the operation, then the process dies before recording it."""

    def __init__(self, inner, operation):
        self.inner, self.name, self.operation = inner, inner.name, operation

    def charge(self, payment):
        result = self.inner.charge(payment)
        if self.operation == "charge":
            raise _Died()
        return result

    def capture(self, *args):
        result = self.inner.capture(*args)
        if self.operation == "capture":
            raise _Died()
        return result

    def refund(self, *args):
        result = self.inner.refund(*args)
        if self.operation == "refund":
            raise _Died()
        return result


def _money_back_ledger(api, operation):
    with api.db.read() as conn:
        return list(conn.execute(select(sandbox_payments.c.amount).where(
            sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.operation == operation)
            .order_by(sandbox_payments.c.id)).scalars())


def _authorized(api):
    _, address, _ = _subscriber(api, token="authorize_only")
    [charge] = charges_of(api, address.id)
    _bill(api)
    assert api.get(f"/charges/{charge.id}").json()["charge"]["status"] == "pending"
    return charge.id


@pytest.mark.parametrize("crashed_before_end", [timedelta(days=1), timedelta(seconds=10)])
def test_a_capture_that_died_after_the_processor_captured_is_finished_by_the_next_call(tier_a, at,
                                                                                      crashed_before_end):
    from rebill.domain.billing import money_back
    from rebill.domain.charge.model import CAPTURE_WINDOW
    api = tier_a
    at(START)
    charge_id = _authorized(api)
    api.clock.advance(CAPTURE_WINDOW - crashed_before_end)
    with pytest.raises(_Died):
        money_back.capture(api.db, _DiesAfter(_gateway(api), "capture"), api.store, charge_id, api.clock.now())
    assert _money_back_ledger(api, "capture") == [Decimal(1250)]
    # The claim holds a minute; the next call repeats the same capture (same key), even when
    # the window has closed since: the processor captured inside it.
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    reply = api.post(f"/charges/{charge_id}/capture_payment", json={})
    assert reply.status_code == 200, reply.text
    assert reply.json()["charge"]["status"] == "success"
    assert _money_back_ledger(api, "capture") == [Decimal(1250)]
    _consistent_money(api)


def _dead_refund(api, at):
    """A paid charge of 12.50 and a refund of 5.00 that died after the processor refunded."""
    from rebill.domain.billing import money_back
    at(START)
    _, address, _ = _subscriber(api)
    [charge] = charges_of(api, address.id)
    _bill(api)
    with pytest.raises(_Died):
        money_back.refund(api.db, _DiesAfter(_gateway(api), "refund"), api.store, charge.id, Decimal("5.00"), False,
                          api.clock.now())
    return charge


@pytest.mark.parametrize("amount", ["5.00", "5"])  # one amount, one key to the processor
def test_a_refund_that_died_after_the_processor_refunded_is_finished_by_the_same_refund(tier_a, at, amount):
    api = tier_a
    charge = _dead_refund(api, at)
    assert api.post(f"/charges/{charge.id}/refund", json={"amount": amount}).status_code == 409  # still held
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    reply = api.post(f"/charges/{charge.id}/refund", json={"amount": amount})
    assert reply.status_code == 200, reply.text
    assert reply.json()["charge"]["total_refunds"] == "5.00"
    assert _money_back_ledger(api, "refund") == [Decimal(500)]
    _consistent_money(api)


def test_a_refund_that_died_is_never_lost_even_when_the_retry_asks_another_amount(tier_a, at):
    api = tier_a
    charge = _dead_refund(api, at)
    # While the dead refund's claim is fresh, nothing else may touch the charge.
    assert api.post(f"/charges/{charge.id}/refund", json={"amount": "3.00"}).status_code == 409
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    # Another amount: the dead refund is finished first (with its own key) and the caller is told.
    other = api.post(f"/charges/{charge.id}/refund", json={"amount": "3.00"})
    assert other.status_code == 409 and "5.00" in other.json()["errors"], other.text
    refunded = sum(_money_back_ledger(api, "refund")) / 100
    assert refunded == 5 and api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "5.00"
    # Sent again, it is a refund of its own.
    assert api.post(f"/charges/{charge.id}/refund", json={"amount": "3.00"}).status_code == 200
    assert api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "8.00"
    assert sum(_money_back_ledger(api, "refund")) == 800


def test_a_subscription_cancelled_while_its_charge_is_paid_counts_the_charge_and_is_not_billed_twice(tier_a, at):
    """The charge being paid keeps the subscription (a claimed charge does not change): it is
    paid for, so it counts, and an activation must not bring back the date just paid."""
    api = tier_a
    at(START)
    customer, address, subscription = _subscriber(api)
    gateway = _Meanwhile(_gateway(api), lambda: WRITES["cancel"](api, subscription, address, None, None))
    _bill(api, gateway)
    assert gateway.replies[0].status_code == 200, gateway.replies[0].text
    item = _item(api, subscription.id)
    assert (item.status, item.charges_count, item.last_charge_date) == ("cancelled", 1, START)
    assert item.cancelled_next_date == date(2027, 4, 10)
    at(START + timedelta(days=1))
    activated = api.post(f"/subscriptions/{subscription.id}/activate", json={})
    assert activated.status_code == 200, activated.text
    assert activated.json()["subscription"]["next_charge_scheduled_at"] == "2027-04-10"
    _bill(api)
    assert _ledger(api) == Counter({f"charge {c.id}": 1 for c in charges_of(api, address.id) if c.status == "success"})
    assert len(_ledger(api)) == 1  # nothing more was due


@pytest.mark.parametrize("write", ["cancel", "delete"])
def test_a_subscription_cancelled_while_its_charge_fails_leaves_the_charge_in_retry(tier_a, at, write):
    """The failed charge waits for its retry; the subscription cancelled (or deleted) while it
    was being paid must not be charged by that retry (decisions §5.16, as a cancel takes an
    item out of a charge in retry; the claim kept the charge unchanged then)."""
    api = tier_a
    at(START)
    customer, address, subscription = _subscriber(api, token="pm_declined")
    other = make_subscription(api, address, next_charge_scheduled_at=START)
    gateway = _Meanwhile(_gateway(api), lambda: WRITES[write](api, subscription, address, None, None))
    _bill(api, gateway)
    assert gateway.replies[0].status_code in (200, 204), gateway.replies[0].text
    [charge] = [c for c in charges_of(api, address.id) if c.status == "error"]
    assert [line["purchase_item_id"] for line in charge.line_items] == [other.id]
    # Nothing of it left: the charge in retry is deleted with it.
    api.delete(f"/subscriptions/{other.id}")
    assert [c for c in charges_of(api, address.id) if c.status == "error"] == []


@pytest.mark.parametrize("write, line", [
    ("quantity", (3, "12.50")),
    ("price", (1, "30.00")),
])
def test_an_update_while_its_charge_fails_is_what_the_retry_bills(tier_a, at, write, line):
    """Found by the race audit on PostgreSQL: an update answered 200 while the charge was being
    paid (a claimed charge does not change), the payment failed, and the charge in retry kept the
    old line, which the retry then billed. Recorded failed, the charge takes what changed, as it
    does at once when an item on a charge in retry is updated."""
    api = tier_a
    at(START)
    customer, address, subscription = _subscriber(api, token="pm_declined")
    body = {"quantity": 3} if write == "quantity" else {"price": "30.00"}
    gateway = _Meanwhile(_gateway(api), lambda: api.put(f"/subscriptions/{subscription.id}", json=body))
    _bill(api, gateway)
    assert gateway.replies[0].status_code == 200, gateway.replies[0].text
    [charge] = [c for c in charges_of(api, address.id) if c.status == "error"]
    shown = api.get(f"/charges/{charge.id}").json()["charge"]
    assert [(i["quantity"], i["unit_price"]) for i in shown["line_items"]] == [line]
    # The retry, with a card that works, takes the charge as it is now.
    with api.db.write() as conn:
        conn.execute(update(payment_methods).where(payment_methods.c.customer_id == customer.id)
                     .values(processor_payment_method_token="pm_ok"))
    _bill_real(api, charge.id)
    paid = api.get(f"/charges/{charge.id}").json()["charge"]
    assert paid["status"] == "success" and paid["total_price"] == shown["total_price"]
    with api.db.read() as conn:
        [amount] = conn.execute(select(sandbox_payments.c.amount).where(
            sandbox_payments.c.reference == f"charge {charge.id}",
            sandbox_payments.c.outcome == "captured")).scalars()
    assert amount == int(Decimal(shown["total_price"]) * 100)


@pytest.mark.parametrize("change", ["delete", "update"])
def test_a_claim_waits_for_a_replan_that_read_the_charge_before_it(tier_a, at, change):
    """A replan that read an address's charges before a run's claim must not rewrite or delete
    the charge the run then pays: the claim takes the address's lock first (as a replan does),
    so the run pays what the charge is once the replan is done, or nothing if it is gone."""
    import threading

    from rebill.domain.schedule import reconcile
    from rebill.domain.subscription import service as sub_service
    from rebill.domain.subscription.model import SubscriptionUpdate
    from rebill.domain.unit import Unit
    api = tier_a
    at(START)
    _, address, subscription = _subscriber(api)
    [charge] = charges_of(api, address.id)
    read, real = threading.Event(), reconcile.charges.open_of

    def slow(*args, **kw):
        found = real(*args, **kw)
        if threading.current_thread().name == "replan":
            read.set()
            threading.Event().wait(0.5)  # the run tries to claim meanwhile
        return found

    def write():
        with api.db.write() as conn:
            unit = Unit(conn, api.store, api.clock.now())
            if change == "delete":
                sub_service.delete(unit, subscription.id)
            else:
                sub_service.update(unit, subscription.id, SubscriptionUpdate(quantity=5))
    reconcile.charges.open_of = slow
    try:
        replanning = threading.Thread(target=write, name="replan")
        replanning.start()
        assert read.wait(10)
        billing.process(api.db, _gateway(api), api.store, [charge.id], api.clock.now())
        replanning.join(10)
    finally:
        reconcile.charges.open_of = real
    paid = [c for c in charges_of(api, address.id) if c.status == "success"]
    if change == "delete":
        assert paid == [] and _ledger(api) == Counter()
    else:
        assert [c.total_price for c in paid] == [Decimal("62.50")]
        assert _money_back_ledger(api, "charge") == [Decimal(6250)]
    _consistent_money(api)


def test_a_paid_charge_at_the_end_of_the_calendar_expires_its_subscription_never_raises(tier_a, at):
    """The payment is already taken when the outcome is recorded: a subscription whose next date
    would fall past 9999-12-31 (a date set in the database by hand; the API refuses it) ends
    there instead of failing the record."""
    from sqlalchemy import update

    from rebill.domain.schedule.reconcile import replan
    from rebill.domain.unit import Unit
    api = tier_a
    end = date(9999, 12, 15)
    _, address, subscription = _subscriber(api)
    with api.db.write() as conn:
        conn.execute(update(purchase_items).where(purchase_items.c.id == subscription.id)
                     .values(next_charge_scheduled_at=end, anchor_day=15))
        replan(Unit(conn, api.store, api.clock.now()), [address.id])
    at(end)
    summary = _bill(api)
    assert summary.paid == 1
    item = _item(api, subscription.id)
    assert (item.status, item.next_charge_scheduled_at, item.charges_count) == ("expired", None, 1)
    _consistent_money(api)


def test_a_record_given_up_in_a_deadlock_is_recorded_again(tier_a, at, monkeypatch):
    from sqlalchemy.exc import OperationalError

    class _Orig(Exception):
        sqlstate = "40P01"
    api = tier_a
    at(START)
    _, address, subscription = _subscriber(api)
    real, tries = billing.record, []

    def flaky(unit, *args, **kw):
        tries.append(1)
        done = real(unit, *args, **kw)  # written, then given up on: rolled back
        if len(tries) == 1:
            raise OperationalError("UPDATE purchase_items ...", {}, _Orig())
        return done
    monkeypatch.setattr(billing, "record", flaky)
    summary = _bill(api)
    assert len(tries) == 2 and summary.paid == 1
    assert _item(api, subscription.id).charges_count == 1  # advanced once
    _consistent_money(api)


def test_moving_the_next_date_of_a_subscription_being_paid_answers_409(tier_a, at):
    """The payment moves the date on from the charge's when it is recorded: a date set meanwhile
    would be overwritten, so the request loses the race openly."""
    api = tier_a
    at(START)
    _, address, subscription = _subscriber(api)
    gateway = _Meanwhile(_gateway(api), lambda: WRITES["next_date"](api, subscription, address, None, None))
    _bill(api, gateway)
    assert gateway.replies[0].status_code == 409, gateway.replies[0].text
    assert _item(api, subscription.id).next_charge_scheduled_at == date(2027, 4, 10)
    moved = api.post(f"/subscriptions/{subscription.id}/set_next_charge_date", json={"date": "2027-04-20"})
    assert moved.status_code == 200, moved.text  # once the payment is recorded, it moves


def test_the_billing_run_finishes_a_capture_and_a_refund_nobody_asked_again(tier_a, at):
    """Money the processor may have moved never stays unrecorded: with no repeat from the
    client, the next billing run finishes an abandoned capture and an abandoned refund with
    their own keys (money_back.finish_abandoned)."""
    from rebill.domain.billing import money_back
    api = tier_a
    charge = _dead_refund(api, at)  # a refund of 5.00 the processor made, never recorded
    authorized = _authorized(api)
    with pytest.raises(_Died):
        money_back.capture(api.db, _DiesAfter(_gateway(api), "capture"), api.store, authorized, api.clock.now())
    _bill(api)  # too early: both claims are still fresh, the run leaves them
    assert api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "0.00"
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    _bill(api)
    assert api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "5.00"
    assert api.get(f"/charges/{authorized}").json()["charge"]["status"] == "success"
    assert _money_back_ledger(api, "refund") == [Decimal(500)]
    assert _money_back_ledger(api, "capture") == [Decimal(1250)]
    _consistent_money(api)


def test_the_billing_run_finishes_a_manual_process_of_a_later_charge_that_died(tier_a, at):
    """A manual process of a charge dated next week that died after the processor charged: no
    batch picks the charge before its date, so the run finishes the abandoned claim first."""
    from rebill.domain.billing import manual
    api = tier_a
    at(START)
    _, address, subscription = _subscriber(api)
    api.clock.advance(timedelta(days=-7))  # the charge is a week away
    [charge] = charges_of(api, address.id)
    with pytest.raises(_Died):
        manual.process(api.db, _DiesAfter(_gateway(api), "charge"), api.store, charge.id, api.clock.now())
    assert _ledger(api) == Counter({f"charge {charge.id}": 1})
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    _bill(api)
    assert [c.status for c in charges_of(api, address.id) if c.id == charge.id] == ["success"]
    assert _ledger(api) == Counter({f"charge {charge.id}": 1})  # the same key: charged once
    _consistent_money(api)


def test_a_lapsed_authorization_holds_no_code_and_projects_no_delivery(tier_a, at):
    """Found by an audit: an authorization past its 7 days (nothing can capture it) still held
    its once-per-customer code against the customer's other addresses, kept a single-use code
    spent on its address's next charge, and its prepaid deliveries stayed in the delivery
    schedule. Within the window it holds them all; past it, none."""
    from rebill.domain.charge.model import CAPTURE_WINDOW
    api = tier_a
    at(START)
    once = make_discount(api, code="ONCE1", once_per_customer=True)
    customer, address, _ = _subscriber(api, token="authorize_only", charge_interval_frequency=3,
                                       order_interval_frequency=1, order_interval_unit="month")
    other = make_address(api, customer)
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "ONCE1"},
                    version="2021-01").status_code == 200
    [charge] = charges_of(api, address.id)
    _bill(api)
    assert api.get(f"/charges/{charge.id}").json()["charge"]["status"] == "pending"
    assert api.post(f"/addresses/{address.id}/remove_discount", json={}, version="2021-01").status_code == 200

    def apply_elsewhere():
        return api.post(f"/addresses/{other.id}/apply_discount", json={"discount_code": "ONCE1"}, version="2021-01")

    def scheduled():
        schedule = api.get(f"/customers/{customer.id}/delivery_schedule", params={"future_interval_days": 120})
        return [d["date"] for d in schedule.json()["deliveries"]]
    assert apply_elsewhere().status_code == 422  # the authorized charge holds it, while capturable
    assert "2027-04-10" in scheduled()  # its second prepaid delivery, made at the capture
    api.clock.advance(CAPTURE_WINDOW + timedelta(hours=1))
    assert "2027-04-10" not in scheduled()
    assert apply_elsewhere().status_code == 200, once


# A keyed request whose payment or refund the billing run finished ------------------------------

def _keyed(api, path, body, key):
    return api.post(path, json=body, headers={"Idempotency-Key": key})


def _record_fails_once(monkeypatch, module, name):
    """The request's recording of the processor's answer fails (a database gone at that moment,
    a bug): the request answers 500, its claim left behind, as a process that died there."""
    real = getattr(module, name)
    calls = []

    def fails(*args, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the record failed")
        return real(*args, **kw)
    monkeypatch.setattr(module, name, fails)


def _keyed_refund_died(api, at, monkeypatch):
    """A paid charge of 12.50 whose refund of 5.00, key `refund-once`, answered 500 after the
    processor refunded (its record failed): the charge."""
    from rebill.domain.billing import money_back
    at(START)
    _, address, _ = _subscriber(api)
    [charge] = charges_of(api, address.id)
    _bill(api)
    _record_fails_once(monkeypatch, money_back, "record_refund")
    assert _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "refund-once").status_code == 500
    return charge


def test_a_keyed_refund_finished_by_the_billing_run_is_not_made_again_by_its_repeat(tier_a, at, monkeypatch):
    """Found by an audit: the run finished the dead request's refund (its claim stale), and the
    repeat with the same key, finding no claim left, refunded again: twice the money back. The
    request's key names its claim; whoever finishes the claim marks the key, and the repeat
    answers 409 (its answer was lost: read the charge) instead of running again."""
    api = tier_a
    charge = _keyed_refund_died(api, at, monkeypatch)
    assert _money_back_ledger(api, "refund") == [Decimal(500)]
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    _bill(api)  # finish_abandoned records the dead request's refund
    assert api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "5.00"
    for _ in range(2):
        repeat = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "refund-once")
        assert repeat.status_code == 409 and "answer was lost" in repeat.json()["errors"], repeat.text
    assert _money_back_ledger(api, "refund") == [Decimal(500)]
    assert api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "5.00"
    # Another refund, with a key of its own, is one.
    other = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "refund-twice")
    assert other.status_code == 200, other.text
    assert _money_back_ledger(api, "refund") == [Decimal(500), Decimal(500)]
    _consistent_money(api)


def test_a_keyed_refund_whose_repeat_comes_before_the_run_finishes_it_as_its_own(tier_a, at, monkeypatch):
    api = tier_a
    charge = _keyed_refund_died(api, at, monkeypatch)
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    repeat = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "refund-once")
    assert repeat.status_code == 200 and repeat.json()["charge"]["total_refunds"] == "5.00", repeat.text
    _bill(api)  # nothing left for the run
    assert _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "refund-once").json() == repeat.json()
    assert _money_back_ledger(api, "refund") == [Decimal(500)]
    _consistent_money(api)


def _keyed_process_died(api, at, monkeypatch):
    """A due charge whose process, key `pay-once`, answered 500 after the processor paid (its
    record failed), and the minute of its claim past: the charge."""
    at(START)
    _, address, _ = _subscriber(api)
    [charge] = charges_of(api, address.id)
    _record_fails_once(monkeypatch, billing, "record")
    assert _keyed(api, f"/charges/{charge.id}/process", {}, "pay-once").status_code == 500
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    return charge


def test_a_keyed_process_finished_by_the_billing_run_answers_its_repeat_409_not_422(tier_a, at, monkeypatch):
    """Found by an audit: its repeat answered 422 "this one is success", as if its payment had
    been refused; the run that finished it marks the request's key (domain/claimed_keys.py)."""
    api = tier_a
    charge = _keyed_process_died(api, at, monkeypatch)
    _bill(api)
    assert api.get(f"/charges/{charge.id}").json()["charge"]["status"] == "success"
    repeat = _keyed(api, f"/charges/{charge.id}/process", {}, "pay-once")
    assert repeat.status_code == 409 and "answer was lost" in repeat.json()["errors"], repeat.text
    assert _ledger(api) == Counter({f"charge {charge.id}": 1})
    _consistent_money(api)


def test_a_keyed_refund_told_to_send_again_after_finishing_another_can_with_its_key(tier_a, at):
    """Found by an audit: the refund that finished another's abandoned refund answered 409
    "send this refund again", but its record had marked its own key applied: sent again with
    that key it answered 409 "still running", then "applied, but its answer was lost", and was
    never made. Its key now names nothing of it, and the 409 frees it."""
    api = tier_a
    charge = _dead_refund(api, at)
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    other = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "3.00"}, "three")
    assert other.status_code == 409 and "send this refund again" in other.json()["errors"], other.text
    again = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "3.00"}, "three")
    assert again.status_code == 200 and again.json()["charge"]["total_refunds"] == "8.00", again.text
    assert _keyed(api, f"/charges/{charge.id}/refund", {"amount": "3.00"}, "three").json() == again.json()
    assert sorted(_money_back_ledger(api, "refund")) == [Decimal(300), Decimal(500)]
    _consistent_money(api)


def test_a_keyed_process_finished_by_the_processors_own_event_answers_its_repeat_409(tier_a, at, monkeypatch):
    """Found by a review: the processor's event that records a dead request's payment did not
    mark its key, and the repeat answered 422 "this one is success"."""
    from rebill.domain.billing import inbound
    from rebill.domain.payment.gateway import CAPTURED, Result
    from rebill.domain.payment.inbound import InboundEvent, PaymentSettled
    api = tier_a
    charge = _keyed_process_died(api, at, monkeypatch)
    fact = PaymentSettled(store_ref=str(api.store.id), idempotency_key=f"rebill-charge-{charge.id}-attempt-1",
                          result=Result(CAPTURED, transaction_id="sbx_event"),
                          amount_minor=int(charge.total_price * 100), currency=charge.currency)
    inbound.apply(api.db, api.store, api.clock.now(), api.clock.now(),
                  InboundEvent("sandbox", "evt_1", "payment_intent.succeeded", fact))
    assert api.get(f"/charges/{charge.id}").json()["charge"]["status"] == "success"
    repeat = _keyed(api, f"/charges/{charge.id}/process", {}, "pay-once")
    assert repeat.status_code == 409 and "answer was lost" in repeat.json()["errors"], repeat.text


def test_a_refund_of_the_same_amount_under_another_key_does_not_take_a_dead_one_for_its_own(tier_a, at,
                                                                                         monkeypatch):
    """Found by a review: a second refund of 5.00 (its own key) finished the dead 5.00 one and
    answered 200 as if it were its own: one refund made, two answered. A keyed request's own is
    the claim its key names."""
    from rebill.models import idempotency_keys
    api = tier_a
    charge = _keyed_refund_died(api, at, monkeypatch)
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    second = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "second-refund")
    assert second.status_code == 409 and "send this refund again" in second.json()["errors"], second.text
    again = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "second-refund")
    assert again.status_code == 200 and again.json()["charge"]["total_refunds"] == "10.00", again.text
    repeat = _keyed(api, f"/charges/{charge.id}/refund", {"amount": "5.00"}, "refund-once")
    assert repeat.status_code == 409 and "answer was lost" in repeat.json()["errors"], repeat.text
    assert _money_back_ledger(api, "refund") == [Decimal(500), Decimal(500)]
    # The finished key keeps its real-time `updated_at` (a review: the store's clock was written).
    with api.db.read() as conn:
        state, updated = conn.execute(select(idempotency_keys.c.state, idempotency_keys.c.updated_at).where(
            idempotency_keys.c.store_id == api.store.id, idempotency_keys.c.key == "refund-once")).one()
    assert state == "finished" and updated <= api.clock.now()
    _consistent_money(api)


def test_twenty_repeats_at_once_of_a_dead_keyed_refund_make_it_once(tier_a, at, monkeypatch):
    """The repeats of a keyed refund that died after the processor refunded, all at once once
    its minute is past: one finishes it (200), the others answer 409; one refund in all."""
    import asyncio

    import httpx2 as httpx
    api = tier_a
    charge = _keyed_refund_died(api, at, monkeypatch)
    api.clock.advance(claims.STALE_AFTER + timedelta(seconds=1))

    async def main():
        transport = httpx.ASGITransport(app=api.client.app)
        headers = {"X-Service-Access-Token": api.token, "X-Service-Version": api.version,
                   "Idempotency-Key": "refund-once"}
        async with httpx.AsyncClient(transport=transport, base_url="http://rebill.test", headers=headers) as http:
            return await asyncio.gather(*(http.post(f"/charges/{charge.id}/refund", json={"amount": "5.00"})
                                          for _ in range(20)))
    replies = asyncio.run(main())
    codes = sorted(r.status_code for r in replies)
    assert set(codes) <= {200, 409} and codes.count(200) >= 1, codes
    assert len({r.text for r in replies if r.status_code == 200}) == 1  # a 200 is the one refund, replayed
    assert _money_back_ledger(api, "refund") == [Decimal(500)]
    assert api.get(f"/charges/{charge.id}").json()["charge"]["total_refunds"] == "5.00"
    _consistent_money(api)
