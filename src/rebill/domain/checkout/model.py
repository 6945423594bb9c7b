"""The checkout as the domain sees it, and its commands (spec 02 Checkout, decisions §7.3, §7.7)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

SUBSCRIPTION, ONETIME = "subscription", "onetime"
# NOTE: decisions §7.3, checkouts on a platform S store go through platform S.
PLATFORM_S = ("platform_s_hosted", "platform_s_checkout")
# NOTE: spec 02 Checkouts charge, `payment_type` allowed values.
PAYMENT_TYPES = ("CREDIT_CARD", "PAYPAL", "APPLE_PAY", "GOOGLE_PAY")
# The fields of a checkout's billing and shipping address (spec 02 Checkout).
ADDRESS_FIELDS = ("address1", "address2", "city", "company", "country_code", "first_name", "last_name", "phone",
                  "province", "zip")
# NOTE: decisions §7.7.4, what a complete shipping address has (and a zip where the country
# has zips, decisions §4.2); with `partial_shipping` the country and the zip are enough until
# the charge (spec 02 Checkouts).
COMPLETE = ("address1", "city", "country_code", "first_name", "last_name")
PARTIAL = ("country_code",)
# The cadence of a subscription line (decisions §7.7.2), as a subscription takes it.
CADENCE = ("charge_interval_frequency", "order_interval_frequency", "order_interval_unit", "order_day_of_month",
           "order_day_of_week", "cutoff_day_of_month", "cutoff_day_of_week", "expire_after_specific_number_of_charges")


class Checkout(msgspec.Struct):
    """Positional, in the column order of ``models.checkouts`` (db/rows.py)."""

    id: int
    store_id: int
    token: str
    email: str | None
    phone: str | None
    note: str | None
    note_attributes: list[dict[str, Any]]
    buyer_accepts_marketing: bool
    currency: str
    discount_code: str | None
    discount_id: int | None
    analytics_data: dict[str, Any] | None
    billing_address: dict[str, Any] | None
    shipping_address: dict[str, Any] | None
    external_checkout_id: str | None
    external_checkout_source: str | None
    external_customer_id: str | None
    # Each line: its catalog product and variant, quantity, kind, cadence, and what the catalog
    # said of it (lines.py); `subscription_id` once the checkout made its subscription.
    line_items: list[dict[str, Any]]
    # The charge the checkout would be (plan.build_charge): `line_items`, `shipping_lines`,
    # `tax_lines`, `discounts`, `discount_id`, plus `applied_discount`, `requires_shipping`,
    # `shipping_address_validations`, `taxable`, `total_weight_grams`, `orders_count`.
    pricing: dict[str, Any]
    taxes_included: bool
    subtotal_price: Decimal
    total_discounts: Decimal
    total_shipping: Decimal
    total_tax: Decimal
    total_price: Decimal
    payment_processor: str | None
    payment_type: str | None
    payment_token: str | None
    payment_processor_customer_id: str | None
    payment_processor_transaction_id: str | None
    customer_id: int | None
    charge_id: int | None
    completed_at: datetime | None
    charge_attempts: int
    claimed_by: str | None
    claimed_at: datetime | None
    payment: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


class LineInput(msgspec.Struct, kw_only=True):
    """A line as sent: which catalog variant, how many, and for a subscription its cadence."""

    product_id: str
    variant_id: str
    quantity: int
    properties: list[dict[str, Any]] = []
    charge_interval_frequency: int | None = None
    order_interval_frequency: int | None = None
    order_interval_unit: str | None = None
    order_day_of_month: int | None = None
    order_day_of_week: int | None = None
    cutoff_day_of_month: int | None = None
    cutoff_day_of_week: int | None = None
    expire_after_specific_number_of_charges: int | None = None
    first_recurring_charge_delay: int | None = None


class CheckoutWrite(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A create or an update: only the fields that were sent are set."""

    line_items: list[LineInput] | UnsetType = UNSET
    analytics_data: dict[str, Any] | None | UnsetType = UNSET
    billing_address: dict[str, Any] | None | UnsetType = UNSET
    shipping_address: dict[str, Any] | None | UnsetType = UNSET
    buyer_accepts_marketing: bool | None | UnsetType = UNSET
    currency: str | None | UnsetType = UNSET
    discount_code: str | None | UnsetType = UNSET
    email: str | None | UnsetType = UNSET
    external_checkout_id: str | None | UnsetType = UNSET
    external_checkout_source: str | None | UnsetType = UNSET
    external_customer_id: str | None | UnsetType = UNSET
    note: str | None | UnsetType = UNSET
    note_attributes: list[dict[str, Any]] | None | UnsetType = UNSET
    phone: str | None | UnsetType = UNSET
    partial_shipping: bool | None = None

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__
                if f != "partial_shipping" and getattr(self, f) is not UNSET}


class ChargeRequest(msgspec.Struct, kw_only=True):
    """NOTE: spec 02 Checkouts charge body: `payment_processor` and `payment_token` required."""

    payment_processor: str
    payment_token: str
    payment_type: str | None = None  # a card when not said


class CheckoutCharge(msgspec.Struct):
    """NOTE: spec 02 Checkouts charge result: the checkout after its payment, and the status of
    the charge it made (`success`, or `pending` for an authorization awaiting its capture)."""

    checkout: Checkout
    status: str | None
