"""Typed query-string values (decisions §2.5, §2.6). Each parser takes the raw string and
returns the value or raises ``ValueError`` with the message for the caller.

Each parser also carries the JSON Schema of what it accepts in ``openapi`` (``typed``), which
the OpenAPI document reads (``api/openapi/``): a new parser says what it takes, or the document
shows it as a plain string."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, time, timezone
from typing import Any

QueryParser = Callable[[str], Any]
MAX_ID = 2**63 - 1
MAX_IDS = 1000  # ids in one filter; longer lists answer 422 instead of straining the driver
MAX_ID_DIGITS = len(str(MAX_ID))
_INTEGER = re.compile(r"(-?)([0-9]+)", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def typed(**schema: Any) -> Callable[[QueryParser], QueryParser]:
    """Attach the JSON Schema of the values ``parser`` accepts (for the OpenAPI document)."""
    def attach(parser: QueryParser) -> QueryParser:
        parser.openapi = schema  # type: ignore[attr-defined]
        return parser
    return attach


def schema_of(parser: QueryParser) -> dict[str, Any]:
    """The JSON Schema a parser declared; a string when it declared none."""
    return dict(getattr(parser, "openapi", None) or {"type": "string"})


def described(parser: QueryParser, **schema: Any) -> QueryParser:
    """``parser`` documented as ``schema`` (added to what it declares), for parameters whose
    handler bounds them further (`delivery_count_future` from 1 to 30)."""
    def parse(value: str) -> Any:
        return parser(value)
    return typed(**{**schema_of(parser), **schema})(parse)


@typed(type="string")
def text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("Invalid value: must not contain NUL characters")
    return value


def _bounded(digits: str) -> int | None:
    """The value of ASCII ``digits`` if it fits an id, else None; never calls int() on more
    digits than an id has (Python refuses strings of over 4300 digits)."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > MAX_ID_DIGITS:
        return None
    number = int(digits)
    return number if number <= MAX_ID else None


@typed(type="integer", minimum=-MAX_ID, maximum=MAX_ID)
def integer(value: str) -> int:
    value = value.strip()
    found = _INTEGER.fullmatch(value)
    number = _bounded(found[2]) if found else None
    if number is None:
        raise ValueError(f"Invalid integer: {value}")
    return -number if found and found[1] else number


# Comma-separated: the document says so with `style: form, explode: false` on the parameter.
@typed(type="array", items={"type": "integer", "minimum": 0, "maximum": MAX_ID}, minItems=1, maxItems=MAX_IDS)
def ids(value: str) -> list[int]:
    """NOTE: spec 01, a non-integer in an ids-style filter answers 422."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    numbers = [_bounded(p) if _DIGITS.fullmatch(p) else None for p in parts[: MAX_IDS + 1]]
    if not parts or None in numbers:
        raise ValueError(f"Invalid ids: {value}. Must be comma-separated integers")
    if len(parts) > MAX_IDS:
        raise ValueError(f"Invalid ids: at most {MAX_IDS} ids at a time")
    return [n for n in numbers if n is not None]


@typed(type="boolean")
def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"true", "1"}:
        return True
    if lowered in {"false", "0"}:
        return False
    raise ValueError(f"Invalid boolean: {value}. Must be true, false, 1 or 0")


# NOTE: decisions §2.5, the accepted forms: a date, then optionally `T` or a space and a time
# of hours and minutes (seconds and fractions optional), then optionally `Z`, `+00:00` or
# `+0000`. A query filter takes those zones only ("anything else answers 422"); a body's
# datetime (a discount's `starts_at`, a date field sent as a datetime) takes any explicit
# offset too. A zone's `+` that form decoding of an unencoded query string turned into a
# space is read as the `+` it was.
_DATETIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})"
    r"(?:[Tt ](\d{2}:\d{2}(?::\d{2}(?:\.(\d{1,9}))?)?)"
    r"([Zz]|[+ -]\d{2}:?\d{2})?)?",
    re.ASCII,
)
# The grammar as the OpenAPI document states it (JSON Schema's `pattern`, ECMA-262, reads these
# characters alike), beside `format: date-time` and `date`: those alone told a client's validator
# that a bare date, a space for `T`, `+0000` or no zone are refused (found by an audit), and a
# generated client keeps them to take its language's dates. The calendar (month 13, February 30)
# is checked here only.
DATETIME_PATTERN = f"^{_DATETIME.pattern}$"
DATETIME_FORMS = [{"type": "string", "format": "date-time"}, {"type": "string", "format": "date"},
                  {"type": "string", "pattern": DATETIME_PATTERN}]
# A filter's: the zone UTC or none (a `format: date-time` alone would admit any offset).
UTC_ZONES = frozenset({"Z", "z", "+00:00", "+0000", " 00:00", " 0000"})
FILTER_PATTERN = DATETIME_PATTERN.replace(r"([Zz]|[+ -]\d{2}:?\d{2})", r"([Zz]|[+ ]00:?00)")
assert FILTER_PATTERN != DATETIME_PATTERN
FILTER_FORMS = [{"type": "string", "format": "date-time", "pattern": FILTER_PATTERN},
                {"type": "string", "format": "date"}, {"type": "string", "pattern": FILTER_PATTERN}]


def parse_datetime(value: str, *, offsets: bool = True) -> datetime:
    """``T`` or space, ``Z``/``+00:00``/``+0000``/no zone (UTC), or a bare date; an explicit
    other offset is converted to UTC where ``offsets`` (a body's value), and refused otherwise
    (a query filter's, decisions §2.5). Anything else (week dates, basic formats, an hour
    alone, what ``fromisoformat`` would also take) answers the error of decisions §2.5."""
    found = _DATETIME.fullmatch(value.strip())
    try:
        if found is None:
            raise ValueError(value)
        day, clock, fraction, zone = found.groups()
        if not offsets and zone is not None and zone not in UTC_ZONES:
            raise ValueError(value)
        if clock is None:
            return datetime.combine(date.fromisoformat(day), time(), tzinfo=timezone.utc)
        if fraction is not None:  # Python reads at most microseconds
            clock = clock[: clock.index(".") + 1] + fraction[:6].ljust(6, "0")
        offset = ""
        if zone is not None and zone not in ("Z", "z"):
            sign = "-" if zone[0] == "-" else "+"
            offset = f"{sign}{zone[1:3]}:{zone[-2:]}"
        parsed = datetime.fromisoformat(f"{day}T{clock}{offset}")
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # OverflowError: an offset past year 1 or 9999
        raise ValueError(f"Invalid date: {value}. Must be a valid ISO-8601 datetime string") from None


def written_date(value: str) -> date:
    """The date a body's date field names: ``YYYY-MM-DD``, or a datetime of the grammar above
    whose date part counts as written (no conversion to UTC). Week dates, basic formats and
    other separators, which ``fromisoformat`` also takes, raise ValueError (found by an audit:
    `2030-W02` or `2030-01-05x10:00` set a charge date)."""
    found = _DATETIME.fullmatch(value)
    if found is None:
        raise ValueError(value)
    if found.group(2) is not None:
        parse_datetime(value)  # the time and offset must be valid too
    return date.fromisoformat(found.group(1))


def filter_datetime(value: str) -> datetime:
    """A query filter's datetime (decisions §2.5): UTC or no zone."""
    return parse_datetime(value, offsets=False)


@typed(anyOf=FILTER_FORMS,
       description="A date and time (`T` or a space between them; `Z`, `+00:00`, `+0000` or no zone: "
                   "UTC) or a bare date (its midnight, UTC).")
def datetime_(value: str) -> datetime:
    return filter_datetime(value)


def choice(*allowed: str, transform: Callable[[str], str] = str.lower,
           loose: bool = False) -> QueryParser:
    """``loose``: the value is matched without regard to case or the spaces around it."""
    @typed(type="string", enum=list(allowed))
    def parse(value: str) -> str:
        if loose:
            value = next((a for a in allowed if a.casefold() == value.strip().casefold()), value)
        if value not in allowed:
            raise ValueError(f"Invalid value: {value}. Must be one of {', '.join(allowed)}")
        return transform(value)
    return parse


def window(*fields: str) -> dict[str, tuple[str, QueryParser]]:
    """``created_at_min``/``_max`` style filters for the given datetime fields."""
    return {f"{f}_{end}": (f"{f}_{end}", datetime_) for f in fields for end in ("min", "max")}
