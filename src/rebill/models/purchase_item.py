"""Purchase items: subscriptions and one-time items in one table (decisions §5.1, §5.6).

They share one id sequence because charges, skips and bundle selections name either kind by
``purchase_item_id`` (spec 01 Charge line items)."""

from sqlalchemy import Boolean, Column, Date, ForeignKey, Index, Integer, String, Table, UniqueConstraint

from .base import DecimalText, IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

purchase_items = Table(
    "purchase_items",
    metadata,
    id_column(),
    store_column(),
    Column("kind", String(16), nullable=False),  # subscription | onetime
    Column("customer_id", IdType, ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("address_id", IdType, ForeignKey("addresses.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("plan_id", IdType, nullable=True),
    Column("status", String(16), nullable=False),
    Column("external_product_id", String(64), nullable=True),
    Column("external_variant_id", String(64), nullable=True),
    Column("product_title", String(255), nullable=False),
    Column("variant_title", String(255), nullable=True),
    Column("sku", String(255), nullable=True),
    Column("sku_override", Boolean, nullable=False),
    Column("price", DecimalText(), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("properties", JsonType, nullable=False),
    Column("grams", Integer, nullable=True),
    Column("taxable", Boolean, nullable=False),
    Column("requires_shipping", Boolean, nullable=False),
    Column("images", JsonType, nullable=True),
    Column("presentment_currency", String(3), nullable=False),
    Column("next_charge_scheduled_at", Date, nullable=True),
    Column("charge_interval_frequency", Integer, nullable=True),
    Column("order_interval_frequency", Integer, nullable=True),
    Column("order_interval_unit", String(8), nullable=True),
    Column("order_day_of_month", Integer, nullable=True),
    Column("order_day_of_week", Integer, nullable=True),
    Column("cutoff_day_of_month", Integer, nullable=True),
    Column("cutoff_day_of_week", Integer, nullable=True),
    Column("expire_after_specific_number_of_charges", Integer, nullable=True),
    # The day of month a monthly schedule keeps coming back to (Jan 31 -> Feb 28 -> Mar 31).
    Column("anchor_day", Integer, nullable=True),
    # Successful charges so far and the date of the last one (the billing run fills them).
    Column("charges_count", Integer, nullable=False),
    Column("last_charge_date", Date, nullable=True),
    # The next date a cancelled subscription had, for activate (decisions §5.16).
    Column("cancelled_next_date", Date, nullable=True),
    Column("is_skippable", Boolean, nullable=False),
    Column("is_swappable", Boolean, nullable=False),
    Column("max_retries_reached", Boolean, nullable=False),
    Column("cancellation_reason", String(1024), nullable=True),
    Column("cancellation_reason_comments", String(4096), nullable=True),
    Column("cancelled_at", UtcDateTime(), nullable=True),
    Column("analytics_data", JsonType, nullable=True),
    Column("lock_version", Integer, nullable=False),
    *timestamps(),
    Index("ix_purchase_items_store_kind_id", "store_id", "kind", "id"),
    sqlite_autoincrement=True,
)

# NOTE: design guide, skips are inputs to the plan, recorded per purchase item and date.
skips = Table(
    "skips",
    metadata,
    id_column(),
    store_column(),
    Column("purchase_item_id", IdType, ForeignKey("purchase_items.id", ondelete="CASCADE"), nullable=False),
    Column("address_id", IdType, nullable=False, index=True),
    Column("date", Date, nullable=False),
    UniqueConstraint("purchase_item_id", "date", name="uq_skips_item_date"),
    sqlite_autoincrement=True,
)
