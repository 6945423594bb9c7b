"""`GET /metrics`: every figure in the Prometheus text format (issue 18; the figures in
``observability/metrics.py``, the list in docs/operations.md "Metrics and logs").

Served by the edge without a token, like the reference (``http/edge.py``), and only when
``REBILL_METRICS=on``: off (the default) the path is no path of Rebill's, and answers as any
unknown path does (401 without a token, 404 with one). Prometheus scrapes without Rebill's
tokens, and the figures name no store, customer or amount; what they do tell (routes, volumes,
the backlog) is for the operator only, so the setting is off unless asked for and the docs say
to keep the path from the public at the proxy (or bind the server to a private address).

The scrape reads the processes' files and the database: it runs in a worker thread, never on
the event loop.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.types import Scope, Send

from rebill.errors import MethodNotAllowed
from rebill.observability.metrics import CONTENT_TYPE, PATH, Metrics

from .render import send_error

__all__ = ["PATH", "serve"]


async def serve(scope: Scope, send: Send, metrics: Metrics, headers: list[tuple[bytes, bytes]]) -> None:
    """Answers ``GET /metrics`` (and HEAD); another method is 405. ``headers``: the edge's
    (the request id)."""
    method = scope["method"]
    if method not in ("GET", "HEAD"):
        await send_error(send, MethodNotAllowed(headers={"Allow": "GET, HEAD"}), headers)
        return
    metrics.flush()  # this process's requests, up to this one
    body = await run_in_threadpool(metrics.exposition)
    await send({"type": "http.response.start", "status": 200, "headers": [
        *headers, (b"content-type", CONTENT_TYPE), (b"content-length", b"%d" % len(body)),
        (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
