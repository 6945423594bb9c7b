"""The HTTP server's own answer to a request it cannot read, in the error shape (spec 01 Errors).

uvicorn answers a request its parser refuses (a request line past 64 KiB, a malformed request
line or header) itself, before any ASGI app sees it, with a plain-text 400. Every other error of
the service is JSON `{"errors": ...}` with an `X-Request-Id`, and clients built for the service
parse every 4xx that way. ``HttpProtocol`` is uvicorn's httptools protocol with that one answer
in the service's shape; `rebill serve` runs it (cli/serve.py). The connection still closes after
it: the parser cannot tell where the next request would begin.

It overrides one method of uvicorn's protocol (``send_400_response``, present since before the
0.30 the project requires); tests/api/test_http_protocol.py drives a real `rebill serve` with
refused bytes, so an uvicorn that renamed it fails there, not in production.
"""

from __future__ import annotations

from random import getrandbits

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from rebill.api.versions import FALLBACK_VERSION
from rebill.errors import NOT_READABLE_HTTP

from .render import encode

_BODY = encode({"errors": NOT_READABLE_HTTP})
# NOTE: decisions §2.8, every response names a version: here no store is known.
_VERSION = b"x-service-version: " + FALLBACK_VERSION.encode() + b"\r\n"


class HttpProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        # ``msg`` is uvicorn's own text, already in its log line: the answer says what to fix.
        body = _BODY
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([
            b"x-request-id: %032x\r\n" % getrandbits(128),
            _VERSION,
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n",
            b"\r\n",
            body,
        ])
        self.transport.write(b"".join(content))
        self.transport.close()
