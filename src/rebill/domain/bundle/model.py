"""Bundles as the domain sees them (spec 01 Bundle selection, decisions §7.4, §7.7 items 7 and 8;
docs/api-choices.md, Bundles): bundle variants, bundle selections and their commands."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

FIXED, DYNAMIC = "fixed", "dynamic"
PRICE_RULES = (FIXED, DYNAMIC)
# Bounds of what one bundle holds: a quantity (an item's, a range's) and how many collections
# and items (docs/api-choices.md, Bundles).
MAX_QUANTITY = 1000
MAX_COLLECTIONS = 50
MAX_ITEMS = 100
# NOTE: decisions §7.7 item 8, `collection_source` may be omitted: the collections are Rebill's.
DEFAULT_SOURCE = "rebill"


class BundleCollection(msgspec.Struct):
    """A collection a bundle's contents may come from, with its quantity range (inclusive;
    None: no bound). Positional, so a row builds it in field order."""

    bundle_variant_id: int
    collection_id: int
    min_quantity: int | None
    max_quantity: int | None


class BundleVariant(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py); ``collections`` is filled by
    the repository."""

    id: int
    store_id: int
    external_product_id: str
    external_variant_id: str
    price_rule: str
    min_quantity: int | None
    max_quantity: int | None
    created_at: datetime
    updated_at: datetime
    collections: list[BundleCollection] = []


class SelectionItem(msgspec.Struct):
    """One product chosen for a bundle. Positional, so a row builds it in field order."""

    id: int
    bundle_selection_id: int
    collection_id: int
    collection_source: str
    external_product_id: str
    external_variant_id: str
    quantity: int
    price: Decimal
    created_at: datetime
    updated_at: datetime


class BundleSelection(msgspec.Struct):
    """Positional, so a row builds it in field order; ``items`` is filled by the repository."""

    id: int
    store_id: int
    purchase_item_id: int
    bundle_variant_id: int
    external_product_id: str
    external_variant_id: str
    plan_id: int | None
    created_at: datetime
    updated_at: datetime
    items: list[SelectionItem] = []


# Commands ---------------------------------------------------------------------------------


class CollectionRange(msgspec.Struct, kw_only=True):
    collection_id: int
    min_quantity: int | None = None
    max_quantity: int | None = None


class BundleVariantCreate(msgspec.Struct, kw_only=True):
    external_product_id: str
    external_variant_id: str
    price_rule: str = FIXED
    min_quantity: int | None = None
    max_quantity: int | None = None
    collections: list[CollectionRange]


class _Changes(msgspec.Struct, kw_only=True, omit_defaults=True):
    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}


class BundleVariantUpdate(_Changes, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set; ``collections`` replaces the whole list. The
    variant's external ids are its key: sent, they must be the stored ones."""

    external_product_id: str | UnsetType = UNSET
    external_variant_id: str | UnsetType = UNSET
    price_rule: str | UnsetType = UNSET
    min_quantity: int | None | UnsetType = UNSET
    max_quantity: int | None | UnsetType = UNSET
    collections: list[CollectionRange] | UnsetType = UNSET


class ItemInput(msgspec.Struct, kw_only=True):
    """An item as sent; without ``collection_id`` it comes from the first of the bundle's
    collections that holds its product."""

    collection_id: int | None = None
    collection_source: str | None = None
    external_product_id: str
    external_variant_id: str
    quantity: int


class BundleSelectionCreate(msgspec.Struct, kw_only=True):
    purchase_item_id: int
    items: list[ItemInput]
    plan_id: int | None = None


class BundleSelectionUpdate(_Changes, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set; ``items`` replaces the whole contents."""

    purchase_item_id: int | UnsetType = UNSET
    items: list[ItemInput] | UnsetType = UNSET
    plan_id: int | None | UnsetType = UNSET
