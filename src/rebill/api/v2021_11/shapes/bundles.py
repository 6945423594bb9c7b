"""Head (2021-11) shapes of `bundle_variant` (a Rebill extension, decisions §7.7 item 7) and
`bundle_selection` (spec 01 Bundle selection, 03-real-fields "bundle_selection (2021-11)"): what
``v2021_11/bundles.py`` renders. 2021-01 derives its bundle variant through
``v2021_01/bundles.py`` (bundle selections are 2021-11 only)."""

from __future__ import annotations

from rebill.api.shapes import Shape, array, boolean, datetime_offset, enum, integer, money, null, nullable, obj, string
from rebill.domain.bundle.model import MAX_QUANTITY, PRICE_RULES

# NOTE: decisions §7.7 item 7, each bound optional and inclusive (null: no bound).
_low = nullable(integer(minimum=0, maximum=MAX_QUANTITY))
_high = nullable(integer(minimum=1, maximum=MAX_QUANTITY))

bundle_variant = obj({
    "id": integer(),
    "collections": array(obj({"collection_id": integer(), "min_quantity": _low, "max_quantity": _high}),
                         minItems=1),
    "created_at": datetime_offset(),
    # External ids plain strings, as 2021-11 bundle selections show them.
    "external_product_id": string(),
    "external_variant_id": string(),
    "max_quantity": _high,
    "min_quantity": _low,
    "price_rule": enum(*PRICE_RULES),
    "updated_at": datetime_offset(),
})

_item = obj({
    "id": integer(),
    # NOTE: spec 01 and 03-real-fields, an item's collection_id is a string.
    "collection_id": string(),
    "collection_source": string(),
    "created_at": datetime_offset(),
    "external_product_id": string(),
    "external_variant_id": string(),
    # NOTE: 03-real-fields, a string: the variant's price (less the plan's discount in a dynamic
    # bundle, decisions §7.7 item 8).
    "price": money(),
    "quantity": integer(minimum=1, maximum=MAX_QUANTITY),
    "updated_at": datetime_offset(),
})

bundle_selection = obj({
    "id": integer(),
    "bundle_variant_id": integer(),
    # NOTE: 03-real-fields, only null was seen: a selection stands for the item's next orders.
    "charge_id": null(),
    "created_at": datetime_offset(),
    "external_product_id": string(),
    "external_variant_id": string(),
    "is_fallback": boolean(),
    "items": array(_item),
    "order_id": null(),
    "purchase_item_id": integer(),
    "updated_at": datetime_offset(),
})

SHAPES: dict[str, Shape] = {"bundle_variant": bundle_variant, "bundle_selection": bundle_selection}
