"""Purchase items as the domain sees them: a subscription or a one-time item (decisions
§5.1, §5.6), and the commands that make and change them."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

SUBSCRIPTION, ONETIME = "subscription", "onetime"
ACTIVE, CANCELLED, EXPIRED = "active", "cancelled", "expired"
# A one-time item is `active` until its charge is processed, then `processed`.
PROCESSED = "processed"

# The columns the head (2021-11) purchase items do not show: left out of an update's
# `updated_attributes` (domain/event/attributes.py). A one-time item's status only ever
# becomes `processed`, which 2021-11 does not show (its `is_cancelled` stays false).
_NOT_SHOWN: dict[str, str | None] = dict.fromkeys(
    ("anchor_day", "cancelled_next_date", "charges_count", "last_charge_date", "grams", "taxable",
     "requires_shipping", "images"))
API_NAMES: dict[str, dict[str, str | None]] = {SUBSCRIPTION: _NOT_SHOWN, ONETIME: {**_NOT_SHOWN, "status": None}}


class PurchaseItem(msgspec.Struct):
    """Positional, in the column order of ``models.purchase_items`` (db/rows.py)."""

    id: int
    store_id: int
    kind: str
    customer_id: int
    address_id: int
    plan_id: int | None
    status: str
    external_product_id: str | None
    external_variant_id: str | None
    product_title: str
    variant_title: str | None
    sku: str | None
    sku_override: bool
    price: Decimal
    quantity: int
    properties: list[dict[str, Any]]
    grams: int | None
    taxable: bool
    requires_shipping: bool
    images: dict[str, Any] | None
    presentment_currency: str
    next_charge_scheduled_at: date | None
    charge_interval_frequency: int | None
    order_interval_frequency: int | None
    order_interval_unit: str | None
    order_day_of_month: int | None
    order_day_of_week: int | None
    cutoff_day_of_month: int | None
    cutoff_day_of_week: int | None
    expire_after_specific_number_of_charges: int | None
    anchor_day: int | None
    charges_count: int
    last_charge_date: date | None
    cancelled_next_date: date | None
    is_skippable: bool
    is_swappable: bool
    max_retries_reached: bool
    cancellation_reason: str | None
    cancellation_reason_comments: str | None
    cancelled_at: datetime | None
    analytics_data: dict[str, Any] | None
    lock_version: int
    created_at: datetime
    updated_at: datetime
    # Derived on read: whether a queued charge holds the item, and the customer's email.
    has_queued_charges: bool = False
    customer_email: str | None = None

    @property
    def is_prepaid(self) -> bool:
        """NOTE: decisions §5.4, a charge interval longer than the order interval."""
        return bool(self.charge_interval_frequency and self.order_interval_frequency
                    and self.charge_interval_frequency > self.order_interval_frequency)

    @property
    def shown_skippable(self) -> bool:
        """`is_skippable` as shown: a prepaid item cannot be skipped (decisions §5.11), whatever
        its own flag, which it keeps for when it is prepaid no more."""
        return self.is_skippable and not self.is_prepaid

    @property
    def orders_per_charge(self) -> int:
        if not self.is_prepaid:
            return 1
        assert self.charge_interval_frequency and self.order_interval_frequency
        return self.charge_interval_frequency // self.order_interval_frequency

    @property
    def schedulable(self) -> bool:
        """Whether the item has a queued charge to come (decisions §5.5 expiry included)."""
        if self.status != ACTIVE or self.next_charge_scheduled_at is None:
            return False
        limit = self.expire_after_specific_number_of_charges
        return not (self.kind == SUBSCRIPTION and limit is not None and self.charges_count >= limit)


class ItemCreate(msgspec.Struct, kw_only=True):
    """What a subscription and a one-time item are made of: an address and a product."""

    address_id: int
    external_product_id: str | None = None
    external_variant_id: str | None = None
    product_title: str | None = None
    variant_title: str | None = None
    sku: str | None = None
    sku_override: bool | None = None
    price: Decimal | None = None
    quantity: int = 1
    properties: list[dict[str, Any]] = []
    # Read-only: the address's, sent, passes; another is refused (service.same_currency).
    presentment_currency: str | None = None


class SubscriptionCreate(ItemCreate, kw_only=True):
    plan_id: int | None = None
    next_charge_scheduled_at: date | None = None
    charge_interval_frequency: int | None = None
    order_interval_frequency: int | None = None
    order_interval_unit: str | None = None
    order_day_of_month: int | None = None
    order_day_of_week: int | None = None
    cutoff_day_of_month: int | None = None
    cutoff_day_of_week: int | None = None
    expire_after_specific_number_of_charges: int | None = None
    is_skippable: bool = True
    is_swappable: bool = True
    analytics_data: dict[str, Any] | None = None
    status: str = ACTIVE


class OnetimeCreate(ItemCreate, kw_only=True):
    next_charge_scheduled_at: date


class ItemUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set."""

    external_product_id: str | None | UnsetType = UNSET
    external_variant_id: str | None | UnsetType = UNSET
    product_title: str | UnsetType = UNSET
    variant_title: str | None | UnsetType = UNSET
    sku: str | None | UnsetType = UNSET
    sku_override: bool | UnsetType = UNSET
    price: Decimal | UnsetType = UNSET
    quantity: int | UnsetType = UNSET
    properties: list[dict[str, Any]] | UnsetType = UNSET
    # None: sent null, what a cancelled or expired subscription shows (no change for one, 422
    # for one that has a date).
    next_charge_scheduled_at: date | None | UnsetType = UNSET
    # Read-only: the address it is on, sent back, passes; another is refused (service.kept_address).
    address_id: int | UnsetType = UNSET
    # Read-only: the currency it has, sent back, passes; another is refused (service.same_currency).
    presentment_currency: str | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__
                if f != "commit" and getattr(self, f) is not UNSET}


class OnetimeUpdate(ItemUpdate, kw_only=True, omit_defaults=True):
    # Read-only: the one it has, sent back, is taken; another is refused (onetimes.update).
    is_cancelled: bool | UnsetType = UNSET


class SubscriptionUpdate(ItemUpdate, kw_only=True, omit_defaults=True):
    plan_id: int | None | UnsetType = UNSET
    charge_interval_frequency: int | UnsetType = UNSET
    order_interval_frequency: int | UnsetType = UNSET
    order_interval_unit: str | UnsetType = UNSET
    order_day_of_month: int | None | UnsetType = UNSET
    order_day_of_week: int | None | UnsetType = UNSET
    cutoff_day_of_month: int | None | UnsetType = UNSET
    cutoff_day_of_week: int | None | UnsetType = UNSET
    expire_after_specific_number_of_charges: int | None | UnsetType = UNSET
    is_skippable: bool | UnsetType = UNSET
    is_swappable: bool | UnsetType = UNSET
    analytics_data: dict[str, Any] | None | UnsetType = UNSET
    # Read-only: the status it has is taken (a body sent back as shown), another is refused.
    status: str | UnsetType = UNSET
    # NOTE: decisions §5.3, commit=false defers the regeneration of the queued charges.
    commit: bool = True
