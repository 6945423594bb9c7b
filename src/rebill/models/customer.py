"""Customers: spec 02 Customer, decisions §1."""

from sqlalchemy import Boolean, Column, String, Table, UniqueConstraint

from .base import JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

customers = Table(
    "customers",
    metadata,
    id_column(),
    store_column(),
    Column("email", String(255), nullable=False),
    # NOTE: spec 02, email is unique per store; compared case-insensitively.
    Column("email_key", String(255), nullable=False),
    Column("first_name", String(255), nullable=False),
    Column("last_name", String(255), nullable=False),
    Column("phone", String(64), nullable=True),
    Column("external_customer_id", String(64), nullable=True, index=True),
    Column("hash", String(32), nullable=False, unique=True),
    Column("accepts_marketing", Boolean, nullable=False),
    Column("tax_exempt", Boolean, nullable=False),
    Column("analytics_data", JsonType, nullable=True),
    Column("processor_type", String(32), nullable=True),
    Column("status", String(16), nullable=False),
    Column("first_charge_processed_at", UtcDateTime(), nullable=True),
    # The 2021-01 billing address (domain/customer/model.py BILLING_FIELDS), read and written
    # whole: one JSON document, not ten columns (migration 0002).
    Column("billing_address", JsonType, nullable=True),
    *timestamps(),
    UniqueConstraint("store_id", "email_key", name="uq_customers_store_email"),
    sqlite_autoincrement=True,
)
