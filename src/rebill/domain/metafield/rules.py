"""What a metafield's value must be for its type (decisions §7.6)."""

from __future__ import annotations

import re

import msgspec

from rebill.errors import ValidationFailed
from rebill.json_limits import MAX_NESTING, nested_deeper_than

# NOTE: decisions §7.6, an `integer` is an optional sign and ASCII digits.
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


def check_value(value: str, value_type: str) -> None:
    """422 naming `value` when it does not read as its type; a `string` takes anything."""
    if value_type == "integer" and not _INTEGER.fullmatch(value):
        raise ValidationFailed.field("value", "must be an integer (an optional sign and digits) for value_type integer")
    if value_type == "json_string":
        raw = value.encode()
        # Refused before decoding: no decoder ever recurses past what a request body may nest.
        if nested_deeper_than(raw):
            raise ValidationFailed.field("value", f"is nested too deeply (at most {MAX_NESTING} levels)")
        try:
            msgspec.json.decode(raw)
        except (msgspec.DecodeError, ValueError, RecursionError):
            raise ValidationFailed.field("value", "must be valid JSON for value_type json_string") from None
