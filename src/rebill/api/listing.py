"""List parameters to a ``ListQuery``, cursors, and list replies (decisions §3).

A cursor is opaque to clients: base64url of JSON holding the resource, the original
filter/sort/include parameters and the boundary row. A request with a cursor may carry
only ``limit`` (spec 02 "With a cursor, limit is the only filter allowed").
"""

from __future__ import annotations

import base64
import re
import zlib
from datetime import date, datetime, timezone
from typing import Any

import msgspec

from rebill.domain.listing import ListQuery, Position
from rebill.errors import ValidationFailed
from rebill.json_limits import nested_deeper_than

from .contract import ListContract

CURSOR_KEYS = ("cursor", "page_info")  # page_info: spec 01's example script sends this name
MAX_LIMIT, DEFAULT_LIMIT, MAX_PAGE = 250, 50, 100
MAX_ID = 2**63 - 1
MAX_TEXT_BOUNDARY = 4096  # longer than any sorted text column
_DIGITS = re.compile(r"[0-9]{1,6}", re.ASCII)


def cursor_key(plural: str, version: str, path: str) -> str:
    """NOTE: decisions §3.3, a cursor carries every filter of its first request, and one made
    for another list is invalid: the list is its resource, its version (whose filters and sorts
    it carries) and its path (a parent's id, as `/customers/{id}/addresses`)."""
    return f"{plural} {version} {path}"


# A cursor carries its first request's parameters as sent: one whose JSON passes this is
# deflated ("z" and zlib), so that a cursor is never much longer than the request line its
# parameters came in (found by an audit: `ids` padded with 50,000 commas made a 68 KB cursor,
# past the 64 KiB a request line may have, so the next page could not be asked for).
DEFLATE_OVER = 2048
# What a deflated cursor may inflate to: its parameters came in one request line (64 KiB).
MAX_INFLATED = 256 * 1024


def encode_cursor(key: str, raw: dict[str, str], position: Position) -> str:
    value = position.value.isoformat() if isinstance(position.value, datetime) else position.value
    payload = msgspec.json.encode({"r": key, "q": raw, "p": [value, position.id, position.backwards]})
    if len(payload) > DEFLATE_OVER:
        payload = b"z" + zlib.compress(payload, 6)
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode()


def _inflated(payload: bytes) -> bytes:
    if payload[:1] != b"z":
        return payload
    inflate = zlib.decompressobj()
    out = inflate.decompress(payload[1:], MAX_INFLATED)
    if inflate.unconsumed_tail or not inflate.eof:  # a bomb, or cut short
        raise _invalid_cursor()
    return out


def _invalid_cursor() -> ValidationFailed:
    return ValidationFailed({"cursor": ["Invalid value"]})


def decode_cursor(key: str, cursor: str) -> tuple[dict[str, str], list[Any]]:
    """The raw parameters and the boundary [value, id, backwards], checked for shape only;
    ``typed_position`` checks the value against the sort once the sort is known."""
    try:
        payload = _inflated(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if nested_deeper_than(payload):  # our cursors nest two levels; refuse before decoding
            raise _invalid_cursor()
        data = msgspec.json.decode(payload)
        raw, boundary = data["q"], data["p"]
        if (data["r"] != key or not isinstance(raw, dict) or not isinstance(boundary, list)
                or len(boundary) != 3 or not all(isinstance(v, str) for v in raw.values())):
            raise _invalid_cursor()
        return {str(k): v for k, v in raw.items()}, boundary
    except (ValueError, KeyError, TypeError, RecursionError, msgspec.DecodeError, zlib.error):
        raise _invalid_cursor() from None


def typed_position(sort: str, boundary: list[Any], *, is_date: bool = False, is_text: bool = False) -> Position:
    """A cursor is client input: the boundary must fit the sort column (an id, a date, a
    string, or a UTC datetime), or the cursor is invalid."""
    value, row_id, backwards = boundary
    if isinstance(row_id, bool) or not isinstance(row_id, int) or not 0 <= row_id <= MAX_ID:
        raise _invalid_cursor()
    if not isinstance(backwards, bool):
        raise _invalid_cursor()
    if sort == "id":
        return Position(row_id, row_id, backwards)
    if is_text:
        # PostgreSQL cannot compare a NUL; no stored value holds one.
        if not isinstance(value, str) or "\x00" in value or len(value) > MAX_TEXT_BOUNDARY:
            raise _invalid_cursor()
        return Position(value, row_id, backwards)
    if is_date:
        try:
            if isinstance(value, str) and len(value) == 10:
                return Position(date.fromisoformat(value), row_id, backwards)
        except ValueError:
            pass
        raise _invalid_cursor()
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
        # The keyset compares in UTC: a boundary that has no UTC value (year 1 at +05:00,
        # year 9999 at -05:00) is no boundary of ours.
        when = when.astimezone(timezone.utc) if when is not None and when.tzinfo is not None else None
    except (ValueError, OverflowError):
        when = None
    if when is None:
        raise _invalid_cursor()
    return Position(when, row_id, backwards)


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not _DIGITS.fullmatch(value.strip()) or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationFailed({"limit": [f"must be an integer from 1 to {MAX_LIMIT}"]})
    return int(value)


def _page(value: str | None) -> int:
    if value is None:
        return 1
    if not _DIGITS.fullmatch(value.strip()) or int(value) < 1:
        raise ValidationFailed({"page": ["must be a positive integer"]})
    if int(value) > MAX_PAGE:
        # NOTE: spec 01 Pagination, page-number paging works only up to page 100.
        raise ValidationFailed({"page": [f"page-number paging stops at page {MAX_PAGE}; use cursor paging"]})
    return int(value)


def parse_sort(contract: ListContract, value: str | None) -> tuple[str, bool]:
    # NOTE: decisions §3.7, anything but a field of the table answers 422: an empty value too.
    text = contract.default_sort if value is None else value
    field, _, direction = text.rpartition("-")
    if field not in contract.sorts or direction not in ("asc", "desc"):
        allowed = ", ".join(f"{f}-{d}" for f in contract.sorts for d in ("asc", "desc"))
        raise ValidationFailed({"sort_by": [f"Invalid value: {text}. Must be one of {allowed}"]})
    return field, direction == "desc"


def parse_include(contract: ListContract, value: str | None) -> tuple[str, ...]:
    """NOTE: decisions §3.8, comma-separated values of the table; anything else answers 422,
    an empty value or an empty name between commas too (as the document's enum says)."""
    if value is None:
        return ()
    names = tuple(dict.fromkeys(value.split(",")))
    unknown = [n for n in names if n not in contract.includes]
    if unknown:
        allowed = f"Must be one of {', '.join(contract.includes)}" if contract.includes else \
            "This resource takes no include values"
        raise ValidationFailed({"include": [f"Invalid value: {n}. {allowed}" for n in unknown]})
    return names


def parse_filters(filters: dict[str, Any], raw: dict[str, str], allowed: Any = None) -> dict[str, Any]:
    """Known filter parameters to {filter key: value}; all bad values reported at once."""
    clean: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for name, value in raw.items():
        if name not in filters or (allowed is not None and name not in allowed):
            continue  # unknown parameters are ignored, as in request bodies (decisions §2.3)
        key, parser = filters[name]
        try:
            clean[key] = parser(value)
        except ValueError as exc:
            errors[name] = [str(exc)]
    if errors:
        raise ValidationFailed(errors)
    return clean


def parse_list(contract: ListContract, params: dict[str, str], cursor_key: str) -> tuple[ListQuery, dict[str, str]]:
    """Returns the query and the raw parameters a cursor must carry forward. ``cursor_key``
    names the list a cursor was made for (Call.cursor_key): one made for another is invalid."""
    limit = _limit(params.get("limit"))
    cursor = next((params[k] for k in CURSOR_KEYS if params.get(k)), None)
    if cursor is not None:
        extra = sorted(k for k in params if k not in ("limit", *CURSOR_KEYS))
        if extra:
            raise ValidationFailed({name: ["cannot be combined with cursor; only limit can"] for name in extra})
        raw, boundary = decode_cursor(cursor_key, cursor)
        page = 1
    else:
        keep = set(contract.filters) | {"sort_by", "include"}
        raw = {k: v for k, v in params.items() if k in keep}
        boundary, page = None, _page(params.get("page"))
    sort, descending = parse_sort(contract, raw.get("sort_by"))
    sort = contract.sort_columns.get(sort, sort)
    position = (typed_position(sort, boundary, is_date=sort in contract.date_sorts, is_text=sort in contract.text_sorts)
                if boundary is not None else None)
    include = parse_include(contract, raw.get("include"))
    filters = parse_filters(contract.filters, raw)
    query = ListQuery(filters=filters, sort=sort, descending=descending, limit=limit, page=page,
                      position=position, include=include)
    return query, raw


def link_header(base_url: str, limit: int, cursors: list[tuple[str, str]]) -> str:
    """NOTE: spec 02 Cursor paging, absolute URLs with an encoded page_info parameter."""
    return ", ".join(f'<{base_url}?limit={limit}&page_info={cursor}>; rel="{rel}"' for rel, cursor in cursors)
