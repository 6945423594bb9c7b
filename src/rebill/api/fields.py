"""Declarative request-body validation that names every bad field (decisions §2.3).

A :class:`Schema` lists the fields of one body in the caller's version. ``parse`` returns a
dict keyed by the head (2021-11) names, or raises ``ValidationFailed`` with every problem in
the caller's names. A version whose field is called differently declares it with
``key=`` the head name, so one domain command serves both versions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from decimal import Decimal
from typing import Any

from rebill.api import external_ids
from rebill.api.query import written_date
from rebill.errors import ValidationFailed

MISSING = object()
MAX_ID = 2**63 - 1  # ids are 64-bit (BIGINT); a longer number is no id of ours
MAX_ID_DIGITS = len(str(MAX_ID))
INTEGER = re.compile(r"-?([0-9]+)", re.ASCII)
# Money and rates: at most 12 integer digits (a trillion in any currency).
MAX_INTEGER_DIGITS = 12
MAX_DECIMAL = Decimal(10) ** MAX_INTEGER_DIGITS
# A "decimal" is rounded to the currency's minor digits later (domain/money.quantize): it must
# stay below what would round up to 13 digits at 0 minor digits.
MAX_ROUNDED_DECIMAL = MAX_DECIMAL - Decimal("0.5")
# Plain decimal notation, ASCII only: no exponent, no "_", no spaces, no "NaN"/"Infinity".
DECIMAL_TEXT = re.compile(r"([+-]?)([0-9]+)(?:\.([0-9]+))?", re.ASCII)
NOT_DECIMAL = "must be a decimal number as a string"
Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # str | int | bool | decimal | money | date | object | list
    required: bool = False
    nullable: bool = True
    min_length: int | None = None
    # Strings are bounded by their column (PostgreSQL refuses longer values).
    max_length: int | None = 255
    key: str | None = None
    items: "Schema | str | None" = None  # list items: a schema of objects, or a scalar kind
    check: Check | None = None
    # Turns the value into its head form; raises ValueError with the message on bad input.
    convert: Callable[[Any], Any] | None = None
    choices: frozenset[str] | None = None
    # The exact values the domain takes, which it checks itself with the rest of its rules (one
    # 422 naming every problem, in its own words): stated as the document's enum, not checked
    # by the parser. For a list, the values of its items.
    domain_values: frozenset[str] | None = None
    # The same for an integer's range (a quantity, a frequency, an order day): stated as the
    # document's minimum/maximum, checked by the domain in its own words.
    domain_range: tuple[int, int] | None = None
    # money: the most decimal places (the currency's minor digits); None leaves that check to
    # the domain (domain/money.minor_digits of the currency the body names).
    decimals: int | None = 2
    # money: whether a leading minus is allowed (amounts are non-negative unless stated).
    signed: bool = False
    # money: the most integer digits. Prices and codes' values take 12 (a trillion in any
    # currency); an amount that names part of a charge takes what a charge may total.
    digits: int = MAX_INTEGER_DIGITS
    # What an absent optional field is stored as when the whole object is given (a create, a
    # list item); MISSING leaves it out. An attribute sent without `value` keeps the key.
    default: Any = MISSING
    # A deprecated alias that gives way to its successor when both are sent: it is not read
    # then (an object sent back as GET shows it names both, and the alias may show the
    # successor's null as something else).
    yields: bool = False
    # A required or non-nullable field that an update may still send as null: the null is
    # passed on, and the domain refuses it only where the record has a value (what a GET shows
    # of a record that has none, sent back, is no change).
    null_on_update: bool = False
    # Bounds the parser checks and the OpenAPI documents state (minItems/maxItems, minimum/
    # maximum): a list's number of items, an integer's value.
    min_items: int = 0
    max_items: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    # Whether any of the four is set: the parse of every body asks each field, most have none.
    bounded: bool = dataclass_field(init=False, default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bounded", bool(self.min_items or self.max_items is not None
                                                 or self.minimum is not None or self.maximum is not None))

    @property
    def target(self) -> str:
        return self.key or self.name


def _decimal_text(value: Any, bound: Decimal = MAX_DECIMAL) -> str | None:
    """The decimal notation of a JSON string or number, or None for another type. A float
    is read through its shortest repr (``12.5`` -> ``"12.5"``), never through binary."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        # msgspec hands over integers of up to ~4300 digits; Python's str() refuses longer.
        return str(value) if abs(value) < bound else None
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")  # repr may use an exponent: 1e+16, 1e-05
    return None


def _number(value: Any, *, signs: str, decimals: int | None,
            digits: int = MAX_INTEGER_DIGITS) -> tuple[Decimal | None, str | None]:
    """A strict decimal: ASCII digits, one optional point, a sign only among ``signs``, at
    most ``digits`` integer digits and ``decimals`` places (trailing zeros do not count)."""
    bound = Decimal(10) ** digits
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= bound:
        return None, "is out of range"
    text = _decimal_text(value, bound)
    found = DECIMAL_TEXT.fullmatch(text) if text is not None else None
    if found is None:
        return None, NOT_DECIMAL
    sign, whole, places = found[1], found[2].lstrip("0"), (found[3] or "").rstrip("0")
    if sign == "-" and not whole and not places:
        sign = ""  # -0 is 0: its field's rule for zero says what is wrong (found by an audit)
    if sign and sign not in signs:
        return None, "must not be negative" if sign == "-" else NOT_DECIMAL
    if len(whole) > digits:
        return None, "is out of range"
    if decimals is not None and len(places) > decimals:
        return None, f"has too many decimal places (at most {decimals})"
    return Decimal(f"{sign}{whole or '0'}" + (f".{places}" if places else "")), None


def _coerce(kind: str, value: Any, field: "Field | None" = None) -> tuple[Any, str | None]:
    """Return (clean value, error message)."""
    if kind == "str":
        if not isinstance(value, str):
            return None, "must be a string"
        if "\x00" in value:  # PostgreSQL cannot store NUL; refuse it on both databases
            return None, "must not contain NUL characters"
        return value, None
    if kind == "external_id":
        # NOTE: decisions §5.16, an external (platform) id: a string, a number (older clients
        # send platform ids as integers), or nested as {"ecommerce": ...}.
        if isinstance(value, dict):
            if set(value) - {"ecommerce"}:
                return None, "must be a string or an object with the key ecommerce"
            value = value.get("ecommerce")
            if value is None:
                return None, None
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or "\x00" in value or not value.strip():
            return None, "must be a non-empty string or number"
        value = value.strip()
        # NOTE: spec 02 and 03, 2021-01 shows an id as an integer; the rule is api/external_ids.py.
        refused = external_ids.problem(value)
        return (None, refused) if refused else (value, None)
    if kind == "int":
        if isinstance(value, bool):
            return None, "must be an integer"
        if isinstance(value, str):
            found = INTEGER.fullmatch(value.strip())
            if found is None:
                return None, "must be an integer"
            digits = found[1].lstrip("0") or "0"
            if len(digits) > MAX_ID_DIGITS:  # before int(), which refuses 4300+ digits
                return None, "is out of range"
            value = -int(digits) if found[0].startswith("-") else int(digits)
        if isinstance(value, int):
            return (value, None) if abs(value) <= MAX_ID else (None, "is out of range")
        return None, "must be an integer"
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        return None, "must be a boolean"
    if kind == "decimal":
        # Any sign and any number of places: the domain rounds to the currency's minor digits,
        # so the value must not round up past 12 integer digits.
        number, problem = _number(value, signs="+-", decimals=None)
        if number is not None and abs(number) >= MAX_ROUNDED_DECIMAL:
            return None, "is out of range"
        return number, problem
    if kind == "money":
        if field is None:
            return _number(value, signs="", decimals=2)
        return _number(value, signs="-" if field.signed else "", decimals=field.decimals, digits=field.digits)
    if kind == "date":
        # A date, or a datetime whose date part counts (clients send either for dates).
        if isinstance(value, str) and len(value) <= 40:
            try:
                return written_date(value), None
            except ValueError:
                pass
        return None, "must be a date (YYYY-MM-DD)"
    if kind == "object":
        if not isinstance(value, dict):
            return None, "must be an object"
        if _has_nul(value):
            return None, "must not contain NUL characters"
        return value, None
    if kind == "list":
        if isinstance(value, list):
            return value, None
        return None, "must be an array"
    raise AssertionError(f"unknown field kind {kind}")


class Schema:
    # Stored fields a body may also send inside an object, as (object, key): a domain error
    # on such a field is named where the caller sent it (``Version.rename_errors``).
    nested_names: Mapping[str, tuple[str, str]] = {}
    # The key a body may also be wrapped in (`{"metafield": {...}}`), which the subclass's
    # parse unwraps; the document states both forms (api/openapi/bodies.py).
    wrapper: str | None = None

    def __init__(self, *fields: Field, one_of: tuple[tuple[str, ...], ...] = ()) -> None:
        self.fields = fields
        # Groups of body names of which at least one must be sent (on create).
        self.one_of = one_of

    def __contains__(self, name: str) -> bool:
        return any(f.name == name for f in self.fields)

    def parse(self, body: Mapping[str, Any], *, partial: bool = False) -> dict[str, Any]:
        clean, errors = self._parse(body, partial=partial)
        if errors:
            raise ValidationFailed(errors)
        return clean

    def _parse(self, body: Mapping[str, Any], *, partial: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        clean: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for field in self.fields:
            raw = body.get(field.name, MISSING)
            if raw is not MISSING and field.yields and any(
                    f.name in body for f in self.fields if f.target == field.target and f is not field):
                continue
            if raw is MISSING:
                if field.required and not partial:
                    errors[field.name] = ["is required"]
                elif field.default is not MISSING and not partial:
                    clean[field.target] = field.default
                continue
            if raw is None and any(f.target == field.target and f is not field and body.get(f.name) is not None
                                   for f in self.fields):
                continue  # two names for one field: a null beside the other's value is no value
            if raw is None:
                if partial and field.null_on_update:
                    clean[field.target] = None
                elif field.required or not field.nullable:
                    # A field a create may leave out cannot be null either, but is not required
                    # (found by an audit: an optional `sort_order: null` answered "is required").
                    needed = field.required or any(field.name in group for group in self.one_of)
                    errors[field.name] = ["is required" if needed and not partial else "cannot be null"]
                else:
                    clean[field.target] = None
                continue
            value, problem = _coerce(field.kind, raw, field)
            if problem:
                errors[field.name] = [problem]
                continue
            if field.min_length is not None and isinstance(value, str) and len(value.strip()) < field.min_length:
                errors[field.name] = ["cannot be blank" if field.min_length == 1 else
                                      f"must be at least {field.min_length} characters"]
                continue
            if field.max_length is not None and isinstance(value, str) and len(value) > field.max_length:
                errors[field.name] = [f"is too long (at most {field.max_length} characters)"]
                continue
            if field.choices is not None and value not in field.choices:
                errors[field.name] = [f"must be one of: {', '.join(sorted(field.choices))}"]
                continue
            if field.bounded and (problem := _out_of_bounds(field, value)):
                errors[field.name] = [problem]
                continue
            if field.kind == "object" and isinstance(field.items, Schema):
                value, nested = field.items._parse(value, partial=partial)
                if nested:
                    errors[field.name] = nested
                    continue
            if field.kind == "list" and field.items is not None:
                value, nested = _parse_items(field.items, value)
                if nested:
                    errors[field.name] = nested
                    continue
            if field.convert is not None:
                try:
                    value = field.convert(value)
                except ValueError as exc:
                    errors[field.name] = [str(exc)]
                    continue
            if field.check is not None:
                problem = field.check(value)
                if problem:
                    errors[field.name] = [problem]
                    continue
            if field.target in clean and clean[field.target] != value:
                # Two names for one field (a deprecated alias and its successor) that disagree.
                other = next(f.name for f in self.fields if f.target == field.target and f.name in body)
                errors[field.name] = [f"conflicts with {other}"]
                continue
            clean[field.target] = value
        if not partial:
            for group in self.one_of:
                if all(body.get(name) is None for name in group) and not any(n in errors for n in group):
                    errors[group[0]] = ["is required"]
        return clean, errors

    # Version variants ---------------------------------------------------------------

    def renamed(self, **names: str) -> "Schema":
        """The same fields with some body names changed (head name kept as the key)."""
        return Schema(*(replace(f, name=names[f.name], key=f.target) if f.name in names else f
                        for f in self.fields), one_of=self.one_of)

    def without(self, *names: str) -> "Schema":
        return Schema(*(f for f in self.fields if f.name not in names), one_of=self.one_of)

    def plus(self, *fields: Field, one_of: tuple[tuple[str, ...], ...] = ()) -> "Schema":
        return Schema(*self.fields, *fields, one_of=self.one_of + one_of)

    def changed(self, name: str, **changes: Any) -> "Schema":
        return Schema(*(replace(f, **changes) if f.name == name else f for f in self.fields), one_of=self.one_of)


def _out_of_bounds(field: Field, value: Any) -> str | None:
    """What is wrong with a list's length or an integer's value under the field's bounds
    (checked before a list's items are parsed: a list too long is not read through)."""
    if field.kind == "list":
        if len(value) < field.min_items:
            return "cannot be empty" if field.min_items == 1 else f"must have at least {field.min_items} items"
        if field.max_items is not None and len(value) > field.max_items:
            return f"has too many items (at most {field.max_items})"
    elif field.kind == "int":
        low, high = field.minimum, field.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                return f"must be from {low} to {high}"
            return f"must be at least {low}" if low is not None else f"must be at most {high}"
    return None


def _has_nul(value: Any) -> bool:
    """Whether a NUL is in any string, key or value of ``value``, walked without recursion
    (bodies nest at most ``MAX_NESTING`` levels, but no walk should rely on it)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _parse_items(items: "Schema | str", values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    clean: list[Any] = []
    errors: dict[str, Any] = {}
    for index, item in enumerate(values):
        if isinstance(items, Schema):
            if not isinstance(item, dict):
                errors[str(index)] = ["must be an object"]
                continue
            value, nested = items._parse(item, partial=False)
            if nested:
                errors[str(index)] = nested
                continue
        else:
            value, problem = _coerce(items, item)
            if problem:
                errors[str(index)] = [problem]
                continue
            if value is None:  # an external id sent as {"ecommerce": null}: no item at all
                errors[str(index)] = ["cannot be null"]
                continue
        clean.append(value)
    return clean, errors
