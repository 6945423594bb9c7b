"""JSON responses and the one error shape of decisions §2.2: ``{"errors": ...}``."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

from rebill.errors import ServiceError

_encoder = msgspec.json.Encoder(decimal_format="string")
encode = _encoder.encode


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return encode(content)


def error_response(exc: ServiceError) -> JSON:
    return JSON({"errors": exc.errors}, status_code=exc.status, headers=exc.headers or None)
