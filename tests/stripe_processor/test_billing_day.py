"""A billing day on a Stripe store (issue 16): the billing run pays through PaymentIntents
confirmed off-session, Stripe's test cards decline as they do in Stripe's test mode and land on
decisions §6.2 error types, dunning retries on the store's schedule, an authorize-only store
authorizes and captures through `/capture_payment`, and refunds (partial, then the rest) go
through `/refund`. Both databases; money is counted by what the suite's Stripe holds."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal

import pytest

from rebill.domain.billing import run as billing
from tests.stripe_processor.conftest import stripe_store

START = date(2027, 3, 10)
DECLINES = [  # card, error_type, whether the method becomes invalid (decisions §6.12)
    ("4000000000000002", "CARD_DECLINED", False),
    ("4000000000009995", "INSUFFICIENT_FUNDS", False),
    ("4000000000000069", "CARD_EXPIRED", True),
    ("4000002760003184", "CUSTOMER_NEEDS_TO_UPDATE_CARD", True),  # authentication_required
    ("4000002500003155", "CUSTOMER_NEEDS_TO_UPDATE_CARD", True),  # localstripe's own: requires_action
    ("4000000000000119", "PROCESSING_ERROR", False),
]


def _at(shop, day):
    shop.api.clock.set(datetime.combine(day, time(12), tzinfo=timezone.utc))


def _subscriber(shop, number="4242424242424242", price="12.50"):
    return shop.subscriber(number, price=price, on=START)


def _run(shop):
    gateway = shop.api.client.app.services.gateway
    return billing.run_store(shop.api.db, gateway, shop.api.store, shop.api.clock.now)


def _charge(shop, charge_id):
    return shop.api.get(f"/charges/{charge_id}").json()["charge"]


def _intents_by_key(shop):
    found = {}
    for intent in shop.intents():
        key = intent["metadata"]["rebill_idempotency_key"]
        assert key not in found, f"two PaymentIntents for {key}"
        found[key] = intent
    return found


@pytest.fixture
def day(shop):
    before = shop.api.clock.now()
    _at(shop, START - timedelta(days=3))
    yield shop
    shop.api.clock.set(before)


def test_a_billing_day_pays_declines_and_retries_each_on_its_error_type(day):
    shop = day
    paid, _, _ = _subscriber(shop)
    failing = {number: _subscriber(shop, number) for number, _, _ in DECLINES}
    _at(shop, START)
    summary = _run(shop)
    assert (summary.processed, summary.paid, summary.failed) == (1 + len(DECLINES), 1, len(DECLINES))
    assert summary.amounts == {"USD": Decimal("12.50")}

    charge = _charge(shop, paid)
    assert (charge["status"], charge["payment_processor"]) == ("success", "stripe")
    intents = _intents_by_key(shop)
    intent = intents[f"rebill-charge-{paid}-attempt-1"]
    assert charge["external_transaction_id"]["payment_processor"] == intent["id"]
    assert (intent["amount"], intent["currency"], intent["status"]) == (1250, "usd", "succeeded")
    assert intent["metadata"]["rebill_reference"] == f"charge {paid}"

    for number, error_type, invalid in DECLINES:
        charge_id, method, _ = failing[number]
        charge = _charge(shop, charge_id)
        assert (charge["status"], charge["error_type"], charge["retry_date"][:10]) == (
            "error", error_type, str(START + timedelta(days=1))), number
        assert charge["charge_attempts"] == 1
        assert f"rebill-charge-{charge_id}-attempt-1" in intents
        status = shop.api.get(f"/payment_methods/{method['id']}").json()["payment_method"]["status"]
        assert status == ("invalid" if invalid else "unvalidated"), number

    assert _run(shop).processed == 0  # nothing more due today: no second PaymentIntent
    assert len(_intents_by_key(shop)) == 1 + len(DECLINES)


def test_dunning_retries_on_the_store_schedule_and_a_new_card_pays_the_retry(day):
    shop = day
    charge_id, method, cus = _subscriber(shop, "4000000000009995")
    _at(shop, START)
    _run(shop)
    _at(shop, START + timedelta(days=1))
    _run(shop)  # the retry, still declined
    charge = _charge(shop, charge_id)
    assert (charge["charge_attempts"], charge["retry_date"][:10]) == (2, str(START + timedelta(days=7)))
    # The customer gives a new card: attached in Stripe, then named on the method.
    _, new = shop.customer_with_card()
    shop.client.v1.payment_methods.detach(new)
    shop.client.v1.payment_methods.attach(new, {"customer": cus})
    assert shop.api.put(f"/payment_methods/{method['id']}", json={"processor_payment_method_token": new}
                        ).status_code == 200
    _at(shop, START + timedelta(days=6))
    assert _run(shop).processed == 0  # not before its retry date
    _at(shop, START + timedelta(days=7))
    assert _run(shop).paid == 1
    assert _charge(shop, charge_id)["status"] == "success"
    intents = _intents_by_key(shop)
    assert [intents[f"rebill-charge-{charge_id}-attempt-{n}"]["status"] for n in (1, 2, 3)] == [
        "requires_confirmation", "requires_confirmation", "succeeded"]  # declines never confirmed a payment


@contextmanager
def _own_store(stripe_client, database, clock, fake_stripe, price="12.50", **store):
    """A premium_a Stripe store of its own with a subscriber due on START, the clock at START:
    (the store, the charge's id); the clock and Stripe's faults are put back after."""
    shop = stripe_store(stripe_client, database, clock, fake_stripe, plan_tier="premium_a", **store)
    before = clock.now()
    try:
        _at(shop, START - timedelta(days=3))
        charge_id, _, _ = _subscriber(shop, price=price)
        _at(shop, START)
        yield shop, charge_id
    finally:
        fake_stripe.clear_faults()
        clock.set(before)


def test_an_authorize_only_store_authorizes_then_captures_through_stripe(stripe_client, database, clock, fake_stripe):
    with _own_store(stripe_client, database, clock, fake_stripe, authorize_only=True) as (shop, charge_id):
        assert _run(shop).pending == 1
        charge = _charge(shop, charge_id)
        assert charge["status"] == "pending"
        [intent] = _intents_by_key(shop).values()
        assert (intent["capture_method"], intent["status"]) == ("manual", "requires_capture")
        captured = shop.api.post(f"/charges/{charge_id}/capture_payment", json={})
        assert captured.status_code == 200, captured.text
        assert captured.json()["charge"]["status"] == "success"
        [intent] = _intents_by_key(shop).values()
        assert intent["status"] == "succeeded"
        keys = [e["key"] for e in fake_stripe.log() if e["path"].endswith("/capture")]
        assert f"rebill-charge-{charge_id}-capture" in keys



def test_refunds_partial_then_the_rest_go_through_stripe_with_their_own_keys(day):
    shop = day
    charge_id, _, _ = _subscriber(shop, price="20.00")
    _at(shop, START)
    _run(shop)
    partial = shop.api.post(f"/charges/{charge_id}/refund", json={"amount": "5.25"})
    assert partial.status_code == 200, partial.text
    assert (partial.json()["charge"]["status"], partial.json()["charge"]["total_refunds"]) == (
        "partially_refunded", "5.25")
    rest = shop.api.post(f"/charges/{charge_id}/refund", json={"full_refund": True})
    assert rest.status_code == 200, rest.text
    assert rest.json()["charge"]["status"] == "refunded"
    [intent] = _intents_by_key(shop).values()
    assert intent["refunded"] == 2000
    keys = [e["key"] for e in shop.fake.log() if e["path"] == "/v1/refunds"]
    assert f"rebill-charge-{charge_id}-refund-0-525" in keys and f"rebill-charge-{charge_id}-refund-525-1475" in keys
    too_much = shop.api.post(f"/charges/{charge_id}/refund", json={"amount": "0.01"})
    assert too_much.status_code == 422


def test_a_free_charge_takes_nothing_and_asks_stripe_nothing(day):
    shop = day
    charge_id, _, _ = _subscriber(shop, price="0.00")
    _at(shop, START)
    assert _run(shop).paid == 1
    assert _charge(shop, charge_id)["status"] == "success"
    assert _intents_by_key(shop) == {}


@pytest.mark.parametrize("currency,price,sent", [
    ("ISK", "1000", 100000),  # Stripe keeps ISK two-decimal: 100 is one króna
    ("MGA", "5000.00", 5000),  # Stripe takes MGA whole (ISO gives it two decimals)
    ("JPY", "500", 500),
    ("KWD", "5.120", 5120),  # three decimals, the last 0: taken as it is
])
def test_amounts_go_to_stripe_in_stripes_units_of_the_currency(stripe_client, database, clock, fake_stripe,
                                                               currency, price, sent):
    """Found by an audit: 1000 ISK went to Stripe as `amount=1000` (10 kr at Stripe) and
    5000.00 MGA as 500000 (a hundred times the price); a refund and the events Stripe sends
    back are converted alike."""
    with _own_store(stripe_client, database, clock, fake_stripe, price=price, currency=currency) as (shop, charge_id):
        assert _run(shop).paid == 1
        [intent] = _intents_by_key(shop).values()
        assert (intent["amount"], intent["currency"]) == (sent, currency.lower())
        refunded = shop.api.post(f"/charges/{charge_id}/refund", json={"full_refund": True})
        assert refunded.status_code == 200 and refunded.json()["charge"]["total_refunds"] == price, refunded.text
        [intent] = _intents_by_key(shop).values()
        assert intent["refunded"] == sent


@pytest.mark.parametrize("currency,price,why", [
    ("MGA", "5000.50", "whole units"),
    ("KWD", "5.125", "tens of its minor units"),  # Stripe: a three-decimal amount ends in 0
])
def test_an_amount_stripe_cannot_hold_in_its_units_fails_the_payment_and_asks_nothing(
        stripe_client, database, clock, fake_stripe, currency, price, why):
    """A fraction of an ariary has no Stripe amount, nor has 5.125 KWD (found by an audit:
    it was sent, and Stripe refuses it): the payment fails, saying why, and no PaymentIntent
    is made."""
    with _own_store(stripe_client, database, clock, fake_stripe, price=price, currency=currency) as (shop, charge_id):
        assert _run(shop).failed == 1
        charge = _charge(shop, charge_id)
        assert (charge["status"], charge["error_type"]) == ("error", "PROCESSING_ERROR")
        assert why in charge["error"]
        assert _intents_by_key(shop) == {}


def test_a_capture_stripe_made_behind_a_500_is_recorded_from_the_payment_intent(
        stripe_client, database, clock, fake_stripe):
    """Found by an audit: Stripe captured and answered 500 (replayed for the key), and every
    capture answered 422 while the charge stayed pending, its orders never made. The
    PaymentIntent says it was captured: the capture is recorded, once."""
    with _own_store(stripe_client, database, clock, fake_stripe, authorize_only=True) as (shop, charge_id):
        assert _run(shop).pending == 1
        [intent] = _intents_by_key(shop).values()
        fake_stripe.fault(f"/v1/payment_intents/{intent['id']}/capture", "error_after", times=3)
        captured = shop.api.post(f"/charges/{charge_id}/capture_payment", json={})
        assert captured.status_code == 200, captured.text
        assert captured.json()["charge"]["status"] == "success"
        assert len(shop.api.get("/orders", params={"charge_id": charge_id}).json()["orders"]) == 1
        [intent] = _intents_by_key(shop).values()
        assert intent["status"] == "succeeded"


def test_a_refund_stripe_made_behind_a_500_is_recorded_once(day):
    """Found by an audit: a refund Stripe made behind a 500 answered 422 and was recorded
    nowhere, so the client's retry refunded a second time. The PaymentIntent's refunds name
    the key: the refund is answered and recorded, once."""
    shop = day
    charge_id, _, _ = _subscriber(shop, price="20.00")
    _at(shop, START)
    _run(shop)
    shop.fake.fault("/v1/refunds", "error_after", times=3)
    refunded = shop.api.post(f"/charges/{charge_id}/refund", json={"amount": "5.00"})
    shop.fake.clear_faults()
    assert refunded.status_code == 200, refunded.text
    assert refunded.json()["charge"]["total_refunds"] == "5.00"
    [intent] = _intents_by_key(shop).values()
    assert intent["refunded"] == 500
