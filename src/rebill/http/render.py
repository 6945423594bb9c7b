"""JSON responses and the one error shape of decisions §2.2: ``{"errors": ...}``."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response
from starlette.types import Send

from rebill.errors import ServiceError

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
