"""The HTTP edge as one plain ASGI middleware: request id, authentication, API version and
rate limit, and the headers every response carries (decisions §2.8, §9.1).

Order: 401 (no or unknown token) -> 403 (store not installed) -> 429 (rate limit) -> 426
(bad version). Every request that names a token counts against its bucket.
"""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rebill.api.contract import Version
from rebill.errors import Forbidden, RateLimited, ServiceError, Unauthorized, VersionInvalid
from rebill.settings import RateLimit

from .auth import TokenResolver
from .context import RequestContext
from .ratelimit import LeakyBuckets
from .render import send_error

TOKEN_HEADER = b"x-service-access-token"
VERSION_HEADER = b"x-service-version"


class Edge:
    def __init__(self, app: ASGIApp, *, tokens: TokenResolver, buckets: LeakyBuckets,
                 versions: dict[str, Version], fallback_version: str) -> None:
        self.app, self.tokens, self.buckets = app, tokens, buckets
        self.versions, self.fallback_version = versions, fallback_version
        self._limits: dict[str, RateLimit] = {}

    def _limit(self, text: str | None) -> RateLimit | None:
        if not text:
            return None
        if text not in self._limits:
            self._limits[text] = RateLimit.parse(text)
        return self._limits[text]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token_value = asked_version = None
        for name, value in scope["headers"]:
            if name == TOKEN_HEADER:
                token_value = value.decode("latin-1").strip()
            elif name == VERSION_HEADER:
                asked_version = value.decode("latin-1").strip()
        headers: list[tuple[bytes, bytes]] = [(b"x-request-id", os.urandom(16).hex().encode())]
        served = asked_version if asked_version in self.versions else self.fallback_version
        try:
            if not token_value:
                raise Unauthorized()
            resolved = await self.tokens.resolve(token_value)
            if resolved is None:
                raise Unauthorized()
            token, store = resolved
            if not store.installed:
                raise Forbidden("The store is not installed")
            allowed, used, burst, wait = self.buckets.take(token.id, self._limit(token.rate_limit or store.rate_limit))
            headers.append((b"x-service-limit", f"{used}/{burst}".encode()))
            if not allowed:
                raise RateLimited(headers={"Retry-After": str(wait)})
            version_name = asked_version or store.default_api_version
            if version_name not in self.versions:
                raise VersionInvalid(f"Invalid API version: {version_name}. Use one of {', '.join(self.versions)}")
            served = version_name
        except ServiceError as exc:
            headers.append((b"x-service-version", served.encode()))
            await send_error(_with_headers(send, headers), exc)
            return
        headers.append((b"x-service-version", served.encode()))
        scope["rebill"] = RequestContext(headers[0][1].decode(), store, token, self.versions[served])
        await self.app(scope, receive, _with_headers(send, headers))


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def sender(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)
    return sender

