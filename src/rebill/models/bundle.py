"""Bundles (spec 01 Bundle selection, decisions §7.4, §7.7 items 7 and 8, issue 15).

A bundle variant says which catalog variant is a bundle and which collections its contents may
come from (a row per collection, with its quantity range); a bundle selection is the contents
one purchase item (a subscription or a one-time item) holds, a row per item. Bundle variants
name the catalog variant by its external ids, as purchase items do, with no foreign key to the
catalog: a product leaving the catalog leaves its bundle as it was, as it leaves its
subscriptions."""

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Table, UniqueConstraint

from .base import DecimalText, IdType, id_column, metadata, store_column, timestamps

bundle_variants = Table(
    "bundle_variants",
    metadata,
    id_column(),
    # No index of its own: the unique (store, product, variant) constraint leads with it.
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("external_product_id", String(64), nullable=False),
    Column("external_variant_id", String(64), nullable=False),
    Column("price_rule", String(16), nullable=False),  # fixed | dynamic
    # Bounds of a selection's total quantity, inclusive; null: no bound.
    Column("min_quantity", Integer, nullable=True),
    Column("max_quantity", Integer, nullable=True),
    *timestamps(),
    # NOTE: decisions §7.7 item 7, one bundle per variant; also the look-up from a purchase item.
    UniqueConstraint("store_id", "external_product_id", "external_variant_id",
                     name="uq_bundle_variants_store_variant"),
    sqlite_autoincrement=True,
)

bundle_variant_collections = Table(
    "bundle_variant_collections",
    metadata,
    id_column(),
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("bundle_variant_id", IdType, ForeignKey("bundle_variants.id", ondelete="CASCADE"), nullable=False),
    # No cascade: a collection a bundle names cannot be deleted (its delete refuses first;
    # docs/api-choices.md, Bundles). The index answers which bundles name a collection.
    Column("collection_id", IdType, ForeignKey("collections.id"), nullable=False, index=True),
    Column("min_quantity", Integer, nullable=True),
    Column("max_quantity", Integer, nullable=True),
    # A collection once per bundle; the constraint's index serves a bundle's collections.
    UniqueConstraint("bundle_variant_id", "collection_id", name="uq_bundle_variant_collections_variant_collection"),
    sqlite_autoincrement=True,
)

bundle_selections = Table(
    "bundle_selections",
    metadata,
    id_column(),
    store_column(),
    # One selection per purchase item: the contents its next orders take. It goes with the item.
    Column("purchase_item_id", IdType, ForeignKey("purchase_items.id", ondelete="CASCADE"), nullable=False,
           unique=True),
    # No cascade: a bundle variant with selections cannot be deleted (422).
    Column("bundle_variant_id", IdType, ForeignKey("bundle_variants.id"), nullable=False, index=True),
    # Copied from the bundle variant, whose external ids never change.
    Column("external_product_id", String(64), nullable=False),
    Column("external_variant_id", String(64), nullable=False),
    # The plan a dynamic bundle's items were priced with (decisions §7.7 item 8); no foreign
    # key: a plan may be deleted, the prices it gave stay.
    Column("plan_id", IdType, nullable=True),
    *timestamps(),
    sqlite_autoincrement=True,
)

bundle_selection_items = Table(
    "bundle_selection_items",
    metadata,
    id_column(),
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("bundle_selection_id", IdType, ForeignKey("bundle_selections.id", ondelete="CASCADE"), nullable=False,
           index=True),
    # The collection the item was chosen from; no foreign key: the item stays as chosen when
    # the collection later leaves the bundle and is deleted.
    Column("collection_id", IdType, nullable=False),
    Column("collection_source", String(32), nullable=False),
    Column("external_product_id", String(64), nullable=False),
    Column("external_variant_id", String(64), nullable=False),
    Column("quantity", Integer, nullable=False),
    # The unit price, in the purchase item's currency and its minor digits.
    Column("price", DecimalText(), nullable=False),
    *timestamps(),
    # The list filters `item_external_product_ids` and `item_external_variant_ids`.
    Index("ix_bundle_selection_items_store_product", "store_id", "external_product_id"),
    Index("ix_bundle_selection_items_store_variant", "store_id", "external_variant_id"),
    sqlite_autoincrement=True,
)
