"""How 2021-01 differs from the head for subscriptions and one-time items (decisions §5.1,
§5.6, 03-real-fields "subscription (2021-01)", "onetime (2021-01)"): change modules, list
contracts and the schemas of 2021-01-only endpoints, merged by ``contract.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rebill.api import query as q
from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.external_ids import platform_id
from rebill.api.fields import Field, Schema
from rebill.api.v2021_11 import purchases as head

KINDS = ("subscription", "onetime")


def naive(value: str | None) -> str | None:
    return value[:-6] if value is not None and value.endswith("+00:00") else value


class PurchasePlatformIds(Change):
    """Subscriptions and one-time items carry flat `platform_product_id`/`platform_variant_id`
    instead of the nested `external_*_id{ecommerce}` objects."""

    kinds = KINDS

    def request(self, schema: Schema) -> Schema:
        fields = [Field(f"platform_{name}_id", "external_id", max_length=64, key=f"external_{name}_id")
                  for name in ("product", "variant") if f"external_{name}_id" in schema]
        return schema.without("external_product_id", "external_variant_id").plus(*fields)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data["platform_product_id"] = platform_id(data.pop("external_product_id")["ecommerce"])
        data["platform_variant_id"] = platform_id(data.pop("external_variant_id")["ecommerce"])
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        # `platform_id`: an integer when the stored id is one, else the string; null when none.
        flat = sh.nullable({"type": ["integer", "string"]})
        sh.drop(shape, "external_product_id", "external_variant_id")
        return sh.add(shape, {"platform_product_id": flat, "platform_variant_id": flat})

    def error_names(self) -> dict[str, str]:
        return {"external_product_id": "platform_product_id", "external_variant_id": "platform_variant_id"}


class PurchaseNaiveDates(Change):
    """Datetimes have no offset (decisions §2.4) and `next_charge_scheduled_at` is a datetime
    at midnight (`YYYY-MM-DDT00:00:00`)."""

    kinds = KINDS

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for key in ("created_at", "updated_at", "cancelled_at", "next_charge_scheduled_at"):
            if key in data:
                data[key] = naive(data[key])
        when = data.get("next_charge_scheduled_at")
        if when is not None and len(when) == 10:
            data["next_charge_scheduled_at"] = f"{when}T00:00:00"
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        sh.naive_datetimes(shape, ("created_at", "updated_at", "cancelled_at", "next_charge_scheduled_at"))
        when = shape["properties"].get("next_charge_scheduled_at")
        if when is not None and when.get("pattern") == sh.DATE_PATTERN:
            # A date (a subscription's) becomes a naive datetime at midnight, null kept.
            naive = {k: v for k, v in when.items() if k != "format"}
            sh.replace(shape, "next_charge_scheduled_at", {**naive, "pattern": sh.NAIVE_PATTERN})
        return shape


class SubscriptionOldShape(Change):
    """Subscriptions show upper-case `status`, frequencies as strings, the customer's `email`,
    and the 2021-01 extras (`charge_delay`, the cutoff windows, `commit_update`,
    `service_product_id`); an update takes `commit_update` in its body (decisions §5.3)."""

    kinds = ("subscription",)

    def request(self, schema: Schema) -> Schema:
        # An update's schema: a create's needs an `address_id`, an update's takes it back as shown.
        if "order_interval_unit" in schema and not any(f.name == "address_id" and f.required for f in schema.fields):
            return schema.plus(Field("commit_update", "bool", nullable=False, key="commit"))
        return schema

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data["status"] = data["status"].upper()
        for key in ("charge_interval_frequency", "order_interval_frequency"):
            if data[key] is not None:
                data[key] = str(data[key])
        data["email"] = obj.customer_email
        data["charge_delay"] = None
        data["cutoff_day_of_month_before_and_after"] = None
        data["cutoff_day_of_week_before_and_after"] = None
        data["commit_update"] = False
        data["service_product_id"] = None
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        props = shape["properties"]
        for key in ("charge_interval_frequency", "order_interval_frequency"):
            text = sh.string(pattern=r"^[1-9][0-9]*$")
            sh.replace(shape, key, sh.nullable(text) if "null" in props[key].get("type", ()) else text)
        status = props["status"]["enum"]
        sh.replace(shape, "status", sh.enum(*(value.upper() for value in status)))
        return sh.add(shape, {"email": sh.string(), "charge_delay": sh.null(),
                              "cutoff_day_of_month_before_and_after": sh.null(),
                              "cutoff_day_of_week_before_and_after": sh.null(),
                              "commit_update": sh.boolean(), "service_product_id": sh.null()})


def _cancelled(status: str) -> bool:
    """The status a 2021-01 one-time item shows, as the head's `is_cancelled`."""
    found = {"ONETIME": False, "CANCELLED": True}.get(status.strip().upper())
    if found is None:
        raise ValueError("must be ONETIME or CANCELLED")
    return found


class OnetimeOldShape(Change):
    """One-time items show `status` `ONETIME` (or `CANCELLED`) instead of `is_cancelled`, and a
    `service_product_id`; an update takes the status it shows back (another is refused)."""

    kinds = ("onetime",)

    def request(self, schema: Schema) -> Schema:
        if "is_cancelled" in schema:
            return schema.without("is_cancelled").plus(
                Field("status", "str", nullable=False, max_length=32, key="is_cancelled", convert=_cancelled))
        return schema

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data["status"] = "CANCELLED" if data.pop("is_cancelled") else "ONETIME"
        data["service_product_id"] = None
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        sh.drop(shape, "is_cancelled")
        return sh.add(shape, {"status": sh.enum("ONETIME", "CANCELLED"), "service_product_id": sh.null()})


CHANGES: tuple[Change, ...] = (PurchasePlatformIds(), PurchaseNaiveDates(), SubscriptionOldShape(),
                               OnetimeOldShape())


def _old_filters(contract: ListContract) -> dict[str, Any]:
    filters = {k: v for k, v in contract.filters.items() if k not in ("external_variant_id", "status")}
    filters["platform_variant_id"] = ("external_variant_id", q.text)
    filters["product_id"] = ("external_product_id", q.text)
    filters["platform_product_id"] = ("external_product_id", q.text)
    return filters


_subscriptions = head.LISTS["subscriptions"]
_onetimes = head.LISTS["onetimes"]
_sub_filters = {**_old_filters(_subscriptions),
                "status": ("status", q.choice("ACTIVE", "CANCELLED", "EXPIRED", "active", "cancelled", "expired"))}
LISTS: dict[str, ListContract] = {
    # NOTE: decisions §5.16, the 2021-11 filters with `platform_variant_id` and `product_id`;
    # spec 02 Sorting and include; a count takes every filter of the list.
    "subscriptions": replace(_subscriptions, filters=_sub_filters, includes=("address", "metafields"),
                             count_filters=tuple(_sub_filters)),
    "onetimes": replace(_onetimes, filters=_old_filters(_onetimes), includes=(),
                        count_filters=tuple(_old_filters(_onetimes))),
}
SCHEMAS: dict[str, Schema] = {}
