"""How 2021-01 differs from the head for discounts (spec 02 Discount, decisions §7.1, §7.5):
the flat shape with `discount_type`, `duration`, `times_used` and `applies_to_*`, flat request
bodies (`duration` required), and `GET /discounts/count`. Merged by ``contract.py``."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.external_ids import platform_id
from rebill.api.fields import Field, Schema
from rebill.api.v2021_11 import discounts as head
from rebill.domain.discount.model import DURATIONS, RESOURCES

_head_list = head.LISTS["discounts"]


def _number(value: Decimal | None) -> int | str | None:
    """NOTE: spec 02 Discount `prerequisite_subtotal_min` is an integer; a minimum with cents
    is shown as its decimal text rather than rounded."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else str(value)


class DiscountOldShape(Change):
    """Discounts are flat: `discount_type`, `duration`/`duration_usage_limit`, `usage_limit`,
    `once_per_customer`, `first_time_customer_restriction`, `applies_to_id`/`_resource`/
    `_product_type` and `times_used` instead of `value_type`, `applies_to{}` and `usage_limits{}`."""

    kinds = ("discount",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        return {
            "id": obj.id,
            "applies_to": None,
            # NOTE: spec 02 Discount, an integer; a platform id that is no number stays text.
            "applies_to_id": platform_id(obj.applies_to_id),
            "applies_to_product_type": obj.applies_to_product_type,
            "applies_to_resource": obj.applies_to_resource,
            "channel_settings": data["channel_settings"],
            "code": data["code"],
            "created_at": data["created_at"],
            "discount_type": obj.value_type,
            "duration": obj.duration,
            "duration_usage_limit": obj.duration_usage_limit,
            "ends_at": data["ends_at"],
            "first_time_customer_restriction": obj.first_time_customer_restriction,
            "once_per_customer": obj.once_per_customer,
            "prerequisite_subtotal_min": _number(obj.prerequisite_subtotal_min),
            "starts_at": data["starts_at"],
            "status": data["status"],
            "times_used": obj.times_used,
            "updated_at": data["updated_at"],
            "usage_limit": obj.usage_limit,
            "value": data["value"],
        }


    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        props = shape["properties"]
        count = sh.nullable(sh.integer())
        return sh.obj({
            **{name: props[name] for name in ("id", "channel_settings", "code", "created_at", "ends_at",
                                              "first_time_customer_restriction", "starts_at", "status",
                                              "updated_at", "value")},
            "applies_to": sh.null(),
            "applies_to_id": sh.nullable({"type": ["integer", "string"]}),
            "applies_to_product_type": props["applies_to"]["properties"]["purchase_item_type"],
            "applies_to_resource": sh.nullable(sh.enum(*RESOURCES)),
            "discount_type": props["value_type"],
            "duration": sh.enum(*DURATIONS),
            "duration_usage_limit": count,
            "once_per_customer": sh.boolean(),
            # An integer, or the decimal text of a minimum with cents (`_number`).
            "prerequisite_subtotal_min": sh.nullable({"anyOf": [sh.integer(), sh.decimal()]}),
            "times_used": sh.integer(minimum=0),
            "usage_limit": count,
        })


CHANGES: tuple[Change, ...] = (DiscountOldShape(),)
SCHEMAS: dict[str, Schema] = {
    # NOTE: spec 02 Discounts create: `code`, `discount_type`, `duration`, `value` required.
    "discount.create": Schema(
        Field("code", "str", required=True, nullable=False, min_length=1),
        Field("discount_type", "str", required=True, nullable=False, convert=head._types()),
        Field("value", "money", required=True, nullable=False, decimals=None),
        *(f if f.name != "duration" else Field("duration", "str", required=True, nullable=False,
                                               convert=f.convert) for f in head.FLAT),
        *head.COMMON,
    ),
    "discount.update": Schema(
        Field("channel_settings", "object", nullable=False, items=head.CHANNEL_SETTINGS),
        Field("starts_at", "str", convert=head.when),
        Field("ends_at", "str", convert=head.when),
        Field("status", "str", nullable=False, convert=head.COMMON[-1].convert),
        head.COUNT,
    ),
    "discount.apply": head.APPLY,
    "discount.remove": head.REMOVE,
}
LISTS: dict[str, ListContract] = {
    # NOTE: spec 02 Discounts list and count; a count takes every list filter (as customers do,
    # docs/api-choices.md).
    "discounts": replace(_head_list, count_filters=tuple(_head_list.filters)),
}
