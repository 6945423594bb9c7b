"""What a route declares about its request body and its replies, for the OpenAPI document
(``api/openapi/``, docs/openapi.md). Plain data: the dispatcher never reads it.

A route names its body by the schema its handler parses (``body="customer.create"``: the
version's schema of that name, so 2021-01 gets the schema its change modules derived) and its
replies by the kind its serializer renders (``reply=one("customer")``); the generator turns the
schema's fields into JSON Schema and the kind into its declared shape (``api/shapes.py``).

    @endpoints.put("/customers/{customer_id:id}", scope=WRITE, body=update("customer.update"),
                   reply=one("customer"))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .fields import Field, Schema

if TYPE_CHECKING:
    from .contract import Version

# Statuses that depend on the version (decisions §2.10): a create answers 201 (2021-11) or 200
# (2021-01), a delete 204 with no body (2021-11) or 200 `{}` (2021-01).
CREATED = "created"
DELETED = "deleted"

SchemaRef = str | Schema


@dataclass(frozen=True, eq=False)  # compared and hashed as itself: `schema` may be a dict
class Body:
    """The JSON object a POST, PUT (or a 2021-01 bulk DELETE) takes.

    ``schema`` is a name in the version's schemas, a ``Schema`` of the handler's own, or a map
    of version name to either (the 2021-01 products take another body on the same path).
    ``partial``: an update, where no field is required. ``wrap``: a bulk body
    ``{wrap: [item, ...]}`` of 1 to ``max_items`` objects of the schema, each requiring
    ``item_required`` besides the schema's own required fields and taking ``item_fields`` besides
    its own (the `id` a bulk update names each item by). ``ignored``: the endpoint takes no
    fields (any JSON object is accepted and ignored)."""

    schema: SchemaRef | Mapping[str, SchemaRef]
    partial: bool = False
    wrap: str | None = None
    max_items: int | None = None
    item_required: tuple[str, ...] = ()
    item_fields: tuple[Field, ...] = ()
    ignored: bool = False

    def schema_for(self, version: "Version") -> Schema:
        chosen = self.schema[version.name] if isinstance(self.schema, Mapping) else self.schema
        return version.schemas[chosen] if isinstance(chosen, str) else chosen

    def errors_schema(self, version: "Version") -> Schema | None:
        """The schema whose names a domain error of this body is said in (``rename_errors``);
        none for a bulk body, whose errors are named per item."""
        return self.schema_for(version) if self.wrap is None else None

    def names(self) -> tuple[str, ...]:
        """The schema names it refers to (a handler must parse the body with these)."""
        chosen = self.schema.values() if isinstance(self.schema, Mapping) else (self.schema,)
        return tuple(name for name in chosen if isinstance(name, str))


# The body of an action that takes no fields: a JSON object (415 otherwise), read and ignored.
NO_FIELDS = Body(Schema(), ignored=True)


def update(schema: SchemaRef | Mapping[str, SchemaRef]) -> Body:
    """An update body: the fields sent change, none is required."""
    return Body(schema, partial=True)


def bulk(wrap: str, schema: SchemaRef, *, max_items: int, partial: bool = False,
         item_required: tuple[str, ...] = (), item_fields: tuple[Field, ...] = ()) -> Body:
    return Body(schema, partial=partial, wrap=wrap, max_items=max_items, item_required=item_required,
                item_fields=item_fields)


@dataclass(frozen=True)
class Returns:
    """One successful reply of an operation.

    - ``kind`` with ``keys``: ``{key: record}`` for each key (``many``: ``{key: [record, ...]}``);
    - ``kind`` without keys: the whole body is the shape named ``kind``;
    - ``page``: the list envelope of that list contract (``{plural: [...]}`` with the body
      cursors of 2021-11, the `Link` header of 2021-01) and its query parameters;
    - ``count``: ``{"count": n}`` with the count filters of that list contract;
    - ``status`` DELETED: 204 with no body or 200 ``{}``, by version.
    ``include``: the list contract whose `include` values a single record takes."""

    status: int | str = 200
    kind: str | None = None
    keys: tuple[str, ...] = ()
    many: bool = False
    page: str | None = None
    count: str | None = None
    include: str | None = None

    def status_in(self, version: "Version") -> int:
        if self.status == CREATED:
            return version.created_status
        if self.status == DELETED:
            return version.deleted_status
        return int(self.status)

    def contract(self) -> str | None:
        """The list contract whose query parameters this reply takes, if any."""
        return self.page or self.count or self.include


def one(kind: str, *, key: str | tuple[str, ...] | None = None, status: int | str = 200,
        include: str | None = None) -> Returns:
    """``{kind: record}`` (or under ``key``; a tuple: the same record under each key)."""
    keys = (key,) if isinstance(key, str) else key or (kind,)
    return Returns(status=status, kind=kind, keys=keys, include=include)


def created(kind: str) -> Returns:
    return one(kind, status=CREATED)


def listed(key: str, kind: str, *, status: int | str = 200) -> Returns:
    """``{key: [record, ...]}`` without paging (bulk replies, small fixed lists)."""
    return Returns(status=status, kind=kind, keys=(key,), many=True)


def page(plural: str) -> Returns:
    return Returns(page=plural)


def count(plural: str) -> Returns:
    return Returns(count=plural)


def whole(shape: str, *, status: int | str = 200) -> Returns:
    """The body is the named shape itself (no envelope key)."""
    return Returns(status=status, kind=shape)


def deleted() -> Returns:
    return Returns(status=DELETED)


def replies(value: Returns | tuple[Returns, ...] | None) -> tuple[Returns, ...]:
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)

