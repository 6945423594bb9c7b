"""Stripe's webhook events in (issue 16): verified with the library's own check, then read
into the facts of ``inbound.py``.

- ``verify``: ``stripe.Webhook.construct_event`` with the store's endpoint secret and the
  library's tolerance (5 minutes, against real time: a store's test clock plays no part), so an
  event is Stripe's, for this endpoint, and recent; anything else is a 400.
- ``read``: the types Rebill handles (``HANDLED``) become facts; any other type is acknowledged
  and ignored (fact None). Only fields every API version of Stripe's objects has are read.

The ``stripe`` library is imported where it is used: a server whose stores all use the sandbox
never loads it (as ``router.py``).
"""

from __future__ import annotations

import json
from typing import Any

from rebill.errors import BadRequest

from .gateway import GatewayUnavailable
from .inbound import Fact, InboundEvent, MethodUnusable, MethodUpdated, PaymentSettled, Refunded
from .stripe_amounts import from_stripe

PROCESSOR = "stripe"
HANDLED = ("payment_intent.succeeded", "payment_intent.payment_failed", "charge.refunded",
           "payment_method.updated", "payment_method.detached", "customer.deleted")
DETACHED = "The payment method was detached from its customer in Stripe."
CUSTOMER_DELETED = "The customer was deleted in Stripe."


def verify(payload: bytes, signature: str | None, secret: str) -> dict[str, Any]:
    """The event, once its ``Stripe-Signature`` verifies with ``secret``; BadRequest otherwise."""
    import stripe
    if not signature:
        raise BadRequest("The Stripe-Signature header is missing")
    try:
        stripe.Webhook.construct_event(payload, signature, secret)
    except stripe.SignatureVerificationError as exc:
        raise BadRequest(f"The Stripe-Signature does not verify: {exc.user_message or exc}") from None
    except (ValueError, UnicodeDecodeError, AttributeError, TypeError, KeyError):
        # Verified, then no event to build: no JSON (json's errors are ValueErrors), or JSON
        # that is no object (the library then fails on it).
        raise BadRequest("The body is not a Stripe event") from None
    # The library's Event is built from the same text; plain JSON is what the rest reads.
    event = json.loads(payload)
    if not (isinstance(event, dict) and isinstance(event.get("id"), str) and isinstance(event.get("type"), str)
            and isinstance(event.get("data"), dict) and isinstance(event["data"].get("object"), dict)):
        raise BadRequest("The body is not a Stripe event")
    return event


def read(event: dict[str, Any]) -> InboundEvent:
    kind = event["type"]
    fact = _fact(kind, event["data"]["object"]) if kind in HANDLED else None
    return InboundEvent(PROCESSOR, event["id"], kind, fact)


def _fact(kind: str, obj: dict[str, Any]) -> Fact | None:
    if kind.startswith("payment_intent."):
        metadata = obj.get("metadata") or {}
        if not isinstance(metadata, dict) or not isinstance(obj.get("id"), str):
            return None  # not an object Stripe sends (found by an audit and a review: a 500)
        key = metadata.get("rebill_idempotency_key")
        if not isinstance(key, str):
            return None  # not a payment Rebill made
        from .stripe_errors import charge_result
        try:
            result = charge_result(obj)
        except GatewayUnavailable:  # still processing: no outcome yet
            return None
        amount, currency = obj.get("amount"), obj.get("currency")
        if not isinstance(amount, int) or not isinstance(currency, str):
            return None
        return PaymentSettled(metadata.get("rebill_store"), key, result, from_stripe(amount, currency),
                              currency.upper(), _id(obj.get("payment_method")))
    if kind == "charge.refunded":
        intent, refunded = _id(obj.get("payment_intent")), obj.get("amount_refunded")
        if intent is None or not isinstance(refunded, int) or not isinstance(obj.get("currency"), str):
            return None
        return Refunded(intent, from_stripe(refunded, obj["currency"]), obj["currency"].upper())
    if not isinstance(obj.get("id"), str):
        return None
    if kind == "payment_method.updated":
        return MethodUpdated(obj["id"], method_details(obj))
    if kind == "payment_method.detached":
        return MethodUnusable(DETACHED, method_token=obj["id"])
    return MethodUnusable(CUSTOMER_DELETED, customer_token=obj["id"])  # customer.deleted


def _id(value: Any) -> str | None:
    """An object's id, whether Stripe sent the id or the object (expanded)."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) else None


def method_details(method: dict[str, Any]) -> dict[str, Any]:
    """NOTE: issue 16, `payment_details` from a Stripe PaymentMethod: brand, last4, expiry (and
    funding, the cardholder's name)."""
    kind = method.get("type")
    kind = kind if isinstance(kind, str) else None
    info = _object(method.get(kind)) if kind else {}
    if kind == "card" and info:
        details = {"brand": info.get("brand"), "last4": info.get("last4"), "exp_month": info.get("exp_month"),
                   "exp_year": info.get("exp_year"), "funding_type": info.get("funding")}
    elif info.get("last4"):
        details = {"last4": info["last4"]}
    else:
        details = {}
    name = _object(method.get("billing_details")).get("name")
    if name:
        details["cardholder_name"] = name
    # The expiry is a number (the document says integer), whatever way it came.
    for key in ("exp_month", "exp_year"):
        value = details.get(key)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 4:
            details[key] = int(value)
        elif not isinstance(value, int) or isinstance(value, bool):
            details.pop(key, None)
    # Only the scalars Stripe sends there (found by an audit: fields of shapes Stripe never
    # sends, a string for `card`, a list for `type`, answered a signed event 500).
    return {k: v for k, v in details.items() if isinstance(v, (str, int)) and not isinstance(v, bool)}


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
