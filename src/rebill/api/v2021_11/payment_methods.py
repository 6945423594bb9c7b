"""The head (2021-11) contract of payment methods (decisions §6.1, §6.12, 03-real-fields
"payment_method (2021-11)"): serializer, request schemas and list contract, merged by
``contract.py``. The deprecated 2021-01 payment sources are derived from the same serializer
(``api/v2021_01/payment_methods.py``)."""

from __future__ import annotations

import re
from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.geo import country, country_code_for_name, country_name
from rebill.domain.payment_method.model import (
    PAYMENT_TYPES,
    STATUSES,
    PaymentMethod,
    PaymentSource,
    token_card_data_problem,
)

from .serializers import ts

BILLING_FIELDS = ("address1", "address2", "city", "company", "country_code", "first_name", "last_name",
                  "phone", "province", "zip")
# NOTE: 03-real-fields payment_method (2021-11), the card fields of `payment_details`; shown
# (null when unknown) on every method, so every record has one shape.
CARD_DETAILS = ("brand", "exp_month", "exp_year", "last4")
_LAST4 = re.compile(r"[0-9]{4}", re.ASCII)


def billing_fields(document: dict[str, Any] | None) -> dict[str, Any]:
    """The stored billing address with every one of its fields, null when not given (the
    delivery schedule shows a method's billing address this way, 03-real-fields)."""
    document = document or {}
    return {name: document.get(name) for name in BILLING_FIELDS}


def billing_address(document: dict[str, Any] | None) -> dict[str, Any]:
    """Every field of spec 03, null when not given: `country` is the name of `country_code`,
    `name` the first and last names together, `company_name` the company (fields some of the
    real service's records carry, 03-real-fields payment_method (2021-11))."""
    shown = billing_fields(document)
    code = shown["country_code"]
    shown["country"] = country_name(code) if code else None
    shown["company_name"] = shown["company"]
    shown["name"] = " ".join(part for part in (shown["first_name"], shown["last_name"]) if part) or None
    return shown


def payment_method(m: PaymentMethod) -> dict[str, Any]:
    return {
        "id": m.id,
        "customer_id": m.customer_id,
        "billing_address": billing_address(m.billing_address),
        "created_at": ts(m.created_at),
        "default": m.is_default,
        "payment_details": {**dict.fromkeys(CARD_DETAILS), **(m.payment_details or {})},
        "payment_type": m.payment_type,
        "processor_customer_token": m.processor_customer_token,
        "processor_name": m.processor_name,
        "processor_payment_method_token": m.processor_payment_method_token,
        "status": m.status,
        "status_reason": m.status_reason,
        "updated_at": ts(m.updated_at),
        # NOTE: 03-real-fields, `include` is on every record: empty unless ?include= asks
        # (Call.render fills it then).
        "include": {},
    }


def payment_source(source: PaymentSource) -> dict[str, Any]:
    """2021-11 has no payment sources (spec 02: deprecated, 2021-01 only): the method and its
    customer's dunning flag, which the 2021-01 change turns into the old shape."""
    return {**payment_method(source.method), "has_payment_method_in_dunning": source.has_payment_method_in_dunning}


# Requests --------------------------------------------------------------------------------

def _payment_type(value: str) -> str:
    # Upper case as decisions §6.1 writes them; any case is accepted (as for interval units).
    if value.strip().upper() not in PAYMENT_TYPES:
        raise ValueError(f"must be one of: {', '.join(PAYMENT_TYPES)}")
    return value.strip().upper()


def _country_code(value: str) -> str:
    if country(value.strip()) is None:
        # Found by an audit: `XX` was told it "must be a 2-letter country code".
        shaped = len(value.strip()) == 2 and value.strip().isascii() and value.strip().isalpha()
        raise ValueError("is not a valid country code" if shaped else "must be a 2-letter country code")
    return value.strip().upper()


def _country(value: str) -> str:
    code = country_code_for_name(value)
    if code is None:
        raise ValueError("is not a known country")
    return code


BILLING_ADDRESS = Schema(
    Field("address1", "str"),
    Field("address2", "str"),
    Field("city", "str"),
    Field("company", "str"),
    Field("country_code", "str", convert=_country_code),
    # Spec 03 shows both; either is accepted, and they must agree.
    Field("country", "str", key="country_code", convert=_country),
    Field("first_name", "str"),
    Field("last_name", "str"),
    Field("phone", "str", max_length=64),
    Field("province", "str"),
    Field("zip", "str", max_length=32),
)
PAYMENT_DETAILS = Schema(
    Field("brand", "str", max_length=64),
    Field("exp_month", "int", minimum=1, maximum=12),
    Field("exp_year", "int", minimum=1000, maximum=9999),
    Field("last4", "str", check=lambda v: None if _LAST4.fullmatch(v) else "must be 4 digits"),
    Field("cardholder_name", "str"),
    Field("funding_type", "str", max_length=32),
    Field("paypal_email", "str"),
    Field("wallet_type", "str", max_length=32),
)
FIELDS = (
    Field("payment_type", "str", required=True, nullable=False, convert=_payment_type),
    Field("processor_customer_token", "str", min_length=1, check=token_card_data_problem),
    Field("processor_payment_method_token", "str", min_length=1, check=token_card_data_problem),
    # NOTE: decisions §6.12, optional; null or absent names the built-in sandbox gateway.
    Field("processor_name", "str", min_length=1, max_length=32),
    Field("default", "bool"),
    Field("billing_address", "object", items=BILLING_ADDRESS),
    Field("payment_details", "object", items=PAYMENT_DETAILS),
)

SERIALIZERS: dict[str, Serializer] = {"payment_method": payment_method, "payment_source": payment_source}
SCHEMAS: dict[str, Schema] = {
    "payment_method.create": Schema(
        Field("customer_id", "int", required=True, nullable=False), *FIELDS,
        # NOTE: decisions §6.12, a charge uses the method token, else the customer token.
        one_of=(("processor_payment_method_token", "processor_customer_token"),),
    ),
    # The customer is not writable: a method stays with its customer.
    "payment_method.update": Schema(*FIELDS),
}


def _any_case(*allowed: str) -> q.QueryParser:
    @q.typed(type="string", enum=[*allowed, *(a.lower() for a in allowed)])
    def parse(value: str) -> str:
        if value.strip().upper() not in allowed:
            raise ValueError(f"Invalid value: {value}. Must be one of {', '.join(allowed)}")
        return value.strip().upper()
    return parse


LISTS: dict[str, ListContract] = {
    # Spec 01 names no filters or sorts for payment methods; these follow the other lists
    # (docs/api-choices.md, Payment methods).
    "payment_methods": ListContract(
        plural="payment_methods",
        kind="payment_method",
        filters={
            **q.window("created_at", "updated_at"),
            "customer_id": ("customer_id", q.integer),
            "ids": ("ids", q.ids),
            "payment_type": ("payment_type", _any_case(*PAYMENT_TYPES)),
            "status": ("status", q.choice(*STATUSES)),
        },
        sorts=("id", "created_at", "updated_at"),
        default_sort="id-desc",
        # NOTE: spec 01 Including related objects, Payment methods: addresses.
        includes=("addresses",),
    ),
}
