"""Checkouts (spec 02 Checkout, decisions §7.3, §7.7): a cart a buyer pays once, which then
becomes a customer, an address, subscriptions, a charge of type checkout and its order.

What the buyer sent is kept as sent (its lines resolved from the catalog); what it costs is
computed by the charge totals (domain/charge/totals.py) at each write and kept whole in
``pricing`` with the totals beside it. A payment in flight holds the checkout the way a billing
run holds a charge: ``claimed_by``/``claimed_at`` and the attempt it makes in ``payment``."""

from sqlalchemy import Boolean, Column, Index, Integer, String, Table, text

from .base import DecimalText, IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

checkouts = Table(
    "checkouts",
    metadata,
    id_column(),
    store_column(),
    # NOTE: spec 02 Checkout `token`, the checkout's id in every path (unique everywhere).
    Column("token", String(32), nullable=False, unique=True),
    Column("email", String(255), nullable=True),
    Column("phone", String(64), nullable=True),
    Column("note", String(4096), nullable=True),
    Column("note_attributes", JsonType, nullable=False),
    Column("buyer_accepts_marketing", Boolean, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("discount_code", String(255), nullable=True),
    Column("discount_id", IdType, nullable=True),
    Column("analytics_data", JsonType, nullable=True),
    Column("billing_address", JsonType, nullable=True),
    Column("shipping_address", JsonType, nullable=True),
    Column("external_checkout_id", String(64), nullable=True),
    Column("external_checkout_source", String(64), nullable=True),
    Column("external_customer_id", String(64), nullable=True),
    # The lines as the buyer chose them, with what the catalog said of each.
    Column("line_items", JsonType, nullable=False),
    # The charge lines, shipping, tax and discount the totals computed (read and written whole).
    Column("pricing", JsonType, nullable=False),
    Column("taxes_included", Boolean, nullable=False),
    Column("subtotal_price", DecimalText(), nullable=False),
    Column("total_discounts", DecimalText(), nullable=False),
    Column("total_shipping", DecimalText(), nullable=False),
    Column("total_tax", DecimalText(), nullable=False),
    Column("total_price", DecimalText(), nullable=False),
    Column("payment_processor", String(32), nullable=True),
    Column("payment_type", String(16), nullable=True),
    Column("payment_token", String(255), nullable=True),
    Column("payment_processor_customer_id", String(255), nullable=True),
    Column("payment_processor_transaction_id", String(128), nullable=True),
    # No foreign keys: what the checkout made outlives it and it outlives them (money history).
    Column("customer_id", IdType, nullable=True),
    Column("charge_id", IdType, nullable=True),
    Column("completed_at", UtcDateTime(), nullable=True),
    # Payments tried so far: each attempt pays under its own idempotency key.
    Column("charge_attempts", Integer, nullable=False),
    Column("claimed_by", String(64), nullable=True),
    Column("claimed_at", UtcDateTime(), nullable=True),
    # The attempt the claim is making (token, processor, amount), so that a crashed one is
    # asked again exactly as it was.
    Column("payment", JsonType, nullable=True),
    *timestamps(),
    # The few checkouts being paid right now: the billing run looks for abandoned ones.
    Index("ix_checkouts_store_claimed", "store_id", postgresql_where=text("claimed_by IS NOT NULL"),
          sqlite_where=text("claimed_by IS NOT NULL")),
    sqlite_autoincrement=True,
)
