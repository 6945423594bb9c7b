"""The head (2021-11) contract of subscriptions and one-time items (decisions §5.1-§5.6,
§5.16, 03-real-fields "subscription (2021-11)", "onetime (2021-11)"): serializers, request
schemas and list contracts of the family, merged by ``contract.py``."""

from __future__ import annotations

from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.money import format_amount
from rebill.domain.subscription.intervals import RANGES
from rebill.domain.subscription.model import PurchaseItem
from rebill.domain.subscription.service import MAX_QUANTITY

from .parsers import ATTRIBUTE
from .serializers import _analytics, ts


def external_id(name: str) -> Field:
    """NOTE: decisions §5.16, purchase items nest external ids as ``{"ecommerce": "..."}``; a
    plain string or number is taken too."""
    return Field(name, "external_id", max_length=64)


def cadence(name: str, **options: Any) -> Field:
    """A cadence field: an integer whose range the domain checks with the cadence's other rules
    (domain/subscription/intervals.py), which the document states."""
    return Field(name, "int", domain_range=RANGES[name], **options)


def _day(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _common(p: PurchaseItem) -> dict[str, Any]:
    return {
        "id": p.id,
        "address_id": p.address_id,
        "customer_id": p.customer_id,
        "created_at": ts(p.created_at),
        "external_product_id": {"ecommerce": p.external_product_id},
        "external_variant_id": {"ecommerce": p.external_variant_id},
        "presentment_currency": p.presentment_currency,
        "price": format_amount(p.price, p.presentment_currency),
        "product_title": p.product_title,
        "properties": p.properties,
        "quantity": p.quantity,
        "sku": p.sku,
        "sku_override": p.sku_override,
        "updated_at": ts(p.updated_at),
        "variant_title": p.variant_title,
    }


def subscription(p: PurchaseItem) -> dict[str, Any]:
    return {
        **_common(p),
        # NOTE: 03-real-fields, `utm_params` is an array, also when the client sent none.
        "analytics_data": _analytics(p.analytics_data),
        "cancellation_reason": p.cancellation_reason,
        "cancellation_reason_comments": p.cancellation_reason_comments,
        "cancelled_at": ts(p.cancelled_at),
        "charge_interval_frequency": p.charge_interval_frequency,
        "cutoff_day_of_month": p.cutoff_day_of_month,
        "cutoff_day_of_week": p.cutoff_day_of_week,
        "expire_after_specific_number_of_charges": p.expire_after_specific_number_of_charges,
        "has_queued_charges": p.has_queued_charges,
        "is_prepaid": p.is_prepaid,
        # NOTE: decisions §5.4, the items of a prepaid subscription are not skippable.
        "is_skippable": p.shown_skippable,
        "is_swappable": p.is_swappable,
        "max_retries_reached": p.max_retries_reached,
        "next_charge_scheduled_at": _day(p.next_charge_scheduled_at),
        "order_day_of_month": p.order_day_of_month,
        "order_day_of_week": p.order_day_of_week,
        "order_interval_frequency": p.order_interval_frequency,
        "order_interval_unit": p.order_interval_unit,
        "plan_id": p.plan_id,
        "status": p.status,
    }


def onetime(p: PurchaseItem) -> dict[str, Any]:
    # NOTE: 03-real-fields, a one-time item's next date is a datetime (midnight UTC).
    when = p.next_charge_scheduled_at
    return {
        **_common(p),
        "is_cancelled": p.status == "cancelled",
        "next_charge_scheduled_at": f"{when.isoformat()}T00:00:00+00:00" if when else None,
    }


PRODUCT_FIELDS = (
    external_id("external_product_id"),
    external_id("external_variant_id"),
    Field("product_title", "str", nullable=False, min_length=1),
    Field("variant_title", "str"),
    Field("sku", "str"),
    Field("sku_override", "bool", nullable=False),
    # The currency's decimals are checked by the domain, which knows the address's currency.
    Field("price", "money", nullable=False, decimals=None),
    Field("quantity", "int", nullable=False, domain_range=(1, MAX_QUANTITY)),
    Field("properties", "list", nullable=False, items=ATTRIBUTE),
    # Read-only, shown: an item is charged in its address's currency; the one it has (or its
    # address's), sent back, passes, another is refused (domain/subscription/service.same_currency).
    Field("presentment_currency", "str", nullable=False, max_length=3, convert=str.upper),
)
CADENCE_FIELDS = (
    cadence("charge_interval_frequency", nullable=False),
    cadence("order_interval_frequency", nullable=False),
    Field("order_interval_unit", "str", nullable=False, max_length=16),
    cadence("order_day_of_month"),
    cadence("order_day_of_week"),
    cadence("cutoff_day_of_month"),
    cadence("cutoff_day_of_week"),
    cadence("expire_after_specific_number_of_charges"),
)


def _analytics_problem(value: dict[str, Any]) -> str | None:
    """NOTE: 03-real-fields, `analytics_data.utm_params` renders as an array (of objects): a body
    that would break that is refused rather than stored and shown on every read (as customers)."""
    params = value.get("utm_params")
    if params is None or (isinstance(params, list) and all(isinstance(p, dict) for p in params)):
        return None
    return "utm_params must be an array of objects"


SUBSCRIPTION_FLAGS = (
    Field("is_skippable", "bool", nullable=False),
    Field("is_swappable", "bool", nullable=False),
    Field("analytics_data", "object", check=_analytics_problem),
)
SUBSCRIPTION_CREATE = Schema(
    Field("address_id", "int", required=True, nullable=False),
    Field("plan_id", "int"),
    *PRODUCT_FIELDS,
    Field("next_charge_scheduled_at", "date"),
    *CADENCE_FIELDS,
    *SUBSCRIPTION_FLAGS,
    Field("status", "str", nullable=False, convert=str.lower),
)
SUBSCRIPTION_UPDATE = Schema(
    Field("plan_id", "int"),
    *PRODUCT_FIELDS,
    # A cancelled subscription's null, sent back as shown, passes (null_on_update: the domain
    # refuses it only on one that has a date).
    Field("next_charge_scheduled_at", "date", nullable=False, null_on_update=True),
    *CADENCE_FIELDS,
    *SUBSCRIPTION_FLAGS,
    # The one it has, sent back, passes; another is refused (domain/subscription/service.update).
    Field("status", "str", nullable=False, max_length=32),
    # Likewise: a move is POST /subscriptions/{id}/change_address (service.kept_address).
    Field("address_id", "int", nullable=False),
)
ONETIME_CREATE = Schema(
    Field("address_id", "int", required=True, nullable=False),
    *PRODUCT_FIELDS,
    Field("next_charge_scheduled_at", "date", required=True, nullable=False),
)
ONETIME_UPDATE = Schema(*PRODUCT_FIELDS, Field("next_charge_scheduled_at", "date", nullable=False),
                        # The ones it has, sent back, pass; others are refused (domain/subscription/onetimes).
                        Field("is_cancelled", "bool", nullable=False), Field("address_id", "int", nullable=False))

SERIALIZERS: dict[str, Serializer] = {"subscription": subscription, "onetime": onetime}
SCHEMAS: dict[str, Schema] = {
    "subscription.create": SUBSCRIPTION_CREATE,
    "subscription.update": SUBSCRIPTION_UPDATE,
    "subscription.cancel": Schema(
        Field("cancellation_reason", "str", required=True, nullable=False, min_length=1, max_length=1024),
        Field("cancellation_reason_comments", "str", max_length=4096),
        Field("send_email", "bool"),
    ),
    "subscription.set_next_charge_date": Schema(Field("date", "date", required=True, nullable=False)),
    "subscription.change_address": Schema(Field("address_id", "int", required=True, nullable=False),
                                          Field("next_charge_scheduled_at", "date")),
    "onetime.create": ONETIME_CREATE,
    "onetime.update": ONETIME_UPDATE,
}

# The filters both kinds of purchase item share (decisions §5.16).
ITEM_FILTERS = {
    **q.window("created_at", "updated_at"),
    "address_id": ("address_id", q.integer),
    "address_ids": ("address_ids", q.ids),
    "customer_id": ("customer_id", q.integer),
    "external_variant_id": ("external_variant_id", q.text),
    "ids": ("ids", q.ids),
}
LISTS: dict[str, ListContract] = {
    # NOTE: decisions §5.16, subscription list filters; spec 01 Sorting and Including.
    "subscriptions": ListContract(
        plural="subscriptions",
        kind="subscription",
        filters={**ITEM_FILTERS, "status": ("status", q.choice("active", "cancelled", "expired"))},
        sorts=("id", "created_at", "updated_at"),
        default_sort="id-desc",
        includes=("address", "charge_activities", "customer", "metafields", "bundle_product", "bundle_selections"),
    ),
    "onetimes": ListContract(
        plural="onetimes",
        kind="onetime",
        filters={**ITEM_FILTERS, "is_cancelled": ("is_cancelled", q.boolean)},
        sorts=("id", "created_at", "updated_at"),
        default_sort="id-desc",
    ),
}
