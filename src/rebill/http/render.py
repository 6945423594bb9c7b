"""JSON in and out: request bodies decoded within limits, responses, and the one error shape
of decisions §2.2: ``{"errors": ...}``."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import msgspec
from starlette.responses import Response
from starlette.types import Send

from rebill.errors import ServiceError, UnsupportedMediaType, ValidationFailed
from rebill.json_limits import MAX_NESTING, nested_deeper_than

INEXACT = "has a number with more digits than can be read exactly (send it as a string)"


def _exact_float(text: str) -> float:
    """A JSON number with a fraction or an exponent, as a float only when the float is that
    number: its shortest repr has the literal's value (`0.1`, `12.50`, `1.5e3`). Otherwise the
    body is refused, never rounded: a money field reads a float through its repr (api/fields.py),
    so `19.999999999999999` would have been taken as 20.00 while the same text as a string is
    refused (found by an audit; decisions §2.7)."""
    number = float(text)
    if number in (_INFINITY, -_INFINITY) or (number == 0 and Decimal(text) != 0):  # 1e400, 1e-400
        raise ValueError("out of range")
    if Decimal(repr(number)) != Decimal(text):
        raise ValueError(INEXACT)
    return number


_INFINITY = float("inf")
_decoder = msgspec.json.Decoder(float_hook=_exact_float)


def too_deep(limit: int = MAX_NESTING) -> ValidationFailed:
    return ValidationFailed({"body": [f"is nested too deeply (at most {limit} levels)"]})


def decode_object(raw: bytes, nesting: int = MAX_NESTING) -> dict[str, Any]:
    """A request body that must be one JSON object (decisions §2.3, docs/api-choices.md).

    415 when it is not JSON or not an object; 422 ``{"body": [...]}`` when it is nested too
    deeply, has a string that is not UTF-8, or holds a number past a double or of thousands of
    digits. Good input costs one decode (and, past ``MAX_NESTING`` brackets, one scan in C)."""
    if nested_deeper_than(raw, nesting):
        raise too_deep(nesting)
    try:
        body = _decoder.decode(raw)
    except msgspec.ValidationError as exc:
        # Decoding to Any validates nothing but numbers: 1e400, an integer of thousands of
        # digits, or a number no double holds exactly (_exact_float).
        said = INEXACT if str(exc).startswith(INEXACT) else "has a number out of range"
        raise ValidationFailed({"body": [said]}) from None
    except msgspec.DecodeError:
        if _object_with_lone_surrogate(raw):
            raise ValidationFailed({"body": ["has a \\u escape that is no character (a lone UTF-16 surrogate)"]}) \
                from None
        raise UnsupportedMediaType() from None
    except UnicodeDecodeError:  # msgspec's word for bytes that are no UTF-8 inside a string
        raise ValidationFailed({"body": ["is not valid UTF-8"]}) from None
    except RecursionError:  # unbalanced text that opens deeper than the scan counts
        raise too_deep(nesting) from None
    if not isinstance(body, dict):
        raise UnsupportedMediaType()
    return body

def _refuse_constant(name: str) -> None:
    raise ValueError(name)


def _object_with_lone_surrogate(raw: bytes) -> bool:
    """Whether a body msgspec refused is still a JSON object by the grammar: one whose string
    holds an escaped lone surrogate (``"\\ud800"``), which msgspec refuses and no UTF-8 text can
    hold. The client gets 422 naming that, not 415 "not a JSON object". Only on the error path;
    the nesting was bounded before (``nested_deeper_than``)."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # not UTF-8 (a BOM, UTF-16), or not JSON either
        return False
    if not isinstance(value, dict):
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # the surrogate: no UTF-8 for it
        return True
    return False


_encoder = msgspec.json.Encoder(decimal_format="string")
encode = _encoder.encode


class JSON(Response):
    """A Starlette response encoded by msgspec (the bench's bare endpoint uses it)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return encode(content)


_JSON_TYPE = (b"content-type", b"application/json")


async def send_json(send: Send, status: int, body: Any, headers: dict[str, str] | None = None,
                    common: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send a complete response: JSON ``body``, or no body at all when it is None (204).
    ``headers`` are this response's own; ``common`` the edge's, already encoded."""
    raw: list[tuple[bytes, bytes]] = [*common] if common else []
    payload = b""
    if body is not None:
        payload = encode(body)
        raw += [_JSON_TYPE, (b"content-length", b"%d" % len(payload))]
    if headers:
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


async def send_error(send: Send, exc: ServiceError, common: list[tuple[bytes, bytes]] | None = None) -> None:
    await send_json(send, exc.status, {"errors": exc.errors}, exc.headers, common)
