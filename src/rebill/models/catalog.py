"""The catalog subscriptions point at: products with their variants, and plans (decisions
§5.7, §5.8). A product is keyed by its ``external_product_id`` within a store."""

from sqlalchemy import Boolean, Column, ForeignKey, Integer, String, Table, UniqueConstraint

from .base import DecimalText, IdType, JsonType, id_column, metadata, store_column, timestamps

products = Table(
    "products",
    metadata,
    id_column(),
    store_column(),
    Column("external_product_id", String(64), nullable=False),
    Column("title", String(255), nullable=False),
    Column("handle", String(255), nullable=True),
    Column("product_type", String(255), nullable=True),
    Column("vendor", String(255), nullable=True),
    Column("description", String(4096), nullable=True),
    # {large, medium, original, small}: read and written whole.
    Column("images", JsonType, nullable=True),
    Column("requires_shipping", Boolean, nullable=False),
    Column("taxable", Boolean, nullable=False),
    # [{external_variant_id, title, price, sku, grams, requires_shipping, taxable, image}]: a
    # product's variants are read and written with it, never on their own.
    Column("variants", JsonType, nullable=False),
    *timestamps(),
    UniqueConstraint("store_id", "external_product_id", name="uq_products_store_external_id"),
    sqlite_autoincrement=True,
)

plans = Table(
    "plans",
    metadata,
    id_column(),
    store_column(),
    Column("product_id", IdType, ForeignKey("products.id", ondelete="CASCADE"), nullable=False, index=True),
    # Copied from the product: the list filter of decisions §5.8 needs no join.
    Column("external_product_id", String(64), nullable=False, index=True),
    Column("title", String(255), nullable=False),
    Column("type", String(16), nullable=False),
    Column("discount_amount", DecimalText(), nullable=True),
    Column("discount_type", String(16), nullable=True),
    Column("channel_settings", JsonType, nullable=False),
    Column("sort_order", Integer, nullable=False),
    Column("subscription_preferences", JsonType, nullable=True),
    Column("external_variant_ids", JsonType, nullable=False),
    *timestamps(),
    sqlite_autoincrement=True,
)
