"""Head (2021-11) shapes of `collection` and `collection_product` (03-real-fields "collection
(2021-11)", decisions §7.7 item 13): what ``v2021_11/collections.py`` renders. 2021-01 derives
its own (naive datetimes) through ``v2021_01/collections.py``."""

from __future__ import annotations

from rebill.api.shapes import datetime_offset, enum, integer, obj, string
from rebill.domain.collection.model import SORT_ORDERS, TYPE

collection = obj({
    "id": integer(),
    "created_at": datetime_offset(),
    # "" when none was given (domain/collection/service.py): never null.
    "description": string(),
    "name": string(),
    "sort_order": enum(*SORT_ORDERS),
    "title": string(),
    "type": enum(TYPE),
    "updated_at": datetime_offset(),
})

collection_product = obj({
    "id": integer(),
    "collection_id": integer(),
    # NOTE: decisions §5.16, plain as 2021-11 products show it.
    "external_product_id": string(),
    "created_at": datetime_offset(),
    "updated_at": datetime_offset(),
})

SHAPES = {"collection": collection, "collection_product": collection_product}
