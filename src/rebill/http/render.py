"""JSON in and out: request bodies decoded within limits, responses, and the one error shape
of decisions §2.2: ``{"errors": ...}``."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response
from starlette.types import Send

from rebill.errors import ServiceError, UnsupportedMediaType, ValidationFailed
from rebill.json_limits import MAX_NESTING, nested_deeper_than


def too_deep() -> ValidationFailed:
    return ValidationFailed({"body": [f"is nested too deeply (at most {MAX_NESTING} levels)"]})


def decode_object(raw: bytes) -> dict[str, Any]:
    """A request body that must be one JSON object (decisions §2.3, docs/api-choices.md).

    415 when it is not JSON or not an object; 422 ``{"body": [...]}`` when it is nested too
    deeply, has a string that is not UTF-8, or holds a number past a double or of thousands of
    digits. Good input costs one decode (and, past ``MAX_NESTING`` brackets, one scan in C)."""
    if nested_deeper_than(raw):
        raise too_deep()
    try:
        body = msgspec.json.decode(raw)
    except msgspec.ValidationError:
        # Decoding to Any validates nothing but number ranges: 1e400, or an integer of
        # thousands of digits.
        raise ValidationFailed({"body": ["has a number out of range"]}) from None
    except msgspec.DecodeError:
        raise UnsupportedMediaType() from None
    except UnicodeDecodeError:  # msgspec's word for bytes that are no UTF-8 inside a string
        raise ValidationFailed({"body": ["is not valid UTF-8"]}) from None
    except RecursionError:  # unbalanced text that opens deeper than the scan counts
        raise too_deep() from None
    if not isinstance(body, dict):
        raise UnsupportedMediaType()
    return body

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
