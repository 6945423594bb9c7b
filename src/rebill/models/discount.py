"""Discounts (spec 02 Discount). The endpoints come with the discounts issue; addresses
already carry one (spec 01 Address ``discounts``)."""

from sqlalchemy import Boolean, Column, Integer, String, Table, UniqueConstraint

from .base import DecimalText, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

discounts = Table(
    "discounts",
    metadata,
    id_column(),
    store_column(),
    Column("code", String(255), nullable=False),
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
    UniqueConstraint("store_id", "code", name="uq_discounts_store_code"),
    sqlite_autoincrement=True,
)
