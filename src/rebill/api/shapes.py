"""Response shapes: what a serializer renders, as JSON Schema (2020-12, which OpenAPI 3.1 uses).

Each family declares the head (2021-11) shape of every kind its serializers render in
``api/v2021_11/shapes/<family>.py`` with the builders below; 2021-01 shapes are derived from
them by the change modules' ``response_shape`` half, as 2021-01 replies are derived by their
``response`` half (``api/contract.py``). The OpenAPI document (``api/openapi/``) puts each
shape under ``components.schemas``, and the suite checks every reply it gets against it
(docs/openapi.md).

    SHAPES = {"address": obj({"id": integer(), "address2": nullable(string()), ...})}

A declared object is closed (``additionalProperties: false``): a field the serializer renders
and the shape does not list is a mismatch, so the shape stays a full account of the reply.

The edit helpers (``rename``, ``drop``, ``add``, ``replace``, ``naive_datetimes``) change a shape
in place and return it; the change modules use them on the copy ``derive`` hands them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

Shape = dict[str, Any]

COMPONENTS = "#/components/schemas/"

# NOTE: decisions §2.4, 2021-11 datetimes carry `+00:00` and no fractions; 2021-01 ones are
# naive UTC. Decisions §2.7, money is a string with the currency's minor digits.
OFFSET_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\+00:00$"
NAIVE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$"
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
MONEY_PATTERN = r"^-?[0-9]+(\.[0-9]+)?$"


def component_name(kind: str) -> str:
    """``async_batch_task`` -> ``AsyncBatchTask``: the name of a shape under components.schemas."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_\W]+", kind) if part)


# Builders ---------------------------------------------------------------------------------

def string(**extra: Any) -> Shape:
    return {"type": "string", **extra}


def integer(**extra: Any) -> Shape:
    return {"type": "integer", **extra}


def number(**extra: Any) -> Shape:
    return {"type": "number", **extra}


def boolean() -> Shape:
    return {"type": "boolean"}


def null() -> Shape:
    """A field that is always null in this build (spec 03 saw only null: its type is unknown)."""
    return {"type": "null"}


def enum(*values: Any) -> Shape:
    types = sorted({"string" if isinstance(v, str) else "integer" if isinstance(v, int) else "null"
                    for v in values})
    return {"type": types[0] if len(types) == 1 else types, "enum": list(values)}


def money() -> Shape:
    """An amount as a decimal string (`"12.50"`, the currency's minor digits)."""
    return {"type": "string", "pattern": MONEY_PATTERN}


def decimal() -> Shape:
    """An exact decimal as a string (a rate, a percentage)."""
    return {"type": "string", "pattern": MONEY_PATTERN}


def date() -> Shape:
    return {"type": "string", "format": "date", "pattern": DATE_PATTERN}


def datetime_offset() -> Shape:
    """``2022-03-10T12:13:28+00:00`` (2021-11)."""
    return {"type": "string", "format": "date-time", "pattern": OFFSET_PATTERN}


def datetime_naive() -> Shape:
    """``2022-03-09T02:36:35``, UTC without an offset (2021-01)."""
    return {"type": "string", "pattern": NAIVE_PATTERN}


def array(items: Shape | None = None, **extra: Any) -> Shape:
    return {"type": "array", **({"items": items} if items is not None else {}), **extra}


def any_object() -> Shape:
    """An object whose keys are the client's own (`analytics_data`, a payment's details)."""
    return {"type": "object"}


def ref(kind: str) -> Shape:
    """Another kind's shape (its component): an embedded address, an included customer."""
    return {"$ref": COMPONENTS + component_name(kind)}


def nullable(shape: Shape) -> Shape:
    """``shape`` or null."""
    kind = shape.get("type")
    if isinstance(kind, str) and "$ref" not in shape and "enum" not in shape:
        return {**shape, "type": [kind, "null"]}
    if isinstance(kind, list) and "enum" not in shape:
        return {**shape, "type": [*kind, *([] if "null" in kind else ["null"])]}
    if "enum" in shape:
        values = shape["enum"] if None in shape["enum"] else [*shape["enum"], None]
        return enum(*values)
    return {"anyOf": [shape, {"type": "null"}]}


def non_null(shape: Shape) -> Shape:
    """``shape`` without its null (a field that an older version never leaves null)."""
    kind = shape.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        out = {**shape, "type": rest[0] if len(rest) == 1 else rest}
        if "enum" in out:
            out["enum"] = [v for v in out["enum"] if v is not None]
        return out
    if "anyOf" in shape:
        rest = [s for s in shape["anyOf"] if s != {"type": "null"}]
        return rest[0] if len(rest) == 1 else {**shape, "anyOf": rest}
    return shape


def obj(required: Mapping[str, Shape], optional: Mapping[str, Shape] | None = None, **extra: Any) -> Shape:
    """A closed object: ``required`` fields are always present (null where their shape says),
    ``optional`` ones only sometimes (a key some replies carry and others do not)."""
    properties = {**required, **(optional or {})}
    return {"type": "object", "properties": dict(sorted(properties.items())), "required": sorted(required),
            "additionalProperties": False, **extra}


# Edits (for the change modules' response_shape) ------------------------------------------------

def _props(shape: Shape) -> dict[str, Shape]:
    return shape.setdefault("properties", {})


def rename(shape: Shape, head: str, old: str) -> Shape:
    props = _props(shape)
    if head in props:
        props[old] = props.pop(head)
        shape["properties"] = dict(sorted(props.items()))
        required = shape.get("required", [])
        if head in required:
            shape["required"] = sorted({*(n for n in required if n != head), old})
    return shape


def drop(shape: Shape, *names: str) -> Shape:
    props = _props(shape)
    for name in names:
        props.pop(name, None)
    shape["required"] = [n for n in shape.get("required", []) if n not in names]
    return shape


def add(shape: Shape, fields: Mapping[str, Shape], *, required: bool = True) -> Shape:
    props = _props(shape)
    props.update(fields)
    shape["properties"] = dict(sorted(props.items()))
    if required:
        shape["required"] = sorted({*shape.get("required", []), *fields})
    return shape


def replace(shape: Shape, name: str, field: Shape) -> Shape:
    """A field keeps its place and whether it is required, with another shape."""
    _props(shape)[name] = field
    return shape


def _naive(field: Shape) -> Shape:
    if field.get("pattern") == OFFSET_PATTERN:
        out = {k: v for k, v in field.items() if k != "format"}
        out["pattern"] = NAIVE_PATTERN
        return out
    if "anyOf" in field:
        return {**field, "anyOf": [_naive(f) for f in field["anyOf"]]}
    return field


def naive_datetimes(shape: Shape, names: Iterable[str]) -> Shape:
    """The offset datetimes among ``names`` become naive ones (nullability kept)."""
    props = _props(shape)
    for name in names:
        if name in props:
            props[name] = _naive(props[name])
    return shape
