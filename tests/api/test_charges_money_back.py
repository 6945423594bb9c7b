"""Capturing and refunding (decisions §6.7, §6.8, §6.12), both versions, both databases."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import select

from rebill.models import charges, sandbox_payments
from tests.builders import (
    charges_of,
    concurrently,
    events_of,
    make_address,
    make_customer,
    make_payment_method,
    make_subscription,
)


@pytest.fixture
def tier_a(vapi):
    store = vapi.other_store(plan_tier="premium_a")
    store.version = vapi.version
    return store


def _processed(api, token="pm_ok", price="12.50"):
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    address = make_address(api, customer)
    make_subscription(api, address, price=Decimal(price))
    [charge] = charges_of(api, address.id)
    reply = api.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200, reply.text
    return reply.json()["charge"]


def _status(body):
    return body["status"].lower()


def _ledger(api, operation):
    with api.db.read() as conn:
        return list(conn.execute(select(sandbox_payments.c.amount).where(
            sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.operation == operation)
            .order_by(sandbox_payments.c.id)).scalars())


def test_an_authorized_charge_is_captured_within_seven_days_and_then_makes_its_order(tier_a):
    charge = _processed(tier_a, token="authorize_only")
    assert _status(charge) == "pending"
    tier_a.clock.advance(timedelta(days=7))  # exactly 7 x 24 h is still inside
    reply = tier_a.post(f"/charges/{charge['id']}/capture_payment", json={})
    assert reply.status_code == 200, reply.text
    assert _status(reply.json()["charge"]) == "success"
    assert ("charge/paid", charge["id"]) in events_of(tier_a, charge["id"])
    assert [t for t, _ in events_of(tier_a) if t == "order/created"]
    assert _ledger(tier_a, "capture") == [Decimal(1250)]


def test_a_capture_is_the_customers_first_paid_charge(tier_a):
    charge = _processed(tier_a, token="authorize_only")
    customer = f"/customers/{charge['customer_id'] if 'customer_id' in charge else charge['customer']['id']}"
    assert tier_a.get(customer).json()["customer"]["first_charge_processed_at"] is None
    tier_a.clock.advance(timedelta(days=1))
    assert tier_a.post(f"/charges/{charge['id']}/capture_payment", json={}).status_code == 200
    stamped = tier_a.get(customer).json()["customer"]["first_charge_processed_at"]
    assert stamped is not None and stamped.startswith(tier_a.clock.now().date().isoformat())


def test_a_capture_after_seven_days_is_refused_and_the_charge_stays_pending(tier_a):
    charge = _processed(tier_a, token="authorize_only")
    tier_a.clock.advance(timedelta(days=7, seconds=1))
    reply = tier_a.post(f"/charges/{charge['id']}/capture_payment", json={})
    assert reply.status_code == 422
    assert "7 days" in reply.json()["errors"]["status"][0]
    assert _status(tier_a.get(f"/charges/{charge['id']}").json()["charge"]) == "pending"
    assert _ledger(tier_a, "capture") == []


def test_only_a_pending_charge_can_be_captured(tier_a):
    charge = _processed(tier_a)
    reply = tier_a.post(f"/charges/{charge['id']}/capture_payment", json={})
    assert reply.status_code == 422 and "only a pending" in reply.json()["errors"]["status"][0]


def test_capturing_needs_plan_tier_a_and_the_scope_and_a_charge_of_the_store(tier_a, vapi):
    charge = _processed(tier_a, token="authorize_only")
    refused = vapi.post(f"/charges/{charge['id']}/capture_payment", json={})
    assert refused.status_code == 403 and "tier A" in str(refused.json()["errors"])
    other = tier_a.other_store(plan_tier="premium_a")
    other.version = tier_a.version
    assert other.post(f"/charges/{charge['id']}/capture_payment", json={}).status_code == 404
    no_scope = tier_a.post(f"/charges/{charge['id']}/capture_payment", json={},
                           token=tier_a.token_with("read_orders"))
    assert no_scope.status_code == 403
    assert _status(tier_a.get(f"/charges/{charge['id']}").json()["charge"]) == "pending"


def test_a_partial_refund_then_the_rest_adds_up_and_ends_refunded(tier_a):
    charge = _processed(tier_a, price="20.00")
    total = Decimal(charge["total_price"])
    first = tier_a.post(f"/charges/{charge['id']}/refund", json={"amount": "5.25"})
    assert first.status_code == 200, first.text
    body = first.json()["charge"]
    assert _status(body) == "partially_refunded"
    assert Decimal(body["total_refunds"]) == Decimal("5.25")
    rest = tier_a.post(f"/charges/{charge['id']}/refund", json={"full_refund": True, "amount": "1.00"})
    body = rest.json()["charge"]
    assert _status(body) == "refunded"
    assert Decimal(body["total_refunds"]) == total
    assert _ledger(tier_a, "refund") == [Decimal(525), (total - Decimal("5.25")) * 100]
    assert [t for t, i in events_of(tier_a, charge["id"]) if t == "charge/refunded"] == ["charge/refunded"] * 2
    again = tier_a.post(f"/charges/{charge['id']}/refund", json={"full_refund": True})
    assert again.status_code == 422 and "only a paid charge" in again.json()["errors"]["status"][0]


def test_two_refunds_of_one_amount_one_after_the_other_are_two_refunds_and_a_replay_is_none(tier_a):
    """Two requests are two refunds, whatever their amounts; only a repeat under one
    Idempotency-Key is the same request (decisions §6.8, §9.2)."""
    charge = _processed(tier_a)
    refund = f"/charges/{charge['id']}/refund"
    for total in ("1.00", "2.00"):
        reply = tier_a.post(refund, json={"amount": "1.00"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["charge"]["total_refunds"] == total
    keyed = [tier_a.post(refund, json={"amount": "1"}, headers={"Idempotency-Key": f"refund-{charge['id']}"})
             for _ in range(2)]
    assert [r.status_code for r in keyed] == [200, 200] and keyed[0].json() == keyed[1].json()
    assert keyed[1].json()["charge"]["total_refunds"] == "3.00"
    assert _ledger(tier_a, "refund") == [Decimal(100)] * 3
    assert [t for t, _ in events_of(tier_a, charge["id"])].count("charge/refunded") == 3


def _later(open_transaction, most=0.1):
    """``open_transaction`` after a random pause of up to ``most`` seconds in worker threads,
    where calls to the processor run (the event loop's own reads are left alone)."""
    def opened():
        if threading.current_thread() is not threading.main_thread():
            time.sleep(random.uniform(0, most))
        return open_transaction()
    return opened


def test_twenty_refunds_at_once_answer_200_only_for_a_refund_made_and_409_to_the_others(api, monkeypatch):
    """A hostile client's race: every 200 is a refund made and recorded, every other answer a
    409 in the errors shape (decisions §6.8, §6.12). The requests run in worker threads on
    both databases, each transaction after a random pause, so they spread over the time one
    refund holds the charge and the time after: a request that had looked at the claim of a
    refund still running, then claimed the charge once it was free, answered 200 for that
    refund again (before the fix one burst showed it in most runs on SQLite and about half on
    PostgreSQL; two bursts failed every run on both). A request that claims a free charge
    refunds for real, so the charge has room for all forty."""
    tier_a = api.other_store(plan_tier="premium_a")
    charge = _processed(tier_a, price="50.00")
    for name in ("read", "write"):
        monkeypatch.setattr(tier_a.db, name, _later(getattr(tier_a.db, name)))
    burst = [("POST", f"/charges/{charge['id']}/refund", {"amount": "1.00"})] * 20
    replies = concurrently(tier_a, burst) + concurrently(tier_a, burst)  # twice the chance of the interleaving
    monkeypatch.undo()
    statuses = Counter(r.status_code for r in replies)
    assert set(statuses) <= {200, 409} and statuses[200] >= 1, [(r.status_code, r.text) for r in replies]
    for reply in replies:
        if reply.status_code == 409:
            body = reply.json()
            assert list(body) == ["errors"] and isinstance(body["errors"], str) and body["errors"], body
    made = statuses[200]
    after = tier_a.get(f"/charges/{charge['id']}").json()["charge"]
    assert Decimal(after["total_refunds"]) == made, (statuses, after["total_refunds"])
    assert _ledger(tier_a, "refund") == [Decimal(100)] * made
    assert [t for t, _ in events_of(tier_a, charge["id"])].count("charge/refunded") == made
    assert _status(after) == "partially_refunded"
    with tier_a.db.read() as conn:  # nothing left held
        assert conn.execute(select(charges.c.claimed_by).where(charges.c.id == charge["id"])).scalar() is None


@pytest.mark.parametrize("body, field, message", [
    ({"amount": "0"}, "amount", "must be greater than 0"),
    # Found by an audit: a negative zero was "must not be negative"; it is a zero.
    ({"amount": "-0"}, "amount", "must be greater than 0"),
    ({"amount": "-0.00"}, "amount", "must be greater than 0"),
    ({"amount": -0.0}, "amount", "must be greater than 0"),
    ({"amount": "-1.00"}, "amount", None),
    ({"amount": "1.005"}, "amount", "too many decimal places"),
    ({"amount": "999.00"}, "amount", "more than what is left"),
    ({}, "amount", "is required unless full_refund is true"),
    ({"amount": ["5.00"]}, "amount", None),
    ({"amount": "5.00", "full_refund": "yes"}, "full_refund", None),
])
def test_a_refund_refuses_bad_amounts_and_changes_nothing(tier_a, body, field, message):
    charge = _processed(tier_a)
    reply = tier_a.post(f"/charges/{charge['id']}/refund", json=body)
    assert reply.status_code == 422, reply.text
    errors = reply.json()["errors"]
    assert field in errors
    if message:
        assert message in errors[field][0]
    after = tier_a.get(f"/charges/{charge['id']}").json()["charge"]
    assert _status(after) == "success" and Decimal(after["total_refunds"]) == 0
    assert _ledger(tier_a, "refund") == []


def test_a_charge_that_totals_past_a_prices_twelve_digits_is_refunded_in_part(tier_a):
    """Found by an audit: the amount was read as a price (12 integer digits), so a charge of two
    items at the highest price refunded whole but not in part ("is out of range")."""
    customer = make_customer(tier_a)
    make_payment_method(tier_a, customer, processor_payment_method_token="pm_ok")
    address = make_address(tier_a, customer)
    make_subscription(tier_a, address, price=Decimal("999999999999.99"), quantity=2)
    [charge] = charges_of(tier_a, address.id)
    paid = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert paid.status_code == 200, paid.text
    total = Decimal(paid.json()["charge"]["total_price"])
    assert total > Decimal(10) ** 12
    for amount in ("1" + "0" * 24, 10**24):  # 25 integer digits, as a string and as a number
        refused = tier_a.post(f"/charges/{charge.id}/refund", json={"amount": amount})
        assert refused.status_code == 422 and refused.json()["errors"]["amount"] == ["is out of range"]
    part = tier_a.post(f"/charges/{charge.id}/refund", json={"amount": 1_000_000_000_000})
    assert part.status_code == 200, part.text
    assert _status(part.json()["charge"]) == "partially_refunded"
    assert Decimal(part.json()["charge"]["total_refunds"]) == Decimal(10) ** 12
    past = tier_a.post(f"/charges/{charge.id}/refund", json={"amount": str(total)})
    assert past.status_code == 422 and "more than what is left" in past.json()["errors"]["amount"][0]
    rest = tier_a.post(f"/charges/{charge.id}/refund", json={"amount": str(total - Decimal(10) ** 12)})
    assert rest.status_code == 200 and _status(rest.json()["charge"]) == "refunded"
    assert _ledger(tier_a, "refund") == [Decimal(10) ** 14, (total - Decimal(10) ** 12) * 100]


def test_a_queued_charge_cannot_be_refunded_and_unknown_ids_are_404(tier_a):
    customer = make_customer(tier_a)
    address = make_address(tier_a, customer)
    make_subscription(tier_a, address)
    [queued] = charges_of(tier_a, address.id)
    reply = tier_a.post(f"/charges/{queued.id}/refund", json={"amount": "1.00"})
    assert reply.status_code == 422
    assert tier_a.post("/charges/999999999/refund", json={"amount": "1.00"}).status_code == 404


def test_refunding_needs_the_write_orders_scope(tier_a):
    charge = _processed(tier_a)
    reply = tier_a.post(f"/charges/{charge['id']}/refund", json={"amount": "1.00"},
                        token=tier_a.token_with("read_orders"))
    assert reply.status_code == 403


def test_a_full_refund_of_a_charge_paid_at_nothing_names_full_refund_not_amount(tier_a):
    """decisions §6.12: with full_refund, `amount` is ignored, so it is not the field at fault
    when nothing is left (found by a conformance audit: the 422 named `amount`)."""
    charge = _processed(tier_a, price="0.00")
    assert Decimal(charge["total_price"]) == 0
    reply = tier_a.post(f"/charges/{charge['id']}/refund", json={"full_refund": True})
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"full_refund": ["nothing is left to refund on this charge"]}
    assert _ledger(tier_a, "refund") == []


def _orders_of(api, charge_id):
    listed = api.get("/orders", params={"charge_id": charge_id, "sort_by": "id-asc"}, version="2021-11")
    return [(o["status"], o["scheduled_at"][:10]) for o in listed.json()["orders"]]


@pytest.mark.parametrize("before,after,made", [
    ((1, 1), (3, 1), 1),  # made prepaid while its charge was authorized: the charge paid one delivery
    ((3, 1), (2, 1), 3),  # a prepaid one shortened: the charge paid three
])
def test_a_capture_makes_the_orders_the_authorized_charge_paid_for(api, before, after, made):
    """Found by an audit: a capture made its orders from the subscription's cadence at capture
    time, so a change between authorization and capture made more deliveries than were paid
    for, or fewer. The charge's lines say how many each paid for; the interval steps them."""
    tier_a = api.other_store(plan_tier="premium_a")
    customer = make_customer(tier_a)
    make_payment_method(tier_a, customer, processor_payment_method_token="authorize_only")
    address = make_address(tier_a, customer)
    item = make_subscription(tier_a, address, price=Decimal("10.00"), charge_interval_frequency=before[0],
                             order_interval_frequency=before[1])
    [charge] = charges_of(tier_a, address.id)
    pending = tier_a.post(f"/charges/{charge.id}/process", json={}, version="2021-11").json()["charge"]
    assert (pending["status"], pending["orders_count"]) == ("pending", made)
    changed = tier_a.put(f"/subscriptions/{item.id}", json={"charge_interval_frequency": after[0],
                                                           "order_interval_frequency": after[1],
                                                           "order_interval_unit": "month"}, version="2021-11")
    assert changed.status_code == 200, changed.text
    captured = tier_a.post(f"/charges/{charge.id}/capture_payment", json={}, version="2021-11")
    assert captured.status_code == 200, captured.text
    assert captured.json()["charge"]["orders_count"] == made
    day = charge.scheduled_at
    months = [day.replace(month=day.month + k) if day.month + k <= 12 else
              day.replace(year=day.year + 1, month=day.month + k - 12) for k in range(made)]
    assert _orders_of(tier_a, charge.id) == [("success" if k == 0 else "queued", m.isoformat())
                                             for k, m in enumerate(months)]
    assert _ledger(tier_a, "capture") == [Decimal(pending["total_price"].replace(".", ""))]


def test_a_capture_dates_later_orders_from_the_charge_not_the_subscriptions_new_day(api):
    """Found by an audit: a prepaid charge authorized for Dec 1, whose subscription's next date
    was set to Mar 20 before the capture, made its orders on Dec 1, Jan 20 and Feb 20. They
    are the charge's date plus one and two order intervals (decisions §6.12)."""
    tier_a = api.other_store(plan_tier="premium_a")
    customer = make_customer(tier_a)
    make_payment_method(tier_a, customer, processor_payment_method_token="authorize_only")
    address = make_address(tier_a, customer)
    item = make_subscription(tier_a, address, price=Decimal("10.00"), charge_interval_frequency=3)
    [charge] = charges_of(tier_a, address.id)
    assert tier_a.post(f"/charges/{charge.id}/process", json={}).json()["charge"]["status"] == "pending"
    moved = tier_a.post(f"/subscriptions/{item.id}/set_next_charge_date",
                        json={"date": (charge.scheduled_at + timedelta(days=109)).isoformat()})
    assert moved.status_code == 200, moved.text
    assert tier_a.post(f"/charges/{charge.id}/capture_payment", json={}).status_code == 200
    day = charge.scheduled_at
    expected = [day.replace(month=day.month + k) if day.month + k <= 12 else
                day.replace(year=day.year + 1, month=day.month + k - 12) for k in range(3)]
    assert [when for _, when in _orders_of(tier_a, charge.id)] == [d.isoformat() for d in expected]


def test_a_refused_refund_or_capture_names_the_status_as_the_version_writes_it(tier_a):
    """Found by an audit: 2021-01 said `this one is queued` in the message and `QUEUED` in the
    charge (decisions §2.9: its statuses are upper case)."""
    customer = make_customer(tier_a)
    address = make_address(tier_a, customer)
    make_subscription(tier_a, address)
    [queued] = charges_of(tier_a, address.id)
    word = "QUEUED" if tier_a.version == "2021-01" else "queued"
    assert tier_a.get(f"/charges/{queued.id}").json()["charge"]["status"] == word
    refused = tier_a.post(f"/charges/{queued.id}/refund", json={"amount": "1.00"})
    assert refused.json() == {"errors": {"status": [f"only a paid charge can be refunded; this one is {word}"]}}
    paid = _processed(tier_a)
    refused = tier_a.post(f"/charges/{paid['id']}/capture_payment", json={})
    assert refused.json()["errors"]["status"][0].endswith(f"this one is {paid['status']}")


def test_a_lapsed_authorization_gives_its_code_back_to_the_next_charge(tier_a):
    """Found by an audit: while an authorization could be captured it counted as the use of the
    single-use code it carried, so the next queued charge went without the code; once the
    window closed nothing planned that charge again, and it was billed without the code (the
    schedule check named the difference). The billing run closes the lapse once."""
    from rebill.domain.schedule.audit import differences
    from rebill.domain.store import repository as stores
    from rebill.domain.store.clock import clock_for
    from rebill.domain.unit import Unit
    customer = make_customer(tier_a)
    make_payment_method(tier_a, customer, processor_payment_method_token="authorize_only")
    address = make_address(tier_a, customer)
    code = tier_a.post("/discounts", json={"code": "ONCE15", "value_type": "percentage", "value": "15",
                                           "duration": "single_use"}, version="2021-11")
    assert code.status_code == 201, code.text
    assert tier_a.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "ONCE15"}).status_code == 200
    make_subscription(tier_a, address, next_charge_scheduled_at=tier_a.clock.now().date() + timedelta(days=2))
    assert tier_a.post("/store/clock/advance", json={"days": 3}).status_code == 200
    [pending] = [c for c in charges_of(tier_a, address.id) if c.status == "pending"]
    [after] = [c for c in charges_of(tier_a, address.id) if c.status == "queued"]
    assert pending.discount_id is not None and after.discount_id is None  # the use is the authorization's
    assert tier_a.post("/store/clock/advance", json={"days": 8}).status_code == 200  # the window closes
    [after] = [c for c in charges_of(tier_a, address.id) if c.status == "queued"]
    assert after.discount_id is not None and after.total_discounts > 0
    with tier_a.db.read() as conn:
        store = stores.get(conn, tier_a.store.id)  # its test clock moved on
        assert differences(Unit(conn, store, clock_for(store, tier_a.clock.now)()), [address.id]) == []
    told = [e for e in events_of(tier_a, pending.id, "charge") if e[0] == "charge/authorization_lapsed"]
    assert told == [("charge/authorization_lapsed", pending.id)]
    assert tier_a.post("/store/clock/advance", json={"days": 1}).status_code == 200  # told once
    assert [e for e in events_of(tier_a, pending.id, "charge") if e[0] == "charge/authorization_lapsed"] == told
