"""The head (2021-11) contract of discounts (decisions §7.1, §7.5, 03-real-fields "discount
(2021-11)"): serializer, request schemas (nested `applies_to` and `usage_limits`, and the
2021-01 flat names too) and list contract, merged by ``contract.py``."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.discount.model import (
    APPLIES_TO_ID_LENGTH,
    CHANNELS,
    FIRST_TIME,
    PRODUCT_TYPES,
    SINGLE_USE,
    STATUSES,
    TYPES,
    USAGE_LIMIT,
    Discount,
)
from rebill.errors import ValidationFailed

from .serializers import ts

RESOURCE_NAMES = {"platform_product": "product", "platform_collection_id": "collection"}
RESOURCE_STORED = {v: k for k, v in RESOURCE_NAMES.items()}


def _subsequent(d: Discount) -> int | None:
    """NOTE: decisions §7.5, null forever, 0 single_use, N usage_limit N."""
    if d.duration == SINGLE_USE:
        return 0
    return d.duration_usage_limit if d.duration == USAGE_LIMIT else None


def minimum(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def discount(d: Discount) -> dict[str, Any]:
    return {
        "id": d.id,
        "applies_to": {"ids": [] if d.applies_to_id is None else [d.applies_to_id],
                       # NOTE: decisions §7.5 (corrected), upper case as the real service sends it.
                       "purchase_item_type": d.applies_to_product_type,
                       "resource": RESOURCE_NAMES.get(d.applies_to_resource or "")},
        "channel_settings": d.channel_settings,
        "code": d.code,
        "created_at": ts(d.created_at),
        "ends_at": ts(d.ends_at),
        "external_discount_id": {"ecommerce": None},
        "external_discount_source": None,
        # NOTE: 03-real-fields discount (2021-11), schema only at the top level: the restriction
        # as 2021-01 names it (null or `customer_must_not_exist_in_service`).
        "first_time_customer_restriction": d.first_time_customer_restriction,
        "prerequisite_subtotal_min": minimum(d.prerequisite_subtotal_min),
        "starts_at": ts(d.starts_at),
        "status": d.status,
        "updated_at": ts(d.updated_at),
        "usage_limits": {"first_time_customer_restriction": d.first_time_customer_restriction is not None,
                         "max_subsequent_redemptions": _subsequent(d),
                         "one_application_per_customer": d.once_per_customer,
                         "redemptions": d.usage_limit},
        "value": d.value,
        "value_type": d.value_type,
    }


# Requests --------------------------------------------------------------------------------

def lower_choice(*allowed: str) -> Any:
    def convert(value: str) -> str:
        if value.strip().lower() not in allowed:
            raise ValueError(f"must be one of: {', '.join(allowed)}")
        return value.strip().lower()
    return convert


def upper_choice(*allowed: str) -> Any:
    def convert(value: str) -> str:
        if value.strip().upper() not in allowed:
            raise ValueError(f"must be one of: {', '.join(allowed)}")
        return value.strip().upper()
    return convert


def when(value: str) -> Any:
    return q.parse_datetime(value)


CHANNEL_SETTINGS = Schema(*(Field(name, "object", nullable=False,
                                  items=Schema(Field("can_apply", "bool", required=True, nullable=False)))
                            for name in CHANNELS))
COUNT = Field("usage_limit", "int")
# The fields 2021-01 names flat; 2021-11 takes them too (decisions §7.5).
FLAT = (
    Field("duration", "str", nullable=False, convert=lower_choice("forever", "usage_limit", "single_use")),
    Field("duration_usage_limit", "int"),
    COUNT,
    Field("once_per_customer", "bool", nullable=False),
    Field("applies_to_id", "external_id"),
    Field("applies_to_resource", "str", convert=lower_choice(*RESOURCE_NAMES)),
    Field("applies_to_product_type", "str", nullable=False, convert=upper_choice(*PRODUCT_TYPES)),
    Field("first_time_customer_restriction", "str", convert=lower_choice(FIRST_TIME)),
)
COMMON = (
    Field("channel_settings", "object", nullable=False, items=CHANNEL_SETTINGS),
    Field("prerequisite_subtotal_min", "money", decimals=None),
    Field("starts_at", "str", convert=when),
    Field("ends_at", "str", convert=when),
    Field("status", "str", nullable=False, convert=lower_choice(*STATUSES)),
)
APPLIES_TO = Schema(
    Field("ids", "list", items="external_id"),
    # NOTE: decisions §7.5, either case is accepted; the errors name the case it renders.
    Field("purchase_item_type", "str", nullable=False, convert=upper_choice(*PRODUCT_TYPES)),
    Field("resource", "str", convert=lower_choice(*RESOURCE_STORED)),
)
USAGE_LIMITS = Schema(
    Field("first_time_customer_restriction", "bool"),
    Field("max_subsequent_redemptions", "int"),
    Field("one_application_per_customer", "bool"),
    Field("redemptions", "int"),
)


class NestedSchema(Schema):
    """A 2021-11 discount body: the nested `applies_to` and `usage_limits` become the stored
    flat fields (decisions §7.5 mapping). A flat field sent beside its nested one with another
    value is 422 on the flat name, as `discount_type` beside `value_type` is (found by an audit:
    the nested value won in silence)."""

    nested_names = {
        "applies_to_id": ("applies_to", "ids"),
        "applies_to_resource": ("applies_to", "resource"),
        "applies_to_product_type": ("applies_to", "purchase_item_type"),
        "duration": ("usage_limits", "max_subsequent_redemptions"),
        "duration_usage_limit": ("usage_limits", "max_subsequent_redemptions"),
        "once_per_customer": ("usage_limits", "one_application_per_customer"),
        "usage_limit": ("usage_limits", "redemptions"),
        "first_time_customer_restriction": ("usage_limits", "first_time_customer_restriction"),
    }

    def parse(self, body: Mapping[str, Any], *, partial: bool = False) -> dict[str, Any]:
        clean = super().parse(body, partial=partial)
        applies = clean.pop("applies_to", None) or {}
        limits = clean.pop("usage_limits", None) or {}
        nested: dict[str, Any] = {}
        if "ids" in applies:
            ids = applies["ids"] or []
            if len(ids) > 1:
                raise ValidationFailed({"applies_to": {"ids": ["at most one id"]}})
            if ids and len(ids[0]) > APPLIES_TO_ID_LENGTH:
                raise ValidationFailed({"applies_to": {"ids": [f"is too long (at most {APPLIES_TO_ID_LENGTH} "
                                                               "characters)"]}})
            nested["applies_to_id"] = ids[0] if ids else None
        if "resource" in applies:
            nested["applies_to_resource"] = RESOURCE_STORED.get(applies["resource"] or "")
        if "purchase_item_type" in applies:
            nested["applies_to_product_type"] = applies["purchase_item_type"]
        if "max_subsequent_redemptions" in limits:
            n = limits["max_subsequent_redemptions"]
            if n is not None and n < 0:
                raise ValidationFailed({"usage_limits": {"max_subsequent_redemptions": ["must not be negative"]}})
            nested["duration"] = "forever" if n is None else SINGLE_USE if n == 0 else USAGE_LIMIT
            nested["duration_usage_limit"] = n if n else None
        if "one_application_per_customer" in limits:
            nested["once_per_customer"] = bool(limits["one_application_per_customer"])
        if "redemptions" in limits:
            nested["usage_limit"] = limits["redemptions"]
        if "first_time_customer_restriction" in limits:
            nested["first_time_customer_restriction"] = FIRST_TIME if limits["first_time_customer_restriction"] \
                else None
        conflicts = {name: [f"conflicts with {'.'.join(self.nested_names[name])}"]
                     for name, value in nested.items() if name in body and name in clean and clean[name] != value}
        if conflicts:
            raise ValidationFailed(conflicts)
        return {**clean, **nested}


def _types() -> Any:
    return lower_choice(*TYPES)


CREATE = NestedSchema(
    Field("code", "str", required=True, nullable=False, min_length=1),
    Field("value_type", "str", key="discount_type", nullable=False, convert=_types()),
    Field("discount_type", "str", nullable=False, convert=_types()),
    Field("value", "money", required=True, nullable=False, decimals=None),
    Field("applies_to", "object", items=APPLIES_TO),
    Field("usage_limits", "object", items=USAGE_LIMITS),
    *FLAT, *COMMON,
    one_of=(("value_type", "discount_type"),),
)
UPDATE = NestedSchema(
    Field("channel_settings", "object", nullable=False, items=CHANNEL_SETTINGS),
    Field("starts_at", "str", convert=when),
    Field("ends_at", "str", convert=when),
    Field("status", "str", nullable=False, convert=lower_choice(*STATUSES)),
    COUNT,
    Field("usage_limits", "object", items=Schema(Field("redemptions", "int"))),
)
APPLY = Schema(Field("discount_id", "int"), Field("discount_code", "str", min_length=1),
               one_of=(("discount_id", "discount_code"),))
REMOVE = Schema(Field("address_id", "int"), Field("charge_id", "int"))

SERIALIZERS: dict[str, Serializer] = {"discount": discount}
SCHEMAS: dict[str, Schema] = {
    "discount.create": CREATE,
    "discount.update": UPDATE,
    "discount.apply": APPLY,
    "discount.remove": REMOVE,
}
FILTERS = {
    **q.window("created_at", "updated_at"),
    "discount_code": ("discount_code", q.text),
    "discount_type": ("discount_type", q.choice(*TYPES)),
    "ids": ("ids", q.ids),
    "status": ("status", q.choice(*STATUSES)),
}
LISTS: dict[str, ListContract] = {
    # NOTE: spec 01 Sorting, Discount: id-desc; id, created_at, updated_at.
    "discounts": ListContract(plural="discounts", kind="discount", filters=FILTERS,
                              sorts=("id", "created_at", "updated_at"), default_sort="id-desc"),
}
