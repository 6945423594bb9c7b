"""What an API version is: serializers, request schemas, list contracts per resource.

2021-11 is the head contract. 2021-01 is the head passed through :class:`Change` modules
(design guide, after Stripe's version changes): each change is one difference, with the
request half (old body -> head schema), the response half (head body -> old body) and its
shape (head response shape -> old one, for the OpenAPI document) side by side, and a
docstring that reads as a changelog line.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import shapes as sh
from .fields import Schema
from .query import QueryParser

Serializer = Callable[[Any], dict[str, Any]]


@dataclass(frozen=True)
class ListContract:
    """How one resource is listed in one version (decisions §3)."""

    plural: str
    kind: str
    filters: dict[str, tuple[str, QueryParser]]
    sorts: tuple[str, ...]
    default_sort: str
    includes: tuple[str, ...] = ()
    count_filters: tuple[str, ...] = ()
    # Sort names that are not column names (2021-01 `charge_date` is `scheduled_at`).
    sort_columns: dict[str, str] = field(default_factory=dict)
    # Sort columns holding dates rather than datetimes (a cursor's boundary is then a date).
    date_sorts: tuple[str, ...] = ()
    # Sort columns holding text (a cursor's boundary is then a string).
    text_sorts: tuple[str, ...] = ()
    # Filters the list cannot go without (a cursor carries them): the document says so.
    required_filters: tuple[str, ...] = ()


class Change:
    """Base of a 2021-01 change module; subclasses override the halves they need."""

    kinds: tuple[str, ...] = ()

    def request(self, schema: Schema) -> Schema:
        return schema

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        """How the head's response shape (``api/shapes.py``) becomes the old one: the same
        difference as ``response``, said of the shape. A change that rewrites replies must say
        it here too, or the document of its version cannot be made."""
        if type(self).response is not Change.response:
            raise NotImplementedError(f"{type(self).__name__} changes the replies of {', '.join(self.kinds)} "
                                      "but not their shape: give it a response_shape")
        return shape

    def error_names(self) -> dict[str, str]:
        return {}


class Rename(Change):
    """A field that the old version names differently, in requests, responses and errors."""

    def __init__(self, kinds: tuple[str, ...], head: str, old: str) -> None:
        self.kinds, self.head, self.old = kinds, head, old
        self.__doc__ = f"2021-01 calls `{head}` `{old}` on {', '.join(kinds)}."

    def request(self, schema: Schema) -> Schema:
        return schema.renamed(**{self.head: self.old}) if self.head in schema else schema

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        if self.head in data:
            data[self.old] = data.pop(self.head)
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        return sh.rename(shape, self.head, self.old)

    def error_names(self) -> dict[str, str]:
        return {self.head: self.old}


# The end of a domain message that names what a record's status is (a status value).
_THIS_ONE = re.compile(r"(; this one is )([a-z_]+)$")


@dataclass
class Version:
    name: str
    serializers: dict[str, Serializer]
    schemas: dict[str, Schema]
    lists: dict[str, ListContract]
    created_status: int
    # NOTE: decisions §2.10, a delete answers 204 with no body (2021-11) or 200 {} (2021-01).
    deleted_status: int
    cursor_in_body: bool
    changes: tuple[Change, ...] = ()
    error_names: dict[str, str] = field(default_factory=dict)
    # How this version writes a status value (2021-01: upper case, decisions §2.9), also where a
    # domain message names one: "...; this one is queued" (found by an audit: 2021-01 said
    # `queued` in the message and `QUEUED` in the charge).
    status_word: Callable[[str], str] | None = None
    # The response shapes of this version's kinds (api/shapes.py), made on first use: the head
    # declares them, an older version derives them through its changes' response_shape.
    shape_source: Callable[[], dict[str, sh.Shape]] = dict
    _shapes: dict[str, sh.Shape] | None = field(default=None, repr=False)

    def serialize(self, kind: str, obj: Any) -> dict[str, Any]:
        return self.serializers[kind](obj)

    def shapes(self) -> dict[str, sh.Shape]:
        """Kind (or named reply shape) -> its declared JSON Schema."""
        if self._shapes is None:
            self._shapes = self.shape_source()
        return self._shapes

    def rename_errors(self, errors: Any, sent: Any = (), schema: Schema | None = None) -> Any:
        """Domain errors name head fields; say them in this version's names, except a field
        the caller itself sent under the head name (2021-01 accepts `country_code` too).
        ``schema``: the body's, whose fields sent under a name of their own (`shipping_date` for
        an order's `scheduled_at`) are named as sent, not by the version's usual name."""
        sent_as = {f.target: f.name for f in schema.fields if f.name != f.target and f.name in sent} \
            if schema is not None and isinstance(sent, Mapping) else {}
        # A stored field the caller sent inside an object (a 2021-11 discount's
        # `usage_limits.redemptions` for `usage_limit`): named there (found by an audit).
        nested = {k: path for k, path in schema.nested_names.items()
                  if k not in sent and isinstance(sent.get(path[0]), Mapping)} \
            if schema is not None and isinstance(sent, Mapping) else {}
        if self.status_word is not None and isinstance(errors, dict) and isinstance(errors.get("status"), list):
            word = self.status_word
            errors = {**errors, "status": [_THIS_ONE.sub(lambda m: m[1] + word(m[2]), said) if isinstance(said, str)
                                           else said for said in errors["status"]]}
        if not isinstance(errors, dict) or not (self.error_names or sent_as or nested):
            return errors
        def inner(name: str) -> Any:  # what the caller sent under that name, for nested errors
            return sent.get(name, ()) if isinstance(sent, Mapping) else ()
        renamed: dict[str, Any] = {}
        for k, v in errors.items():
            if k in nested:
                outer, key = nested[k]
                within = renamed.setdefault(outer, {})
                if isinstance(within, dict):  # two stored fields of one nested key: both said
                    said = within.get(key, [])
                    within[key] = said + v if isinstance(said, list) and isinstance(v, list) else v
                continue
            name = k if k in sent else sent_as.get(k) or self.error_names.get(k, k)
            value = self.rename_errors(v, inner(k))
            if isinstance(value, dict) and isinstance(renamed.get(name), dict):
                renamed[name] = {**value, **renamed[name]}
            else:
                renamed[name] = value
        return renamed


def derive(head: Version, *, name: str, changes: Iterable[Change], lists: dict[str, ListContract],
           created_status: int, deleted_status: int, cursor_in_body: bool,
           schemas: dict[str, Schema] | None = None, shapes: Mapping[str, sh.Shape] | None = None) -> Version:
    """An older version: the head with ``changes`` applied to schemas, serializers and
    response shapes (``shapes``: shapes of this version's own, which no change touches)."""
    changes = tuple(changes)

    def old_serializer(kind: str, head_serializer: Serializer) -> Serializer:
        mine = [c for c in changes if kind in c.kinds]
        if not mine:
            return head_serializer

        def serialize(obj: Any) -> dict[str, Any]:
            data = head_serializer(obj)
            for change in mine:
                data = change.response(data, obj)
            return data
        return serialize

    def old_schema(schema_name: str, schema: Schema) -> Schema:
        kind = schema_name.split(".", 1)[0]
        for change in changes:
            if kind in change.kinds:
                schema = change.request(schema)
        return schema

    def old_shape(kind: str, shape: sh.Shape) -> sh.Shape:
        shape = copy.deepcopy(shape)
        for change in changes:
            if kind in change.kinds:
                shape = change.response_shape(shape)
        return shape

    def old_shapes() -> dict[str, sh.Shape]:
        return {**{k: old_shape(k, s) for k, s in head.shapes().items()}, **(shapes or {})}

    error_names: dict[str, str] = {}
    for change in changes:
        error_names.update(change.error_names())
    derived = {n: old_schema(n, s) for n, s in head.schemas.items()}
    derived.update(schemas or {})
    return Version(
        name=name,
        serializers={k: old_serializer(k, s) for k, s in head.serializers.items()},
        schemas=derived,
        lists=lists,
        created_status=created_status,
        deleted_status=deleted_status,
        cursor_in_body=cursor_in_body,
        changes=changes,
        error_names=error_names,
        shape_source=old_shapes,
    )
