"""The HTTP edge in front of the API (``api/routing.Api``): request id, authentication, API
version and rate limit, and the headers every response carries (decisions §2.8, §9.1). It
answers its own errors; otherwise it hands the API a ``RequestContext`` whose headers the
API adds to its response.

One path needs no token: ``POST /processors/stripe/events/{key}``, where Stripe sends a store's
webhook events, signed with the store's endpoint secret instead (``processor_events.py``). The
edge hands exactly that path, whole, to its handler, with the request id and the error shape;
any other path, under ``/processors/`` too, goes through the token check below. The reference
needs none either: `/openapi.json`, `/docs` and the page's assets under `/docs/static/`
(``docs.py``), read before a client has a token. And, only when ``REBILL_METRICS=on``,
`/metrics` for Prometheus (``metrics.py``); off, it is an unknown path like any other.

Order: 400 (a request target that is no path, ``OPTIONS *``) -> 401 (no or unknown token)
-> 403 (store not installed) -> 429 (rate limit) -> 426 (bad version). Every request that
names a token counts against its bucket. A request body larger than ``MAX_BODY_BYTES``
answers 413 when the API reads it (after its own routing and scope checks), before it is
buffered: by its ``Content-Length`` at once, a chunked one as soon as it passes the limit.
"""

from __future__ import annotations

import logging
from random import getrandbits
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from rebill.api.contract import Version
from rebill.api.routing import Api
from rebill.db.engine import unavailable
from rebill.errors import (
    BadRequest,
    DatabaseUnavailable,
    Forbidden,
    RateLimited,
    ServiceError,
    Unauthorized,
    VersionInvalid,
)
from rebill.observability.metrics import Metrics
from rebill.settings import RateLimit

from . import docs
from . import metrics as metrics_endpoint
from .auth import TokenResolver
from .context import STORE_KEY, RequestContext
from .processor_events import PREFIX as PROCESSOR_EVENTS
from .processor_events import ProcessorEvents, endpoint_key
from .ratelimit import LeakyBuckets
from .render import send_error

logger = logging.getLogger("rebill")

TOKEN_HEADER = b"x-service-access-token"
VERSION_HEADER = b"x-service-version"
LENGTH_HEADER = b"content-length"
# The largest body the API reads. The largest legitimate one (a metafield value of 65,535
# characters, each escaped as six bytes at worst) stays well below it.
MAX_BODY_BYTES = 1024 * 1024


class PayloadTooLarge(ServiceError):
    status = 413

    def __init__(self) -> None:
        super().__init__(f"The request body is too large (at most {MAX_BODY_BYTES} bytes)")


def _bounded_receive(receive: Receive, declared: int | None) -> Receive:
    """``receive`` that refuses a body past ``MAX_BODY_BYTES``: the router turns the
    ``ServiceError`` raised while it reads the body into the one error shape."""
    if declared is not None and declared > MAX_BODY_BYTES:
        async def refuse() -> Message:
            raise PayloadTooLarge()
        return refuse
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise PayloadTooLarge()
        return message
    return counted


def _closing_on_shutdown(send: Send, buckets: Any) -> Send:
    """``send`` that closes the shared buckets' Redis connections on this loop before telling
    the server the shutdown is complete (after it, the loop and its sockets are gone)."""
    async def sending(message: Message) -> None:
        if message["type"] == "lifespan.shutdown.complete":
            await buckets.close()
        await send(message)
    return sending


class Edge:
    def __init__(self, app: Api, *, tokens: TokenResolver, buckets: LeakyBuckets,
                 versions: dict[str, Version], fallback_version: str) -> None:
        self.app, self.tokens, self.buckets = app, tokens, buckets
        self.versions, self.fallback_version = versions, fallback_version
        # The processor's webhooks in: the one path served without a token (module docstring).
        self.processor_events = ProcessorEvents(app.services)
        self._limits: dict[str, RateLimit | None] = {}
        # The figures `/metrics` serves, or None: the setting is off (app.py sets it).
        self.metrics: Metrics | None = None

    def _limit(self, text: str) -> RateLimit | None:
        """A store's or token's own limit; None (the process's limit) for one that does not
        parse, which only a hand edit of the database can store: a request is never a 500."""
        if text not in self._limits:
            try:
                self._limits[text] = RateLimit.parse(text)
            except ValueError:
                logger.warning("ignoring the unreadable rate limit %r", text)
                self._limits[text] = None
        return self._limits[text]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan" and self.buckets.shared:
                send = _closing_on_shutdown(send, self.buckets)
            await self.app(scope, receive, send)
            return
        token_value = asked_version = None
        length: int | None = None
        for name, value in scope["headers"]:
            # A field sent twice is the two values joined by a comma (RFC 9110 §5.3), as one line
            # holding both: no version (426) and no token (401), unless they are the same (found
            # by an audit: the last line won, so a request could get another version silently).
            if name == TOKEN_HEADER:
                text = value.decode("latin-1").strip()
                token_value = text if token_value is None or token_value == text else f"{token_value}, {text}"
            elif name == VERSION_HEADER:
                text = value.decode("latin-1").strip()
                asked_version = text if asked_version is None or asked_version == text else f"{asked_version}, {text}"
            elif name == LENGTH_HEADER:
                # RFC 9110 §5.5: the whitespace around a field value is not part of it (found by an
                # audit: `53 ` was taken for a body too large).
                value = value.strip(b" \t")
                # `1*DIGIT` (RFC 9110 §8.6): leading zeros are allowed (found by an audit: a 413).
                digits = (value.lstrip(b"0") or b"0") if value.isdigit() else b""
                length = int(digits) if digits and len(digits) < 19 else MAX_BODY_BYTES + 1
        # Unique, not secret: the PRNG is enough and spares a system call per request.
        headers: list[tuple[bytes, bytes]] = [(b"x-request-id", b"%032x" % getrandbits(128))]
        served = asked_version if asked_version in self.versions else self.fallback_version
        if scope["path"].startswith(PROCESSOR_EVENTS):
            # Stripe calls it: no token, no version; signed with the store's endpoint secret. A
            # path under it that is no endpoint address answers 404 there, not the token's 401
            # (found by an audit: a mistyped address sent the operator after a token).
            key = endpoint_key(scope["path"])
            if length is None or length > MAX_BODY_BYTES:
                receive = _bounded_receive(receive, length)
            await self.processor_events(scope, receive, send, key, headers)
            return
        if self.metrics is not None and scope["path"] == metrics_endpoint.PATH:
            await metrics_endpoint.serve(scope, send, self.metrics, headers)  # no token, no rate limit
            return
        if docs.is_docs_path(scope["path"]):
            # The reference: no token, no rate limit; the version from the query or the header.
            await docs.serve(scope, send, asked_version, headers)
            return
        try:
            if not scope["path"].startswith("/"):
                # ``OPTIONS *`` / ``GET *``: the server passes the target as it came.
                raise BadRequest("The request target must be a path starting with /")
            if not token_value:
                raise Unauthorized()
            if self.tokens.db.inline_reads:
                self.tokens.check_sqlite()  # no coroutine on the hot path
            else:
                await self.tokens.check()
            found, resolved = self.tokens.cached(token_value)
            if not found:
                resolved = await self.tokens.resolve(token_value)
            if resolved is None:
                raise Unauthorized()
            token, store = resolved
            # The request line names the store of a refusal from here on (a 403, 429 or 426;
            # found by an audit: an operator filtering by store did not see its 429s).
            scope[STORE_KEY] = store.id
            if asked_version is None and store.default_api_version in self.versions:
                # Its 403 or 429 names the version the store's default would serve (found by an
                # audit: they named the fallback, 2021-01, for a store of 2021-11).
                served = store.default_api_version
            if not store.installed:
                raise Forbidden("The store is not installed")
            own_limit = token.rate_limit or store.rate_limit
            rule = self._limit(own_limit) if own_limit else None
            if self.buckets.shared:  # one round trip to Redis (ratelimit_redis.py)
                allowed, used, burst, wait = await self.buckets.take_shared(token.id, rule)  # type: ignore[attr-defined]
            else:  # no coroutine on the hot path
                allowed, used, burst, wait = self.buckets.take(token.id, rule)
            headers.append((b"x-service-limit", f"{used}/{burst}".encode()))
            if not allowed:
                raise RateLimited(headers={"Retry-After": str(wait)})
            version_name = asked_version or store.default_api_version
            if version_name not in self.versions:
                raise VersionInvalid(f"Invalid API version: {version_name}. Use one of {', '.join(self.versions)}")
            served = version_name
        except ServiceError as exc:
            headers.append((b"x-service-version", served.encode()))
            await send_error(send, exc, headers)
            return
        except Exception as exc:
            if not unavailable(exc):
                raise
            # The token's look-up met a database that is away: 503, as the dispatcher answers.
            logger.warning("database unavailable while resolving a token: %s", exc.__class__.__name__)
            headers.append((b"x-service-version", served.encode()))
            await send_error(send, DatabaseUnavailable(), headers)
            return
        headers.append((b"x-service-version", served.encode()))
        scope["rebill"] = RequestContext(store, token, self.versions[served], headers)
        if length is None or length > MAX_BODY_BYTES:
            # No length (a chunked body) or too long a one; a body within its declared length
            # is held to it by the server and needs no counting.
            receive = _bounded_receive(receive, length)
        await self.app(scope, receive, send)

