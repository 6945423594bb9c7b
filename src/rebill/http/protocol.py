"""The HTTP server's own answer to a request it cannot read, in the error shape (spec 01 Errors).

uvicorn answers a request its parser refuses (a request line past 64 KiB, a malformed request
line or header) itself, before any ASGI app sees it, with a plain-text 400. Every other error of
the service is JSON `{"errors": ...}` with an `X-Request-Id`, and clients built for the service
parse every 4xx that way. ``HttpProtocol`` is uvicorn's httptools protocol with that one answer
in the service's shape; `rebill serve` runs it (cli/serve.py). The connection still closes after
it: the parser cannot tell where the next request would begin.

Neither uvicorn nor httptools bounds the request's header fields, and httptools gathers a
header that arrives in pieces by concatenation: a header of 120 MB held the event loop for
18 s, every other client with it (found by an audit). A head still unfinished after more than
``MAX_HEAD`` bytes of later pieces answers 431 in the error shape and closes (RFC 6585 §5). The
first piece of a head is not counted (it may carry the end of the previous request's body when
requests are pipelined): only pieces that continue a head left open are, which bounds the work
of a head whatever its size, and no ordinary request ever comes near.

The fields themselves are counted too, as the parser hands them over: past ``MAX_HEAD`` bytes of
names and values in all, 431 (found by an audit: a 150 KB field sent in one piece was taken).

Two more refusals of RFC 9112 and 9110 the parser leaves to the server (found by an audit): an
HTTP/1.1 request without a Host field, or with two, answers 400 (RFC 9112 §3.2; the 2021-01 `Link`
header is built from it); and the trailer fields of a chunked body are not header fields (RFC 9110
§6.5.1): uvicorn appended them to the list the request's scope holds, so a token or version sent as
a trailer in the same packet as the body authenticated or chose the version of the request, and one
in a later packet did not. They are dropped.

A client that stops sending in the middle of a request (half a head, a body shorter than its
`Content-Length`), or opens a connection and sends nothing, was held for good: uvicorn bounds
only the idle time between requests (found by an audit: a few thousand such sockets would
have exhausted a process). Once ``READ_SECONDS`` (`REBILL_CLIENT_READ_SECONDS`, 30) pass
without a byte while a request is awaited, the connection is closed: an unfinished head is
answered 408 in the error shape first; an unfinished body's request sees the client gone
(`http.disconnect`), as when a client hangs up. Reading paused by the server itself (a body
not yet read by the app) is no client's silence and waits on.

It overrides uvicorn's ``send_400_response``, ``data_received``, ``connection_made`` and four
parser callbacks (``on_message_begin``, ``on_header``, ``on_headers_complete``,
``on_message_complete``), present since before the 0.30 the project requires; tests/api/test_http_protocol.py drives a real `rebill serve` with refused bytes,
so an uvicorn that renamed them fails there, not in production.
"""

from __future__ import annotations

import asyncio
import os
from random import getrandbits
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from rebill.api.versions import FALLBACK_VERSION
from rebill.errors import HEAD_TOO_LARGE, NOT_READABLE_HTTP, ONE_HOST, REQUEST_TIMEOUT
from rebill.settings import client_read_seconds

from .render import encode

_BODY = encode({"errors": NOT_READABLE_HTTP})
_HEAD_BODY = encode({"errors": HEAD_TOO_LARGE})
_HOST_BODY = encode({"errors": ONE_HOST})
_TIMEOUT_BODY = encode({"errors": REQUEST_TIMEOUT})
LINGER_SECONDS = 0.5  # how long a refused connection's later bytes are read and dropped
# Read in each process uvicorn starts (its workers inherit the environment, not the class).
# `rebill serve` refuses a bad value by name before any starts (settings.py); imported by other
# means, a bad value leaves the default.
try:
    READ_SECONDS = client_read_seconds(os.environ)
except ValueError:
    READ_SECONDS = 30.0
MAX_HEAD = 64 * 1024
# NOTE: decisions §2.8, every response names a version: here no store is known.
_VERSION = b"x-service-version: " + FALLBACK_VERSION.encode() + b"\r\n"


class _Refused(Exception):
    """Raised in a parser callback: the parser stops, and uvicorn calls ``send_400_response``,
    which answers ``refusal`` instead of its 400."""


class HttpProtocol(HttpToolsProtocol):
    _in_head = False  # a request has begun and its header fields are not all in yet
    _head_bytes = 0  # bytes of the pieces that continued it
    _field_bytes = 0  # bytes of its header fields' names and values
    _refusal: tuple[int, bytes] | None = None
    _awaited = False  # a request's bytes are awaited: a new connection's, or a request's not all in
    _began = False  # some byte of that request has come
    _read_timer: asyncio.TimerHandle | None = None
    _refused = False  # answered by the server itself; closing

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._awaited, self._began = True, False
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_bytes, self._field_bytes = True, 0, 0
        self._awaited, self._began = True, True

    def on_message_complete(self) -> None:
        self._awaited = False
        super().on_message_complete()

    def _arm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer = self.loop.call_later(READ_SECONDS, self._read_timed_out) if self._awaited else None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if not self._awaited or self.transport.is_closing():
            return
        cycle = self.cycle
        owed = bool(self.pipeline) or (cycle is not None and not cycle.response_complete and not cycle.more_body)
        if self.flow.read_paused or owed:
            # The server's own pause (the app has not read the body yet), or an answer still
            # owed to an earlier request of the connection (a 408 written now would be taken
            # for its answer: found by a review, pipelined behind a slow write): not the
            # client's silence yet.
            self._arm()
            return
        if self._in_head and self._began:
            self._refuse(408, _TIMEOUT_BODY)
        else:  # nothing sent at all, or a body cut short: the request sees the client gone
            self.transport.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            return  # a trailer field (module docstring)
        self._field_bytes += len(name) + len(value)
        if self._field_bytes > MAX_HEAD:
            self._stop(431, _HEAD_BODY)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self.parser.get_http_version() == "1.1" and sum(name == b"host" for name, _ in self.headers) != 1:
            self._stop(400, _HOST_BODY)
        super().on_headers_complete()

    def _stop(self, status: int, body: bytes) -> None:
        self._refusal = (status, body)
        raise _Refused()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered and closing (_refuse): the rest is dropped
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD:
                if not self.headers and not self._field_bytes:
                    # Still the request line: the parser's own refusal of one past 64 KiB, the
                    # same however long (found by an audit: 400 up to ~200 KB, 431 past it).
                    self._refuse(400, _BODY)
                    return
                self.logger.warning("Request header fields too large.")
                self._refuse(431, _HEAD_BODY)
                return
        super().data_received(data)
        self._arm()  # after the parser: a request begun or ended in these bytes is known

    def connection_lost(self, exc: Exception | None) -> None:
        self._awaited = False
        self._arm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        # ``msg`` is uvicorn's own text, already in its log line: the answer says what to fix.
        self._refuse(*(self._refusal or (400, _BODY)))

    def _refuse(self, status: int, body: bytes) -> None:
        content = [STATUS_LINE[status]]
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
        self._awaited, self._refused = False, True
        self._arm()
        # A lingering close: the answer and our end of the stream (FIN) first, then what the
        # client still sends is read and dropped for a moment before the socket closes. Closed
        # at once with its bytes unread, the kernel answers them with a reset, which can reach
        # the client before it has read the answer (a request line of 300 KB lost its 400).
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
