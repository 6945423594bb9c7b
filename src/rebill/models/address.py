"""Addresses: spec 01 Address (2021-11), spec 02 Address (2021-01)."""

from sqlalchemy import Column, ForeignKey, Integer, String, Table

from .base import IdType, JsonType, id_column, metadata, store_column, timestamps

addresses = Table(
    "addresses",
    metadata,
    id_column(),
    store_column(),
    Column("customer_id", IdType, ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("payment_method_id", IdType, ForeignKey("payment_methods.id", ondelete="SET NULL"), nullable=True),
    Column("discount_id", IdType, ForeignKey("discounts.id", ondelete="SET NULL"), nullable=True, index=True),
    Column("address1", String(255), nullable=False),
    Column("address2", String(255), nullable=True),
    Column("city", String(255), nullable=False),
    Column("company", String(255), nullable=True),
    Column("country_code", String(2), nullable=False),
    Column("first_name", String(255), nullable=False),
    Column("last_name", String(255), nullable=False),
    Column("phone", String(64), nullable=False),
    Column("province", String(255), nullable=True),
    Column("zip", String(32), nullable=True),
    Column("order_note", String(4096), nullable=True),
    Column("order_attributes", JsonType, nullable=False),
    Column("presentment_currency", String(3), nullable=False),
    Column("shipping_lines_override", JsonType, nullable=True),
    Column("shipping_lines_conserved", JsonType, nullable=False),
    # NOTE: decisions §4.6, optimistic lock: an overlapping write loses with 409.
    Column("lock_version", Integer, nullable=False),
    *timestamps(),
    sqlite_autoincrement=True,
)
