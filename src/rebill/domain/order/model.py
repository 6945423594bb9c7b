"""An order as the domain sees it (decisions §6.10, §6.12): what a paid charge made, one per
delivery, with its own copy of the lines, addresses and amounts."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import msgspec

SUCCESS, QUEUED, CANCELLED, ERROR = "success", "queued", "cancelled", "error"
STATUSES = (SUCCESS, QUEUED, CANCELLED, ERROR)
# Orders no payment went into: they can be deleted (docs/api-choices.md, Orders).
UNPAID = (QUEUED, CANCELLED)
# Unprocessed orders sort after every processed one by `processed_at` (ascending), as NULLS
# LAST would, the same way on both databases (docs/api-choices.md, Orders).
NOT_PROCESSED = datetime(9999, 12, 31, tzinfo=timezone.utc)


class Order(msgspec.Struct):
    """Positional: the columns of ``models.orders`` in order, then the joined ones."""

    id: int
    store_id: int
    customer_id: int
    address_id: int
    charge_id: int | None
    status: str
    type: str
    is_prepaid: bool
    sequence: int
    scheduled_at: date
    processed_at: datetime | None
    currency: str
    line_items: list[dict[str, Any]]
    shipping_lines: list[dict[str, Any]]
    tax_lines: list[dict[str, Any]]
    discounts: list[dict[str, Any]]
    billing_address: dict[str, Any] | None
    shipping_address: dict[str, Any]
    order_attributes: list[dict[str, Any]]
    note: str | None
    tags: str | None
    taxable: bool
    subtotal_price: Decimal
    total_discounts: Decimal
    total_line_items_price: Decimal
    total_tax: Decimal
    total_shipping: Decimal
    total_price: Decimal
    total_weight_grams: int
    external_order_id: str | None
    external_order_name: str | None
    external_order_number: str | None
    number: int
    error: str | None
    created_at: datetime
    updated_at: datetime
    # The charge that paid for it (none for a clone) and its customer, joined.
    charge_status: str | None
    payment_processor: str | None
    transaction_id: str | None
    customer_email: str | None
    customer_hash: str | None
    customer_external_id: str | None
    customer_first_name: str | None
    customer_last_name: str | None
    customer_phone: str | None
    customer_accepts_marketing: bool | None
    address_exists: bool

    @property
    def processed_sort(self) -> datetime:
        """The value a `processed_at` sort and its cursors use."""
        return self.processed_at or NOT_PROCESSED

    @property
    def shown_number(self) -> str:
        """The order's number as the API shows it (`external_order_number`): the platform's
        when it set one, else the store's own (docs/api-choices.md, Orders)."""
        return self.external_order_number or str(self.number)

    @property
    def purchase_item_ids(self) -> list[int]:
        return [line["purchase_item_id"] for line in self.line_items]


class OrderUpdate(msgspec.Struct, omit_defaults=True):
    """The writable fields of an order (docs/api-choices.md, Orders); UNSET = not sent."""

    scheduled_at: date | msgspec.UnsetType = msgspec.UNSET
    note: str | None | msgspec.UnsetType = msgspec.UNSET
    tags: str | None | msgspec.UnsetType = msgspec.UNSET
    order_attributes: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET
    shipping_address: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    billing_address: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    external_order_id: str | None | msgspec.UnsetType = msgspec.UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not msgspec.UNSET}
