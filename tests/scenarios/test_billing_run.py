"""The billing run (decisions §6.3-§6.5, §6.12) on both databases: due charges are paid once,
failures retry on the dunning schedule, and no crash or second run takes money twice.
Money is counted in the sandbox gateway's ledger, as a processor would count it."""

from __future__ import annotations

import threading
from datetime import date, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from rebill.domain.billing import run as billing
from rebill.domain.billing.claim import STALE_AFTER
from rebill.domain.order import repository as orders
from rebill.domain.payment.gateway import GatewayUnavailable
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.models import charges, events, purchase_items, sandbox_payments
from rebill.models import orders as orders_table
from tests.builders import charges_of, events_of, make_address, make_customer, make_payment_method, make_subscription
from tests.scenarios.conftest import assert_schedule_consistent

START = date(2027, 3, 10)


def _gateway(api):
    return SandboxGateway(api.db, api.clock.now)


def _bill(api, gateway=None, **kw):
    return billing.run_store(api.db, gateway or _gateway(api), api.store, api.clock.now, **kw)


def _money_taken(api, charge_id=None):
    """Successful charge operations in the gateway's ledger (per charge when given)."""
    stmt = select(func.count()).select_from(sandbox_payments).where(
        sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.operation == "charge",
        sandbox_payments.c.outcome.in_(("captured", "authorized")))
    if charge_id is not None:
        stmt = stmt.where(sandbox_payments.c.reference == f"charge {charge_id}")
    with api.db.read() as conn:
        return conn.execute(stmt).scalar()


def _customer_with(api, token="pm_ok"):
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    return make_address(api, customer)


def _subscription(api, address, **kw):
    return make_subscription(api, address, next_charge_scheduled_at=START, **kw)


def _item(api, subscription_id):
    return api.get(f"/subscriptions/{subscription_id}").json()["subscription"]


def test_a_due_charge_is_paid_once_makes_its_order_and_the_next_charge_appears(api, at):
    at(START - timedelta(days=5))
    address = _customer_with(api)
    subscription = _subscription(api, address)
    [queued] = charges_of(api, address.id)
    assert _bill(api).processed == 0  # not due yet
    at(START)
    summary = _bill(api)
    assert (summary.processed, summary.paid, summary.failed) == (1, 1, 0)
    assert summary.amounts == {"USD": queued.total_price}
    charge = api.get(f"/charges/{queued.id}").json()["charge"]
    assert charge["status"] == "success" and charge["processed_at"] is not None
    with api.db.read() as conn:
        [order] = orders.of_charge(conn, api.store.id, queued.id)
    assert (order.status, order.scheduled_at, order.total_price) == ("success", START, queued.total_price)
    assert _item(api, subscription.id)["next_charge_scheduled_at"].startswith("2027-04-10")
    [next_charge] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    assert next_charge.scheduled_at == date(2027, 4, 10)
    assert ("charge/paid", queued.id) in events_of(api, queued.id)
    assert ("order/created", order.id) in events_of(api, order.id)
    assert _bill(api).processed == 0  # a second run finds nothing due
    assert _money_taken(api, queued.id) == 1
    assert_schedule_consistent(api, address.id)
    customer = api.get(f"/customers/{queued.customer_id}").json()["customer"]
    assert customer["orders_count"] == 1 and customer["first_charge_processed_at"] is not None


def test_until_bills_only_charges_dated_on_or_before_it_and_never_after_today(api, at):
    at(START)
    address = _customer_with(api)
    _subscription(api, address)
    assert _bill(api, until=START - timedelta(days=1)).processed == 0
    assert _bill(api, until=START + timedelta(days=400)).paid == 1  # capped at today: one charge
    assert [c.status for c in charges_of(api, address.id)] == ["success", "queued"]


def test_a_declined_card_retries_on_the_dunning_days_then_closes_and_cancels(api, at):
    at(START)
    address = _customer_with(api, token="pm_declined")
    subscription = _subscription(api, address)
    [queued] = charges_of(api, address.id)
    attempt_days = []
    day = START
    while day <= START + timedelta(days=40):
        at(day)
        if _bill(api).processed:
            attempt_days.append((day - START).days)
        day += timedelta(days=1)
    # NOTE: decisions §6.12, attempts on D, D+1, D+7, ..., D+37: eight in all.
    assert attempt_days == [0, 1, 7, 13, 19, 25, 31, 37]
    charge = api.get(f"/charges/{queued.id}").json()["charge"]
    assert charge["status"] == "error"
    assert charge["error_type"] == "CLOSED_MAX_RETRIES_REACHED"
    assert charge["retry_date"] is None
    assert charge["charge_attempts"] == 8
    item = _item(api, subscription.id)
    assert item["status"] == "cancelled" and item["max_retries_reached"] is True
    assert ("charge/max_retries_reached", queued.id) in events_of(api, queued.id)
    assert _money_taken(api) == 0
    # While in dunning the charge held its subscription: no second charge for the same date.
    assert [c.id for c in charges_of(api, address.id) if c.scheduled_at == START] == [queued.id]


def test_a_payment_marks_its_method_valid_and_an_expired_card_invalid_and_tells_the_customer(api, at):
    at(START)
    told = ("customer/payment_method_updated",)
    addresses = {}
    for token, status in (("pm_ok", "valid"), ("pm_expired", "invalid")):
        customer = make_customer(api)
        make_payment_method(api, customer, processor_payment_method_token=token, status="unvalidated")
        addresses[status] = make_address(api, customer)
        _subscription(api, addresses[status])
    before = {s: [e for e in events_of(api, a.customer_id) if e[0] in told] for s, a in addresses.items()}
    _bill(api)
    for status, address in addresses.items():
        [method] = api.get("/payment_methods", params={"customer_id": address.customer_id}).json()["payment_methods"]
        assert method["status"] == status
        after = [e for e in events_of(api, address.customer_id) if e[0] in told]
        assert len(after) == len(before[status]) + 1


def test_a_failure_records_the_error_the_attempt_and_the_retry_date_and_keeps_the_date(api, at):
    at(START)
    address = _customer_with(api, token="tok_INSUFFICIENT_FUNDS")
    subscription = _subscription(api, address)
    [queued] = charges_of(api, address.id)
    summary = _bill(api)
    assert (summary.failed, summary.paid) == (1, 0)
    charge = api.get(f"/charges/{queued.id}").json()["charge"]
    assert (charge["status"], charge["error_type"], charge["charge_attempts"]) == (
        "error", "INSUFFICIENT_FUNDS", 1)
    assert charge["retry_date"].startswith("2027-03-11")
    assert charge["scheduled_at"].startswith("2027-03-10")
    assert _item(api, subscription.id)["next_charge_scheduled_at"].startswith("2027-03-10")
    assert_schedule_consistent(api, address.id)


def test_a_customer_without_a_payment_method_fails_without_calling_the_gateway(api, at):
    at(START)
    address = make_address(api)
    _subscription(api, address)
    [queued] = charges_of(api, address.id)
    assert _bill(api).failed == 1
    charge = api.get(f"/charges/{queued.id}").json()["charge"]
    assert charge["error_type"] == "CUSTOMER_NEEDS_TO_UPDATE_CARD"
    with api.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(sandbox_payments)
                            .where(sandbox_payments.c.store_id == api.store.id)).scalar() == 0


def test_a_subscription_expires_with_its_nth_charge_and_gets_no_next_charge(api, at):
    at(START)
    address = _customer_with(api)
    subscription = _subscription(api, address, expire_after_specific_number_of_charges=2)
    _bill(api)
    assert _item(api, subscription.id)["status"] == "active"
    at(date(2027, 4, 10))
    _bill(api)
    item = _item(api, subscription.id)
    assert item["status"] == "expired" and item["next_charge_scheduled_at"] is None
    assert [c.status for c in charges_of(api, address.id)] == ["success", "success"]
    assert_schedule_consistent(api, address.id)


def test_a_subscription_that_expires_with_its_last_charge_drops_its_skips_ahead(api, at):
    """Found by an audit: a subscription the run expired kept a skip of a later date, shown as
    a skipped charge that nothing could unskip (a lowered limit or a cancel drops such skips)."""
    at(START)
    address = _customer_with(api)
    subscription = _subscription(api, address)
    later = date(2027, 5, 10)
    reply = api.post(f"/addresses/{address.id}/charges/skip", json={"date": later.isoformat(),
                                                                   "purchase_item_ids": [subscription.id]})
    assert reply.status_code == 200, reply.text
    # A limit set after the skip (a skip after the last charge is refused when asked for).
    limited = api.put(f"/subscriptions/{subscription.id}", json={"expire_after_specific_number_of_charges": 1})
    assert limited.status_code == 200, limited.text
    assert [(c.status, c.scheduled_at) for c in charges_of(api, address.id)] == [
        ("queued", START), ("skipped", later)]
    assert _bill(api).paid == 1
    assert _item(api, subscription.id)["status"] == "expired"
    assert [(c.status, c.scheduled_at) for c in charges_of(api, address.id)] == [("success", START)]
    assert_schedule_consistent(api, address.id)


def test_a_monthly_subscription_created_on_the_31st_keeps_that_day(api, at):
    """docs/api-choices.md, Month ends: a cadence keeps the day it was set on. Found by an
    audit: created on Jan 31 without a date, it was charged on Feb 28 and then on Mar 28."""
    at(date(2027, 1, 31))
    address = _customer_with(api)
    created = api.post("/subscriptions", json={
        "address_id": address.id, "product_title": "Tea", "price": "5.00", "quantity": 1,
        "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"})
    assert created.status_code == 201, created.text
    subscription = created.json()["subscription"]
    assert subscription["next_charge_scheduled_at"] == "2027-02-28"
    at(date(2027, 2, 28))
    assert _bill(api).paid == 1
    assert _item(api, subscription["id"])["next_charge_scheduled_at"] == "2027-03-31"


def test_authorize_only_leaves_the_charge_pending_advances_and_makes_no_order_yet(api, at):
    at(START)
    address = _customer_with(api, token="authorize_only")
    subscription = _subscription(api, address)
    [queued] = charges_of(api, address.id)
    assert _bill(api).pending == 1
    assert api.get(f"/charges/{queued.id}").json()["charge"]["status"] == "pending"
    with api.db.read() as conn:
        assert orders.of_charge(conn, api.store.id, queued.id) == []
    assert _item(api, subscription.id)["next_charge_scheduled_at"].startswith("2027-04-10")


def test_a_charge_with_uncommitted_changes_is_regenerated_before_it_is_paid(api, at):
    at(START)
    address = _customer_with(api)
    subscription = _subscription(api, address)
    reply = api.put(f"/subscriptions/{subscription.id}", json={"price": "20.00"}, params={"commit": "false"})
    assert reply.status_code == 200
    [queued] = charges_of(api, address.id)
    assert queued.has_uncommitted_changes and queued.total_price == Decimal("12.50")
    summary = _bill(api)  # inside the 5-second window: decisions §6.3 regenerates first
    assert summary.amounts == {"USD": Decimal("20.00")}
    charge = api.get(f"/charges/{queued.id}").json()["charge"]
    assert charge["status"] == "success" and charge["total_price"] == "20.00"


def test_an_authorization_left_uncaptured_for_6_days_is_told_once(api, at):
    at(START)
    address = _customer_with(api, token="authorize_only")
    _subscription(api, address)
    [queued] = charges_of(api, address.id)
    _bill(api)
    at(START + timedelta(days=5))
    _bill(api)
    assert ("charge/uncaptured", queued.id) not in events_of(api, queued.id)
    at(START + timedelta(days=6))
    _bill(api)
    _bill(api)
    assert events_of(api, queued.id).count(("charge/uncaptured", queued.id)) == 1


def test_a_prepaid_charges_later_orders_are_processed_on_their_dates(api, at):
    at(START)
    address = _customer_with(api)
    _subscription(api, address, charge_interval_frequency=3, order_interval_frequency=1)
    [queued] = charges_of(api, address.id)
    _bill(api)
    at(date(2027, 4, 10))
    _bill(api)
    with api.db.read() as conn:
        made = orders.of_charge(conn, api.store.id, queued.id)
    assert [o.status for o in made] == ["success", "success", "queued"]
    assert ("order/processed", made[1].id) in events_of(api, made[1].id)


def test_a_prepaid_charge_makes_one_order_per_order_interval(api, at):
    at(START)
    address = _customer_with(api)
    _subscription(api, address, charge_interval_frequency=3, order_interval_frequency=1)
    [queued] = charges_of(api, address.id)
    _bill(api)
    with api.db.read() as conn:
        made = orders.of_charge(conn, api.store.id, queued.id)
    assert [(o.status, o.scheduled_at, o.is_prepaid) for o in made] == [
        ("success", START, True), ("queued", date(2027, 4, 10), True), ("queued", date(2027, 5, 10), True)]
    assert [c.scheduled_at for c in charges_of(api, address.id) if c.status == "queued"] == [date(2027, 6, 10)]


def test_two_runs_at_once_pay_every_charge_exactly_once(api, at):
    at(START)
    addresses = [_customer_with(api) for _ in range(6)]
    for address in addresses:
        _subscription(api, address)
    results = []

    def run():
        results.append(_bill(api).paid)
    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(results) == 6
    for address in addresses:
        [paid] = [c for c in charges_of(api, address.id) if c.status == "success"]
        assert _money_taken(api, paid.id) == 1


class _CrashAfterPaying:
    """The processor takes the money, then the process dies before recording it."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def charge(self, payment):
        self.inner.charge(payment)
        raise GatewayUnavailable("connection reset after the request was sent")


def test_a_run_that_dies_after_the_gateway_answered_is_finished_by_the_next_without_paying_twice(api, at):
    at(START)
    address = _customer_with(api)
    subscription = _subscription(api, address)
    [queued] = charges_of(api, address.id)
    crashed = _bill(api, _CrashAfterPaying(_gateway(api)))
    assert crashed.processed == 0 and _money_taken(api, queued.id) == 1
    # Still claimed: another run leaves it alone until the claim is stale...
    assert _bill(api).processed == 0
    # ...then repeats the same attempt with the same key and records what the processor did.
    api.clock.advance(STALE_AFTER + timedelta(seconds=1))
    assert _bill(api).paid == 1
    assert _money_taken(api, queued.id) == 1
    assert api.get(f"/charges/{queued.id}").json()["charge"]["status"] == "success"
    assert _item(api, subscription.id)["next_charge_scheduled_at"].startswith("2027-04-10")


def test_the_same_idempotency_key_is_the_same_payment_at_the_gateway(api):
    from rebill.domain.payment.gateway import Payment
    gateway = _gateway(api)
    payment = Payment(store_id=api.store.id, idempotency_key="k-1", reference="charge 1", amount_minor=1250,
                      currency="USD", customer_token=None, payment_method_token="pm_ok")
    first, second = gateway.charge(payment), gateway.charge(payment)
    assert first == second and first.transaction_id
    assert _money_taken(api) == 1


@pytest.mark.parametrize("token, outcome, error_type", [
    ("pm_ok", "captured", None), ("PM_DECLINED", "failed", "CARD_DECLINED"),
    ("x_insufficient_funds", "failed", "INSUFFICIENT_FUNDS"), ("expired_card", "failed", "CARD_EXPIRED"),
    ("needs_update", "failed", "CUSTOMER_NEEDS_TO_UPDATE_CARD"),
    ("processor_error", "failed", "PROCESSING_ERROR"), ("authorize_only", "authorized", None)])
def test_the_sandbox_token_chooses_the_outcome(token, outcome, error_type):
    from rebill.domain.payment.sandbox import decide
    result = decide(token, None)
    assert (result.outcome, result.error_type) == (outcome, error_type)
    assert decide(None, token) == result  # the customer's token when the method has none
    assert result.retryable == (error_type == "PROCESSING_ERROR")


def test_amounts_go_to_the_gateway_in_minor_units(api, at):
    seen = []

    class Spy:
        name = "sandbox"

        def charge(self, payment):
            seen.append((payment.amount_minor, payment.currency, payment.idempotency_key))
            return _gateway(api).charge(payment)
    at(START)
    address = _customer_with(api)
    _subscription(api, address, price=Decimal("12.34"), quantity=3)
    [queued] = charges_of(api, address.id)
    _bill(api, Spy())
    assert seen == [(int(queued.total_price * 100), "USD", f"rebill-charge-{queued.id}-attempt-1")]


def test_an_address_whose_charge_is_being_paid_cannot_be_deleted_until_the_run_is_done(api, at):
    from rebill.domain.billing.claim import claim
    from tests.builders import make_onetime
    at(START)
    address = _customer_with(api)
    make_onetime(api, address, next_charge_scheduled_at=START)
    [queued] = charges_of(api, address.id)
    with api.db.write() as conn:
        assert claim(conn, api.store.id, [queued.id], "another-run", api.clock.now()) == [queued.id]
    refused = api.delete(f"/addresses/{address.id}")
    assert refused.status_code == 409
    assert "being paid" in str(refused.json()["errors"])
    assert [c.id for c in charges_of(api, address.id)] == [queued.id]
    api.clock.advance(STALE_AFTER + timedelta(seconds=1))  # the run died; the next one finishes it
    assert _bill(api).paid == 1
    assert api.delete(f"/addresses/{address.id}").status_code in (200, 204)


def test_every_event_of_a_run_names_the_customer_of_its_record(api, at):
    """The run names each event's customer from what it holds (charges, items, orders), without
    a look-up: every event it writes, paid, failed, authorized then captured, carries the
    customer of the row it is about, as `GET /events?customer_id=` filters by it."""
    api = api.other_store(plan_tier="premium_a")  # a plan that may capture
    at(START)
    first, second = make_customer(api), make_customer(api)
    make_payment_method(api, first, processor_payment_method_token="pm_ok")
    make_payment_method(api, second, processor_payment_method_token="authorize_only")
    declined = _customer_with(api, token="pm_declined")
    for address in (make_address(api, first), make_address(api, first), make_address(api, second), declined):
        _subscription(api, address)
    with api.db.read() as conn:
        before = conn.execute(select(func.max(events.c.id))).scalar()
    summary = _bill(api)
    assert (summary.paid, summary.failed, summary.pending) == (2, 1, 1)
    [pending] = [c for c in api.get("/charges", params={"status": "pending"}).json()["charges"]]
    assert api.post(f"/charges/{pending['id']}/capture_payment").status_code == 200
    owners = {"charge": charges, "order": orders_table, "subscription": purchase_items, "customer": None}
    with api.db.read() as conn:
        written = conn.execute(select(events.c.topic, events.c.resource, events.c.resource_id, events.c.customer_id)
                               .where(events.c.store_id == api.store.id, events.c.id > before)).all()
        for topic, resource, resource_id, customer_id in written:
            table = owners.get(resource)
            owner = resource_id if table is None else conn.execute(  # a customer's events are its own
                select(table.c.customer_id).where(table.c.id == resource_id)).scalar()
            assert customer_id == owner, (topic, resource_id)
    assert {resource for _, resource, *_ in written} <= set(owners)
    topics = {topic for topic, *_ in written}
    assert {"charge/paid", "charge/failed", "subscription/updated", "order/created", "order/success",
            "order/payment_captured", "charge/created"} <= topics
    assert {customer_id for *_, customer_id in written} == {first.id, second.id, declined.customer_id}
