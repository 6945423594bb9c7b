"""How 2021-01 differs from the head for checkouts (spec 02 Checkout, 03-real-fields
"checkout (2021-01)"): flat ids, naive datetimes, upper-case enums, `country` names in the
addresses. Merged by ``contract.py``."""

from __future__ import annotations

import copy
from typing import Any

from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract, Rename
from rebill.api.external_ids import platform_id
from rebill.api.fields import Schema
from rebill.domain.geo import country_name

from .changes import NaiveDatetimes

# A platform id as 2021-01 shows it: an integer when it is one, else the stored string.
PLATFORM_ID: sh.Shape = {"type": ["integer", "string"]}


def _upper(field: sh.Shape) -> sh.Shape:
    """An enum of the head's lower-case values, upper-cased (decisions §2.9); null stays."""
    return sh.enum(*(v.upper() if isinstance(v, str) else v for v in field["enum"]))


class CheckoutNaiveDatetimes(NaiveDatetimes):
    """Checkout datetimes render naive in UTC (decisions §2.4)."""

    kinds = ("checkout",)
    fields = ("created_at", "updated_at", "completed_at")


class CheckoutOldShape(Change):
    """Checkouts carry flat `external_checkout_id`/`external_customer_id` strings, addresses
    with the `country` name, and lines with upper-case `type` and the flat platform ids
    (`product_id` and `variant_id` as numbers where they are). The body's
    `external_checkout_customer_id` (spec 02) is the head's, in both versions."""

    kinds = ("checkout",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for name in ("external_checkout_id", "external_customer_id"):
            data[name] = data[name]["ecommerce"]
        for name in ("billing_address", "shipping_address"):
            address = data[name]
            if address is not None:
                code = address.get("country_code")
                address["country"] = country_name(code) if code else None
        for line in data["line_items"]:
            line.pop("external_product_id")
            line.pop("external_variant_id")
            line["type"] = line["type"].upper()
            line["product_id"] = line["platform_product_id"] = platform_id(line["product_id"])
            line["variant_id"] = line["platform_variant_id"] = platform_id(line["variant_id"])
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        props = shape["properties"]
        for name in ("external_checkout_id", "external_customer_id"):
            sh.replace(shape, name, props[name]["properties"]["ecommerce"])
        for name in ("billing_address", "shipping_address"):
            # Its own copy: the head's two addresses may share their fields.
            sh.replace(shape, name, sh.add(copy.deepcopy(props[name]), {"country": sh.nullable(sh.string())}))
        line = props["line_items"]["items"]
        sh.drop(line, "external_product_id", "external_variant_id")
        sh.replace(line, "type", _upper(line["properties"]["type"]))
        sh.add(line, {name: PLATFORM_ID for name in ("product_id", "variant_id", "platform_product_id",
                                                     "platform_variant_id")})
        return shape


class CheckoutChargeUpperCase(Change):
    """The charge result's `status` is upper case (decisions §2.9)."""

    kinds = ("checkout_charge",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        if data["status"] is not None:
            data["status"] = data["status"].upper()
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        return sh.replace(shape, "status", _upper(shape["properties"]["status"]))


CHANGES: tuple[Change, ...] = (CheckoutNaiveDatetimes(), CheckoutOldShape(), CheckoutChargeUpperCase(),
                               Rename(("checkout",), "order_attributes", "note_attributes"))
LISTS: dict[str, ListContract] = {}
SCHEMAS: dict[str, Schema] = {}
