"""Discounts (spec 02 Discount, decisions §7.1, §7.5), and the two inputs of the plan they
add: a discount applied to one queued charge, and the uses (redemptions) of a discount by
successful charges."""

from sqlalchemy import Boolean, Column, Date, ForeignKey, Index, Integer, String, Table, UniqueConstraint

from .base import DecimalText, IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

discounts = Table(
    "discounts",
    metadata,
    id_column(),
    store_column(),
    Column("code", String(255), nullable=False),
    # NOTE: decisions §7.5, codes are unique per store, matched case-insensitively.
    Column("code_key", String(255), nullable=False),
    Column("discount_type", String(16), nullable=False),
    Column("value", DecimalText(), nullable=False),
    Column("status", String(16), nullable=False),
    Column("duration", String(16), nullable=False),
    Column("duration_usage_limit", Integer, nullable=True),
    Column("usage_limit", Integer, nullable=True),
    Column("times_used", Integer, nullable=False),
    Column("once_per_customer", Boolean, nullable=False),
    Column("applies_to_id", String(64), nullable=True),
    Column("applies_to_resource", String(32), nullable=True),
    Column("applies_to_product_type", String(16), nullable=False),
    Column("channel_settings", JsonType, nullable=False),
    Column("first_time_customer_restriction", String(64), nullable=True),
    Column("prerequisite_subtotal_min", DecimalText(), nullable=True),
    Column("starts_at", UtcDateTime(), nullable=True),
    Column("ends_at", UtcDateTime(), nullable=True),
    *timestamps(),
    UniqueConstraint("store_id", "code_key", name="uq_discounts_store_code_key"),
    sqlite_autoincrement=True,
)

# NOTE: spec 02 Charges rule 2, a discount applied to one queued charge only. An input of the
# plan keyed like a planned charge (address, date), so the plan stays a pure function; the
# reconciler drops it when no queued charge of that date remains.
charge_discounts = Table(
    "charge_discounts",
    metadata,
    id_column(),
    store_column(),
    Column("address_id", IdType, ForeignKey("addresses.id", ondelete="CASCADE"), nullable=False),
    Column("scheduled_at", Date, nullable=False),
    Column("discount_id", IdType, ForeignKey("discounts.id", ondelete="CASCADE"), nullable=False, index=True),
    # What the charge was made of when the code was applied (domain/discount/terms.basis_of):
    # spec 02 Charges rule 2, a regeneration that changes it drops the code.
    Column("basis", String(64), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("address_id", "scheduled_at", name="uq_charge_discounts_address_date"),
    sqlite_autoincrement=True,
)

# NOTE: decisions §7.5, one use per successful charge carrying a code, exactly once (the unique
# charge id). Written by the billing outcome in the transaction that records the payment; the
# plan counts an address's uses against the discount's duration. No foreign key to the address
# or the charge: money history outlives both.
discount_redemptions = Table(
    "discount_redemptions",
    metadata,
    id_column(),
    store_column(),
    Column("discount_id", IdType, ForeignKey("discounts.id", ondelete="CASCADE"), nullable=False),
    Column("charge_id", IdType, nullable=False),
    Column("customer_id", IdType, nullable=False),
    Column("address_id", IdType, nullable=False),
    Column("via", String(8), nullable=False),  # address | charge
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("charge_id", name="uq_discount_redemptions_charge"),
    Index("ix_discount_redemptions_discount_customer", "discount_id", "customer_id"),
    Index("ix_discount_redemptions_address_discount", "address_id", "discount_id"),
    sqlite_autoincrement=True,
)

# The code of each deleted discount, by the discount's id, as codes are matched (`code_key`): a
# processed charge keeps the id of the discount it carried (decisions §7.5), and the charges'
# `discount_code` filter finds those of a deleted discount by its code here (found by an audit:
# the charge line's code lower-cased by the database matched other codes on PostgreSQL, whose
# `lower()` is the locale's, than on SQLite outside ASCII). Written by the discount's delete.
deleted_discounts = Table(
    "deleted_discounts",
    metadata,
    Column("id", IdType, primary_key=True, autoincrement=False),
    store_column(),
    Column("code_key", String(255), nullable=False),
    Index("ix_deleted_discounts_store_code_key", "store_id", "code_key"),
)
