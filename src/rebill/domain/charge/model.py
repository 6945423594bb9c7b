"""A charge as the domain sees it (spec 01 Charge, spec 02 Charge, decisions §5.9-§5.13)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import msgspec

# NOTE: decisions §6.7, §6.12: an authorization is captured within 7 x 24 hours (the end itself
# still allowed), or never.
CAPTURE_WINDOW = timedelta(days=7)


def capturable(authorized_at: datetime | None, claimed_by: str | None, now: datetime) -> bool:
    """Whether a pending charge may still be captured: within its window, or by a capture that
    claimed it (one whose answer was lost is finished whatever the time: decisions §6.5).
    A lapsed one makes no orders and uses no code (found by audits: it held a one-use code for
    good and its prepaid deliveries stayed in the delivery schedule)."""
    return claimed_by is not None or (authorized_at is not None and now - authorized_at <= CAPTURE_WINDOW)


QUEUED, SKIPPED, SUCCESS, ERROR = "queued", "skipped", "success", "error"
REFUNDED, PARTIALLY_REFUNDED, PENDING = "refunded", "partially_refunded", "pending"
STATUSES = (SUCCESS, ERROR, QUEUED, SKIPPED, REFUNDED, PARTIALLY_REFUNDED, "pending_manual_payment", PENDING)
# The charges a replan reads: what it may rewrite (queued, skipped) and what holds items back
# from the plan (in dunning; or claimed by a billing run: domain/billing).
OPEN = (QUEUED, SKIPPED, ERROR)
# NOTE: decisions §6.9, processed charges (and only they) fall out of sight after 90 days.
PROCESSED = (SUCCESS, REFUNDED, PARTIALLY_REFUNDED)
# Columns the head (2021-11) charge names otherwise, or does not show (None): the names of a
# `charge/updated` event's `updated_attributes` (domain/event/attributes.py).
API_NAMES: dict[str, str | None] = {
    "customer_id": "customer", "discount_id": "discounts", "total_shipping": "shipping_lines",
    "authorized_at": None, "payment_method_id": None,
}


class Charge(msgspec.Struct):
    """Positional: the columns of ``models.charges`` in order, then the customer's (joined),
    then, on the API's reads, the count of processed orders."""

    id: int
    store_id: int
    customer_id: int
    address_id: int
    scheduled_at: date
    status: str
    type: str
    currency: str
    line_items: list[dict[str, Any]]
    shipping_lines: list[dict[str, Any]]
    tax_lines: list[dict[str, Any]]
    discounts: list[dict[str, Any]]
    discount_id: int | None
    billing_address: dict[str, Any] | None
    shipping_address: dict[str, Any]
    order_attributes: list[dict[str, Any]]
    note: str | None
    tags: str | None
    taxable: bool
    taxes_included: bool
    subtotal_price: Decimal
    total_discounts: Decimal
    total_line_items_price: Decimal
    total_tax: Decimal
    total_shipping: Decimal
    total_price: Decimal
    total_refunds: Decimal
    total_weight_grams: int
    orders_count: int
    processed_at: datetime | None
    error: str | None
    error_type: str | None
    charge_attempts: int
    retry_date: date | None
    last_charge_attempt: datetime | None
    external_order_id: str | None
    external_transaction_id: str | None
    payment_processor: str | None
    has_uncommitted_changes: bool
    merged_at: datetime | None
    original_scheduled_at: date | None
    lock_version: int
    payment_method_id: int | None
    authorized_at: datetime | None
    claimed_by: str | None
    analytics_data: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    customer_email: str | None
    customer_hash: str | None
    customer_external_id: str | None
    customer_first_name: str | None
    customer_last_name: str | None
    # NOTE: spec 02 Charge `shipments_count`, the charge's successfully processed orders; the
    # reads the API answers with count them (repository.get, page), the others leave 0.
    shipments_count: int = 0

    @property
    def purchase_item_ids(self) -> list[int]:
        return item_ids(self.line_items)


def item_ids(line_items: list[dict[str, Any]]) -> list[int]:
    # A checkout's one-time line is on its charge and order only: no purchase item
    # (decisions §7.3, docs/api-choices.md, Checkouts).
    return [line["purchase_item_id"] for line in line_items if line["purchase_item_id"] is not None]


# The columns a plan decides (domain/schedule/reconcile.py); everything else on a charge belongs
# to processing.
PLANNED = ("customer_id", "address_id", "scheduled_at", "status", "type", "currency", "line_items", "shipping_lines",
           "tax_lines", "discounts", "discount_id", "billing_address", "shipping_address", "order_attributes", "note",
           "taxable", "taxes_included", "subtotal_price", "total_discounts", "total_line_items_price", "total_tax",
           "total_shipping", "total_price", "total_weight_grams", "orders_count")

_CHARGE_TYPES = {field.name: field.type for field in msgspec.structs.fields(Charge)}

# An open charge as a replan reads it (repository.open_of): the columns a plan decides, then
# what tells the replan whether and how it may rewrite the charge, typed as Charge types them.
# Every subscription write replans its address and reads its open charges: half a Charge's
# columns, and no customer joined, cost a third less per row.
OpenCharge = msgspec.defstruct(
    "OpenCharge",
    [(name, _CHARGE_TYPES[name]) for name in (*PLANNED, "id", "has_uncommitted_changes",
                                               "original_scheduled_at", "claimed_by")],
    namespace={"purchase_item_ids": property(lambda self: item_ids(self.line_items))},
    module=__name__,
)
