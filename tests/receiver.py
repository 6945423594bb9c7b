"""A webhook receiver on localhost for the tests: a real HTTP server in a thread that keeps
every request it gets and answers what the test says (a status, or a pause), counts the
requests it holds at once (``peak``), and can be taken down and brought back up on the same
port (set ``port`` before ``start()``)."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the sender gave up on the answer (its timeout, or it was killed)
        super().handle_error(request, client_address)


@dataclass
class Receiver:
    status: int = 200
    delay: float = 0.0
    answer: bytes = b"ok"  # the body of every answer
    received: list[Received] = field(default_factory=list)
    port: int = 0
    active: int = 0  # requests being answered now
    peak: int = 0  # the most answered at once
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                      body))
                    receiver.active += 1
                    receiver.peak = max(receiver.peak, receiver.active)
                try:
                    if receiver.delay:
                        time.sleep(receiver.delay)
                finally:
                    # Before the answer leaves: once the sender has it, it may send the next
                    # request, which must not find this one still counted.
                    with receiver._lock:
                        receiver.active -= 1
                self.send_response(receiver.status)
                self.send_header("Content-Length", str(len(receiver.answer)))
                self.end_headers()
                self.wfile.write(receiver.answer)

            def log_message(self, *args: Any) -> None:
                return

        self._server = _Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def topics(self) -> list[str]:
        return [r.headers["x-service-topic"] for r in self.received]
