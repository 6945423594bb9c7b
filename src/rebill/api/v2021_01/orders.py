"""How 2021-01 differs from the head for orders (decisions §6.10, 03-real-fields "order
(2021-01)"): the old order shape, its list contract and its bodies, merged by
``contract.py``."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from rebill.api import query as q
from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.external_ids import as_integer, platform_id
from rebill.api.fields import Field, Schema
from rebill.api.v2021_11 import charges as head_charges
from rebill.api.v2021_11 import orders as head
from rebill.api.v2021_11.parsers import ATTRIBUTE
from rebill.domain.geo import country_code_for_name
from rebill.domain.order.model import STATUSES, Order
from rebill.domain.order.repository import PROCESSED_SORT

from .charges import old_address
from .purchases import naive


def _old_line(line: dict[str, Any], head_line: dict[str, Any]) -> dict[str, Any]:
    return {
        "external_inventory_policy": line["external_inventory_policy"],
        "grams": line["grams"],
        "images": line["images"],
        "original_price": line["original_price"],
        "platform_product_id": platform_id(head_line["external_product_id"]),
        "platform_variant_id": platform_id(head_line["external_variant_id"]),
        "price": line["unit_price"],
        "product_title": line["title"],
        "properties": line["properties"],
        "quantity": line["quantity"],
        "sku": line["sku"],
        "subscription_id": line["purchase_item_id"],
        "tax_lines": line["tax_lines"],
        "title": line["title"],
        "variant_title": line["variant_title"],
    }


class OrderOldShape(Change):
    """Orders show upper-case `status` and `type`, `charge_id` and `charge_status` instead of
    the `charge` object, the customer flat (`customer_id`, `email`, names, `hash`,
    `platform_customer_id`) beside a `customer` object, `platform_*` order ids, `note_attributes`,
    `shipping_date` (the scheduled date) and `shipped_date` (when it was processed), `country`
    names in the addresses, naive datetimes and `total_weight`."""

    kinds = ("order",)

    def response(self, data: dict[str, Any], obj: Order) -> dict[str, Any]:
        scheduled = naive(data["scheduled_at"])
        return {
            "id": data["id"],
            "address_id": data["address_id"],
            "address_is_active": bool(obj.address_exists),
            "billing_address": old_address(data["billing_address"]),
            "browser_ip": None,
            "charge_id": obj.charge_id,
            "charge_status": obj.charge_status.upper() if obj.charge_status else None,
            "created_at": naive(data["created_at"]),
            "currency": data["currency"],
            "customer": {"accepts_marketing": bool(obj.customer_accepts_marketing), "email": obj.customer_email,
                         "first_name": obj.customer_first_name, "last_name": obj.customer_last_name,
                         "phone": obj.customer_phone, "send_email_welcome": False, "verified_email": False},
            "customer_id": obj.customer_id,
            "discount_codes": [{"amount": data["total_discounts"], "code": d["code"], "type": d["value_type"]}
                               for d in data["discounts"]],
            "email": obj.customer_email,
            "error": data["error"],
            "first_name": obj.customer_first_name,
            "hash": obj.customer_hash,
            "is_prepaid": data["is_prepaid"],
            "last_name": obj.customer_last_name,
            "line_items": [_old_line(line, raw) for line, raw in zip(data["line_items"], obj.line_items)],
            "note": data["note"],
            "note_attributes": data["order_attributes"],
            "payment_processor": obj.payment_processor,
            "platform_cart_token": None,
            "platform_customer_id": platform_id(obj.customer_external_id),
            "platform_id": obj.external_order_id,
            "platform_order_id": platform_id(obj.external_order_id),
            # NOTE: 03-real-fields, an integer: the order's number in the store (null only
            # for a platform's number that is not one).
            "platform_order_number": as_integer(obj.shown_number),
            "processed_at": naive(data["processed_at"]),
            "scheduled_at": scheduled,
            "shipped_date": naive(data["processed_at"]),
            "shipping_address": old_address(data["shipping_address"]),
            "shipping_date": scheduled,
            "shipping_lines": [{"code": s["code"], "price": s["price"], "source": s["source"], "title": s["title"]}
                               for s in data["shipping_lines"]],
            "status": data["status"].upper(),
            "subtotal_price": data["subtotal_price"],
            "tags": data["tags"],
            "tax_lines": data["tax_lines"],
            "total_discounts": data["total_discounts"],
            "total_duties": data["total_duties"],
            "total_line_items_price": data["total_line_items_price"],
            "total_price": data["total_price"],
            # NOTE: 03-real-fields, null in 2021-01: refunds are made on charges (decisions §6.12).
            "total_refunds": None,
            "total_tax": data["total_tax"],
            "total_weight": data["total_weight_grams"],
            "transaction_id": obj.transaction_id,
            "type": data["type"].upper(),
            "updated_at": naive(data["updated_at"]),
        }

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        """The old shape as a whole, from the head's parts (its lines, addresses, totals)."""
        head_props = shape["properties"]
        head_line = head_props["line_items"]["items"]["properties"]
        id_or_text = head_line["platform_product_id"]
        line = sh.obj({
            **{name: head_line[name] for name in ("external_inventory_policy", "grams", "images", "original_price",
                                                  "platform_product_id", "platform_variant_id", "price",
                                                  "properties", "quantity", "sku", "subscription_id", "tax_lines",
                                                  "title", "variant_title")},
            "product_title": head_line["title"],
        })
        shipping_line = sh.drop(copy.deepcopy(head_props["shipping_lines"]["items"]), "tax_lines", "taxable")
        naive = sh.datetime_naive()
        upper = [s.upper() for s in STATUSES]
        charge_statuses = head_props["charge"]["properties"]["status"]["enum"]
        text = sh.nullable(sh.string())
        return sh.obj({
            "id": sh.integer(),
            "address_id": sh.integer(),
            "address_is_active": sh.boolean(),
            "billing_address": _old_address(head_props["billing_address"]),
            "browser_ip": sh.null(),
            "charge_id": sh.nullable(sh.integer()),
            # NOTE: decisions §2.9, upper case in 2021-01 (null for a clone, which has no charge).
            "charge_status": sh.enum(*(s.upper() for s in charge_statuses if s is not None), None),
            "created_at": naive,
            "currency": head_props["currency"],
            "customer": sh.obj({"accepts_marketing": sh.boolean(), "email": text, "first_name": text,
                                "last_name": text, "phone": text, "send_email_welcome": sh.boolean(),
                                "verified_email": sh.boolean()}),
            "customer_id": sh.integer(),
            "discount_codes": sh.array(sh.obj({"amount": sh.money(), "code": sh.string(),
                                               "type": head_props["discounts"]["items"]["properties"]["value_type"]})),
            "email": text,
            "error": head_props["error"],
            "first_name": text,
            "hash": text,
            "is_prepaid": sh.boolean(),
            "last_name": text,
            "line_items": sh.array(line),
            "note": head_props["note"],
            "note_attributes": head_props["order_attributes"],
            "payment_processor": sh.nullable(sh.string()),
            "platform_cart_token": sh.null(),
            "platform_customer_id": id_or_text,
            "platform_id": sh.nullable(sh.string()),
            "platform_order_id": id_or_text,
            # NOTE: 03-real-fields, an integer (null only for a platform's number that is not one).
            "platform_order_number": sh.nullable(sh.integer()),
            "processed_at": sh.nullable(naive),
            "scheduled_at": naive,
            "shipped_date": sh.nullable(naive),
            "shipping_address": _old_address(head_props["shipping_address"]),
            "shipping_date": naive,
            "shipping_lines": sh.array(shipping_line),
            "status": sh.enum(*upper),
            **{key: head_props[key] for key in ("subtotal_price", "tags", "tax_lines", "total_discounts",
                                                "total_duties", "total_line_items_price", "total_price",
                                                "total_tax")},
            "total_refunds": sh.null(),
            "total_weight": head_props["total_weight_grams"],
            "transaction_id": sh.nullable(sh.string()),
            "type": sh.enum(*(t.upper() for t in head_props["type"]["enum"])),
            "updated_at": naive,
        })


def _old_address(head: sh.Shape) -> sh.Shape:
    """An order's address as ``old_address`` shows it: `country` by name (null for a code it
    does not know) and no `country_code`; the head's nullability kept."""
    return sh.drop(copy.deepcopy(head), "country_code")


CHANGES: tuple[Change, ...] = (OrderOldShape(),)


def _country(value: str) -> str:
    code = country_code_for_name(value)
    if code is None:
        raise ValueError("is not a known country")
    return code


# NOTE: decisions §4.5, each version takes its own country field; 2021-01 takes both.
OLD_ADDRESS = Schema(*head.ADDRESS.fields,
                     Field("country", "str", nullable=False, key="country_code", convert=_country))
WRITABLE = ("scheduled_at", "shipping_date", "note", "tags", "note_attributes", "shipping_address",
            "billing_address", "platform_order_id")
READ_ONLY = frozenset({
    "id", "address_id", "address_is_active", "browser_ip", "charge_id", "charge_status", "created_at", "currency",
    "customer", "customer_id", "discount_codes", "email", "error", "first_name", "hash", "is_prepaid", "last_name",
    "line_items", "payment_processor", "platform_cart_token", "platform_customer_id", "platform_id",
    "platform_order_number", "processed_at", "shipped_date", "shipping_lines", "status", "subtotal_price",
    "tax_lines", "total_discounts", "total_duties", "total_line_items_price", "total_price", "total_refunds",
    "total_tax", "total_weight", "transaction_id", "type", "updated_at"})

SCHEMAS: dict[str, Schema] = {
    "order.update": head.OrderUpdateSchema(
        Field("scheduled_at", "date", nullable=False),
        # `shipping_date` is the scheduled date under its 2021-01 name; both may be sent.
        Field("shipping_date", "date", nullable=False, key="scheduled_at"),
        Field("note", "str", max_length=4096),
        Field("tags", "str", max_length=1024),
        Field("note_attributes", "list", nullable=False, items=ATTRIBUTE, key="order_attributes"),
        Field("shipping_address", "object", nullable=False, items=OLD_ADDRESS),
        Field("billing_address", "object", nullable=False, items=OLD_ADDRESS),
        Field("platform_order_id", "external_id", max_length=64, key="external_order_id"),
        read_only=READ_ONLY,
    ),
    "order.change_date": Schema(head.SCHEDULED_AT),
}

_orders = head.LISTS["orders"]
_filters = {k: v for k, v in _orders.filters.items()
            if k not in ("purchase_item_id", "purchase_item_ids", "external_order_id", "external_customer_id",
                         "processed_at_min", "processed_at_max", "status")}
_filters.update({
    "subscription_id": ("purchase_item_id", q.integer),
    "platform_order_id": ("external_order_id", q.text),
    "platform_customer_id": ("external_customer_id", q.text),
    "shipped_date_min": ("processed_at_min", q.datetime_),
    "shipped_date_max": ("processed_at_max", q.datetime_),
    "status": ("status", head_charges.statuses(*(s.upper() for s in STATUSES), *STATUSES)),
})
LISTS: dict[str, ListContract] = {
    # NOTE: spec 02 Sorting and include (Order); a count takes every filter of the list.
    "orders": replace(_orders, filters=_filters, sorts=("id", "created_at", "shipped_date", "shipping_date", "updated_at"),
                      sort_columns={"shipped_date": PROCESSED_SORT, "shipping_date": "scheduled_at"},
                      count_filters=tuple(_filters)),
}
