"""The request's figures and its log line (issue 18): an ASGI wrapper around the app that times
each request, sees its status as it is sent, and then counts it (``observability/metrics.py``)
and logs it (``rebill.requests``, ``observability/logs.py``).

Installed only when one of them is on (``wrap``): with metrics off and request lines off the
request path is exactly what it was. What names a request:

- ``route``: the template (as the OpenAPI document writes it) the API matched (``RequestContext.route``, set by the router), else
  the template the path would match (a 401 or a 429 before routing), else the edge's own path
  (``/metrics``, ``/openapi.json``, ``/docs``, ``/docs/static/{name}``, Stripe's
  ``/processors/stripe/events/{key}``), else ``unmatched``: never the raw path;
- ``version``: the version served (the one the edge names in ``X-Service-Version``), empty on
  paths that have none;
- ``store_id`` and ``request_id``: the edge's.

The duration runs from the wrapper's first line to the return of the app, after the answer's
last byte was handed to the server.
"""

from __future__ import annotations

import asyncio
import re
from time import perf_counter
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from rebill.api.openapi.edge_paths import DOCS_ASSETS, DOCS_PATH, DOCUMENT_PATH
from rebill.api.routing import Api
from rebill.domain.payment.processors import EVENTS_PATH
from rebill.observability import metrics as metrics_module
from rebill.observability.logs import lighten, log_request, requests_logged
from rebill.observability.metrics import UNMATCHED, Metrics

from .context import STORE_KEY
from .processor_events import endpoint_key

_CONVERTOR = re.compile(r"\{(\w+):\w+\}")
_REQUEST_ID = b"x-request-id"
_VERSION = b"x-service-version"
CLIENT_CLOSED = 499
_EVENTS_ROUTE = EVENTS_PATH + "{key}"
_ASSETS_ROUTE = DOCS_ASSETS + "{name}"


class Observed:
    def __init__(self, app: Any, api: Api, metrics: Metrics | None, log_requests: bool) -> None:
        self.app, self.api, self.metrics, self.log_requests = app, api, metrics, log_requests
        self._names: dict[str, str] = {}
        self._flushing: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan" and self.metrics is not None:
                receive = self._watch_lifespan(receive)
            await self.app(scope, receive, send)
            return
        began = perf_counter()
        # What the server answers when the app ends without a reply (it raised).
        start: Message = {"status": 500, "headers": ()}

        async def observed(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            await send(message)
        try:
            await self.app(scope, receive, observed)
        finally:
            self._done(scope, start, perf_counter() - began)

    def _done(self, scope: Scope, start: Message, seconds: float) -> None:
        ctx = scope.get("rebill")
        if ctx is not None:
            route, version, store_id, request_id = ctx.route or self._route(scope["path"]), ctx.version.name, \
                ctx.store.id, ctx.request_id
        else:
            route, store_id = self._route(scope["path"]), scope.get(STORE_KEY)
            version = request_id = ""
            for name, value in start["headers"]:
                if name == _REQUEST_ID:
                    request_id = value.decode("latin-1")
                elif name == _VERSION:
                    version = value.decode("latin-1")
        route = self._names.get(route) or self._name(route)
        # nginx's "client closed request": the client left before its body arrived (api/routing.py).
        status = CLIENT_CLOSED if ctx is not None and ctx.closed else start["status"]
        if self.metrics is not None:
            self.metrics.request(scope["method"], route, version, status, seconds)
        if self.log_requests:
            log_request(request_id, store_id, scope["method"], scope["path"], route, version, status, seconds)

    def _name(self, route: str) -> str:
        """The template as the OpenAPI document writes it: ``/customers/{customer_id}``, without
        the router's convertor (``{customer_id:id}``)."""
        name = self._names[route] = _CONVERTOR.sub(r"{\1}", route)
        return name

    def _route(self, path: str) -> str:
        if path == metrics_module.PATH or path == DOCUMENT_PATH or path == DOCS_PATH:
            return path
        if path.startswith(DOCS_ASSETS):
            return _ASSETS_ROUTE
        if endpoint_key(path) is not None:
            return _EVENTS_ROUTE
        return self.api.template(path) or UNMATCHED

    def _watch_lifespan(self, receive: Receive) -> Receive:
        """From startup to shutdown: the requests' sums flushed once a second, the pool sampled
        (observability/metrics.py)."""
        figures = self.metrics
        assert figures is not None

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                figures.start_sampling()
                self._flushing = asyncio.ensure_future(figures.flush_every_second())
            elif message["type"] == "lifespan.shutdown":
                figures.stop_sampling()
                flushing, self._flushing = self._flushing, None
                if flushing is not None:
                    flushing.cancel()  # it flushes what is left as it goes
                    await asyncio.gather(flushing, return_exceptions=True)
            return message
        return watched


def wrap(app: Any, api: Api, metrics: Metrics | None) -> Any:
    """``app`` observed, or ``app`` itself when neither metrics nor request lines are on (the
    request logger's level is read once, here: logging is configured before the app is built)."""
    log_requests = requests_logged()
    if metrics is None and not log_requests:
        return app
    if log_requests:
        lighten()
    return Observed(app, api, metrics, log_requests)

