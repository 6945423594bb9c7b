"""The customer as the domain sees it, and its commands."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

BILLING_FIELDS = ("address1", "address2", "city", "company", "country_code", "first_name",
                  "last_name", "phone", "province", "zip")
# NOTE: spec 02 Customers create, the parts of a billing address it requires; once given, an
# update cannot take them away.
BILLING_REQUIRED = ("address1", "city", "country_code", "first_name", "last_name", "province", "zip")


class Customer(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py); the derived counts come last."""

    id: int
    store_id: int
    email: str
    first_name: str
    last_name: str
    phone: str | None
    external_customer_id: str | None
    hash: str
    accepts_marketing: bool
    tax_exempt: bool
    analytics_data: dict[str, Any] | None
    processor_type: str | None
    status: str
    first_charge_processed_at: datetime | None
    # {field: value} for every name of BILLING_FIELDS, or None when the customer has none.
    billing_address: dict[str, str | None] | None
    created_at: datetime
    updated_at: datetime
    # Derived on read.
    has_valid_payment_method: bool = False
    subscriptions_active_count: int = 0
    subscriptions_total_count: int = 0
    has_payment_method_in_dunning: bool = False
    # The customer's default payment method (decisions §6.12: it pays where an address names none).
    default_method_processor: str | None = None
    default_method_customer_token: str | None = None
    default_method_payment_token: str | None = None
    default_method_status: str | None = None
    default_method_status_reason: str | None = None
    orders_count: int = 0

    def customer_token(self, processor: str) -> str | None:
        """The processor's customer token, as the deprecated `<processor>_customer_token`
        fields show it: the default method's, when that method is the processor's."""
        if (self.default_method_processor or "").lower() != processor:
            return None
        return self.default_method_customer_token

    def payment_token(self, processor: str) -> str | None:
        """The default method's payment method token, when that method is the processor's (an
        Authorize.Net payment profile, as the 2021-01 `authorizedotnet_payment_profile_id`)."""
        if (self.default_method_processor or "").lower() != processor:
            return None
        return self.default_method_payment_token

    @property
    def reason_payment_method_not_valid(self) -> str | None:
        """Why the customer has no valid payment method: the default method's `status_reason`,
        else its status in words; None while a valid one exists or when it has none at all."""
        if self.has_valid_payment_method or self.default_method_status is None:
            return None
        return self.default_method_status_reason or f"payment method is {self.default_method_status}"


class CustomerCreate(msgspec.Struct, kw_only=True):
    email: str
    first_name: str
    last_name: str
    phone: str | None = None
    external_customer_id: str | None = None
    accepts_marketing: bool = False
    tax_exempt: bool = False
    analytics_data: dict[str, Any] | None = None
    processor_type: str | None = None
    billing_address1: str | None = None
    billing_address2: str | None = None
    billing_city: str | None = None
    billing_company: str | None = None
    billing_country_code: str | None = None
    billing_first_name: str | None = None
    billing_last_name: str | None = None
    billing_phone: str | None = None
    billing_province: str | None = None
    billing_zip: str | None = None


class CustomerUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set."""

    email: str | UnsetType = UNSET
    first_name: str | UnsetType = UNSET
    last_name: str | UnsetType = UNSET
    phone: str | None | UnsetType = UNSET
    external_customer_id: str | None | UnsetType = UNSET
    accepts_marketing: bool | UnsetType = UNSET
    tax_exempt: bool | UnsetType = UNSET
    analytics_data: dict[str, Any] | None | UnsetType = UNSET
    processor_type: str | None | UnsetType = UNSET
    billing_address1: str | None | UnsetType = UNSET
    billing_address2: str | None | UnsetType = UNSET
    billing_city: str | None | UnsetType = UNSET
    billing_company: str | None | UnsetType = UNSET
    billing_country_code: str | None | UnsetType = UNSET
    billing_first_name: str | None | UnsetType = UNSET
    billing_last_name: str | None | UnsetType = UNSET
    billing_phone: str | None | UnsetType = UNSET
    billing_province: str | None | UnsetType = UNSET
    billing_zip: str | None | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}
