"""How a delivery crosses the network: a small interface (design guide, side effects behind
interfaces) and its implementation on aiohttp, the asyncio HTTP client (docs/dependencies.md:
measured five times the rate of httpx on this machine, which the 1,000 deliveries a second of
issue 14 need).

One attempt is one POST of the stored body with the delivery's headers; a 2xx answered within
5 seconds (the whole exchange) succeeds (decisions §8.4). Only the first bytes of an answer
are read and kept for the log; redirects are not followed (a receiver that moved answers 3xx,
which counts as a failure the log shows).

A store whose webhooks may not reach non-public networks (rules.private_allowed) is sent
through a session whose resolver keeps only the public addresses a name resolves to, so the
connection goes where the check looked (a name that answers a public address to a check and a
private one to the connection, DNS rebinding, gets nowhere); an IP in the address itself never
reaches a resolver and is checked here. Such an attempt fails like a refused connection."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver

from .delivery import EXCERPT, Outcome
from .retries import TIMEOUT_SECONDS
from .rules import is_public


class Sender(Protocol):
    async def send(self, address: str, body: bytes, headers: dict[str, str], started_at: datetime, *,
                   public_only: bool = False) -> Outcome: ...

    async def close(self) -> None: ...


def _text(text: str) -> str:
    """Text either database keeps: PostgreSQL's text holds no NUL (found by an audit: a receiver
    answering one made its attempt impossible to record, the delivery and the batch recorded with
    it went out again for ever); it becomes U+FFFD, as bytes that are no UTF-8 do."""
    return text.replace("\x00", "\ufffd")


def _excerpt(raw: bytes) -> str | None:
    return _text(raw[:EXCERPT].decode("utf-8", errors="replace")) if raw else None


class NotPublic(OSError):
    """The address is, or resolves only to, loopback, private or reserved networks."""

    def __init__(self, host: str) -> None:
        super().__init__(f"{host} is not a public address, and this store's webhooks may only reach public ones")


def _error(exc: BaseException, timeout: float) -> str:
    if isinstance(getattr(exc, "os_error", None), NotPublic):  # aiohttp wraps the resolver's refusal
        exc = exc.os_error  # type: ignore[attr-defined]
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {timeout:g} seconds"
    text = str(exc) or type(exc).__name__
    return _text(f"{type(exc).__name__}: {text}"[:EXCERPT])


class PublicResolver(AbstractResolver):
    """aiohttp's resolver, keeping only the public addresses of a name."""

    def __init__(self) -> None:
        self._inner = aiohttp.DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        found = [r for r in await self._inner.resolve(host, port, family) if is_public(r["host"])]
        if not found:
            raise NotPublic(host)
        return found

    async def close(self) -> None:
        await self._inner.close()


def _names_private_ip(address: str) -> bool:
    host = urlsplit(address).hostname or ""
    try:
        return not is_public(host)
    except ValueError:
        return False  # a name: the resolver's to check


class HttpSender:
    """One client session per process for the stores that may reach any address and one for
    those that may reach public ones only, their connections kept alive per receiver. A
    session is made on first use, inside the event loop that will run it."""

    def __init__(self, *, timeout: float = TIMEOUT_SECONDS, connections: int = 256) -> None:
        self.timeout = timeout
        self.connections = connections
        self._sessions: dict[bool, aiohttp.ClientSession] = {}  # public_only -> its session

    def _client(self, public_only: bool) -> aiohttp.ClientSession:
        session = self._sessions.get(public_only)
        if session is None or session.closed:
            resolver = PublicResolver() if public_only else None
            session = self._sessions[public_only] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connections, ttl_dns_cache=60, resolver=resolver),
                # NOTE: decisions §8.4, 2xx "within 5 seconds": aiohttp rounds a timeout of at
                # least `ceil_threshold` (5 s by default) up to the loop's next whole second,
                # which let answers of up to 6 s succeed; above the timeout, it keeps it exact.
                timeout=aiohttp.ClientTimeout(total=self.timeout, ceil_threshold=self.timeout + 1),
                # The answer's first bytes are kept as they come: ask for them uncompressed
                # (aiohttp would otherwise offer gzip, and keep the compressed bytes).
                headers={"User-Agent": "Rebill-Webhooks/1", "Accept-Encoding": "identity"},
                auto_decompress=False)
        return session

    async def send(self, address: str, body: bytes, headers: dict[str, str], started_at: datetime, *,
                   public_only: bool = False) -> Outcome:
        began = time.perf_counter()
        try:
            if public_only and _names_private_ip(address):
                raise NotPublic(urlsplit(address).hostname or "")
            async with self._client(public_only).post(address, data=body, allow_redirects=False,
                                                      headers={**headers, "Content-Type": "application/json"}) as answer:
                raw = await answer.content.read(EXCERPT)
                status = answer.status
        except Exception as exc:  # noqa: BLE001 - every way an attempt fails is a failed attempt
            return Outcome(started_at, None, _ms(began), None, _error(exc, self.timeout))
        return Outcome(started_at, status, _ms(began), _excerpt(raw), None)

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


def _ms(began: float) -> int:
    return int((time.perf_counter() - began) * 1000)
