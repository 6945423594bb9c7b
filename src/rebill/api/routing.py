"""The route table and the API's ASGI app.

Every endpoint declares its method, path, scope and versions. ``Api`` finds the operation
(404 for an unknown path, 405 with ``Allow`` for a known path and another method), answers
501 for an endpoint of the other version (decisions §2.1) and 403 for a missing scope, reads
the JSON body (415 unless it is an object, decisions §2.3; 422 past the limits of
``http/render.decode_object``), runs the handler (on the event loop on SQLite, its writes
committed in groups by ``db/loop_writer.py``; in a worker thread on PostgreSQL) and sends
the reply.

It is a plain ASGI app rather than a Starlette router: Starlette's routing, its two
exception middlewares and its Response objects cost about 26 µs a request on the server,
more than half of what the bare endpoint costs in all (docs/performance.md). Starlette
still provides the Request object, the path convertors and the test client.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import ClientDisconnect, Request
from starlette.routing import compile_path
from starlette.types import Message, Receive, Scope, Send

from rebill.db.engine import Database, retryable, unavailable
from rebill.db.loop_writer import WriterBusy
from rebill.db.read_lanes import ReadLanes
from rebill.domain.store.model import API_VERSIONS, Store
from rebill.domain.unit import REQUEST_KEY, REQUEST_SOURCE
from rebill.errors import (
    Conflict,
    DatabaseUnavailable,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    NotInThisVersion,
    ServiceError,
    ValidationFailed,
)
from rebill.http.context import RequestContext
from rebill.http.render import decode_object, send_error, send_json
from rebill.json_limits import MAX_NESTING

from . import idempotency
from .call import Call, NeedsThread, Reply, Services
from .contract import Version
from .declared import Body, Returns, replies
from .query import QueryParser

ALL_VERSIONS = frozenset(API_VERSIONS)
logger = logging.getLogger("rebill")
# Runs of a handler whose transaction PostgreSQL gave up on (Api._in_thread).
RETRIES = 4
# A deprecated endpoint says so on every reply, errors included (spec 01 Versioning 5, spec 02
# Versioning 2), with its `Sunset` when it has a retirement date.
DEPRECATION = (b"deprecation", b"true")


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
    # Calls a service outside Rebill (the payment gateway) and manages its own transactions:
    # always in a worker thread, never on the event loop.
    calls_out: bool = False
    # Its call out only reads (a payment method checked with Stripe): after a lost race the
    # whole request runs again, as one that does not call out (found by an audit: a deadlock
    # answered 409 at once). One that moves money is never run twice.
    runs_again: bool = False
    # The versions in which the endpoint is deprecated (its replies carry DEPRECATION), and the
    # HTTP date of its retirement when one is known (a `Sunset` header).
    deprecated_in: frozenset[str] = frozenset()
    sunset: str | None = None
    # What the OpenAPI document says of it (api/declared.py, docs/openapi.md); the dispatcher
    # reads them only for `takes_include`. `body`: the body its handler parses; `reply`: its successful replies;
    # `query`: query parameters of its own besides a list contract's; `extension`: a Rebill
    # extension, no endpoint of the public API; `errors`: error statuses the handler answers
    # that the document cannot infer from the rest (422 on a GET without parameters).
    body: Body | None = None
    reply: tuple[Returns, ...] = ()
    query: tuple[tuple[str, QueryParser | tuple[str, QueryParser]], ...] = ()
    extension: bool = False
    errors: tuple[int, ...] = ()
    # What the store must have for this endpoint (a plan tier), checked right after the scope
    # and before the body or the query is read: raises Forbidden.
    store_check: Callable[[Store], None] | None = None
    # How deeply its body may nest: MAX_NESTING, unless the body wraps other endpoints' bodies
    # (an async batch's tasks), which then keep the whole depth an endpoint allows.
    body_nesting: int = MAX_NESTING
    # Scopes it needs besides ``scope``, checked with it (a checkout's charge keeps a payment
    # token: `write_payment_methods` too, docs/scopes.md).
    also_needs: tuple[str, ...] = ()

    @property
    def scopes(self) -> tuple[str, ...]:
        return ((self.scope,) if self.scope is not None else ()) + self.also_needs

    def said_in(self, version: Version, errors: Any, sent: Any) -> Any:
        """Domain errors, which name head fields, in this version's names and where the caller
        sent them (``Version.rename_errors`` with this endpoint's body schema)."""
        schema = self.body.errors_schema(version) if self.body is not None else None
        return version.rename_errors(errors, sent=sent, schema=schema)

    @property
    def takes_include(self) -> bool:
        """Whether its replies embed `include` values (a list's, or a record's ``include=``)."""
        return any(r.page or r.include for r in self.reply) or any(name == "include" for name, _ in self.query)


class Endpoints:
    """Collects the operations of one resource module."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []

    def route(self, method: str, path: str, *, scope: str | None,
              versions: frozenset[str] | tuple[str, ...] = ALL_VERSIONS,
              calls_out: bool = False, runs_again: bool = False, deprecated_in: tuple[str, ...] = (),
              sunset: str | None = None, body: Body | str | None = None,
              reply: Returns | tuple[Returns, ...] | None = None,
              query: Mapping[str, QueryParser | tuple[str, QueryParser]] | None = None,
              extension: bool = False, errors: tuple[int, ...] = (),
              store_check: Callable[[Store], None] | None = None,
              body_nesting: int = MAX_NESTING, also_needs: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
        declared = Body(body) if isinstance(body, str) else body

        def register(handler: Handler) -> Handler:
            self.operations.append(Operation(method, path, scope, frozenset(versions), handler, calls_out, runs_again,
                                             frozenset(deprecated_in), sunset, declared, replies(reply),
                                             tuple((query or {}).items()), extension, tuple(errors), store_check,
                                             body_nesting, tuple(also_needs)))
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


async def _json_body(request: Request, nesting: int) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    return decode_object(raw, nesting)


@dataclass(frozen=True)
class _Path:
    regex: re.Pattern[str]
    convertors: list[tuple[str, Callable[[str], Any]]]
    methods: dict[str, Operation]
    # By version, the methods it serves on the path: a 405's `Allow` (a method another version
    # serves answers 501; found by an audit: `Allow` listed those too).
    allow: dict[str, str]


def _first_segment(path: str) -> str:
    """``/customers/5`` -> ``customers``; a target that is no path (``*``, ``""``) -> ``""``."""
    parts = path.split("/", 2)
    return parts[1] if len(parts) > 1 else ""


class Api:
    """The ASGI app behind the edge (``http/edge.py``), which has already authenticated
    the request and put a ``RequestContext`` in ``scope["rebill"]``."""

    def __init__(self, operations: list[Operation], services: Services) -> None:
        self.services = services
        by_path: dict[str, dict[str, Operation]] = {}
        for op in operations:
            methods = by_path.setdefault(op.path, {})
            if op.method in methods:
                raise ValueError(f"two operations for {op.method} {op.path}")
            methods[op.method] = op
        # Paths without parameters are found by a dict lookup; a request tries only the
        # parameterized paths that share its first segment.
        self._static: dict[str, _Path] = {}
        self._groups: dict[str, list[_Path]] = defaultdict(list)
        for path, methods in by_path.items():
            regex, _, convertors = compile_path(path)
            versions = {name for op in methods.values() for name in op.versions}
            allow = {name: ", ".join(sorted({*mine, *(["HEAD"] if "GET" in mine else [])}))
                     for name in versions for mine in [[m for m, op in methods.items() if name in op.versions]]}
            converts = [(name, convertor.convert) for name, convertor in convertors.items()]
            route = _Path(regex, converts, methods, allow)
            if converts:
                self._groups[_first_segment(path)].append(route)
            else:
                self._static[path] = route

    def _find(self, path: str) -> _Path | None:
        if not path.startswith("/"):
            return None  # ``*`` and other targets that are no path (the edge answers 400 first)
        route = self._static.get(path)
        if route is None:
            for candidate in self._groups.get(_first_segment(path), ()):
                if candidate.regex.fullmatch(path) is not None:
                    return candidate
        return route

    def template(self, path: str) -> str | None:
        """The route template ``path`` matches (``/customers/{id}``), whatever the method, or
        None: metrics and logs name the requests the edge refused by it (http/observe.py)."""
        route = self._find(path)
        return next(iter(route.methods.values())).path if route is not None else None

    def _match(self, method: str, path: str, version: str) -> tuple[Operation, dict[str, Any]]:
        if not path.startswith("/"):
            raise NotFound()  # ``*`` and other targets that are no path (the edge answers 400 first)
        route = self._static.get(path)
        params: dict[str, Any] = {}
        if route is None:
            for candidate in self._groups.get(_first_segment(path), ()):
                # The whole path: the compiled `$` also matches before a final newline (found
                # by an audit: `/customers/1%0A` reached customer 1, writes included).
                found = candidate.regex.fullmatch(path)
                if found is not None:
                    route = candidate
                    params = {name: convert(found[name]) for name, convert in candidate.convertors}
                    break
            else:
                raise NotFound()
        operation = route.methods.get("GET" if method == "HEAD" else method)
        if operation is None:
            headers = {"Allow": route.allow.get(version, "")}
            # A deprecated path says so on a 405 too (found by an audit: "every reply, errors
            # included" missed the methods it does not serve).
            deprecated = next((op for op in route.methods.values() if version in op.deprecated_in), None)
            if deprecated is not None:
                headers["Deprecation"] = "true"
                if deprecated.sunset:
                    headers["Sunset"] = deprecated.sunset
            raise MethodNotAllowed(headers=headers)
        return operation, params

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await _lifespan(receive, send, self.services.db)
            elif scope["type"] == "websocket":
                # No websocket endpoints: closing before accepting makes the server answer 403.
                await receive()
                await send({"type": "websocket.close", "code": 1008})
            return
        ctx: RequestContext = scope["rebill"]
        try:
            raw = scope.get("raw_path") or b""
            if b"%2f" in raw or b"%2F" in raw:
                # An encoded slash is data, not a separator (RFC 3986 §2.2), and no path segment of
                # the API holds one (found by an audit: `/customers%2F25` read customer 25, past
                # any rule a proxy matched on the path as sent).
                raise NotFound()
            operation, scope["path_params"] = self._match(scope["method"], scope["path"], ctx.version.name)
            ctx.route = operation.path
            if ctx.version.name in operation.deprecated_in:
                # This request's own list: every reply, errors included, carries them.
                ctx.headers.append(DEPRECATION)
                if operation.sunset:
                    ctx.headers.append((b"sunset", operation.sunset.encode()))
            call = self._admit(operation, ctx, scope, receive)
            # DELETE too: the 2021-01 bulk delete names its subscriptions in the body.
            if operation.method == "POST" or operation.method == "PUT" or operation.method == "DELETE":
                call.body = await _json_body(call.request, operation.body_nesting)
            key = idempotency.key_of(scope["headers"]) if operation.method == "POST" else None
        except ServiceError as exc:
            await send_error(send, exc, ctx.headers)
            return
        except ClientDisconnect:
            # Nobody is left to answer, and nothing was done: no 500 and no error in the log
            # (a load generator stopping mid-request, a client's timeout).
            ctx.closed = True
            logger.info("%s %s: the client closed the connection before its body arrived (request %s)",
                        scope["method"], scope["path"], ctx.request_id)
            return
        except Exception as exc:
            await send_error(send, _unexpected(exc, scope, ctx), ctx.headers)
            return
        if key is None:
            await self._respond(operation, call, ctx, send)
        else:
            await self._idempotent(key, operation, call, ctx, send)

    async def _respond(self, operation: Operation, call: Call, ctx: RequestContext, send: Send) -> None:
        scope = call.scope
        # Every change the handler makes is this token's (the events' `source`), in this task
        # and in the worker thread it may run in (the context is copied there).
        REQUEST_SOURCE.set(("api", ctx.token.id))
        try:
            try:
                db = self.services.db
                if db.inline_reads and not operation.calls_out:
                    reply = await self._on_loop(operation, call)
                elif operation.method == "GET" and not operation.calls_out and db.async_reads is not None:
                    reply = await self._async_read(db.async_reads, operation, call)
                else:
                    reply = await self._in_thread(operation, call)
            except ValidationFailed as exc:
                # Domain rules name head fields; the caller reads its own version's names.
                exc.errors = operation.said_in(ctx.version, exc.errors, call.body)
                raise
        except ServiceError as exc:
            await send_error(send, exc, ctx.headers)
            return
        except Exception as exc:
            await send_error(send, _unexpected(exc, scope, ctx), ctx.headers)
            return
        await send_json(send, reply.status, reply.body, reply.headers, ctx.headers)

    async def _in_thread(self, operation: Operation, call: Call) -> Reply:
        """The handler in a worker thread. When PostgreSQL gives its transaction up for a
        concurrent one's sake (a deadlock, a serialization failure), everything it wrote was
        rolled back: it runs again, up to RETRIES times, after a short random pause, so a lost
        race succeeds instead of answering 500. Handlers that call out (the payment gateway)
        manage their own transactions around the call and are never run twice: theirs answers
        409 at once."""
        for attempt in range(1, RETRIES + 1):
            try:
                return await run_in_threadpool(operation.handler, call)
            except DBAPIError as exc:
                if not retryable(exc):
                    raise
                if operation.calls_out and not operation.runs_again:
                    # Never run twice (it may have called out already), but a lost race is still
                    # the loser's 409, not a 500 (found by an audit: a deadlock of
                    # POST /payment_methods on PostgreSQL). What it wrote was rolled back; what it
                    # claimed (a payment's) is finished by its next try.
                    logger.warning("%s %s lost a race (%s): 409", operation.method, operation.path,
                                   type(exc.orig).__name__)
                    raise Conflict() from exc
                if attempt == RETRIES:
                    # NOTE: decisions §4.6: the loser of overlapping writes answers 409, nothing
                    # half written (every attempt was rolled back); it was a 500.
                    logger.warning("%s %s lost %d races in a row (%s): 409", operation.method, operation.path,
                                   RETRIES, type(exc.orig).__name__)
                    raise Conflict() from exc
                logger.info("retrying %s %s after %s (attempt %d)", operation.method, operation.path,
                            type(exc.orig).__name__, attempt)
                await asyncio.sleep(random.uniform(0.005, 0.03) * attempt)
        raise AssertionError("unreachable")

    async def _async_read(self, lanes: ReadLanes, operation: Operation, call: Call) -> Reply:
        """PostgreSQL reads: the handler in a greenlet on the event loop, over an async
        connection (``Database.async_reads``), so its round trips hold no worker thread. A
        GET that turns out to write goes to a worker thread (``Call.write``)."""
        try:
            return await lanes.run_sync(_held_read, operation.handler, call)
        except NeedsThread:
            call.held = None
            return await self._in_thread(operation, call)

    async def _idempotent(self, key: str, operation: Operation, call: Call, ctx: RequestContext, send: Send) -> None:
        """NOTE: decisions §9.2, §6.12: the first answer to a key, replayed to its repeats."""
        db, clock = self.services.db, self.services.clock
        owner = (ctx.store.id, ctx.token.id, key)
        print_ = idempotency.fingerprint(operation.method, call.scope["path"], call.body, version=ctx.version.name)
        began = clock.now()
        try:
            stored = await run_in_threadpool(idempotency.begin, db, *owner, print_, began)
        except ServiceError as exc:
            await send_error(send, exc, ctx.headers)
            return
        except Exception as exc:
            await send_error(send, _unexpected(exc, call.scope, ctx), ctx.headers)
            return
        if stored is not None:
            await idempotency.replay(send, stored, ctx.headers)
            return
        recorder = idempotency.Recorder(send)
        # The units that commit this request's changes mark the key in their transaction
        # (domain/unit.py); the context is copied to the worker thread the handler may run in.
        # A handler that calls the payment processor commits around the call in steps of its
        # own: those before the call do not mark it (`before_the_call`), so its 503 (no answer
        # from the processor) stays safe to repeat, and the one recording the answer does.
        marked = REQUEST_KEY.set((*owner, began))
        lease = idempotency.Lease(db, clock, owner, began)
        lease.hold()
        try:
            await self._respond(operation, call, ctx, recorder)
        finally:
            REQUEST_KEY.reset(marked)
            try:
                await idempotency.finish_soon(db, lease, recorder.answer(), clock.now())
            finally:
                await recorder.release()

    async def _on_loop(self, operation: Operation, call: Call) -> Reply:
        """SQLite: run the handler on the event loop, its reads and its write included
        (``Database.read_on_loop``, ``db/loop_writer.py``). A call that wrote answers, success
        or error, only after the COMMIT of its group. A write that finds the lock taken has
        written nothing: the handler runs again after a pause, and after a second of that in
        a worker thread, which waits as long as SQLite's busy timeout."""
        call.on_loop = True
        pause, waited = 0.0005, 0.0
        while True:
            try:
                try:
                    return operation.handler(call)
                finally:
                    if call.wrote:
                        await self.services.db.loop_writer.committed()  # type: ignore[union-attr]
            except WriterBusy:
                call.wrote = False
                if waited >= 1.0:
                    call.on_loop = False
                    return await run_in_threadpool(operation.handler, call)
                await asyncio.sleep(pause)
                waited += pause
                pause = min(pause * 2, 0.02)

    def _admit(self, operation: Operation, ctx: RequestContext, scope: Scope, receive: Receive) -> Call:
        """501 for the other version's endpoint, 403 for a missing scope or what the store lacks;
        else the call."""
        if ctx.version.name not in operation.versions:
            raise NotInThisVersion()
        for needed in operation.scopes:
            if not ctx.token.allows(needed):
                raise Forbidden(f"This token lacks the scope this endpoint needs: {needed}")
        if operation.store_check is not None:
            operation.store_check(ctx.store)
        call = Call(scope, receive, ctx, self.services)
        if operation.method == "GET" and scope["query_string"] and not operation.takes_include \
                and call.params.get("include") is not None:
            # NOTE: decisions §3.8, unknown include values answer 422, on a record that takes
            # none too (found by an audit: they were ignored there, refused on its list).
            names = dict.fromkeys(call.params["include"].split(","))
            raise ValidationFailed({"include": [f"Invalid value: {n}. This resource takes no include values"
                                                for n in names]})
        return call


def _held_read(conn: Connection, handler: Callable[[Call], Reply], call: Call) -> Reply:
    call.held = conn
    return handler(call)


def _unexpected(exc: Exception, scope: Scope, ctx: RequestContext) -> ServiceError:
    """What an exception that is no ServiceError answers: 503 with Retry-After when the
    database could not be reached (nothing was applied: the transaction went with the
    connection), else a logged 500."""
    if unavailable(exc):
        logger.warning("database unavailable in %s %s (request %s): %s", scope["method"], scope["path"],
                       ctx.request_id, exc.__class__.__name__)
        return DatabaseUnavailable()
    logger.error("unhandled error in %s %s (request %s)", scope["method"], scope["path"], ctx.request_id,
                 exc_info=exc)
    return ServiceError()


async def _lifespan(receive: Receive, send: Send, db: Database) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            # PostgreSQL's read connections belong to this loop, which is ending: closed on it,
            # while they still can be (db/read_lanes.py).
            await db.close_loop_reads()
            await send({"type": "lifespan.shutdown.complete"})
            return
