"""Orders (decisions §6.10): what a paid charge makes, one per delivery (several for prepaid).

An order keeps its own copy of what was bought, where it goes and what it cost, taken from
the charge when it was paid: later changes to the subscription or address do not rewrite
history."""

from sqlalchemy import BigInteger, Boolean, Column, Date, ForeignKey, Index, Integer, String, Table

from .base import DecimalText, IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

orders = Table(
    "orders",
    metadata,
    id_column(),
    store_column(),
    Column("customer_id", IdType, nullable=False, index=True),
    # No foreign keys to address or charge: an order outlives both (money history is kept).
    Column("address_id", IdType, nullable=False),
    Column("charge_id", IdType, nullable=True),
    Column("status", String(16), nullable=False),  # success | queued | cancelled | error
    Column("type", String(16), nullable=False),  # recurring | checkout
    Column("is_prepaid", Boolean, nullable=False),
    # Order k of a prepaid charge (0 for the first and for every ordinary order).
    Column("sequence", Integer, nullable=False),
    Column("scheduled_at", Date, nullable=False),
    # The date `order/upcoming` was told for (issue 14): told again when the date moves.
    Column("upcoming_told_for", Date, nullable=True),
    Column("processed_at", UtcDateTime(), nullable=True),
    Column("currency", String(3), nullable=False),
    Column("line_items", JsonType, nullable=False),
    Column("shipping_lines", JsonType, nullable=False),
    Column("tax_lines", JsonType, nullable=False),
    Column("discounts", JsonType, nullable=False),
    Column("billing_address", JsonType, nullable=True),
    Column("shipping_address", JsonType, nullable=False),
    Column("order_attributes", JsonType, nullable=False),
    Column("note", String(4096), nullable=True),
    Column("tags", String(1024), nullable=True),
    Column("taxable", Boolean, nullable=False),
    Column("subtotal_price", DecimalText(), nullable=False),
    Column("total_discounts", DecimalText(), nullable=False),
    Column("total_line_items_price", DecimalText(), nullable=False),
    Column("total_tax", DecimalText(), nullable=False),
    Column("total_shipping", DecimalText(), nullable=False),
    Column("total_price", DecimalText(), nullable=False),
    Column("total_weight_grams", Integer, nullable=False),
    Column("external_order_id", String(64), nullable=True),
    Column("external_order_name", String(64), nullable=True),
    Column("external_order_number", String(64), nullable=True),
    # The order's number in its store: 1, 2, 3... in the order the orders were made, never
    # reused (order_numbers below). Shown as `external_order_number` until the platform sets
    # its own (docs/api-choices.md, Orders).
    Column("number", BigInteger, nullable=False),
    Column("error", String(1024), nullable=True),
    *timestamps(),
    Index("ix_orders_store_charge", "store_id", "charge_id"),
    # The orders of one address (a list filter), as charges keep theirs.
    Index("ix_orders_store_address", "store_id", "address_id"),
    Index("ix_orders_store_status_date", "store_id", "status", "scheduled_at"),
    Index("ix_orders_store_number", "store_id", "number", unique=True),
    sqlite_autoincrement=True,
)

# The purchase items each order holds, for the `subscription_id` filter of lists.
order_items = Table(
    "order_items",
    metadata,
    Column("order_id", IdType, ForeignKey("orders.id", ondelete="CASCADE"), primary_key=True),
    Column("purchase_item_id", IdType, primary_key=True, index=True),
    Column("store_id", IdType, nullable=False),
)

# The last order number each store gave: one row a store, moved forward by the insert that
# makes orders, in the same transaction (a rolled-back insert gives its numbers back).
order_numbers = Table(
    "order_numbers",
    metadata,
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), primary_key=True,
           autoincrement=False),
    Column("last_number", BigInteger, nullable=False),
)
