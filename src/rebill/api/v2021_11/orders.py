"""The head (2021-11) contract of orders (decisions §6.10, §6.12, 03-real-fields "order
(2021-11)"): serializer, request schemas and list contract, merged by ``contract.py``."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.money import format_amount
from rebill.domain.order.model import STATUSES, Order
from rebill.domain.order.repository import PROCESSED_SORT

from .charges import address, date_, line_extras, statuses
from .parsers import ATTRIBUTE, country_code
from .serializers import ts

# NOTE: 03-real-fields, the platform's inventory policy of a line; the default of platforms
# that track stock.
INVENTORY_POLICY = "decrement_obeying_policy"


def amount_number(amount: str | None) -> float | None:
    """A stored amount as a JSON number. NOTE: 03-real-fields order (both versions),
    `line_items[].original_price` is a number (the only amount of an order seen as a number
    alone; spec 01's strings stay everywhere else): clients with strict models refuse a string
    there (issue 15). Amounts have at most 12 integer digits and 3 decimals (Hardening), and a
    double shows every such amount to the digit."""
    return None if amount is None else float(amount)


def _line(line: dict[str, Any]) -> dict[str, Any]:
    return {
        **line_extras(line),
        "sort_order": None,  # NOTE: 03-real-fields, schema only
        "external_inventory_policy": INVENTORY_POLICY,
        "external_product_id": {"ecommerce": line["external_product_id"]},
        "external_variant_id": {"ecommerce": line["external_variant_id"]},
        "grams": line["grams"],
        "handle": None,
        "original_price": amount_number(line["original_price"]),
        "properties": line["properties"],
        "purchase_item_id": line["purchase_item_id"],
        "purchase_item_type": line["purchase_item_type"],
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
    return {"code": line["code"], "price": line["price"], "source": line["source"], "tax_lines": line["tax_lines"],
            "taxable": line["taxable"], "title": line["title"]}


def order(o: Order) -> dict[str, Any]:
    money = o.currency
    return {
        "id": o.id,
        "address_id": o.address_id,
        "billing_address": address(o.billing_address),
        # A clone has no charge: nothing has paid for it (decisions §6.12).
        "charge": None if o.charge_id is None else {
            "id": o.charge_id, "external_transaction_id": {"payment_processor": o.transaction_id},
            "payment_processor_name": o.payment_processor, "status": o.charge_status},
        "client_details": {"browser_ip": None, "user_agent": None},
        "created_at": ts(o.created_at),
        "currency": o.currency,
        "customer": {"id": o.customer_id, "email": o.customer_email, "hash": o.customer_hash,
                     "external_customer_id": {"ecommerce": o.customer_external_id}},
        "discounts": o.discounts,
        "error": o.error,
        "external_cart_token": None,
        "external_order_id": {"ecommerce": o.external_order_id},
        "external_order_name": {"ecommerce": o.external_order_name},
        # NOTE: 03-real-fields, a string, never null: the order's number in the store.
        "external_order_number": {"ecommerce": o.shown_number},
        "is_prepaid": o.is_prepaid,
        "line_items": [_line(line) for line in o.line_items],
        "note": o.note,
        "order_attributes": o.order_attributes,
        "processed_at": ts(o.processed_at),
        # NOTE: 03-real-fields, an order's scheduled_at is a datetime (a charge's is a date).
        "scheduled_at": f"{o.scheduled_at.isoformat()}T00:00:00+00:00",
        "shipping_address": address(o.shipping_address),
        "shipping_lines": [_shipping_line(line) for line in o.shipping_lines],
        "status": o.status,
        "subtotal_price": format_amount(o.subtotal_price, money),
        "tags": o.tags or "",
        # NOTE: 03-real-fields, schema only: a tax line's `code` (none is kept: null).
        "tax_lines": [{**line, "code": line.get("code")} for line in o.tax_lines],
        "taxable": o.taxable,
        "total_discounts": format_amount(o.total_discounts, money),
        "total_duties": format_amount(Decimal(0), money),
        "total_line_items_price": format_amount(o.total_line_items_price, money),
        "total_price": format_amount(o.total_price, money),
        # NOTE: decisions §6.12, refunds are made on charges; orders do not change.
        "total_refunds": format_amount(Decimal(0), money),
        "total_tax": format_amount(o.total_tax, money),
        "total_weight_grams": o.total_weight_grams,
        "type": o.type,
        "updated_at": ts(o.updated_at),
    }


class OrderUpdateSchema(Schema):
    """An order update names each read-only field the caller sent ("refuse by name",
    docs/api-choices.md, Orders), together with every other problem of the body."""

    def __init__(self, *fields: Field, read_only: frozenset[str]) -> None:
        super().__init__(*fields)
        self.read_only = read_only

    def _parse(self, body: Mapping[str, Any], *, partial: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        clean, errors = super()._parse(body, partial=partial)
        for name in sorted(self.read_only.intersection(body)):
            errors[name] = ["is read-only"]
        return clean, errors


ADDRESS_FIELDS = (
    Field("address1", "str", nullable=False, min_length=1),
    Field("address2", "str"),
    Field("city", "str", nullable=False, min_length=1),
    Field("company", "str"),
    Field("first_name", "str", nullable=False, min_length=1),
    Field("last_name", "str", nullable=False, min_length=1),
    Field("phone", "str", max_length=64),
    Field("province", "str"),
    Field("zip", "str", max_length=32),
)
ADDRESS = Schema(*ADDRESS_FIELDS, Field("country_code", "str", nullable=False, convert=country_code))
# What an order update may change (docs/api-choices.md, Orders); the rest is refused by name.
WRITABLE = ("scheduled_at", "note", "tags", "order_attributes", "shipping_address", "billing_address",
            "external_order_id")
READ_ONLY = frozenset({
    "id", "address_id", "charge", "client_details", "created_at", "currency", "customer", "discounts", "error",
    "external_cart_token", "external_order_name", "external_order_number", "is_prepaid", "line_items",
    "processed_at", "shipping_lines", "status", "subtotal_price", "tax_lines", "taxable", "total_discounts",
    "total_duties", "total_line_items_price", "total_price", "total_refunds", "total_tax", "total_weight_grams",
    "type", "updated_at"})
SCHEDULED_AT = Field("scheduled_at", "date", required=True, nullable=False)

SERIALIZERS: dict[str, Serializer] = {"order": order}
SCHEMAS: dict[str, Schema] = {
    "order.update": OrderUpdateSchema(
        Field("scheduled_at", "date", nullable=False),
        Field("note", "str", max_length=4096),
        Field("tags", "str", max_length=1024),
        Field("order_attributes", "list", nullable=False, items=ATTRIBUTE),
        Field("shipping_address", "object", nullable=False, items=ADDRESS),
        Field("billing_address", "object", nullable=False, items=ADDRESS),
        # NOTE: the platform's order id, for an integration that submits the order there.
        Field("external_order_id", "external_id", max_length=64),
        read_only=READ_ONLY,
    ),
    "order.clone": Schema(SCHEDULED_AT),
}
LISTS: dict[str, ListContract] = {
    # NOTE: spec 01 Sorting and Including (Order); filters docs/api-choices.md, Orders.
    "orders": ListContract(
        plural="orders",
        kind="order",
        filters={
            **q.window("created_at", "updated_at", "processed_at"),
            "address_id": ("address_id", q.integer),
            "charge_id": ("charge_id", q.integer),
            "customer_id": ("customer_id", q.integer),
            "external_customer_id": ("external_customer_id", q.text),
            "external_order_id": ("external_order_id", q.text),
            "ids": ("ids", q.ids),
            "purchase_item_id": ("purchase_item_id", q.integer),
            "purchase_item_ids": ("purchase_item_ids", q.ids),
            "scheduled_at_min": ("scheduled_at_min", date_),
            "scheduled_at_max": ("scheduled_at_max", date_),
            "status": ("status", statuses(*STATUSES)),
        },
        sorts=("id", "updated_at", "processed_at", "scheduled_at"),
        default_sort="id-desc",
        includes=("customer", "metafields", "subscriptions"),
        sort_columns={"processed_at": PROCESSED_SORT},
        date_sorts=("scheduled_at",),
    ),
}
