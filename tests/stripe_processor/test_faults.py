"""When Stripe does not answer, answers late, limits or fails (issue 16, decisions §6.5,
§6.12): an answer that never arrived leaves the charge claimed and is finished by the next run
with the same idempotency key, whose replay is Stripe's first answer; rate limits are asked
again at once, then recorded as a retryable PROCESSING_ERROR; a 500 is looked up by its key
before it counts as a failure. Never a second PaymentIntent for one attempt."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

import pytest

from rebill.domain.billing import run as billing
from tests.builders import charges_of

START = date(2027, 3, 10)
CREATE = "/v1/payment_intents"


@pytest.fixture
def due(shop):
    """A customer paying with 4242 whose charge is due now; its id."""
    before = shop.api.clock.now()
    shop.api.clock.set(datetime.combine(START - timedelta(days=2), time(12), tzinfo=timezone.utc))
    charge_id, _, _ = shop.subscriber(price="30.00", on=START)
    shop.api.clock.set(datetime.combine(START, time(12), tzinfo=timezone.utc))
    yield charge_id
    shop.api.clock.set(before)


def _run(shop):
    return billing.run_store(shop.api.db, shop.api.client.app.services.gateway, shop.api.store, shop.api.clock.now)


def _charge(shop, charge_id):
    return shop.api.get(f"/charges/{charge_id}").json()["charge"]


def _executed(shop, key):
    """How many requests with ``key`` Stripe ran (not replays, not refused before running)."""
    return sum(1 for e in shop.fake.log() if e["account"] == shop.secret_key and e["key"] == key
               and not e["replayed"] and e["status"] not in (429,) and e["fault"] != "error_before")


def test_an_answer_that_never_came_is_the_right_outcome_on_the_next_run_with_the_same_key(shop, due):
    key = f"rebill-charge-{due}-attempt-1"
    shop.fake.fault(CREATE, "drop_after", times=3)  # the library's own two retries are dropped too
    summary = _run(shop)
    assert summary.processed == 0  # unknown: nothing recorded
    [held] = [c for c in charges_of(shop.api, _address_of(shop, due)) if c.id == due]
    assert held.status == "queued" and held.claimed_by is not None  # the claim stays
    [intent] = shop.intents()
    assert intent["status"] == "succeeded"  # Stripe took the money; Rebill did not hear it
    assert _run(shop).processed == 0  # the claim is fresh: nobody asks again yet
    shop.api.clock.advance(timedelta(seconds=61))
    summary = _run(shop)
    assert (summary.processed, summary.paid) == (1, 1)
    charge = _charge(shop, due)
    assert charge["status"] == "success" and charge["charge_attempts"] == 1  # one attempt
    assert charge["external_transaction_id"]["payment_processor"] == intent["id"]
    assert len(shop.intents()) == 1 and _executed(shop, key) == 1
    assert any(e["replayed"] for e in shop.fake.log() if e["key"] == key and e["account"] == shop.secret_key)


def test_a_timeout_on_a_manual_process_is_503_then_the_same_key_finishes_it(shop, due):
    shop.fake.fault(CREATE, "drop_after", times=3, delay=0.2)
    response = shop.api.post(f"/charges/{due}/process", json={})
    assert response.status_code == 503
    assert shop.api.post(f"/charges/{due}/process", json={}).status_code == 409  # claimed meanwhile
    shop.api.clock.advance(timedelta(seconds=61))
    response = shop.api.post(f"/charges/{due}/process", json={})
    assert response.status_code == 200, response.text
    assert response.json()["charge"]["status"] == "success"
    assert len(shop.intents()) == 1 and _executed(shop, f"rebill-charge-{due}-attempt-1") == 1


def _method_of(shop, charge_id):
    customer_id = _charge(shop, charge_id)["customer"]["id"]
    [method] = shop.api.get("/payment_methods", params={"customer_id": customer_id}).json()["payment_methods"]
    return method


def test_a_lost_answer_whose_method_moved_to_another_stripe_customer_is_found_and_recorded_once(shop, due):
    """Found by an audit: after a lost answer the method was given another Stripe customer and
    card; the retry under the attempt's key was refused by Stripe as other parameters, and the
    look-up searched the new customer's PaymentIntents only, so the charge stayed claimed for
    good, its payment at Stripe never recorded. The account's are searched too."""
    shop.fake.fault(CREATE, "drop_after", times=3)
    assert shop.api.post(f"/charges/{due}/process", json={}).status_code == 503
    shop.fake.clear_faults()
    cus, pm = shop.customer_with_card()
    moved = shop.api.put(f"/payment_methods/{_method_of(shop, due)['id']}",
                         json={"processor_customer_token": cus, "processor_payment_method_token": pm})
    assert moved.status_code == 200, moved.text
    shop.api.clock.advance(timedelta(seconds=61))
    response = shop.api.post(f"/charges/{due}/process", json={})
    assert response.status_code == 200, response.text
    assert (response.json()["charge"]["status"], response.json()["charge"]["charge_attempts"]) == ("success", 1)
    assert len(shop.intents()) == 1


def test_a_lost_answer_whose_method_was_deleted_is_the_payment_stripe_made_not_a_failure(shop, due):
    """Found by an audit: after a lost answer the customer's only method was deleted; the retry
    recorded "no payment method" (attempt 1 failed) without asking Stripe, whose PaymentIntent
    had succeeded, and the dunning's next attempt with a new card charged the customer again.
    The retry asks Stripe what the attempt's key made first."""
    shop.fake.fault(CREATE, "drop_after", times=3)
    assert shop.api.post(f"/charges/{due}/process", json={}).status_code == 503
    shop.fake.clear_faults()
    assert shop.api.delete(f"/payment_methods/{_method_of(shop, due)['id']}").status_code == 204
    shop.api.clock.advance(timedelta(seconds=61))
    response = shop.api.post(f"/charges/{due}/process", json={})
    assert response.status_code == 200, response.text
    charge = response.json()["charge"]
    assert (charge["status"], charge["charge_attempts"]) == ("success", 1)
    [intent] = shop.intents()
    assert charge["external_transaction_id"]["payment_processor"] == intent["id"]


def test_a_rate_limit_is_asked_again_at_once_as_the_same_attempt(shop, due):
    shop.fake.fault(CREATE, "rate_limit", times=1)
    assert _run(shop).paid == 1
    assert _charge(shop, due)["charge_attempts"] == 1  # one attempt, asked twice
    assert len(shop.intents()) == 1


def test_a_rate_limit_that_lasts_is_a_retryable_processing_error(shop, due):
    shop.fake.fault(CREATE, "rate_limit", times=3)
    assert _run(shop).failed == 1
    charge = _charge(shop, due)
    assert (charge["status"], charge["error_type"], charge["charge_attempts"]) == ("error", "PROCESSING_ERROR", 1)
    assert shop.intents() == []  # rate limits run before anything is made
    shop.api.clock.set(datetime.combine(START + timedelta(days=1), time(12), tzinfo=timezone.utc))
    assert _run(shop).paid == 1  # the next attempt, its own key
    assert len(shop.intents()) == 1


def test_a_500_before_stripe_ran_is_a_retryable_processing_error(shop, due):
    shop.fake.fault(CREATE, "error_before", times=3)
    assert _run(shop).failed == 1
    charge = _charge(shop, due)
    assert (charge["error_type"], charge["retry_date"][:10]) == ("PROCESSING_ERROR", str(START + timedelta(days=1)))
    assert shop.intents() == []


def test_a_500_after_stripe_made_the_payment_is_found_by_its_key_and_recorded_as_paid(shop, due):
    shop.fake.fault(CREATE, "error_after", times=1)  # saved for the key: the library's retries get it too
    assert _run(shop).paid == 1
    [intent] = shop.intents()
    assert _charge(shop, due)["external_transaction_id"]["payment_processor"] == intent["id"]


def test_the_same_key_with_other_parameters_is_never_a_second_payment(shop, due):
    """A retry whose method changed after a crash: Stripe refuses the key for other parameters,
    the PaymentIntent the key made answers."""
    gateway = shop.api.client.app.services.gateway.for_store(shop.api.store.id)
    from rebill.domain.payment.gateway import Payment
    first = Payment(shop.api.store.id, "rebill-charge-0-attempt-1", "charge 0", 500, "USD", None, None)
    _, pm = shop.customer_with_card()
    cus, mine = shop.customer_with_card()
    paid = gateway.charge(Payment(**{**_fields(first), "customer_token": cus, "payment_method_token": mine}))
    assert paid.outcome == "captured"
    again = gateway.charge(Payment(**{**_fields(first), "customer_token": cus, "payment_method_token": mine,
                                      "amount_minor": 700}))
    assert (again.outcome, again.transaction_id) == ("captured", paid.transaction_id)
    assert len(shop.intents()) == 1


def _fields(payment):
    return {name: getattr(payment, name) for name in payment.__dataclass_fields__}


def _address_of(shop, charge_id):
    return _charge(shop, charge_id)["address_id"]


def test_a_real_timeout_leaves_the_outcome_unknown_and_the_same_key_gets_stripes_first_answer(shop):
    """The client gives up before the answer (REBILL_STRIPE_TIMEOUT_SECONDS); Stripe had paid."""
    from rebill.domain.payment.gateway import GatewayUnavailable, Payment
    from rebill.domain.payment.stripe_gateway import StripeGateway
    account = shop.api.client.app.services.gateway.stripe_account(shop.api.store.id)
    impatient = StripeGateway(account, timeout=0.3, network_retries=0)
    cus, pm = shop.customer_with_card()
    payment = Payment(shop.api.store.id, "rebill-charge-9-attempt-1", "charge 9", 990, "USD", cus, pm)
    shop.fake.fault(CREATE, "drop_after", delay=1.0)
    with pytest.raises(GatewayUnavailable):
        impatient.charge(payment)
    [intent] = shop.intents()
    again = impatient.charge(payment)
    assert (again.outcome, again.transaction_id) == ("captured", intent["id"])
    assert len(shop.intents()) == 1 and _executed(shop, payment.idempotency_key) == 1


def _to_sandbox(shop):
    from rebill.domain.payment import processors
    with shop.api.db.write() as conn:
        processors.choose_sandbox(conn, shop.api.store, shop.api.clock.now())


def test_a_store_changes_processor_only_once_no_payment_waits_for_an_answer(shop, due):
    """Found by an audit: a declined Stripe payment whose answer was lost was asked again of the
    sandbox after `rebill stores processor --sandbox`, which "paid" it. The change is refused
    while a charge is claimed; once the run has the answer (the same key, at Stripe) it goes."""
    from rebill.errors import ValidationFailed
    shop.fake.fault(CREATE, "drop_after", times=3)
    assert _run(shop).processed == 0  # the answer lost: the charge stays claimed
    with pytest.raises(ValidationFailed) as refused:
        _to_sandbox(shop)
    assert "1 payment(s) of the store wait for the answer of stripe" in str(refused.value.errors["processor"])
    # Another Stripe key neither (found by a review): idempotency keys are the account's.
    from tests.stripe_processor.conftest import use_stripe
    with pytest.raises(ValidationFailed):
        use_stripe(shop.api, shop.fake)
    shop.api.clock.advance(timedelta(seconds=61))
    assert _run(shop).paid == 1  # Stripe's own answer, by the same key
    _to_sandbox(shop)
    assert _charge(shop, due)["external_transaction_id"]["payment_processor"].startswith("pi_")


def test_a_stripe_payment_is_refunded_and_captured_through_stripe_only(shop, due):
    """Found by an audit: after a switch to the sandbox, refunding a Stripe payment answered 200
    `refunded` and Stripe refunded nothing. It is refused (422) and nothing changes."""
    assert _run(shop).paid == 1
    _to_sandbox(shop)
    refused = shop.api.post(f"/charges/{due}/refund", json={"full_refund": True})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"]["payment_processor"] == [
        "the charge was paid through stripe and the store now uses sandbox: its capture and refunds go through "
        "stripe only"]
    charge = _charge(shop, due)
    assert charge["status"] == "success" and charge["total_refunds"] == "0.00"
    [intent] = shop.intents()
    assert intent.get("amount_refunded", 0) == 0


def test_a_stripe_authorization_is_captured_through_stripe_only(stripe_client, database, clock, fake_stripe):
    """The same for a capture: the sandbox "captured" an authorization Stripe still held."""
    from tests.stripe_processor.conftest import stripe_store
    held = stripe_store(stripe_client, database, clock, fake_stripe, authorize_only=True, plan_tier="premium_a")
    charge_id, _, _ = held.subscriber(on=clock.now().date())
    assert _run(held).processed == 1
    assert _charge(held, charge_id)["status"] == "pending"
    _to_sandbox(held)
    refused = held.api.post(f"/charges/{charge_id}/capture_payment", json={})
    assert refused.status_code == 422, refused.text
    assert "its capture and refunds go through stripe only" in refused.json()["errors"]["payment_processor"][0]
    assert _charge(held, charge_id)["status"] == "pending"
    assert [i["status"] for i in held.intents()] == ["requires_capture"]
