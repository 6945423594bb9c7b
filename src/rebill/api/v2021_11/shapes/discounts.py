"""Head (2021-11) shape of `discount` (decisions §7.1, §7.5, 03-real-fields "discount
(2021-11)"): what ``v2021_11/discounts.py`` renders. 2021-01 derives its flat one through
``v2021_01/discounts.py``."""

from __future__ import annotations

from rebill.api.shapes import (
    Shape,
    array,
    boolean,
    datetime_offset,
    decimal,
    enum,
    integer,
    null,
    nullable,
    obj,
    string,
)
from rebill.api.v2021_11.discounts import RESOURCE_NAMES
from rebill.domain.discount.model import CHANNELS, FIRST_TIME, PRODUCT_TYPES, STATUSES, TYPES

CHANNEL_SETTINGS = obj({name: obj({"can_apply": boolean()}) for name in CHANNELS})

discount = obj({
    "id": integer(),
    "applies_to": obj({
        # NOTE: decisions §7.5, one product or collection at most (a platform id, as stored).
        "ids": array(string(), maxItems=1),
        "purchase_item_type": enum(*PRODUCT_TYPES),
        "resource": nullable(enum(*RESOURCE_NAMES.values())),
    }),
    "channel_settings": CHANNEL_SETTINGS,
    "code": string(),
    "created_at": datetime_offset(),
    "ends_at": nullable(datetime_offset()),
    "external_discount_id": obj({"ecommerce": null()}),
    "external_discount_source": null(),
    # NOTE: 03-real-fields, schema only: the restriction as 2021-01 names it.
    "first_time_customer_restriction": nullable(enum(FIRST_TIME)),
    "prerequisite_subtotal_min": nullable(decimal()),
    "starts_at": nullable(datetime_offset()),
    "status": enum(*STATUSES),
    "updated_at": datetime_offset(),
    "usage_limits": obj({
        "first_time_customer_restriction": boolean(),
        # NOTE: decisions §7.5, null forever, 0 single use, N a usage limit of N.
        "max_subsequent_redemptions": nullable(integer(minimum=0)),
        "one_application_per_customer": boolean(),
        "redemptions": nullable(integer()),
    }),
    # A fixed amount with the currency's minor digits, a percentage as stored (decisions §2.7).
    "value": decimal(),
    "value_type": enum(*TYPES),
})

SHAPES: dict[str, Shape] = {"discount": discount}
