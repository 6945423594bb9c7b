"""The head (2021-11) contract of collections and their products (issue 15, 03-real-fields
"collection (2021-11)", decisions §7.7 item 13; docs/api-choices.md, Collections):
serializers, request schemas and list contracts, merged by ``contract.py``. 2021-01 differs
by its naive datetimes (``api/v2021_01/collections.py``)."""

from __future__ import annotations

from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.collection.model import BULK_LIMIT, SORT_ORDERS, TYPE, Collection, CollectionProduct

from .serializers import ts


def collection(c: Collection) -> dict[str, Any]:
    """NOTE: 03-real-fields "collection (2021-11)", every field a string but the id."""
    return {
        "id": c.id,
        "created_at": ts(c.created_at),
        "description": c.description,
        # NOTE: 03-real-fields lists `name` beside `title`, both strings: the same text (a
        # collection has one name; docs/api-choices.md, Collections).
        "name": c.title,
        "sort_order": c.sort_order,
        "title": c.title,
        "type": TYPE,
        "updated_at": ts(c.updated_at),
    }


def collection_product(m: CollectionProduct) -> dict[str, Any]:
    """NOTE: decisions §7.7 item 13; the external id plain, as 2021-11 products show it
    (decisions §5.16)."""
    return {
        "id": m.id,
        "collection_id": m.collection_id,
        "external_product_id": m.external_product_id,
        "created_at": ts(m.created_at),
        "updated_at": ts(m.updated_at),
    }


def _present(value: Any) -> str | None:
    # An external id sent as {"ecommerce": null} (the field kind lets it through as null).
    return "is required" if value is None else None


FIELDS = (
    Field("title", "str", required=True, nullable=False, min_length=1),
    Field("description", "str", max_length=4096),
    Field("sort_order", "str", nullable=False, choices=frozenset(SORT_ORDERS)),
)
PRODUCT_REF = Schema(
    # A string, a number, or nested as {"ecommerce": ...}, as the catalog takes it (decisions §5.16).
    Field("external_product_id", "external_id", required=True, nullable=False, max_length=64, check=_present),
)

SERIALIZERS: dict[str, Serializer] = {"collection": collection, "collection_product": collection_product}
SCHEMAS: dict[str, Schema] = {
    "collection.create": Schema(*FIELDS),
    "collection.update": Schema(*FIELDS),
    # NOTE: issue 15, `{collection_products: [{external_product_id}]}` for the bulk add and delete.
    "collection_product.bulk": Schema(
        Field("collection_products", "list", required=True, nullable=False, items=PRODUCT_REF,
              min_items=1, max_items=BULK_LIMIT)),
}

FILTERS = {
    "title": ("title", q.text),
}
LISTS: dict[str, ListContract] = {
    # NOTE: issue 15, sorts id, title and created (created_at), each asc and desc; spec 01's
    # default for every other resource, id-desc.
    "collections": ListContract(
        plural="collections",
        kind="collection",
        filters=FILTERS,
        sorts=("id", "title", "created"),
        default_sort="id-desc",
        sort_columns={"created": "created_at"},
        text_sorts=("title",),
    ),
    "collection_products": ListContract(
        plural="collection_products",
        kind="collection_product",
        filters={"collection_id": ("collection_id", q.integer)},
        sorts=("id",),
        default_sort="id-asc",
        required_filters=("collection_id",),
    ),
}
