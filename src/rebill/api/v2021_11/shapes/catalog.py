"""Head (2021-11) shapes of `product` and `plan` (decisions §5.7, §5.8, §5.16, 03-real-fields
"plan (2021-11)"): what ``v2021_11/catalog.py`` renders. 2021-01 derives its product through
``v2021_01/catalog.py`` (spec 03 "product (2021-01)"); it has no plans."""

from __future__ import annotations

from rebill.api.shapes import (
    array,
    boolean,
    datetime_offset,
    enum,
    integer,
    money,
    null,
    nullable,
    obj,
    string,
)
from rebill.domain.catalog.model import CHANNELS, DISCOUNT_TYPES, IMAGE_SIZES, INTERVAL_UNITS, PLAN_TYPES
from rebill.domain.catalog.rules import DAY_FIELDS
from rebill.domain.subscription.intervals import MAX_FREQUENCY

# The sizes the client sent: each one optional, none null (the body's `images`).
IMAGES = obj({}, {size: string() for size in IMAGE_SIZES})

variant = obj({
    # NOTE: decisions §5.16, 2021-11 product ids are plain strings.
    "external_variant_id": string(),
    "title": nullable(string()),
    "price": nullable(money()),
    "sku": nullable(string()),
    "grams": nullable(integer(minimum=0)),
    "requires_shipping": boolean(),
    "taxable": boolean(),
    "image": nullable(string()),
})

product = obj({
    "id": integer(),
    "external_product_id": string(),
    "title": string(),
    "handle": nullable(string()),
    "product_type": nullable(string()),
    "vendor": nullable(string()),
    "description": nullable(string()),
    "images": nullable(IMAGES),
    "requires_shipping": boolean(),
    "taxable": boolean(),
    "variants": array(variant),
    "created_at": datetime_offset(),
    "updated_at": datetime_offset(),
})

# A recurring plan's stored preferences (domain/catalog/rules.py `preferences`): every key, the
# unit and both frequencies always set, the day and limit fields null unless given.
FREQUENCY = integer(minimum=1, maximum=MAX_FREQUENCY)
DAYS = {name: nullable(integer(minimum=low, maximum=high)) for name, (low, high, _) in DAY_FIELDS.items()}
PREFERENCES = obj({
    "apply_cutoff_date_to_checkout": boolean(),
    "charge_interval_frequency": FREQUENCY,
    **DAYS,
    "expire_after_specific_number_of_charges": nullable(integer(minimum=1)),
    "interval_unit": enum(*INTERVAL_UNITS),
    "order_interval_frequency": FREQUENCY,
})

plan = obj({
    "id": integer(),
    "title": string(),
    "type": enum(*PLAN_TYPES),
    "external_product_id": obj({"ecommerce": string()}),
    "external_variant_ids": array(string()),
    "has_variant_restrictions": boolean(),
    "discount_amount": nullable(money()),
    "discount_type": nullable(enum(*DISCOUNT_TYPES)),
    "channel_settings": obj({channel: obj({"display": boolean()}) for channel in CHANNELS}),
    "sort_order": integer(),
    # Null for a onetime plan.
    "subscription_preferences": nullable(PREFERENCES),
    # NOTE: spec 03 schema only; platform selling plans and deleted plans are not shown.
    "external_plan_group_id": null(),
    "external_plan_id": null(),
    "external_plan_name": null(),
    "deleted_at": null(),
    "created_at": datetime_offset(),
    "updated_at": datetime_offset(),
})

SHAPES = {"product": product, "plan": plan}
