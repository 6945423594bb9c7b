"""Stripe's answers as decisions §6.2 error types (issue 16): the table of docs/payments.md, row
by row, on the errors the stripe library raises (no server)."""

from __future__ import annotations

import pytest
import stripe

from rebill.domain.payment.gateway import GatewayUnavailable
from rebill.domain.payment.stripe_errors import charge_result, error_result


def _card_error(code, decline_code=None, message="Declined."):
    body = {"error": {"type": "card_error", "code": code, "message": message,
                      **({"decline_code": decline_code} if decline_code else {})}}
    return stripe.CardError(message, None, code, http_body=None, http_status=402, json_body=body)


def _invalid(code=None, param=None, status=400, message="Bad."):
    body = {"error": {"type": "invalid_request_error", "code": code, "param": param, "message": message}}
    return stripe.InvalidRequestError(message, param, code, http_status=status, json_body=body)


@pytest.mark.parametrize("code, decline_code, error_type, retryable", [
    ("card_declined", "generic_decline", "CARD_DECLINED", False),
    ("card_declined", "lost_card", "CARD_DECLINED", False),
    ("card_declined", "fraudulent", "CARD_DECLINED", False),
    ("card_declined", None, "CARD_DECLINED", False),
    ("incorrect_cvc", None, "CARD_DECLINED", False),
    ("card_declined", "insufficient_funds", "INSUFFICIENT_FUNDS", False),
    ("expired_card", None, "CARD_EXPIRED", False),
    ("card_declined", "expired_card", "CARD_EXPIRED", False),
    ("authentication_required", "authentication_required", "CUSTOMER_NEEDS_TO_UPDATE_CARD", False),
    ("card_declined", "authentication_required", "CUSTOMER_NEEDS_TO_UPDATE_CARD", False),
    ("processing_error", None, "PROCESSING_ERROR", True),
])
def test_card_errors_map_by_decline_code_then_code(code, decline_code, error_type, retryable):
    result = error_result(_card_error(code, decline_code, "Stripe says no."), charging=True)
    assert (result.outcome, result.error_type, result.retryable, result.error) == (
        "failed", error_type, retryable, "Stripe says no.")


@pytest.mark.parametrize("error", [
    _invalid("payment_method_unexpected_state"), _invalid("resource_missing", "payment_method", 404),
    _invalid(None, "payment_method"), _invalid(None, "customer", 404), _invalid("payment_method_not_available"),
])
def test_a_detached_or_vanished_method_or_customer_is_for_the_customer_to_update(error):
    result = error_result(error, charging=True)
    assert (result.error_type, result.retryable) == ("CUSTOMER_NEEDS_TO_UPDATE_CARD", False)


def test_other_refusals_are_a_processing_error_that_a_retry_would_not_change():
    result = error_result(_invalid("amount_too_small", "amount", message="Amount must be at least $0.50 usd"),
                          charging=True)
    assert (result.error_type, result.retryable, result.error) == (
        "PROCESSING_ERROR", False, "Amount must be at least $0.50 usd")
    # A capture or refund Stripe refuses (an expired authorization, say) is that call's failure.
    assert error_result(_invalid("resource_missing", status=404), charging=False).error_type == "PROCESSING_ERROR"


def test_rate_limits_and_stripes_own_errors_are_a_retryable_processing_error():
    for error in (stripe.RateLimitError("Too many", http_status=429), stripe.APIError("Oops", http_status=500)):
        result = error_result(error, charging=True)
        assert (result.outcome, result.error_type, result.retryable) == ("failed", "PROCESSING_ERROR", True)


@pytest.mark.parametrize("error", [
    stripe.APIConnectionError("timed out", should_retry=True), stripe.AuthenticationError("bad key", http_status=401),
    stripe.PermissionError("restricted key", http_status=403), stripe.IdempotencyError("other parameters"),
])
def test_no_answer_a_refused_key_or_a_refused_idempotency_key_leave_the_outcome_unknown(error):
    with pytest.raises(GatewayUnavailable):
        error_result(error, charging=True)


@pytest.mark.parametrize("status, outcome, error_type", [
    ("succeeded", "captured", None), ("requires_capture", "authorized", None),
    ("requires_action", "failed", "CUSTOMER_NEEDS_TO_UPDATE_CARD"),
])
def test_payment_intent_statuses(status, outcome, error_type):
    result = charge_result({"id": "pi_1", "status": status})
    assert (result.outcome, result.error_type) == (outcome, error_type)
    assert result.transaction_id == ("pi_1" if outcome != "failed" else None)


def test_a_payment_intent_left_without_a_method_carries_its_last_error():
    result = charge_result({"id": "pi_1", "status": "requires_payment_method", "last_payment_error": {
        "code": "card_declined", "decline_code": "insufficient_funds", "message": "Insufficient funds."}})
    assert (result.error_type, result.error) == ("INSUFFICIENT_FUNDS", "Insufficient funds.")


def test_a_payment_still_processing_is_not_an_outcome_yet():
    with pytest.raises(GatewayUnavailable):
        charge_result({"id": "pi_1", "status": "processing"})
