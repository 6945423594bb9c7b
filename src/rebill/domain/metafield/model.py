"""The metafield as the domain sees it, and its commands (spec 02 Metafield, decisions §7.6)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

# NOTE: decisions §7.6, the owner names, singular in both versions.
OWNERS = ("address", "store", "customer", "subscription", "order", "charge")
# NOTE: decisions §7.6, anything else answers 422.
VALUE_TYPES = ("string", "json_string", "integer")
# NOTE: spec 02 Limits, metafields per owner.
MAX_PER_OWNER = 50


class Metafield(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py)."""

    id: int
    store_id: int
    owner_resource: str
    owner_id: int
    namespace: str
    key: str
    value: str
    value_type: str
    description: str
    created_at: datetime
    updated_at: datetime


class MetafieldCreate(msgspec.Struct, kw_only=True):
    owner_resource: str
    owner_id: int
    namespace: str
    key: str
    value: str
    value_type: str
    description: str | None = None


class MetafieldUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set. Spec 02's update body has no `namespace` or
    `key`: they name the metafield and stay."""

    owner_resource: str | UnsetType = UNSET
    owner_id: int | UnsetType = UNSET
    value: str | UnsetType = UNSET
    value_type: str | UnsetType = UNSET
    description: str | None | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}
