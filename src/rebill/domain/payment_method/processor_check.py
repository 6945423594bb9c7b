"""A payment method of a Stripe store names Stripe objects (issue 16): before it is saved, Stripe
says that its Customer (``cus_...``) and PaymentMethod (``pm_...``) exist and belong together,
and what the card is (``payment_details``). Called outside any transaction: it is a call out.

Stores on the sandbox take any tokens, as before (decisions §6.12).
"""

from __future__ import annotations

from typing import Any

import msgspec

from rebill.errors import ServiceUnavailable, ValidationFailed, add_error

from ..payment.gateway import Gateway, GatewayUnavailable
from ..payment.processors import STRIPE
from ..payment.stripe_events import method_details
from .model import PaymentMethodCreate, PaymentMethodUpdate

CUSTOMER, METHOD = "processor_customer_token", "processor_payment_method_token"


def checked_create(gateway: Gateway, store_id: int, command: PaymentMethodCreate) -> PaymentMethodCreate:
    """The command as a Stripe store saves it (processor `stripe`, details from Stripe); as sent
    on the sandbox. 422 naming the field Stripe does not know, 503 when Stripe does not answer."""
    stripe_gateway = _stripe(gateway, store_id)
    if stripe_gateway is None:
        return command
    details = _check(stripe_gateway, command.processor_name, command.processor_customer_token,
                     command.processor_payment_method_token, command.payment_details)
    return msgspec.structs.replace(command, processor_name=STRIPE, payment_details=details)


def touches_processor(command: PaymentMethodUpdate) -> bool:
    return any(name in command.changes() for name in (CUSTOMER, METHOD, "processor_name"))


def checked_update(gateway: Gateway, store_id: int, current: Any, command: PaymentMethodUpdate) -> PaymentMethodUpdate:
    """An update that points a Stripe store's method at other Stripe objects is checked as a create."""
    changes = command.changes()
    stripe_gateway = _stripe(gateway, store_id)
    if stripe_gateway is None:
        return command
    details = _check(stripe_gateway, changes.get("processor_name", current.processor_name),
                     changes.get(CUSTOMER, current.processor_customer_token),
                     changes.get(METHOD, current.processor_payment_method_token),
                     changes.get("payment_details", current.payment_details))
    return msgspec.structs.replace(command, processor_name=STRIPE, payment_details=details)


def current_details(gateway: Gateway, store_id: int, method: str) -> dict[str, Any] | None:
    """The card's details as Stripe has them now (None: no such method any more), for a
    `payment_method.updated` event. Stripe sends events in no set order and retries them for
    days, so the event's own copy may be older than one applied already (found by an audit: a
    late event put an expiry of 2030 back over 2036). 503 when Stripe does not answer: Stripe
    sends the event again later."""
    stripe_gateway = _stripe(gateway, store_id)
    if stripe_gateway is None:
        return None
    try:
        card = _retrieve(lambda: stripe_gateway.client.v1.payment_methods.retrieve(method).to_dict(), METHOD,
                         "payment method")
    except ValidationFailed:
        return None  # gone at Stripe (a detach or a customer's deletion tells its own event)
    return method_details(card)


def _stripe(gateway: Gateway, store_id: int) -> Any:
    stripe_for = getattr(gateway, "stripe_for", None)
    if stripe_for is None:
        return None
    try:
        return stripe_for(store_id)
    except GatewayUnavailable:
        raise ServiceUnavailable() from None


def _check(gateway: Any, processor_name: str | None, customer: str | None, method: str | None,
           sent: dict[str, Any] | None) -> dict[str, Any]:
    errors: dict[str, list[str]] = {}
    if processor_name is not None and processor_name.lower() != STRIPE:
        add_error(errors, "processor_name", "must be stripe: this store's payments go through Stripe")
    # NOTE: issue 16, an off-session charge names both the Customer and its PaymentMethod.
    for field, token, prefix in ((CUSTOMER, customer, "cus_"), (METHOD, method, "pm_")):
        if token is None:
            add_error(errors, field, "is required: this store's payments go through Stripe")
        elif not token.startswith(prefix):
            add_error(errors, field, f"must name a Stripe object ({prefix}...)")
    if errors:
        raise ValidationFailed(errors)
    found = _retrieve(lambda: gateway.client.v1.customers.retrieve(customer).to_dict(), CUSTOMER, "customer")
    if found.get("deleted"):
        raise ValidationFailed.field(CUSTOMER, "no such customer in Stripe")
    card = _retrieve(lambda: gateway.client.v1.payment_methods.retrieve(method).to_dict(), METHOD, "payment method")
    owner = card.get("customer")
    if owner != customer:
        raise ValidationFailed.field(METHOD, f"is not attached to the Stripe customer {customer}"
                                     if owner is None else "belongs to another Stripe customer")
    return {**(sent or {}), **method_details(card)}


def _retrieve(fetch: Any, field: str, noun: str) -> Any:
    import stripe
    try:
        return fetch()
    except stripe.InvalidRequestError as exc:
        if exc.http_status == 404 or exc.code == "resource_missing":
            raise ValidationFailed.field(field, f"no such {noun} in Stripe") from None
        raise ValidationFailed.field(field, exc.user_message or "refused by Stripe") from None
    except stripe.StripeError:
        # Not reached, or the store's key refused: nothing is known of the objects yet.
        raise ServiceUnavailable() from None
