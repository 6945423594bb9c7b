"""The discount as the domain sees it, and its commands (spec 02 Discount, decisions §7.1,
§7.5). Field names are the 2021-01 (stored) names; the 2021-11 serializer nests them."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..money import format_amount, quantize
from ..text_keys import text_key as code_key  # noqa: F401 (the name its callers use)
from ..text_keys import text_keys as code_keys  # noqa: F401

ENABLED, DISABLED, FULLY_DISABLED = "enabled", "disabled", "fully_disabled"
STATUSES = (ENABLED, DISABLED, FULLY_DISABLED)
# NOTE: spec 02 Discount `discount_type`; decisions §7.5 `shipping` takes value % off shipping.
TYPES = ("percentage", "fixed_amount", "shipping")
FOREVER, USAGE_LIMIT, SINGLE_USE = "forever", "usage_limit", "single_use"
DURATIONS = (FOREVER, USAGE_LIMIT, SINGLE_USE)
PRODUCT_TYPES = ("ALL", "ONETIME", "SUBSCRIPTION")
PRODUCT, COLLECTION = "platform_product", "platform_collection_id"
RESOURCES = (PRODUCT, COLLECTION)
CHANNELS = ("api", "checkout_page", "customer_portal", "merchant_portal")
FIRST_TIME = "customer_must_not_exist_in_service"
# The widths of the `code_key` and `applies_to_id` columns (models/discount.py).
CODE_LENGTH, APPLIES_TO_ID_LENGTH = 255, 64


def value_text(discount_type: str, value: Decimal, currency: str) -> str:
    """NOTE: decisions §2.7, a fixed amount carries the currency's minor digits; a percentage
    is shown as stored, in positional notation (never `1E+2`)."""
    return format_amount(value, currency) if discount_type == "fixed_amount" else format(value, "f")


def channels(stored: dict[str, Any] | None) -> dict[str, dict[str, bool]]:
    """NOTE: spec 02 Discount `channel_settings`, every channel `{can_apply}`, default true."""
    stored = stored or {}
    return {name: {"can_apply": bool((stored.get(name) or {}).get("can_apply", True))} for name in CHANNELS}


class Discount(msgspec.Struct, kw_only=True):
    """A stored discount; ``status`` is what it is now (an enabled code whose `ends_at` has
    passed shows `disabled`, spec 02 Discount status), ``value`` the text shown."""

    id: int
    code: str
    value: str
    value_type: str
    status: str
    duration: str
    duration_usage_limit: int | None
    usage_limit: int | None
    times_used: int
    once_per_customer: bool
    applies_to_id: str | None
    applies_to_resource: str | None
    applies_to_product_type: str
    channel_settings: dict[str, dict[str, bool]]
    first_time_customer_restriction: str | None
    prerequisite_subtotal_min: Decimal | None
    starts_at: datetime | None
    ends_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Any, currency: str, now: datetime | None = None) -> "Discount":
        return cls(id=row.id, code=row.code, value=value_text(row.discount_type, row.value, currency),
                   value_type=row.discount_type, status=shown_status(row, now), duration=row.duration,
                   duration_usage_limit=row.duration_usage_limit, usage_limit=row.usage_limit,
                   times_used=row.times_used, once_per_customer=row.once_per_customer,
                   applies_to_id=row.applies_to_id, applies_to_resource=row.applies_to_resource,
                   applies_to_product_type=row.applies_to_product_type,
                   channel_settings=channels(row.channel_settings),
                   first_time_customer_restriction=row.first_time_customer_restriction,
                   # Shown with the store currency's minor digits, as any amount (decisions §2.7).
                   prerequisite_subtotal_min=None if row.prerequisite_subtotal_min is None
                   else quantize(row.prerequisite_subtotal_min, currency), starts_at=row.starts_at,
                   ends_at=row.ends_at, created_at=row.created_at, updated_at=row.updated_at)


def ended(row: Any, now: datetime | None) -> bool:
    """NOTE: decisions §7.5, `ends_at` passed (exclusive, UTC)."""
    return now is not None and row.ends_at is not None and row.ends_at <= now


def shown_status(row: Any, now: datetime | None) -> str:
    """NOTE: spec 02 Discount status, `enabled` -> `disabled` when `ends_at` passes."""
    return DISABLED if row.status == ENABLED and ended(row, now) else row.status


class DiscountCreate(msgspec.Struct, kw_only=True):
    code: str
    discount_type: str
    value: Decimal
    duration: str = FOREVER
    duration_usage_limit: int | None = None
    usage_limit: int | None = None
    once_per_customer: bool = False
    applies_to_id: str | None = None
    applies_to_resource: str | None = None
    applies_to_product_type: str = "ALL"
    channel_settings: dict[str, Any] = {}
    first_time_customer_restriction: str | None = None
    prerequisite_subtotal_min: Decimal | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    status: str = ENABLED


class DiscountUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """NOTE: spec 02 Discounts, PUT takes `channel_settings`, `ends_at`, `starts_at`, `status`,
    `usage_limit`."""

    channel_settings: dict[str, Any] | UnsetType = UNSET
    ends_at: datetime | None | UnsetType = UNSET
    starts_at: datetime | None | UnsetType = UNSET
    status: str | UnsetType = UNSET
    usage_limit: int | None | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}
