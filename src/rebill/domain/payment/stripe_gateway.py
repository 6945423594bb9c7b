"""Stripe behind the gateway (issue 16), on the maintained ``stripe`` library.

A charge is a PaymentIntent confirmed off-session for the amount in minor units, with the
payment's idempotency key as Stripe's ``Idempotency-Key``: a repeat after a crash or a timeout
gets Stripe's first answer back and never makes a second payment. Its metadata names what it
pays and the key, so a PaymentIntent is found from Rebill's side and Rebill's from Stripe's
(the processor's webhooks). Authorize-only stores authorize (``capture_method=manual``);
captures and refunds go through Stripe with their own keys. Answers become results by
``stripe_errors.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import stripe

from .gateway import CAPTURED, FAILED, PROCESSING_ERROR, REFUNDED, GatewayUnavailable, Payment, Result
from .processors import StripeAccount
from .stripe_amounts import NotInStripeUnits, to_stripe
from .stripe_errors import charge_result, error_result

# Stripe's PaymentMethod types by Rebill's payment_type (wallet payments are card methods).
METHOD_TYPES = {"CREDIT_CARD": "card", "APPLE_PAY": "card", "GOOGLE_PAY": "card", "SEPA_DEBIT": "sepa_debit",
                "PAYPAL": "paypal"}
# NOTE: decisions §6.12, a retryable PROCESSING_ERROR may be repeated at once with the same
# key as one attempt: a rate-limited call is asked again after these pauses (seconds).
RATE_LIMIT_PAUSES = (0.5, 1.0)


# How far back a payment's PaymentIntent is looked for: Stripe lists newest first, and a retry
# comes within minutes of its first try (a billing run's batch makes 500 between).
INTENT_PAGES = 10


class StripeGateway:
    name = "stripe"

    def __init__(self, account: StripeAccount, *, timeout: float = 30.0, network_retries: int = 2,
                 rate_limit_pauses: tuple[float, ...] = RATE_LIMIT_PAUSES,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.store_id = account.store_id
        self.authorize_only = account.authorize_only
        self.webhook_secret = account.webhook_secret
        base = {"api": account.api_base} if account.api_base else None
        # NOTE: issue 16, connection errors and Stripe's 5xx are repeated by the library itself
        # with the same key; past them the outcome is unknown (GatewayUnavailable).
        self.client = stripe.StripeClient(account.secret_key, base_addresses=base,  # type: ignore[arg-type]
                                          max_network_retries=network_retries,
                                          http_client=stripe.RequestsClient(timeout=timeout))
        self._pauses, self._sleep = rate_limit_pauses, sleep

    def charge(self, payment: Payment) -> Result:
        try:
            amount = to_stripe(payment.amount_minor, payment.currency)
        except NotInStripeUnits as exc:
            return Result(FAILED, error_type=PROCESSING_ERROR, error=str(exc))
        params: dict[str, Any] = {
            "amount": amount, "currency": payment.currency.lower(),
            "payment_method_types": [METHOD_TYPES.get((payment.payment_type or "").upper(), "card")],
            "confirm": True,
            "metadata": {"rebill_store": str(payment.store_id), "rebill_reference": payment.reference,
                         "rebill_idempotency_key": payment.idempotency_key}}
        if payment.payment_method_token:
            params["payment_method"] = payment.payment_method_token
        if payment.customer_token:
            # NOTE: issue 16, a saved customer's method charged without them: off-session.
            params.update(customer=payment.customer_token, off_session=True)
        if self.authorize_only:
            params["capture_method"] = "manual"
        try:
            intent = self._call(lambda: self.client.v1.payment_intents.create(
                params, {"idempotency_key": payment.idempotency_key}).to_dict())
        except (stripe.APIError, stripe.IdempotencyError) as exc:
            # NOTE: issue 16, Stripe calls the outcome of its 5xx indeterminate (and replays it
            # for the key): the PaymentIntent this key made, if any, is the answer.
            found = self._made_by(payment, anywhere=isinstance(exc, stripe.IdempotencyError))
            if found is not None:
                return charge_result(found)
            return error_result(exc, charging=True, store_id=self.store_id)
        except stripe.StripeError as exc:
            return error_result(exc, charging=True, store_id=self.store_id)
        if intent.get("status") == "processing":
            # A replayed answer is the first one: only a read says what became of it since.
            intent = self._read_intent(intent["id"])
        return charge_result(intent)

    def capture(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
                currency: str) -> Result:
        try:
            intent = self._call(lambda: self.client.v1.payment_intents.capture(
                transaction_id, options={"idempotency_key": idempotency_key}).to_dict())
        except (stripe.APIError, stripe.IdempotencyError) as exc:
            # NOTE: issue 16, a 5xx's outcome is indeterminate (and replayed for the key): the
            # PaymentIntent says whether it was captured (found by an audit: a capture Stripe
            # made behind a 500 left the charge pending for good, its orders never made).
            intent = self._read_intent(transaction_id)
            if intent.get("status") != "succeeded":
                return error_result(exc, charging=False, store_id=self.store_id)
        except stripe.StripeError as exc:
            return error_result(exc, charging=False, store_id=self.store_id)
        if intent.get("status") == "succeeded":
            return Result(CAPTURED, transaction_id=intent["id"])
        return Result(FAILED, error_type=PROCESSING_ERROR, error=f"Stripe left the payment {intent.get('status')}.")

    def refund(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
               currency: str) -> Result:
        try:
            amount = to_stripe(amount_minor, currency)
        except NotInStripeUnits as exc:
            return Result(FAILED, error_type=PROCESSING_ERROR, error=str(exc))
        params = {"payment_intent": transaction_id, "amount": amount,
                  "metadata": {"rebill_store": str(store_id), "rebill_idempotency_key": idempotency_key}}
        try:
            refund = self._call(lambda: self.client.v1.refunds.create(params, {"idempotency_key": idempotency_key})
                                .to_dict())
        except (stripe.APIError, stripe.IdempotencyError) as exc:
            # The same for a refund: the PaymentIntent's refunds say whether this key made one
            # (found by an audit: a refund made behind a 500 was answered 422 and recorded
            # nowhere, and the client's retry refunded again).
            made = self._refund_made(transaction_id, idempotency_key)
            if made is None:
                return error_result(exc, charging=False, store_id=self.store_id)
            refund = made
        except stripe.StripeError as exc:
            return error_result(exc, charging=False, store_id=self.store_id)
        if refund.get("status") in ("failed", "canceled"):
            return Result(FAILED, error_type=PROCESSING_ERROR,
                          error=f"Stripe refused the refund ({refund.get('failure_reason') or refund.get('status')}).")
        return Result(REFUNDED, transaction_id=refund["id"])

    def made(self, store_id: int, idempotency_key: str) -> Result | None:
        """What a payment key made, if anything (gateway.made_before): the account's recent
        PaymentIntent whose metadata names it."""
        intent = self._intent_of(idempotency_key, None, pages=INTENT_PAGES)
        return None if intent is None else charge_result(intent)

    def _made_by(self, payment: Payment, *, anywhere: bool) -> Any:
        """The recent PaymentIntent whose metadata names this payment's key: the customer's 100
        most recent, or for a payment that names none (a checkout's), the account's (found by an
        audit: a checkout paid behind a 500 was answered 422, and the buyer's retry paid again).
        ``anywhere`` (the key refused for other parameters: the method changed since the key's
        first request) looks in the account's too (found by an audit: a retry after a lost
        answer, its method since moved to another Stripe customer, never found its payment).
        A 5xx of the same request looks at the customer's alone: one call, as in an outage
        every payment may ask it."""
        if payment.customer_token:
            found = self._intent_of(payment.idempotency_key, payment.customer_token, pages=1)
            if found is not None or not anywhere:
                return found
        return self._intent_of(payment.idempotency_key, None, pages=INTENT_PAGES)

    def _intent_of(self, idempotency_key: str, customer: str | None, *, pages: int) -> Any:
        """The PaymentIntent among the customer's (or the account's) most recent ones, ``pages``
        pages of 100 at most, whose metadata names the key; None when the list ends without
        it, or when a customer's first page does (a customer's payments are few). Past the
        account's pages nothing is known: GatewayUnavailable (found by a review: "made nothing"
        there let a retry record "no payment method", and the next attempt charge again), and
        the charge waits, claimed, for its event or a later look."""
        where: dict[str, Any] = {"limit": 100}
        if customer:
            where["customer"] = customer
        for _ in range(pages):
            try:
                page = self._call(lambda: self.client.v1.payment_intents.list(dict(where)).to_dict())
            except stripe.StripeError:
                raise GatewayUnavailable("Stripe could not say whether the payment was made") from None
            data = page.get("data", [])
            for intent in data:
                if (intent.get("metadata") or {}).get("rebill_idempotency_key") == idempotency_key:
                    return intent
            if not page.get("has_more") or not data:
                return None
            where["starting_after"] = data[-1]["id"]
        if customer:
            return None
        raise GatewayUnavailable("Stripe's recent PaymentIntents do not go back to this payment")

    def _refund_made(self, intent_id: str, idempotency_key: str) -> Any:
        """The PaymentIntent's refund whose metadata names this key, if Stripe made one."""
        try:
            refunds = self._call(lambda: self.client.v1.refunds.list(
                {"payment_intent": intent_id, "limit": 100}).to_dict())
        except stripe.StripeError:
            raise GatewayUnavailable("Stripe could not say whether the refund was made") from None
        return next((r for r in refunds.get("data", [])
                     if (r.get("metadata") or {}).get("rebill_idempotency_key") == idempotency_key), None)

    def _read_intent(self, intent_id: str) -> Any:
        try:
            return self._call(lambda: self.client.v1.payment_intents.retrieve(intent_id).to_dict())
        except stripe.StripeError:
            raise GatewayUnavailable("the payment is processing at Stripe") from None

    def _call(self, request: Callable[[], Any]) -> Any:
        for pause in (*self._pauses, None):
            try:
                return request()
            except stripe.RateLimitError:
                if pause is None:
                    raise
                self._sleep(pause)
        raise AssertionError("unreachable")
