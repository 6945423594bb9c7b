"""How 2021-01 differs from the head for charges (spec 02 Charge, decisions §5.10, §5.11,
§5.13): the old charge shape, its list contract and its skip bodies, merged by ``contract.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rebill.api import query as q
from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.external_ids import platform_id
from rebill.api.fields import Schema
from rebill.api.v2021_11 import charges as head
from rebill.api.v2021_11.shapes.charges import PLATFORM_ID
from rebill.domain.charge.model import STATUSES
from rebill.domain.geo import country_name

from .purchases import naive


def old_address(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """A charge's or order's address document as 2021-01 shows it (`country` by name)."""
    if document is None:
        return None
    old = {k: v for k, v in document.items() if k != "country_code"}
    old["country"] = country_name(document.get("country_code") or "")
    return old


def _old_line(line: dict[str, Any], head_line: dict[str, Any]) -> dict[str, Any]:
    return {
        "grams": line["grams"],
        "images": line["images"],
        "original_price": line["original_price"],
        "price": line["unit_price"],
        "properties": line["properties"],
        "quantity": line["quantity"],
        "platform_product_id": platform_id(head_line["external_product_id"]),
        "platform_variant_id": platform_id(head_line["external_variant_id"]),
        "sku": line["sku"],
        "subscription_id": head_line["purchase_item_id"],
        "title": line["title"],
        "type": head_line["purchase_item_type"].upper(),
        "variant_title": line["variant_title"],
    }


class ChargeOldShape(Change):
    """Charges show upper-case `status` and `type`, the customer flat (`customer_id` as a
    string, `customer_hash`, `email`, names), `discount_codes` with the amount taken, line
    items with `price`, `subscription_id` and `platform_*_id`, `note_attributes`,
    `number_times_tried`, `has_uncommited_changes` (one t), `scheduled_at` as a datetime,
    `country` names in the addresses and naive datetimes."""

    kinds = ("charge",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        customer = data.pop("customer")
        taken = data["total_discounts"]
        return {
            "id": data["id"],
            "address_id": data["address_id"],
            "analytics_data": data["analytics_data"],
            "billing_address": old_address(data["billing_address"]),
            "browser_ip": None,
            "client_details": data["client_details"],
            "created_at": naive(data["created_at"]),
            "customer_hash": customer["hash"],
            "customer_id": str(customer["id"]),
            "discount_codes": [{"amount": taken, "code": d["code"], "type": d["value_type"]} for d in data["discounts"]],
            "email": customer["email"],
            "error": data["error"],
            "error_type": data["error_type"],
            "first_name": obj.customer_first_name,
            "has_uncommited_changes": data["has_uncommitted_changes"],
            "last_charge_attempt_date": naive(data["last_charge_attempt"]),
            "last_name": obj.customer_last_name,
            "line_items": [_old_line(line, raw) for line, raw in zip(data["line_items"], obj.line_items)],
            "note": data["note"],
            "note_attributes": data["order_attributes"],
            "number_times_tried": data["charge_attempts"],
            "platform_order_id": platform_id(obj.external_order_id),
            # NOTE: spec 02 Charge, an integer (0: every variant was found).
            "platform_variant_id_not_found": int(data["external_variant_id_not_found"]),
            "processed_at": naive(data["processed_at"]),
            "processor_name": data["payment_processor"],
            "retry_date": data["retry_date"],
            "scheduled_at": data["scheduled_at"] + "T00:00:00",
            # NOTE: spec 02 Charge, the successfully processed child orders.
            "shipments_count": obj.shipments_count,
            "shipping_address": old_address(data["shipping_address"]),
            "shipping_lines": [{"code": s["code"], "price": s["price"], "title": s["title"]}
                               for s in data["shipping_lines"]],
            "status": data["status"].upper(),
            "sub_total": data["subtotal_price"],
            "subtotal_price": data["subtotal_price"],
            "tags": data["tags"],
            "tax_lines": data["tax_lines"],
            "total_discounts": data["total_discounts"],
            "total_line_items_price": data["total_line_items_price"],
            "total_price": data["total_price"],
            "total_refunds": data["total_refunds"],
            "total_tax": data["total_tax"],
            "total_weight": data["total_weight_grams"],
            "transaction_id": data["external_transaction_id"]["payment_processor"],
            "type": data["type"].upper(),
            "updated_at": naive(data["updated_at"]),
        }


    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        props = shape["properties"]
        line = props["line_items"]["items"]["properties"]
        upper = sh.enum(*(v.upper() for v in props["status"]["enum"]))
        old_line = sh.obj({
            **{name: line[name] for name in ("grams", "images", "original_price", "price", "properties", "quantity",
                                             "platform_product_id", "platform_variant_id", "sku",
                                             "subscription_id", "title", "variant_title")},
            "type": sh.enum(*(v.upper() for v in line["purchase_item_type"]["enum"])),
        })
        shipping = props["shipping_lines"]["items"]["properties"]
        customer = props["customer"]["properties"]
        same = ("id", "address_id", "analytics_data", "browser_ip", "client_details", "created_at", "error",
                "error_type", "note", "processed_at", "retry_date", "subtotal_price", "tags", "tax_lines",
                "total_discounts", "total_line_items_price", "total_price", "total_refunds", "total_tax",
                "updated_at")
        old = sh.obj({
            **{name: props[name] for name in same},
            "billing_address": _old_address(props["billing_address"]),
            "customer_hash": customer["hash"],
            # A string of digits: the customer's id.
            "customer_id": sh.string(pattern=r"^[0-9]+$"),
            "discount_codes": sh.array(sh.obj({
                "amount": sh.money(), "code": sh.string(),
                "type": props["discounts"]["items"]["properties"]["value_type"],
            }), maxItems=1),
            "email": customer["email"],
            # The customer's names: null once the customer is deleted (its processed charges stay).
            "first_name": sh.nullable(sh.string()),
            "has_uncommited_changes": props["has_uncommitted_changes"],
            "last_charge_attempt_date": props["last_charge_attempt"],
            "last_name": sh.nullable(sh.string()),
            "line_items": sh.array(old_line),
            "note_attributes": props["order_attributes"],
            "number_times_tried": props["charge_attempts"],
            "platform_order_id": PLATFORM_ID,
            "platform_variant_id_not_found": sh.integer(minimum=0, maximum=1),
            "processor_name": props["payment_processor"],
            # A datetime at midnight (spec 02 Charge).
            "scheduled_at": sh.datetime_offset(),
            "shipments_count": sh.integer(minimum=0),
            "shipping_address": _old_address(props["shipping_address"]),
            "shipping_lines": sh.array(sh.obj({name: shipping[name] for name in ("code", "price", "title")})),
            "status": upper,
            "sub_total": props["subtotal_price"],
            "total_weight": props["total_weight_grams"],
            "transaction_id": props["external_transaction_id"]["properties"]["payment_processor"],
            "type": sh.enum(*(v.upper() for v in props["type"]["enum"])),
        })
        return sh.naive_datetimes(old, ("created_at", "updated_at", "processed_at", "last_charge_attempt_date",
                                        "scheduled_at"))


def _old_address(shape: sh.Shape) -> sh.Shape:
    """The shape of ``old_address``: `country` (a name, null when the code is unknown) instead
    of `country_code`."""
    return sh.add(sh.drop(shape, "country_code"), {"country": sh.nullable(sh.string())})


CHANGES: tuple[Change, ...] = (ChargeOldShape(),)

_charges = head.LISTS["charges"]
_filters = {k: v for k, v in _charges.filters.items()
            if k not in ("scheduled_at", "scheduled_at_min", "scheduled_at_max", "purchase_item_id",
                         "purchase_item_ids", "external_order_id", "status")}
_filters.update({
    "date": ("scheduled_at", head.date_),
    "date_min": ("scheduled_at_min", head.date_),
    "date_max": ("scheduled_at_max", head.date_),
    "subscription_id": ("purchase_item_id", q.integer),
    "platform_order_id": ("external_order_id", q.text),
    "status": ("status", head.statuses(*(s.upper() for s in STATUSES), *STATUSES)),
})
LISTS: dict[str, ListContract] = {
    # NOTE: spec 02 Charges list and count; a count takes every filter of the list.
    "charges": replace(_charges, filters=_filters, sorts=("id", "created_at", "updated_at", "charge_date"),
                       sort_columns={"charge_date": "scheduled_at"},
                       includes=("metafields",), count_filters=tuple(_filters)),
}
# NOTE: decisions §5.11, 2021-01 names the items `subscription_id` or `subscription_ids`; 2021-11's
# `purchase_item_ids` is taken too (v2021_11/charges.py SKIP_ITEMS). None may be null: only an
# absent list is the whole charge (found by an audit: `subscription_id: null`, an unset
# variable, skipped every item).
SCHEMAS: dict[str, Schema] = {"charge.skip": head.SKIP_ITEMS, "charge.unskip": head.SKIP_ITEMS}
