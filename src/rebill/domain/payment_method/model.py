"""The payment method as the domain sees it, and its commands (decisions §6.1, §6.12)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

# NOTE: decisions §6.1, the payment types and statuses of a payment method.
PAYMENT_TYPES = ("CREDIT_CARD", "PAYPAL", "APPLE_PAY", "GOOGLE_PAY", "SEPA_DEBIT")
UNVALIDATED, VALID, INVALID, EMPTY = "unvalidated", "valid", "invalid", "empty"
STATUSES = (UNVALIDATED, VALID, INVALID, EMPTY)
# NOTE: decisions §6.12, a customer "has a valid payment method" while one of these exists.
USABLE = (VALID, UNVALIDATED)
# NOTE: decisions §6.12, `processor_name` is optional and the sandbox gateway serves every
# label; a method created without one names the built-in gateway (the store shows it as its
# `payment_processor`, api/v2021_01/changes.py StoreAsShop).
DEFAULT_PROCESSOR = "sandbox"
# The processor fields: changing one points the method at another instrument, whose outcome
# is unknown until it is charged (decisions §6.12: a new method is `unvalidated`).
PROCESSOR_FIELDS = ("processor_name", "processor_customer_token", "processor_payment_method_token")
# NOTE: spec 02 Customers, the deprecated 2021-01 customer token fields (`<processor>_customer_token`):
# the processors they name, and the payment type of a method one of them makes (a Stripe or
# Braintree customer is a vaulted card holder; a PayPal customer pays with PayPal).
CUSTOMER_TOKEN_TYPES = {"stripe": "CREDIT_CARD", "braintree": "CREDIT_CARD", "paypal": "PAYPAL"}
_CARD_SEPARATORS = re.compile(r"[\s-]")


def _reads_as_card(token: str) -> bool:
    """A card number: 13 to 19 digits, spaces or dashes allowed between them."""
    digits = _CARD_SEPARATORS.sub("", token)
    return digits.isascii() and digits.isdigit() and 13 <= len(digits) <= 19


def card_data_problem(token: str) -> str | None:
    """NOTE: spec 02 Customers, "a customer payment token must be a tokenized customer, not card
    data": a value that reads as a card number is refused before anything stores it; None when
    the value is fine."""
    return "must be a tokenized customer, not card data" if _reads_as_card(token) else None


def token_card_data_problem(token: str) -> str | None:
    """The same rule for every token Rebill keeps or charges: a payment method's processor tokens
    (the fields that replaced the customer's, spec 02 Versioning) and a checkout's payment token.
    A card number sent there would be stored and shown back as a token."""
    return "must be a payment processor's token, not card data" if _reads_as_card(token) else None


class PaymentMethod(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py). `is_default` is the column's
    name; the API calls it `default`."""

    id: int
    store_id: int
    customer_id: int
    billing_address: dict[str, Any] | None
    is_default: bool
    payment_type: str
    payment_details: dict[str, Any] | None
    processor_name: str
    processor_customer_token: str | None
    processor_payment_method_token: str | None
    status: str
    status_reason: str | None
    created_at: datetime
    updated_at: datetime


class PaymentSource(msgspec.Struct):
    """A payment method as the deprecated 2021-01 payment sources show it: with its customer's
    dunning flag (2021-01 renders it as `has_card_error_in_dunning`)."""

    method: PaymentMethod
    has_payment_method_in_dunning: bool


class PaymentMethodCreate(msgspec.Struct, kw_only=True):
    customer_id: int
    payment_type: str
    # NOTE: decisions §6.12, a charge uses the method token, else the customer token: one of
    # the two is required.
    processor_customer_token: str | None = None
    processor_payment_method_token: str | None = None
    processor_name: str | None = None
    default: bool | None = None
    billing_address: dict[str, Any] | None = None
    payment_details: dict[str, Any] | None = None


class PaymentMethodUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set. The customer and the status are not writable:
    a method stays with its customer, and its status comes from its charges (decisions §6.12)."""

    payment_type: str | UnsetType = UNSET
    processor_customer_token: str | None | UnsetType = UNSET
    processor_payment_method_token: str | None | UnsetType = UNSET
    processor_name: str | None | UnsetType = UNSET
    default: bool | None | UnsetType = UNSET
    billing_address: dict[str, Any] | None | UnsetType = UNSET
    payment_details: dict[str, Any] | None | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}
