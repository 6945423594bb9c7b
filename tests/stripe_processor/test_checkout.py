"""A checkout charged on a Stripe store (issue 16): the checkout's payment is one PaymentIntent
confirmed with the buyer's PaymentMethod under the checkout's attempt key; a declined card is
the checkout's 422 with Stripe's message. Both databases."""

from __future__ import annotations

from decimal import Decimal

from tests.api.test_checkouts import priced_store, ready
from tests.stripe_processor.conftest import EXP


def _method(shop, number):
    return shop.client.v1.payment_methods.create({"type": "card", "card": {"number": number, **EXP}}).id


def test_a_checkout_is_paid_by_one_payment_intent_under_its_attempt_key(shop):
    priced_store(shop.api)
    checkout = ready(shop.api)
    declined = shop.api.post(f"/checkouts/{checkout['token']}/charge", json={
        "payment_processor": "stripe", "payment_token": _method(shop, "4000000000000002")})
    assert (declined.status_code, declined.json()) == (422, {"errors": {"payment_token": ["Your card was declined."]}})
    paid = shop.api.post(f"/checkouts/{checkout['token']}/charge", json={
        "payment_processor": "stripe", "payment_token": _method(shop, "4242424242424242")})
    assert paid.status_code == 200, paid.text
    result = paid.json()["checkout_charge"]
    checkout_id = shop.api.get(f"/checkouts/{checkout['token']}").json()["checkout"]["id"]
    intents = {i["metadata"]["rebill_idempotency_key"]: i for i in shop.intents()}
    assert set(intents) == {f"rebill-checkout-{checkout_id}-attempt-1", f"rebill-checkout-{checkout_id}-attempt-2"}
    intent = intents[f"rebill-checkout-{checkout_id}-attempt-2"]
    assert intent["status"] == "succeeded" and result["payment_processor_transaction_id"] == intent["id"]
    total = Decimal(shop.api.get(f"/charges/{result['charge_id']}").json()["charge"]["total_price"])
    assert intent["amount"] == int(total * 100)
    assert intent["metadata"]["rebill_reference"] == f"checkout {checkout['token']}"


def test_a_checkout_paid_behind_a_500_is_recorded_once_and_a_retry_pays_nothing_more(shop):
    """Found by an audit: Stripe took the payment and answered 500 (replayed for the key); the
    checkout's payment names no Stripe customer, so the look-up found nothing, the charge
    answered 422, and the buyer's retry paid a second PaymentIntent. The account's recent
    PaymentIntents are searched for the key when the payment names no customer."""
    priced_store(shop.api)
    checkout = ready(shop.api)
    body = {"payment_processor": "stripe", "payment_token": _method(shop, "4242424242424242")}
    shop.fake.fault("/v1/payment_intents", "error_after", times=3)
    try:
        paid = shop.api.post(f"/checkouts/{checkout['token']}/charge", json=body)
    finally:
        shop.fake.clear_faults()
    assert paid.status_code == 200, paid.text
    again = shop.api.post(f"/checkouts/{checkout['token']}/charge", json=body)
    assert again.status_code == 422  # completed: not charged again
    intents = [i for i in shop.intents() if i["metadata"]["rebill_reference"] == f"checkout {checkout['token']}"]
    assert [i["status"] for i in intents] == ["succeeded"]

