"""Head (2021-11) shape of `metafield` (spec 02 Metafield, decisions §7.2, §7.6, 03-real-fields
"metafield (2021-11)"): what ``v2021_11/metafields.py`` renders. 2021-01 derives its own
through ``v2021_01/metafields.py`` (naive datetimes)."""

from __future__ import annotations

from rebill.api.shapes import Shape, datetime_offset, enum, integer, obj, string
from rebill.domain.metafield.model import OWNERS, VALUE_TYPES

metafield = obj({
    "id": integer(),
    # NOTE: decisions §2.4, our datetimes carry their offset in 2021-11 (03-real-fields saw
    # naive ones from the real service).
    "created_at": datetime_offset(),
    # NOTE: decisions §7.2, a string, empty rather than null.
    "description": string(),
    "key": string(),
    "namespace": string(),
    # NOTE: decisions §7.2, the owner's id as a string of digits.
    "owner_id": string(pattern=r"^[0-9]+$"),
    "owner_resource": enum(*OWNERS),
    "updated_at": datetime_offset(),
    # NOTE: decisions §7.6, an `integer` value (even one sent as a JSON number) renders as a string.
    "value": string(),
    "value_type": enum(*VALUE_TYPES),
})

SHAPES: dict[str, Shape] = {"metafield": metafield}
