"""The route table: every endpoint declares its method, path, scope and versions.

One Starlette route per path; its dispatcher picks the operation by method, answers 501
for an endpoint of the other version (decisions §2.1) and 403 for a missing scope, reads the
JSON body (415 unless it is an object, decisions §2.3) and runs the handler in a thread.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route, Router
from starlette.types import Receive, Scope, Send

from rebill.domain.store.model import API_VERSIONS
from rebill.errors import Forbidden, NotInThisVersion, UnsupportedMediaType, ValidationFailed
from rebill.http.context import RequestContext
from rebill.http.render import JSON

from .call import Call, Reply, Services

ALL_VERSIONS = frozenset(API_VERSIONS)


class IdConvertor(Convertor[int]):
    """``{name:id}``: a 64-bit id. A longer number is no id of ours: the route does not match
    and the caller gets 404, never an overflow in the database driver."""

    regex = "[0-9]{1,18}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("id", IdConvertor())
Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    scope: str | None
    versions: frozenset[str]
    handler: Handler


class Endpoints:
    """Collects the operations of one resource module."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []

    def route(self, method: str, path: str, *, scope: str | None,
              versions: frozenset[str] | tuple[str, ...] = ALL_VERSIONS) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.operations.append(Operation(method, path, scope, frozenset(versions), handler))
            return handler
        return register

    def get(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.route("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.route("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.route("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.route("DELETE", path, **kw)


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise UnsupportedMediaType() from None
    if not isinstance(body, dict):
        raise UnsupportedMediaType()
    return body


def _dispatcher(by_method: dict[str, Operation], services: Services) -> Callable[[Request], Any]:
    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        operation = by_method[method]
        ctx: RequestContext = request.scope["rebill"]
        if ctx.version.name not in operation.versions:
            raise NotInThisVersion()
        if operation.scope is not None and not ctx.token.allows(operation.scope):
            raise Forbidden(f"This token lacks the scope this endpoint needs: {operation.scope}")
        body = await _json_body(request) if method in ("POST", "PUT") else None
        call = Call(request, ctx.version, ctx.store, ctx.token, services, body)
        try:
            if operation.method == "GET" and services.db.inline_reads:
                call.on_loop = True
                reply = operation.handler(call)
            else:
                reply = await run_in_threadpool(operation.handler, call)
        except ValidationFailed as exc:
            # Domain rules name head fields; the caller reads its own version's names.
            exc.errors = ctx.version.rename_errors(exc.errors, sent=call.body)
            raise
        if reply.body is None:
            return Response(status_code=reply.status, headers=reply.headers or None)
        return JSON(reply.body, status_code=reply.status, headers=reply.headers or None)

    return dispatch


def build_routes(operations: list[Operation], services: Services) -> list[Route]:
    by_path: dict[str, dict[str, Operation]] = {}
    for op in operations:
        methods = by_path.setdefault(op.path, {})
        if op.method in methods:
            raise ValueError(f"two operations for {op.method} {op.path}")
        methods[op.method] = op
    return [Route(path, _dispatcher(ops, services), methods=list(ops)) for path, ops in by_path.items()]


def _first_segment(path: str) -> str:
    return path.split("/", 2)[1]


class SegmentRouter(Router):
    """Starlette's router, except that a request only tries the routes that share its first
    path segment (trying every route's pattern in turn was a tenth of a request's cost).
    No trailing-slash redirects: an API client gets 404 for a path that is not ours."""

    def __init__(self, routes: list[Route]) -> None:
        super().__init__(routes=routes, redirect_slashes=False)
        self._groups: dict[str, list[Route]] = defaultdict(list)
        for route in routes:
            self._groups[_first_segment(route.path)].append(route)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().app(scope, receive, send)
            return
        scope["router"] = self
        partial = None
        for route in self._groups.get(_first_segment(scope["path"]), ()):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
            if match is Match.PARTIAL and partial is None:
                partial, partial_scope = route, child_scope
        if partial is not None:  # the path exists with other methods: 405
            scope["route"] = partial
            scope.update(partial_scope)
            await partial.handle(scope, receive, send)
            return
        await self.not_found(scope, receive, send)
