"""The head (2021-11) contract of bundle variants (a Rebill extension, decisions §7.7 item 7) and
bundle selections (spec 01 Bundle selection, 03-real-fields "bundle_selection (2021-11)"):
serializers, request schemas and list contracts, merged by ``contract.py``. 2021-01 has bundle
variants only (``api/v2021_01/bundles.py``); docs/api-choices.md, Bundles."""

from __future__ import annotations

from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.bundle.model import (
    MAX_COLLECTIONS,
    MAX_ITEMS,
    MAX_QUANTITY,
    PRICE_RULES,
    BundleSelection,
    BundleVariant,
    SelectionItem,
)

from .serializers import ts


def bundle_variant(v: BundleVariant) -> dict[str, Any]:
    """NOTE: decisions §7.7 item 7, id, the fields a bundle variant takes, created_at, updated_at;
    external ids plain strings, as 2021-11 bundle selections show them."""
    return {
        "id": v.id,
        "collections": [{"collection_id": r.collection_id, "min_quantity": r.min_quantity,
                         "max_quantity": r.max_quantity} for r in v.collections],
        "created_at": ts(v.created_at),
        "external_product_id": v.external_product_id,
        "external_variant_id": v.external_variant_id,
        "max_quantity": v.max_quantity,
        "min_quantity": v.min_quantity,
        "price_rule": v.price_rule,
        "updated_at": ts(v.updated_at),
    }


def _item(i: SelectionItem) -> dict[str, Any]:
    return {
        "id": i.id,
        # NOTE: spec 01 and 03-real-fields, an item's collection_id is a string.
        "collection_id": str(i.collection_id),
        "collection_source": i.collection_source,
        "created_at": ts(i.created_at),
        "external_product_id": i.external_product_id,
        "external_variant_id": i.external_variant_id,
        "price": str(i.price),
        "quantity": i.quantity,
        "updated_at": ts(i.updated_at),
    }


def bundle_selection(s: BundleSelection) -> dict[str, Any]:
    """NOTE: 03-real-fields "bundle_selection (2021-11)", every field; `charge_id` and `order_id`
    are null (only null was seen: a selection stands for the item's next orders), `is_fallback`
    false (Rebill makes no fallback selections)."""
    return {
        "id": s.id,
        "bundle_variant_id": s.bundle_variant_id,
        "charge_id": None,
        "created_at": ts(s.created_at),
        "external_product_id": s.external_product_id,
        "external_variant_id": s.external_variant_id,
        "is_fallback": False,
        "items": [_item(i) for i in s.items],
        "order_id": None,
        "purchase_item_id": s.purchase_item_id,
        "updated_at": ts(s.updated_at),
    }


def _present(value: Any) -> str | None:
    # An external id sent as {"ecommerce": null}.
    return "is required" if value is None else None


def _external(name: str) -> Field:
    return Field(name, "external_id", required=True, nullable=False, max_length=64, check=_present)


RANGE = Schema(
    Field("collection_id", "int", required=True, nullable=False, minimum=1, maximum=q.MAX_ID),
    Field("min_quantity", "int", minimum=0, maximum=MAX_QUANTITY),
    Field("max_quantity", "int", minimum=1, maximum=MAX_QUANTITY),
)
VARIANT_FIELDS = (
    _external("external_product_id"),
    _external("external_variant_id"),
    Field("price_rule", "str", nullable=False, choices=frozenset(PRICE_RULES)),
    Field("min_quantity", "int", minimum=0, maximum=MAX_QUANTITY),
    Field("max_quantity", "int", minimum=1, maximum=MAX_QUANTITY),
    Field("collections", "list", required=True, nullable=False, items=RANGE, min_items=1, max_items=MAX_COLLECTIONS),
)
ITEM = Schema(
    # NOTE: spec 01, a string; a number is taken too. Without it: a collection of the bundle.
    Field("collection_id", "int", minimum=1, maximum=q.MAX_ID),
    Field("collection_source", "str", max_length=32),
    _external("external_product_id"),
    _external("external_variant_id"),
    Field("quantity", "int", required=True, nullable=False, minimum=1, maximum=MAX_QUANTITY),
)
SELECTION_FIELDS = (
    Field("purchase_item_id", "int", required=True, nullable=False),
    Field("items", "list", required=True, nullable=False, items=ITEM, min_items=1, max_items=MAX_ITEMS),
    Field("plan_id", "int"),
)

SERIALIZERS: dict[str, Serializer] = {"bundle_variant": bundle_variant, "bundle_selection": bundle_selection}
SCHEMAS: dict[str, Schema] = {
    "bundle_variant.create": Schema(*VARIANT_FIELDS),
    "bundle_variant.update": Schema(*VARIANT_FIELDS),
    "bundle_selection.create": Schema(*SELECTION_FIELDS),
    "bundle_selection.update": Schema(*SELECTION_FIELDS),
}


@q.typed(**q.schema_of(q.ids))
def _external_ids(value: str) -> list[str]:
    """NOTE: spec 01, `item_external_*_ids` are comma-separated integers (422 otherwise),
    matched as the external ids they spell: `007` is the id `007` (found by an audit: read as
    a number, it lost its zeros and found nothing)."""
    q.ids(value)  # the check and its errors
    return [part.strip() for part in value.split(",") if part.strip()]


LISTS: dict[str, ListContract] = {
    "bundle_variants": ListContract(
        plural="bundle_variants",
        kind="bundle_variant",
        filters={
            **q.window("created_at", "updated_at"),
            "ids": ("ids", q.ids),
            "external_product_id": ("external_product_id", q.text),
            "external_variant_id": ("external_variant_id", q.text),
        },
        sorts=("id", "updated_at"),
        default_sort="id-desc",
    ),
    # NOTE: spec 01 Bundle selections, list query and sorts (default id descending).
    "bundle_selections": ListContract(
        plural="bundle_selections",
        kind="bundle_selection",
        filters={
            "purchase_item_ids": ("purchase_item_ids", q.ids),
            "bundle_variant_ids": ("bundle_variant_ids", q.ids),
            "item_external_variant_ids": ("item_external_variant_ids", _external_ids),
            "item_external_product_ids": ("item_external_product_ids", _external_ids),
            "active_purchase_items": ("active_purchase_items", q.boolean),
        },
        sorts=("id", "updated_at"),
        default_sort="id-desc",
    ),
}
