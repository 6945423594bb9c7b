"""The head (2021-11) contract of charges (spec 01 Charge, decisions §5.9-§5.13, 03-real-fields
"charge (2021-11)"): serializer, request schemas and list contract, merged by ``contract.py``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.external_ids import platform_id
from rebill.api.fields import Field, Schema
from rebill.domain.charge.model import STATUSES, Charge
from rebill.domain.geo import country_name
from rebill.domain.money import format_amount

from .serializers import _analytics, ts

NO_IMAGES = {"large": None, "medium": None, "original": None, "small": None}


def address(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """A charge's or order's address document, with `country` (03-real-fields, schema only):
    the name of its `country_code`."""
    if document is None:
        return None
    shown = dict(document)
    code = shown.get("country_code")
    shown["country"] = country_name(code) if code else None
    return shown


def line_extras(line: dict[str, Any]) -> dict[str, Any]:
    """The fields 03-real-fields knows from client schemas only (charge and order lines): the
    platform ids, `price` (the unit price) and `subscription_id` (the purchase item), as
    2021-01 names them; `images` with its `sort_order`."""
    return {
        # Every size, null where the catalog gave none (a product may give some sizes only).
        "images": {**NO_IMAGES, **(line["images"] or {}), "sort_order": (line["images"] or {}).get("sort_order")},
        "platform_product_id": platform_id(line["external_product_id"]),
        "platform_variant_id": platform_id(line["external_variant_id"]),
        "price": line["unit_price"],
        "subscription_id": line["purchase_item_id"],
    }


def _line(line: dict[str, Any]) -> dict[str, Any]:
    return {
        **line_extras(line),
        "purchase_item_id": line["purchase_item_id"],
        "purchase_item_type": line["purchase_item_type"],
        "external_product_id": {"ecommerce": line["external_product_id"]},
        "external_variant_id": {"ecommerce": line["external_variant_id"]},
        "grams": line["grams"],
        "handle": None,
        "original_price": line["original_price"],
        "properties": line["properties"],
        "quantity": line["quantity"],
        "sku": line["sku"],
        "tax_due": line["tax_due"],
        "tax_lines": line["tax_lines"],
        "taxable": line["taxable"],
        "taxable_amount": line["taxable_amount"],
        "title": line["title"],
        "total_price": line["total_price"],
        "unit_price": line["unit_price"],
        "unit_price_includes_tax": line["unit_price_includes_tax"],
        "variant_title": line["variant_title"],
    }


def _shipping_line(line: dict[str, Any]) -> dict[str, Any]:
    return {"code": line["code"], "price": line["price"], "retrieved_at": None, "source": line["source"],
            "status": "active", "tax_lines": line["tax_lines"], "taxable": line["taxable"], "title": line["title"]}


def charge(c: Charge) -> dict[str, Any]:
    money = c.currency
    return {
        "id": c.id,
        "address_id": c.address_id,
        "analytics_data": _analytics(c.analytics_data),
        "billing_address": address(c.billing_address),
        "browser_ip": None,  # NOTE: 03-real-fields, schema only (as client_details.browser_ip)
        "charge_attempts": c.charge_attempts,
        "client_details": {"browser_ip": None, "user_agent": None},
        "created_at": ts(c.created_at),
        "currency": c.currency,
        "customer": {"id": c.customer_id, "email": c.customer_email, "hash": c.customer_hash,
                     "external_customer_id": {"ecommerce": c.customer_external_id}},
        "discounts": c.discounts,
        "error": c.error,
        "error_type": c.error_type,
        "external_order_id": {"ecommerce": c.external_order_id},
        "external_transaction_id": {"payment_processor": c.external_transaction_id},
        # NOTE: spec 01 Charge names `external_variant_id_not_found` (boolean); 03-real-fields
        # saw `external_variant_not_found` (null). Clients may read either.
        "external_variant_id_not_found": False,
        "external_variant_not_found": None,
        # NOTE: decisions §5.10, two t's in 2021-11 (2021-01 keeps the document's one).
        "has_uncommitted_changes": c.has_uncommitted_changes,
        "last_charge_attempt": ts(c.last_charge_attempt),
        "line_items": [_line(line) for line in c.line_items],
        "merged_at": ts(c.merged_at),
        "note": c.note,
        "order_attributes": c.order_attributes,
        "orders_count": c.orders_count,
        "original_scheduled_at": c.original_scheduled_at.isoformat() if c.original_scheduled_at else None,
        "payment_processor": c.payment_processor,
        "processed_at": ts(c.processed_at),
        "retry_date": c.retry_date.isoformat() if c.retry_date else None,
        "scheduled_at": c.scheduled_at.isoformat(),
        "shipping_address": address(c.shipping_address),
        "shipping_lines": [_shipping_line(line) for line in c.shipping_lines],
        "status": c.status,
        "subtotal_price": format_amount(c.subtotal_price, money),
        "tags": c.tags or "",
        "tax_lines": c.tax_lines,
        "taxable": c.taxable,
        "taxes_included": c.taxes_included,
        "total_discounts": format_amount(c.total_discounts, money),
        "total_duties": format_amount(Decimal(0), money),
        "total_line_items_price": format_amount(c.total_line_items_price, money),
        "total_price": format_amount(c.total_price, money),
        "total_refunds": format_amount(c.total_refunds, money),
        "total_tax": format_amount(c.total_tax, money),
        "total_weight_grams": c.total_weight_grams,
        "type": c.type,
        "updated_at": ts(c.updated_at),
    }


def statuses(*allowed: str, transform: Any = str.lower) -> q.QueryParser:
    """One status or several, comma-separated (spec 02 Charge list ``status``)."""
    @q.typed(type="array", items={"type": "string", "enum": list(allowed)}, minItems=1)
    def parse(value: str) -> list[str]:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        bad = [p for p in parts if p not in allowed]
        if not parts or bad:
            raise ValueError(f"Invalid value: {value}. Must be one or more of {', '.join(allowed)}")
        return [transform(p) for p in parts]
    return parse


@q.typed(type="string", format="date")
def date_(value: str) -> Any:
    """A date filter: a bare date or a datetime, whose UTC date counts (decisions §2.5)."""
    return q.filter_datetime(value).date()


SERIALIZERS: dict[str, Serializer] = {"charge": charge}
ITEMS = Field("purchase_item_ids", "list", nullable=False, items="int")
# NOTE: decisions §5.11 names `purchase_item_ids`; the address skip's `subscription_ids` (spec 01)
# names the same items here too (found by an audit: sent to a charge, it was ignored and the
# whole charge skipped). Both sent must agree.
SUBSCRIPTION_IDS = Field("subscription_ids", "list", nullable=False, items="int", key="purchase_item_ids")
# A charge's skip and unskip take every name either version gives the items, 2021-01's single
# `subscription_id` too (decisions §5.11): a name taken as unknown would skip the whole charge
# (found by an audit). None may be null: only no name at all is the whole charge.
SKIP_ITEMS = Schema(ITEMS, SUBSCRIPTION_IDS,
                    Field("subscription_id", "int", nullable=False, key="purchase_item_ids", convert=lambda v: [v]))
REFUND_DIGITS = 24
SCHEMAS: dict[str, Schema] = {
    "charge.skip": SKIP_ITEMS,
    "charge.unskip": SKIP_ITEMS,
    "charge.change_next_charge_date": Schema(Field("next_charge_date", "date", required=True, nullable=False)),
    # NOTE: decisions §6.8, §6.12: the currency's places are checked against the charge's currency.
    # A part of a charge, which may total past a price's 12 digits (found by an audit: a charge
    # of 2,145,000,000,004.98 refunded whole but not in part): up to 24 integer digits, more than
    # a charge can total (a line below 10**12 x a quantity up to 10**6 x up to 1,000 deliveries
    # a charge, and its tax), within the 28 significant digits of decimal arithmetic.
    "charge.refund": Schema(Field("amount", "money", decimals=None, digits=REFUND_DIGITS),
                            Field("full_refund", "bool")),
    # NOTE: spec 01 Addresses skip, `subscription_ids`; the sample sends `purchase_item_ids`.
    "address.skip_charge": Schema(
        Field("date", "date", required=True, nullable=False),
        SUBSCRIPTION_IDS, ITEMS,
        one_of=(("subscription_ids", "purchase_item_ids"),),
    ),
}
LISTS: dict[str, ListContract] = {
    "charges": ListContract(
        plural="charges",
        kind="charge",
        filters={
            **q.window("created_at", "updated_at", "processed_at"),
            "address_id": ("address_id", q.integer),
            "customer_id": ("customer_id", q.integer),
            "discount_code": ("discount_code", q.text),
            "discount_id": ("discount_id", q.integer),
            "external_order_id": ("external_order_id", q.text),
            "ids": ("ids", q.ids),
            "purchase_item_id": ("purchase_item_id", q.integer),
            "purchase_item_ids": ("purchase_item_ids", q.ids),
            "scheduled_at": ("scheduled_at", date_),
            "scheduled_at_min": ("scheduled_at_min", date_),
            "scheduled_at_max": ("scheduled_at_max", date_),
            "status": ("status", statuses(*STATUSES)),
        },
        sorts=("id", "created_at", "updated_at", "scheduled_at"),
        default_sort="id-asc",
        includes=("charge_activities", "customer", "metafields", "payment_methods"),
        date_sorts=("scheduled_at",),
    ),
}
