"""What a processor's webhook event tells Rebill (issue 16), in words of no processor in
particular: ``stripe_events.py`` reads Stripe's events into these, ``billing/inbound.py``
applies them, each event once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .gateway import Result


@dataclass(frozen=True, slots=True)
class PaymentSettled:
    """A payment's outcome, named by the idempotency key Rebill paid it under
    (``rebill-charge-42-attempt-1``) and the store the payment's metadata names."""

    store_ref: str | None
    idempotency_key: str
    result: Result
    amount_minor: int
    currency: str
    method_token: str | None = None


@dataclass(frozen=True, slots=True)
class Refunded:
    """How much of a payment the processor has refunded in all (minor units), whoever asked."""

    transaction_id: str
    refunded_minor: int
    currency: str


@dataclass(frozen=True, slots=True)
class MethodUpdated:
    """A payment method's details as the processor now has them (a new expiry from the card
    network, a new cardholder name)."""

    method_token: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MethodUnusable:
    """Payment methods that can no longer pay: one method (detached from its customer), or every
    method of a processor customer (deleted)."""

    reason: str
    method_token: str | None = None
    customer_token: str | None = None


Fact = PaymentSettled | Refunded | MethodUpdated | MethodUnusable


@dataclass(frozen=True, slots=True)
class InboundEvent:
    """One verified event: its id (remembered once applied), its type, and what it tells
    (None: a type Rebill does not handle, acknowledged and ignored)."""

    processor: str
    event_id: str
    type: str
    fact: Fact | None
