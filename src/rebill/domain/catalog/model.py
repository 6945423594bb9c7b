"""The catalog as the domain sees it: products with their variants, plans, and their commands
(decisions §5.7, §5.8, §5.16)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

PLAN_TYPES = ("subscription", "prepaid", "onetime")
INTERVAL_UNITS = ("day", "week", "month")
DISCOUNT_TYPES = ("percentage", "fixed_amount")
CHANNELS = ("api", "checkout_page", "customer_portal", "merchant_portal")
IMAGE_SIZES = ("large", "medium", "original", "small")
# The keys every stored subscription_preferences document has (decisions §5.8, spec 03 plan).
PREFERENCES = ("charge_interval_frequency", "interval_unit", "order_interval_frequency", "order_day_of_month",
               "order_day_of_week", "cutoff_day_of_month", "cutoff_day_of_week",
               "expire_after_specific_number_of_charges", "apply_cutoff_date_to_checkout")


class Variant(msgspec.Struct, kw_only=True):
    """One variant of a product, stored in the product's ``variants`` JSON list."""

    external_variant_id: str
    title: str | None = None
    price: Decimal | None = None
    sku: str | None = None
    grams: int | None = None
    requires_shipping: bool = True
    taxable: bool = True
    image: str | None = None


class Plan(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py)."""

    id: int
    store_id: int
    product_id: int
    external_product_id: str
    title: str
    type: str  # subscription | prepaid | onetime
    discount_amount: Decimal | None
    discount_type: str | None  # percentage | fixed_amount
    channel_settings: dict[str, Any]
    sort_order: int
    # Every key of PREFERENCES, or None for a onetime plan.
    subscription_preferences: dict[str, Any] | None
    external_variant_ids: list[str]
    created_at: datetime
    updated_at: datetime

    @property
    def is_subscription(self) -> bool:
        """Subscription and prepaid plans recur; onetime plans do not."""
        return self.type != "onetime"


class Product(msgspec.Struct):
    """Positional, so a row builds it in field order; ``variants`` is decoded from its JSON
    list by the repository and ``plans`` is filled by hand (the 2021-01 view needs them)."""

    id: int
    store_id: int
    external_product_id: str
    title: str
    handle: str | None
    product_type: str | None
    vendor: str | None
    description: str | None
    images: dict[str, str] | None
    requires_shipping: bool
    taxable: bool
    variants: list[Variant]
    created_at: datetime
    updated_at: datetime
    plans: list[Plan] = []


class VariantDefaults(msgspec.Struct, kw_only=True):
    """What the catalog gives a subscription or one-time item of one product and variant."""

    external_product_id: str
    external_variant_id: str | None
    product_title: str
    variant_title: str | None
    price: Decimal | None
    sku: str | None
    grams: int | None
    taxable: bool
    requires_shipping: bool
    images: dict[str, str] | None


# Commands -------------------------------------------------------------------------------


class VariantInput(msgspec.Struct, kw_only=True):
    """A variant as sent; ``requires_shipping`` and ``taxable`` default to the product's."""

    external_variant_id: str
    title: str | None = None
    price: Decimal | None = None
    sku: str | None = None
    grams: int | None = None
    requires_shipping: bool | None = None
    taxable: bool | None = None
    image: str | None = None


class ProductCreate(msgspec.Struct, kw_only=True):
    external_product_id: str
    title: str
    handle: str | None = None
    product_type: str | None = None
    vendor: str | None = None
    description: str | None = None
    images: dict[str, str] | None = None
    requires_shipping: bool = True
    taxable: bool = True
    variants: list[VariantInput] = []


class _Changes(msgspec.Struct, kw_only=True, omit_defaults=True):
    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}


class ProductUpdate(_Changes, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set; ``variants`` replaces the whole list."""

    title: str | UnsetType = UNSET
    handle: str | None | UnsetType = UNSET
    product_type: str | None | UnsetType = UNSET
    vendor: str | None | UnsetType = UNSET
    description: str | None | UnsetType = UNSET
    images: dict[str, str] | None | UnsetType = UNSET
    requires_shipping: bool | UnsetType = UNSET
    taxable: bool | UnsetType = UNSET
    variants: list[VariantInput] | UnsetType = UNSET


class PlanCreate(msgspec.Struct, kw_only=True):
    external_product_id: str
    title: str
    type: str
    discount_amount: Decimal | None = None
    discount_type: str | None = None
    channel_settings: dict[str, Any] | None = None
    sort_order: int = 0
    subscription_preferences: dict[str, Any] | None = None
    external_variant_ids: list[str] = []


class PlanUpdate(_Changes, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set; ``subscription_preferences`` and
    ``channel_settings`` merge into the stored ones key by key. ``id`` names the plan in a bulk
    update."""

    id: int | UnsetType = UNSET
    external_product_id: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    discount_amount: Decimal | None | UnsetType = UNSET
    discount_type: str | None | UnsetType = UNSET
    channel_settings: dict[str, Any] | None | UnsetType = UNSET
    sort_order: int | UnsetType = UNSET
    subscription_preferences: dict[str, Any] | None | UnsetType = UNSET
    external_variant_ids: list[str] | None | UnsetType = UNSET


class PurchaseOptions(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How a product may be bought, in the terms of the deprecated 2021-01 product endpoints
    (`subscription_defaults` plus the product's discount, decisions §5.16). The catalog keeps no
    such record: it is written as plans and read back from them (``purchase_options.py``)."""

    storefront_purchase_options: str | UnsetType = UNSET  # subscription_only | subscription_and_onetime | onetime
    order_interval_unit: str | None | UnsetType = UNSET
    order_interval_frequency_options: list[int] | UnsetType = UNSET
    charge_interval_frequency: int | None | UnsetType = UNSET
    order_day_of_month: int | None | UnsetType = UNSET
    order_day_of_week: int | None | UnsetType = UNSET
    cutoff_day_of_month: int | None | UnsetType = UNSET
    cutoff_day_of_week: int | None | UnsetType = UNSET
    expire_after_specific_number_of_charges: int | None | UnsetType = UNSET
    apply_cutoff_date_to_checkout: bool | UnsetType = UNSET


class LegacyProductWrite(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A 2021-01 ``POST /products`` or ``PUT /products/{id}``: the product's own fields and its
    purchase options. ``external_product_id`` is set on create only."""

    external_product_id: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
    handle: str | None | UnsetType = UNSET
    images: dict[str, str] | None | UnsetType = UNSET
    discount_amount: Decimal | None | UnsetType = UNSET
    discount_type: str | None | UnsetType = UNSET
    subscription_defaults: PurchaseOptions | None | UnsetType = UNSET
