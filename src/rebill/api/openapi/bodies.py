"""Request bodies and query parameters as JSON Schema, read from the declarations the
dispatcher itself uses: a version's ``Schema``/``Field`` (``api/fields.py``) for bodies, the
parsers of its list contracts (``api/query.py``) for queries.

Bodies say what the parser accepts, not only what a tidy client sends: an integer field takes
a string of digits too, money a number as well as its decimal string, an external id a string,
a number or ``{"ecommerce": ...}``; fields the schema does not name are ignored (decisions
§2.3), so no body object is closed. Checks written as code (``check=``, ``convert=``: an email's
form, a known country) are not expressible here; the endpoint still answers 422 for them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rebill.api import shapes as sh
from rebill.api.declared import Body
from rebill.api.fields import (
    DECIMAL_TEXT,
    MAX_ID,
    MAX_INTEGER_DIGITS,
    Field,
    Schema,
)
from rebill.api.query import DATETIME_FORMS

INTEGER_TEXT = r"^\s*-?[0-9]+\s*$"
MAX_ID_DIGITS_TEXT = 64  # an external id's longest text (api/external_ids.py MAX_LENGTH)
# A date, or a datetime whose date part counts (api/fields.py `date`), in the grammar the query
# filters take (api/query.py).
DATE_VALUE = {"anyOf": DATETIME_FORMS, "maxLength": 40}
_ = DECIMAL_TEXT  # the grammar the patterns below follow


class IdForms(NamedTuple):
    """Body names whose external id a schema's parse also takes as a number or as
    ``{"ecommerce": ...}`` before its fields read the string (api/v2021_11/catalog.py
    ``plain_ids``): single ids, lists of them, and lists of objects holding them."""

    keys: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()
    nested: frozenset[str] = frozenset()


NO_IDS = IdForms()


def id_forms(schema: Schema) -> IdForms:
    """What ``schema``'s own parse does to external ids before its fields see them."""
    from rebill.api.v2021_11 import catalog  # a family's contract: read when a document is made
    if isinstance(schema, catalog.CatalogSchema):
        return IdForms(frozenset(catalog.ID_KEYS), frozenset(catalog.ID_LISTS), frozenset(catalog.NESTED))
    return NO_IDS


def _any_id_form(text: dict[str, Any], max_length: int | None) -> dict[str, Any]:
    """A string id as ``text`` says, or a number whose digits fit it, or either under `ecommerce`."""
    digits = max_length or MAX_ID_DIGITS_TEXT
    number = {"type": "integer", "minimum": -(10 ** (digits - 1) - 1), "maximum": 10**digits - 1}
    return {"anyOf": [text, number, {"type": "object", "required": ["ecommerce"],
                                     "properties": {"ecommerce": {"anyOf": [text, number]}}}]}


def _decimal_pattern(*, signs: str, decimals: int | None, digits: int = MAX_INTEGER_DIGITS) -> str:
    sign = {"": "", "-": "-?", "+-": "[+-]?"}[signs]
    places = r"(\.[0-9]+)?" if decimals is None else rf"(\.[0-9]{{1,{decimals}}}0*|\.0+)?"
    return rf"^{sign}0*[0-9]{{1,{digits}}}{places}$"


def _scalar(kind: str, field: Field | None) -> dict[str, Any]:
    if kind == "str":
        out: dict[str, Any] = {"type": "string"}
        if field is not None:
            if field.max_length is not None:
                out["maxLength"] = field.max_length
            if field.min_length == 1:
                out["pattern"] = r"\S"  # "cannot be blank": something besides spaces
            elif field.min_length:
                out["minLength"] = field.min_length
        return out
    if kind == "int":
        return {"type": ["integer", "string"], "minimum": -MAX_ID, "maximum": MAX_ID, "pattern": INTEGER_TEXT}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "decimal":
        return {"type": ["string", "number"], "pattern": _decimal_pattern(signs="+-", decimals=None)}
    if kind == "money":
        signed = field is not None and field.signed
        decimals = field.decimals if field is not None else 2
        digits = field.digits if field is not None else MAX_INTEGER_DIGITS
        # The pattern binds a string; the bounds bind a number (found by an audit: `-5` and
        # `1e20` passed the document): at most the field's integer digits (api/fields.py),
        # not negative unless signed.
        bound = 10**digits
        return {"type": ["string", "number"], "pattern": _decimal_pattern(signs="-" if signed else "",
                                                                          decimals=decimals, digits=digits),
                "exclusiveMinimum" if signed else "minimum": -bound if signed else 0,
                "exclusiveMaximum": bound}
    if kind == "date":
        return dict(DATE_VALUE)
    if kind == "external_id":
        return {"anyOf": [{"type": "string", "pattern": r"\S", "maxLength": 255}, {"type": "integer"},
                          {"type": "object", "properties": {"ecommerce": {"type": ["string", "integer", "null"]}},
                           "additionalProperties": False}]}
    if kind == "object":
        return {"type": "object"}
    if kind == "list":
        return {"type": "array", "items": {}}  # `items` below when the field says them
    raise AssertionError(f"unknown field kind {kind}")


def field_schema(field: Field, *, partial: bool = False, ids: IdForms = NO_IDS) -> dict[str, Any]:
    out = _scalar(field.kind, field)
    if field.choices is not None:
        out["enum"] = sorted(field.choices)
    if field.min_items:
        out["minItems"] = field.min_items
    if field.max_items is not None:
        out["maxItems"] = field.max_items
    low, high = field.domain_range or (field.minimum, field.maximum)
    if low is not None:
        out["minimum"] = low
    if high is not None:
        out["maximum"] = high
    if field.name in ids.keys and field.kind == "str":
        out = _any_id_form(out, field.max_length)
    if field.kind == "object" and isinstance(field.items, Schema):
        out = object_schema(field.items, partial=partial)
    elif field.kind == "list" and field.items is not None:
        # List items are always parsed whole (api/fields.py `_parse_items`).
        if isinstance(field.items, Schema):
            out["items"] = object_schema(field.items, ids=ids if field.name in ids.nested else NO_IDS)
        else:
            out["items"] = _scalar(field.items, None)
            if field.name in ids.lists and field.items == "str":
                out["items"] = _any_id_form(out["items"], None)
    if field.domain_values is not None:
        target = out["items"] if field.kind == "list" else out
        target["enum"] = sorted(field.domain_values)
    # An update may send null where a create may not (api/fields.py `null_on_update`).
    if (field.nullable and not field.required) or (partial and field.null_on_update):
        out = sh.nullable(out) if "anyOf" not in out else {**out, "anyOf": [*out["anyOf"], {"type": "null"}]}
    return out


def object_schema(schema: Schema, *, partial: bool = False, required: tuple[str, ...] = (),
                  ids: IdForms | None = None) -> dict[str, Any]:
    """A body object: every field of ``schema``; its required ones unless ``partial``. ``ids``:
    the external id forms its parse takes (``schema``'s own unless an enclosing schema's)."""
    forms = id_forms(schema) if ids is None else ids
    properties = {f.name: field_schema(f, partial=partial, ids=forms) for f in schema.fields}
    needed = [*dict.fromkeys([*(f.name for f in schema.fields if f.required and not partial), *required])]
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if needed:
        out["required"] = needed
    groups = [] if partial else schema.one_of
    # NOTE: a group is satisfied by one of its fields sent and not null (api/fields.py one_of).
    alternatives = [{"anyOf": [{"required": [name], "properties": {name: {"not": {"type": "null"}}}}
                               for name in group]} for group in groups]
    if len(alternatives) == 1:
        out.update(alternatives[0])
    elif alternatives:
        out["allOf"] = alternatives
    return out


def body_schema(body: Body, schema: Schema) -> dict[str, Any]:
    if body.ignored:
        return {"type": "object", "description": "The endpoint takes no fields; any JSON object is accepted."}
    if body.wrap is None:
        bare = object_schema(schema, partial=body.partial)
        if schema.wrapper is None:
            return bare
        return {"anyOf": [bare, {"type": "object", "required": [schema.wrapper],
                                 "properties": {schema.wrapper: bare}}]}
    own = tuple(f.name for f in body.item_fields if f.required)
    items = object_schema(Schema(*schema.fields, *body.item_fields), partial=body.partial,
                          required=(*body.item_required, *own), ids=id_forms(schema))
    listed: dict[str, Any] = {"type": "array", "minItems": 1, "items": items}
    if body.max_items is not None:
        listed["maxItems"] = body.max_items
    return {"type": "object", "required": [body.wrap], "properties": {body.wrap: listed}}


def body_required(body: Body, schema: Schema) -> bool:
    """Whether a request must carry a body: an empty one is read as `{}`, so only a body with
    required fields must."""
    if body.ignored:
        return False
    if body.wrap is not None:
        return True
    return not body.partial and (any(f.required for f in schema.fields) or bool(schema.one_of))
