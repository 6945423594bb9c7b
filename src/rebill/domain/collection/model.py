"""The collection as the domain sees it, its products, and its commands (issue 15,
03-real-fields "collection"; docs/api-choices.md, Collections)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

# How a storefront orders a collection's products: the values the real service's clients send
# (docs/api-choices.md, Collections). Stored and shown; Rebill lists memberships by id.
SORT_ORDERS = ("id-asc", "id-desc", "title-asc", "title-desc", "created-asc", "created-desc")
DEFAULT_SORT_ORDER = "id-asc"
# Collections are made by hand here (no rule-based "smart" collections).
TYPE = "manual"
# NOTE: the real service's bulk endpoints take at most 250 products a request.
BULK_LIMIT = 250


class Collection(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py)."""

    id: int
    store_id: int
    title: str
    description: str
    sort_order: str
    created_at: datetime
    updated_at: datetime


class CollectionProduct(msgspec.Struct):
    """A product in a collection. Positional, so a row builds it in field order."""

    id: int
    store_id: int
    collection_id: int
    product_id: int
    external_product_id: str
    created_at: datetime
    updated_at: datetime


class CollectionCreate(msgspec.Struct, kw_only=True):
    title: str
    description: str | None = None
    sort_order: str = DEFAULT_SORT_ORDER


class CollectionUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set."""

    title: str | UnsetType = UNSET
    description: str | None | UnsetType = UNSET
    sort_order: str | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}


class ProductRef(msgspec.Struct, kw_only=True):
    """One item of `collection_products` in a bulk body: a catalog product by its external id."""

    external_product_id: str


class CollectionProductsBulk(msgspec.Struct, kw_only=True):
    collection_products: list[ProductRef]
