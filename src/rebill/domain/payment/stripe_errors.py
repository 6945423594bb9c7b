"""Stripe's answers as Rebill's results (issue 16, decisions §6.2): the table of docs/payments.md.

Pure functions of what Stripe said, so each row of the table has a test without a server.
What leaves the outcome unknown (no answer, a key Stripe will not let us repeat, a store whose
key Stripe refuses) raises ``GatewayUnavailable``: the claim stays and the next attempt asks
again with the same idempotency key (decisions §6.5).
"""

from __future__ import annotations

import logging
from typing import Any

import stripe

from .gateway import (
    AUTHORIZED,
    CAPTURED,
    CARD_DECLINED,
    CARD_EXPIRED,
    CUSTOMER_NEEDS_TO_UPDATE_CARD,
    FAILED,
    INSUFFICIENT_FUNDS,
    PROCESSING_ERROR,
    GatewayUnavailable,
    Result,
)

# NOTE: issue 16, Stripe's error and decline codes -> decisions §6.2 error types. A card
# error with any other code (card_declined with generic_decline, lost_card, fraudulent,
# do_not_honor, incorrect_cvc...) is CARD_DECLINED.
BY_CODE = {
    "insufficient_funds": INSUFFICIENT_FUNDS,
    "expired_card": CARD_EXPIRED,
    "authentication_required": CUSTOMER_NEEDS_TO_UPDATE_CARD,
    "processing_error": PROCESSING_ERROR,
}
# Invalid requests that say the instrument itself is gone or unusable (detached, deleted,
# another customer's): the customer must give another one.
METHOD_GONE = {"payment_method_unexpected_state", "resource_missing", "payment_method_not_available",
               "payment_intent_incompatible_payment_method", "payment_method_customer_decline"}
logger = logging.getLogger("rebill.payment")
NEEDS_AUTHENTICATION = "The card needs the customer to authenticate this payment, which cannot be done off-session."


def charge_result(intent: Any) -> Result:
    """A PaymentIntent's status as the outcome of a charge."""
    status = intent.get("status")
    if status == "succeeded":
        return Result(CAPTURED, transaction_id=intent["id"])
    if status == "requires_capture":
        return Result(AUTHORIZED, transaction_id=intent["id"])
    if status == "requires_action":
        # Off-session with a card that asks for 3-D Secure (Stripe usually answers this as an
        # authentication_required error instead).
        return Result(FAILED, error_type=CUSTOMER_NEEDS_TO_UPDATE_CARD, error=NEEDS_AUTHENTICATION)
    if status == "processing":
        raise GatewayUnavailable("the payment is still processing at Stripe")
    failure = intent.get("last_payment_error")
    failure = failure if isinstance(failure, dict) else {}  # a shape Stripe never sends: no detail

    def text(name: str) -> str | None:
        value = failure.get(name)
        return value if isinstance(value, str) else None
    return _failure(text("code"), text("decline_code"), text("message") or f"Stripe left the payment {status}.")


def error_result(exc: stripe.StripeError, *, charging: bool, store_id: int | None = None) -> Result:
    """Stripe's error as a result; raises GatewayUnavailable when the outcome is unknown.
    ``charging``: a payment (where a vanished customer or method is the customer's to fix)
    rather than a capture or a refund."""
    if isinstance(exc, stripe.CardError):
        error = exc.error
        return _failure(exc.code, getattr(error, "decline_code", None) if error else None, exc.user_message)
    if isinstance(exc, stripe.RateLimitError):
        # NOTE: issue 16: rate limits run before Stripe's idempotency layer: nothing was done.
        return Result(FAILED, error_type=PROCESSING_ERROR, error="Stripe is rate limiting requests; try again.",
                      retryable=True)
    if isinstance(exc, stripe.IdempotencyError):
        # The key was used for another request: what that one did is Stripe's alone to say.
        raise GatewayUnavailable(f"Stripe refused the idempotency key: {exc.user_message}")
    if isinstance(exc, stripe.InvalidRequestError):
        param = getattr(exc, "param", None)
        if charging and (exc.code in METHOD_GONE or exc.http_status == 404 or param in ("payment_method", "customer")):
            return Result(FAILED, error_type=CUSTOMER_NEEDS_TO_UPDATE_CARD, error=exc.user_message)
        return Result(FAILED, error_type=PROCESSING_ERROR, error=exc.user_message or "Stripe refused the request.")
    if isinstance(exc, stripe.APIError) and not isinstance(exc, stripe.APIConnectionError):
        # NOTE: issue 16, Stripe's own errors (5xx) are a retryable PROCESSING_ERROR.
        return Result(FAILED, error_type=PROCESSING_ERROR,
                      error=f"Stripe had an error ({exc.request_id or 'no request id'}).", retryable=True)
    # Timeouts and connection errors (the call may have reached Stripe), a key Stripe refuses
    # (the store's settings need a fix; nothing was done): the charge waits, claimed.
    if isinstance(exc, (stripe.AuthenticationError, stripe.PermissionError)):
        logger.error("store %s: Stripe refused its key (%s); its payments wait until `rebill stores processor` "
                     "sets one that works", store_id, exc.http_status)
    else:
        logger.warning("store %s: no answer from Stripe (%s); the next attempt asks again with the same key",
                       store_id, type(exc).__name__)
    raise GatewayUnavailable(type(exc).__name__)


def _failure(code: str | None, decline_code: str | None, message: str | None) -> Result:
    error_type = BY_CODE.get(decline_code or "") or BY_CODE.get(code or "") or CARD_DECLINED
    return Result(FAILED, error_type=error_type, error=message or "Your card was declined.",
                  retryable=error_type == PROCESSING_ERROR)
