"""The payment gateway: the one door money goes through (decisions §6.2).

The interface is what a processor's client needs and no more, so Stripe, Braintree or Adyen
can sit behind it: amounts in the currency's minor units, the processor's own customer and
payment-method tokens, and an idempotency key on every call. The caller derives the key from
what it is paying (charge id and attempt number), so a call repeated after a timeout or a
crash is the same call to the processor and can never take the money twice.

Failures the processor reports are results, not exceptions: the billing run records them
(``error_type`` per spec). Only a gateway that could not be reached raises
(``GatewayUnavailable``); the charge then stays claimed and the next run repeats the call
with the same key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

CAPTURED, AUTHORIZED, FAILED, REFUNDED = "captured", "authorized", "failed", "refunded"

# NOTE: decisions §6.2, the error types a payment can end with.
CARD_DECLINED = "CARD_DECLINED"
INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
CARD_EXPIRED = "CARD_EXPIRED"
CUSTOMER_NEEDS_TO_UPDATE_CARD = "CUSTOMER_NEEDS_TO_UPDATE_CARD"
PROCESSING_ERROR = "PROCESSING_ERROR"
# Rebill's own, before any gateway call: nothing to charge with.
NO_PAYMENT_METHOD = "CUSTOMER_NEEDS_TO_UPDATE_CARD"


@dataclass(frozen=True, slots=True)
class Payment:
    """One attempt to take money."""

    store_id: int
    idempotency_key: str
    reference: str  # what is paid, for the processor's records ("charge 42")
    amount_minor: int
    currency: str
    customer_token: str | None
    payment_method_token: str | None
    # The method's `payment_type` (CREDIT_CARD, SEPA_DEBIT...), for processors that ask for it.
    payment_type: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    outcome: str  # CAPTURED | AUTHORIZED | FAILED | REFUNDED
    transaction_id: str | None = None
    error_type: str | None = None
    error: str | None = None
    # A failure the processor says may pass if tried again at once (decisions §6.12).
    retryable: bool = False
    # Whether a processor was asked: a charge of 0 is paid without one (payment/router.py), and
    # says nothing of the payment method (it stays as it was, not `valid`).
    asked: bool = True

    @property
    def succeeded(self) -> bool:
        return self.outcome != FAILED


class GatewayUnavailable(Exception):
    """The processor could not be asked or did not answer: nothing is known yet."""


class Gateway(Protocol):
    """A processor's client. It may also offer ``charge_many(payments) -> list[Result | None]``
    when the processor (or the sandbox) can take a batch at once (None: that payment's answer is
    unknown); ``charge_all`` uses it. A gateway that serves several processors (the router of
    ``processors.py``) offers ``name_for(store_id)``: the processor a charge records."""

    name: str

    def charge(self, payment: Payment) -> Result:
        """Authorize and capture ``payment`` (or only authorize, where the method says so)."""
        ...

    def capture(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
                currency: str) -> Result:
        ...

    def refund(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
               currency: str) -> Result:
        ...


def made_before(gateway: Gateway, store_id: int, idempotency_key: str) -> Result | None:
    """What the processor made of a payment ``idempotency_key`` an earlier try sent without an
    answer coming back (a process that died, a lost answer), or None when it made nothing of it
    (or cannot tell: a gateway without ``made``). Raises GatewayUnavailable when it cannot be
    asked. A retry whose payment method has gone since asks this first (found by an audit: the
    retry recorded "no payment method" without asking, and the dunning's next attempt charged
    the customer a second time)."""
    made = getattr(gateway, "made", None)
    return None if made is None else made(store_id, idempotency_key)


def processor_name(gateway: Gateway, store_id: int) -> str:
    """The name a payment of ``store_id`` records as its charge's ``payment_processor``."""
    name_for = getattr(gateway, "name_for", None)
    return name_for(store_id) if name_for is not None else gateway.name


def charge_all(gateway: Gateway, payments: list[Payment]) -> list[Result | None]:
    """Each payment's result, in order; None where the gateway could not be asked (unknown:
    the caller asks again later with the same key)."""
    many = getattr(gateway, "charge_many", None)
    if many is not None:
        try:
            return list(many(payments))
        except GatewayUnavailable:
            return [None] * len(payments)
    results: list[Result | None] = []
    for payment in payments:
        try:
            results.append(gateway.charge(payment))
        except GatewayUnavailable:
            results.append(None)
    return results
