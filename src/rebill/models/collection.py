"""Collections of catalog products (issue 15, 03-real-fields "collection"): a merchant's named
group of products, which discounts (`applies_to_resource: platform_collection_id`) and bundle
variants name.

A product joins a collection through a row of ``collection_products``; the row names the
catalog product by its id (a deleted product leaves every collection with it) and keeps the
product's external id, the key the API shows and bundle items name, so that neither a list nor
a membership check needs a join."""

from sqlalchemy import Column, ForeignKey, Index, String, Table, UniqueConstraint

from .base import IdType, id_column, metadata, timestamps

collections = Table(
    "collections",
    metadata,
    id_column(),
    # No index of its own: the (store, title) index below leads with it.
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("title", String(255), nullable=False),
    # Rendered as a string: empty, never null (03-real-fields "collection").
    Column("description", String(4096), nullable=False),
    Column("sort_order", String(16), nullable=False),
    *timestamps(),
    # The `title` filter of the list.
    Index("ix_collections_store_title", "store_id", "title"),
    sqlite_autoincrement=True,
)

collection_products = Table(
    "collection_products",
    metadata,
    id_column(),
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("collection_id", IdType, ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
    # A product's collections (`include=collections`), and the cascade of a product delete.
    Column("product_id", IdType, ForeignKey("products.id", ondelete="CASCADE"), nullable=False, index=True),
    # Copied from the product, whose external id never changes (it is the product's key).
    Column("external_product_id", String(64), nullable=False),
    *timestamps(),
    # A product is in a collection once; the constraint's index serves a collection's list.
    UniqueConstraint("collection_id", "product_id", name="uq_collection_products_collection_product"),
    sqlite_autoincrement=True,
)
