"""The head (2021-11) contract of metafields (spec 02 Metafields, decisions §7.2, §7.6,
03-real-fields "metafield (2021-11)"): serializer, request schemas and list contract, merged
by ``contract.py``. 2021-01 differs only by its naive datetimes (``api/v2021_01/metafields.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.metafield.model import OWNERS, VALUE_TYPES, Metafield

from .serializers import ts

WRAPPER = "metafield"
MAX_VALUE = 65535  # characters of a value; longer answers 422 (docs/api-choices.md, Metafields)


def metafield(m: Metafield) -> dict[str, Any]:
    return {
        "id": m.id,
        "created_at": ts(m.created_at),
        # NOTE: decisions §7.2, a string, empty rather than null.
        "description": m.description,
        "key": m.key,
        "namespace": m.namespace,
        # NOTE: decisions §7.2, `owner_id` renders as a string.
        "owner_id": str(m.owner_id),
        "owner_resource": m.owner_resource,
        "updated_at": ts(m.updated_at),
        "value": m.value,
        "value_type": m.value_type,
    }


class MetafieldSchema(Schema):
    """NOTE: spec 02 Metafields, the body is wrapped in a `metafield` object; a bare body is
    read too (docs/api-choices.md, Metafields). An integer `value` is taken as its digits
    (decisions §7.6: a JSON number is accepted and rendered as a string)."""

    wrapper = WRAPPER

    def _parse(self, body: Mapping[str, Any], *, partial: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        if WRAPPER in body:
            inner = body[WRAPPER]
            if not isinstance(inner, dict):
                return {}, {WRAPPER: ["must be an object"]}
            body = inner
        value = body.get("value")
        if isinstance(value, int) and not isinstance(value, bool):
            body = {**body, "value": str(value)}
        return super()._parse(body, partial=partial)


OWNER_FIELDS = (
    Field("owner_resource", "str", required=True, nullable=False, choices=frozenset(OWNERS)),
    Field("owner_id", "int", required=True, nullable=False),
)
VALUE_FIELDS = (
    # An empty `string` value is a value; the type decides what else it may hold (rules.py).
    Field("value", "str", required=True, nullable=False, max_length=MAX_VALUE),
    Field("value_type", "str", required=True, nullable=False, choices=frozenset(VALUE_TYPES)),
    Field("description", "str"),
)

SERIALIZERS: dict[str, Serializer] = {"metafield": metafield}
SCHEMAS: dict[str, Schema] = {
    "metafield.create": MetafieldSchema(
        *OWNER_FIELDS,
        Field("namespace", "str", required=True, nullable=False, min_length=1),
        Field("key", "str", required=True, nullable=False, min_length=1),
        *VALUE_FIELDS,
    ),
    # NOTE: spec 02 Metafields update body: no `namespace` or `key` (they name the metafield).
    "metafield.update": MetafieldSchema(*OWNER_FIELDS, *VALUE_FIELDS),
}

FILTERS = {
    # NOTE: spec 02 Metafields list: `owner_resource` (must be given), `owner_id`, `namespace`.
    "owner_resource": ("owner_resource", q.choice(*OWNERS)),
    "owner_id": ("owner_id", q.integer),
    "namespace": ("namespace", q.text),
}
LISTS: dict[str, ListContract] = {
    # NOTE: spec 01 Sorting (Metafield: id-desc; id, updated_at).
    "metafields": ListContract(
        plural="metafields",
        kind="metafield",
        filters=FILTERS,
        sorts=("id", "updated_at"),
        default_sort="id-desc",
        required_filters=("owner_resource",),  # NOTE: spec 02 Metafields, "must be given"
    ),
}
