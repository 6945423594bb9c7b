"""Charges (spec 01 Charge, spec 02 Charge) and the purchase items each one holds.

A queued or skipped charge is derived data: the reconciler (domain/schedule) writes it from
the plan of its address. Line items, addresses and amounts are stored as computed, so a read
renders a charge from its own row."""

from sqlalchemy import Boolean, Column, Date, ForeignKey, Index, Integer, String, Table, text

from .base import DecimalText, IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

charges = Table(
    "charges",
    metadata,
    id_column(),
    store_column(),
    Column("customer_id", IdType, nullable=False, index=True),
    # No foreign key: a processed charge outlives its address (money history is kept).
    Column("address_id", IdType, nullable=False),
    Column("scheduled_at", Date, nullable=False),
    Column("status", String(24), nullable=False),
    Column("type", String(16), nullable=False),
    Column("currency", String(3), nullable=False),
    Column("line_items", JsonType, nullable=False),
    Column("shipping_lines", JsonType, nullable=False),
    Column("tax_lines", JsonType, nullable=False),
    Column("discounts", JsonType, nullable=False),
    Column("discount_id", IdType, nullable=True, index=True),
    Column("billing_address", JsonType, nullable=True),
    Column("shipping_address", JsonType, nullable=False),
    Column("order_attributes", JsonType, nullable=False),
    Column("note", String(4096), nullable=True),
    Column("tags", String(1024), nullable=True),
    Column("taxable", Boolean, nullable=False),
    Column("taxes_included", Boolean, nullable=False),
    Column("subtotal_price", DecimalText(), nullable=False),
    Column("total_discounts", DecimalText(), nullable=False),
    Column("total_line_items_price", DecimalText(), nullable=False),
    Column("total_tax", DecimalText(), nullable=False),
    Column("total_shipping", DecimalText(), nullable=False),
    Column("total_price", DecimalText(), nullable=False),
    Column("total_refunds", DecimalText(), nullable=False),
    Column("total_weight_grams", Integer, nullable=False),
    Column("orders_count", Integer, nullable=False),
    Column("processed_at", UtcDateTime(), nullable=True),
    Column("error", String(1024), nullable=True),
    Column("error_type", String(64), nullable=True),
    Column("charge_attempts", Integer, nullable=False),
    Column("retry_date", Date, nullable=True),
    Column("last_charge_attempt", UtcDateTime(), nullable=True),
    Column("external_order_id", String(64), nullable=True),
    Column("external_transaction_id", String(128), nullable=True),
    Column("payment_processor", String(32), nullable=True),
    Column("has_uncommitted_changes", Boolean, nullable=False),
    Column("merged_at", UtcDateTime(), nullable=True),
    Column("original_scheduled_at", Date, nullable=True),
    Column("lock_version", Integer, nullable=False),
    # Processing (decisions §6.3-§6.7, domain/billing): the method the last attempt used, when
    # an authorize-only payment was authorized, and the claim of the run processing it now.
    Column("payment_method_id", IdType, nullable=True),
    Column("authorized_at", UtcDateTime(), nullable=True),
    Column("claimed_by", String(64), nullable=True),
    Column("claimed_at", UtcDateTime(), nullable=True),
    # The date `charge/upcoming` was told for (issue 14): told again when the date moves.
    Column("upcoming_told_for", Date, nullable=True),
    # NOTE: spec 02 Checkout `analytics_data`, copied to the charge its payment creates; other
    # charges have none (rendered as an empty `utm_params`; 0021).
    Column("analytics_data", JsonType, nullable=True),
    *timestamps(),
    # The status inside the address index: a replan reads one address's open charges (0004).
    Index("ix_charges_store_address_status_date", "store_id", "address_id", "status", "scheduled_at"),
    Index("ix_charges_store_status_date", "store_id", "status", "scheduled_at"),
    # Lists sorted by date walk it in order (with the row id after the date) instead of sorting.
    Index("ix_charges_store_scheduled", "store_id", "scheduled_at"),
    # The few charges claimed right now: the billing run looks for abandoned captures and
    # refunds every time it runs (domain/billing/money_back.py finish_abandoned; 0011).
    Index("ix_charges_store_claimed", "store_id", postgresql_where=text("claimed_by IS NOT NULL"),
          sqlite_where=text("claimed_by IS NOT NULL")),
    # A processor's event names the payment by its id: a refund made in Stripe's Dashboard
    # finds its charge (domain/billing/inbound.py; 0019). Paid charges only.
    Index("ix_charges_store_transaction", "store_id", "external_transaction_id",
          postgresql_where=text("external_transaction_id IS NOT NULL"),
          sqlite_where=text("external_transaction_id IS NOT NULL")),
    sqlite_autoincrement=True,
)

# The purchase items on each charge, for the `subscription_id` / `purchase_item_id` filters.
charge_items = Table(
    "charge_items",
    metadata,
    Column("charge_id", IdType, ForeignKey("charges.id", ondelete="CASCADE"), primary_key=True),
    Column("purchase_item_id", IdType, primary_key=True, index=True),
    Column("store_id", IdType, nullable=False),
)

# NOTE: decisions §5.3, an update with commit=false defers the address's regeneration by
# 5 seconds; the row says when it falls due (jobs/regenerate.py runs it).
pending_regenerations = Table(
    "pending_regenerations",
    metadata,
    Column("address_id", IdType, ForeignKey("addresses.id", ondelete="CASCADE"), primary_key=True),
    Column("store_id", IdType, nullable=False, index=True),
    Column("due_at", UtcDateTime(), nullable=False, index=True),
)
