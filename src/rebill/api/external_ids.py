"""External (platform) ids: what one may be where a body brings it, and how a version that
shows platform ids as numbers renders a stored one (docs/api-choices.md, Hardening).

NOTE: spec 01 and 03 type the 2021-11 ids as strings (`external_*_id.ecommerce`), spec 02 types
the 2021-01 ones as integers (`platform_order_id`, `applies_to_id`) and spec 03 (order
2021-01) as "string or integer"; a custom platform's ids are no numbers (decisions §5.16).
One rule serves both versions: an id is at most 64 printable ASCII characters (the columns
hold 64; each field bounds the length with its own message), stored as the string, and shown
by 2021-01 as an integer exactly when it is the plain decimal form of one.

Only ASCII patterns decide, never ``str.isdigit()``: it is true for "²" and "٣", which
``int()`` refuses or reads as 3. Rendering never raises on a stored value, since rows written
before this rule may hold anything.
"""

from __future__ import annotations

import re

MAX_LENGTH = 64
NOT_ASCII = "must contain only printable ASCII characters"
# 18 digits always fit a 64-bit integer; no leading zero, so "007" stays the string it was.
_INTEGER = re.compile(r"0|[1-9][0-9]{0,17}", re.ASCII)


def problem(value: str) -> str | None:
    """Why ``value`` can be no external id, or None (blank and length are the field's checks)."""
    return None if value.isascii() and value.isprintable() else NOT_ASCII


def as_integer(value: str | None) -> int | None:
    """The integer a stored id is the decimal form of, else None."""
    return int(value) if value is not None and _INTEGER.fullmatch(value) else None


def platform_id(value: str | None) -> int | str | None:
    """A stored id as 2021-01 shows it: an integer when it is one, else the stored string."""
    number = as_integer(value)
    return value if number is None else number
