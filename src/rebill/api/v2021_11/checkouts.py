"""The head (2021-11) contract of checkouts (spec 02 Checkout, decisions §7.7.14: spec 02's
field names with 2021-11's conventions; 03-real-fields "checkout (2021-01)"): serializers of
the checkout, its charge result and its shipping rates, and the request schemas, merged by
``contract.py``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.checkout.lines import MAX_LINES
from rebill.domain.checkout.model import ADDRESS_FIELDS, PAYMENT_TYPES, SUBSCRIPTION, Checkout, CheckoutCharge
from rebill.domain.customer.service import email_problem
from rebill.domain.money import format_amount
from rebill.domain.payment_method.model import token_card_data_problem
from rebill.domain.subscription.service import MAX_QUANTITY

from .charges import NO_IMAGES
from .parsers import ATTRIBUTE, currency_code
from .payment_methods import BILLING_ADDRESS
from .serializers import _analytics, ts


def _address(document: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if document is None else {name: document.get(name) for name in ADDRESS_FIELDS}


def _line(line: dict[str, Any], priced: dict[str, Any] | None, currency: str) -> dict[str, Any]:
    """A line as sent and as the catalog priced it; ``priced`` is its charge line."""
    images = line.get("images")
    subscription = line["type"] == SUBSCRIPTION
    unit_price = priced["unit_price"] if priced else format_amount(Decimal(line["price"]), currency)
    return {
        "charge_interval_frequency": line["charge_interval_frequency"],
        "cutoff_day_of_month": line["cutoff_day_of_month"],
        "cutoff_day_of_week": line["cutoff_day_of_week"],
        "expire_after_specific_number_of_charges": line["expire_after_specific_number_of_charges"],
        "external_product_id": {"ecommerce": line["product_id"]},
        "external_variant_id": {"ecommerce": line["variant_id"]},
        "first_recurring_charge_delay": line["first_recurring_charge_delay"],
        "fulfillment_service": "manual",
        "grams": line["grams"],
        "handle": line["handle"],
        "image": (images or {}).get("original"),
        "images": {**NO_IMAGES, **(images or {})},
        "line_price": priced["total_price"] if priced else None,
        "order_day_of_month": line["order_day_of_month"],
        "order_day_of_week": line["order_day_of_week"],
        "order_interval_frequency": line["order_interval_frequency"],
        "order_interval_unit": line["order_interval_unit"],
        "order_interval_unit_type": line["order_interval_unit"],
        "original_price": format_amount(Decimal(line["price"]), currency),
        "price": unit_price,
        "product_id": line["product_id"],
        "product_type": line["product_type"],
        "properties": line["properties"],
        "quantity": line["quantity"],
        "recurring_price": unit_price if subscription else None,
        "requires_shipping": line["requires_shipping"],
        "sku": line["sku"],
        "subscription_id": line["subscription_id"],
        "tax_code": None,
        "taxable": line["taxable"],
        "title": line["title"],
        "type": line["type"],
        "variant_id": line["variant_id"],
        "variant_title": line["variant_title"],
        "vendor": line["vendor"],
    }


def checkout(c: Checkout) -> dict[str, Any]:
    money = c.currency
    priced = c.pricing
    charged = priced.get("line_items") or []
    shipping = priced.get("shipping_lines") or []
    return {
        # Rebill's: the number the event log names the checkout by (`object_id`).
        "id": c.id,
        "token": c.token,
        "analytics_data": _analytics(c.analytics_data),
        "applied_discount": priced.get("applied_discount"),
        "billing_address": _address(c.billing_address),
        "buyer_accepts_marketing": c.buyer_accepts_marketing,
        "charge_id": c.charge_id,
        "completed_at": ts(c.completed_at),
        "created_at": ts(c.created_at),
        "currency": c.currency,
        "discount_code": c.discount_code,
        "email": c.email,
        "external_checkout_id": {"ecommerce": c.external_checkout_id},
        "external_checkout_source": c.external_checkout_source,
        "external_customer_id": {"ecommerce": c.external_customer_id},
        "line_items": [_line(line, charged[i] if i < len(charged) else None, money)
                       for i, line in enumerate(c.line_items)],
        "note": c.note,
        # NOTE: spec 01 Versioning 4 and decisions §7.7.14: 2021-11 names them `order_attributes`.
        "order_attributes": c.note_attributes,
        "payment_processor": c.payment_processor,
        "payment_processor_customer_id": c.payment_processor_customer_id,
        "payment_processor_transaction_id": c.payment_processor_transaction_id,
        "phone": c.phone,
        "requires_shipping": bool(priced.get("requires_shipping")),
        "shipping_address": _address(c.shipping_address),
        "shipping_address_validations": priced.get("shipping_address_validations"),
        # NOTE: spec 02 Checkout, `shipping_line` is an array and `shipping_rate` the applied
        # rate's name (03-real-fields saw objects: the seeds win, docs/api-choices.md).
        "shipping_line": [{"code": s["code"], "price": s["price"], "title": s["title"]} for s in shipping],
        "shipping_rate": (shipping[0]["title"] or shipping[0]["code"]) if shipping else None,
        "subtotal_price": format_amount(c.subtotal_price, money),
        "tax_lines": priced.get("tax_lines") or [],
        "taxes_included": c.taxes_included,
        "total_price": format_amount(c.total_price, money),
        "total_tax": format_amount(c.total_tax, money),
        "updated_at": ts(c.updated_at),
    }


def checkout_charge(result: CheckoutCharge) -> dict[str, Any]:
    """NOTE: spec 02 Checkouts charge result (`checkout_charge`)."""
    c = result.checkout
    return {
        # The processor's authorization of a payment awaiting its capture (authorize-only).
        "authorization_token": c.payment_processor_transaction_id if result.status == "pending" else None,
        "charge_id": c.charge_id,
        "free": c.total_price == 0,
        "payment_processor": c.payment_processor,
        "payment_processor_customer_id": c.payment_processor_customer_id,
        "payment_processor_transaction_id": c.payment_processor_transaction_id,
        "payment_token": c.payment_token,
        "payment_type": c.payment_type,
        "status": result.status,
    }


def shipping_rate(found: dict[str, Any]) -> dict[str, Any]:
    """NOTE: spec 02 shipping rate object; `checkout` holds the totals the rate gives."""
    rate, money = found["rate"], found["currency"]
    return {
        "checkout": {name: format_amount(found[name], money)
                     for name in ("subtotal_price", "total_price", "total_tax")},
        "code": rate.get("code"),
        "delivery_range": None,
        "description": None,
        "handle": rate.get("code"),
        "name": rate.get("title") or rate.get("code"),
        "phone_required": False,
        "price": found["price"],
        "tax_lines": [],
        "title": rate.get("title"),
    }


# Requests --------------------------------------------------------------------------------

def _payment_type(value: str) -> str:
    # Upper case as spec 02 writes them; any case is accepted (as for payment methods).
    if value.strip().upper() not in PAYMENT_TYPES:
        raise ValueError(f"must be one of: {', '.join(PAYMENT_TYPES)}")
    return value.strip().upper()


# NOTE: spec 02 Checkouts, `quantity`, `product_id` and `variant_id` are required per line
# (decisions §7.7.1: a catalog product's and variant's external ids).
LINE = Schema(
    Field("product_id", "external_id", required=True, nullable=False, max_length=64),
    Field("variant_id", "external_id", required=True, nullable=False, max_length=64),
    Field("quantity", "int", required=True, nullable=False, domain_range=(1, MAX_QUANTITY)),
    Field("properties", "list", nullable=False, items=ATTRIBUTE),
    # The cadence's ranges are not stated: a line without a unit is a one-time line, whose
    # cadence fields are not read (decisions §7.7.2).
    Field("charge_interval_frequency", "int"),
    Field("order_interval_frequency", "int"),
    Field("order_interval_unit", "str", max_length=16),
    Field("order_day_of_month", "int"),
    Field("order_day_of_week", "int"),
    Field("cutoff_day_of_month", "int"),
    Field("cutoff_day_of_week", "int"),
    Field("expire_after_specific_number_of_charges", "int"),
    Field("first_recurring_charge_delay", "int"),
)
FIELDS = (
    Field("analytics_data", "object"),
    Field("billing_address", "object", items=BILLING_ADDRESS),
    Field("buyer_accepts_marketing", "bool"),
    Field("currency", "str", convert=currency_code),
    Field("discount_code", "str"),
    Field("email", "str", check=email_problem),
    Field("external_checkout_id", "external_id", max_length=64),
    Field("external_checkout_source", "str", max_length=64),
    Field("external_customer_id", "external_id", max_length=64),
    # NOTE: spec 02 Checkouts names it so in the body; decisions §7.7.14 keeps spec 02's names in
    # 2021-11 too (found by an audit: 2021-11 dropped it). Two names that disagree: 422.
    Field("external_checkout_customer_id", "external_id", max_length=64, key="external_customer_id"),
    Field("note", "str", max_length=4096),
    Field("order_attributes", "list", items=ATTRIBUTE, key="note_attributes"),
    # NOTE: spec 02 Checkouts, with `partial_shipping` the country and zip are enough for now.
    Field("partial_shipping", "bool"),
    Field("phone", "str", max_length=64),
    Field("shipping_address", "object", items=BILLING_ADDRESS),
)

SERIALIZERS: dict[str, Serializer] = {"checkout": checkout, "checkout_charge": checkout_charge,
                                      "shipping_rate": shipping_rate}
SCHEMAS: dict[str, Schema] = {
    # NOTE: spec 02 Checkouts, `line_items` is required on create; every field is optional on update.
    "checkout.create": Schema(Field("line_items", "list", required=True, nullable=False, items=LINE, max_items=MAX_LINES),
                              *FIELDS),
    "checkout.update": Schema(Field("line_items", "list", nullable=False, items=LINE, max_items=MAX_LINES), *FIELDS),
    "checkout.charge": Schema(
        Field("payment_processor", "str", required=True, nullable=False, min_length=1, max_length=32),
        Field("payment_token", "str", required=True, nullable=False, min_length=1, max_length=255,
              check=token_card_data_problem),
        Field("payment_type", "str", convert=_payment_type),
    ),
}
LISTS: dict[str, ListContract] = {}
