"""The address as the domain sees it, and its commands (spec 01 Address)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class DiscountRef(msgspec.Struct, kw_only=True):
    """The discount an address carries (spec 01: only one applies)."""

    id: int
    code: str
    value: str
    value_type: str


class Address(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py); `discount` is filled by hand."""

    id: int
    store_id: int
    customer_id: int
    payment_method_id: int | None
    discount_id: int | None
    address1: str
    address2: str | None
    city: str
    company: str | None
    country_code: str
    first_name: str
    last_name: str
    phone: str
    province: str | None
    zip: str | None
    order_note: str | None
    order_attributes: list[dict[str, Any]]
    presentment_currency: str
    shipping_lines_override: list[dict[str, Any]] | None
    shipping_lines_conserved: list[dict[str, Any]]
    lock_version: int
    created_at: datetime
    updated_at: datetime
    discount: DiscountRef | None = None


class AddressCreate(msgspec.Struct, kw_only=True):
    customer_id: int
    address1: str
    city: str
    country_code: str
    first_name: str
    last_name: str
    phone: str
    zip: str | None = None
    province: str | None = None
    address2: str | None = None
    company: str | None = None
    order_note: str | None = None
    order_attributes: list[dict[str, Any]] = []
    payment_method_id: int | None = None
    presentment_currency: str | None = None
    shipping_lines_override: list[dict[str, Any]] | None = None
    discounts: list[dict[str, Any]] | UnsetType = UNSET


class AddressUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    address1: str | UnsetType = UNSET
    address2: str | None | UnsetType = UNSET
    city: str | UnsetType = UNSET
    company: str | None | UnsetType = UNSET
    country_code: str | UnsetType = UNSET
    first_name: str | UnsetType = UNSET
    last_name: str | UnsetType = UNSET
    phone: str | UnsetType = UNSET
    province: str | None | UnsetType = UNSET
    zip: str | None | UnsetType = UNSET
    order_note: str | None | UnsetType = UNSET
    order_attributes: list[dict[str, Any]] | UnsetType = UNSET
    payment_method_id: int | None | UnsetType = UNSET
    shipping_lines_override: list[dict[str, Any]] | None | UnsetType = UNSET
    discounts: list[dict[str, Any]] | UnsetType = UNSET
    presentment_currency: str | UnsetType = UNSET  # accepted only unchanged (service.update)
    customer_id: int | UnsetType = UNSET  # accepted only unchanged (service.update)

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}
