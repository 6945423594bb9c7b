"""How a delivery crosses the network: a small interface (design guide, side effects behind
interfaces) and its implementation on aiohttp, the asyncio HTTP client (docs/dependencies.md:
measured five times the rate of httpx on this machine, which the 1,000 deliveries a second of
issue 14 need).

One attempt is one POST of the stored body with the delivery's headers; a 2xx answered within
5 seconds (the whole exchange) succeeds (decisions §8.4). Only the first bytes of an answer
are read and kept for the log; redirects are not followed (a receiver that moved answers 3xx,
which counts as a failure the log shows)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Protocol

import aiohttp

from .delivery import EXCERPT, Outcome
from .retries import TIMEOUT_SECONDS


class Sender(Protocol):
    async def send(self, address: str, body: bytes, headers: dict[str, str], started_at: datetime) -> Outcome: ...

    async def close(self) -> None: ...


def _excerpt(raw: bytes) -> str | None:
    return raw[:EXCERPT].decode("utf-8", errors="replace") if raw else None


def _error(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {timeout:g} seconds"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:EXCERPT]


class HttpSender:
    """One client session per process, its connections kept alive per receiver. The session
    is made on first use, inside the event loop that will run it."""

    def __init__(self, *, timeout: float = TIMEOUT_SECONDS, connections: int = 256) -> None:
        self.timeout = timeout
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connections, ttl_dns_cache=60),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"User-Agent": "Rebill-Webhooks/1"}, auto_decompress=False)
        return self._session

    async def send(self, address: str, body: bytes, headers: dict[str, str], started_at: datetime) -> Outcome:
        began = time.perf_counter()
        try:
            async with self._client().post(address, data=body, allow_redirects=False,
                                           headers={**headers, "Content-Type": "application/json"}) as answer:
                raw = await answer.content.read(EXCERPT)
                status = answer.status
        except Exception as exc:  # noqa: BLE001 - every way an attempt fails is a failed attempt
            return Outcome(started_at, None, _ms(began), None, _error(exc, self.timeout))
        return Outcome(started_at, status, _ms(began), _excerpt(raw), None)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _ms(began: float) -> int:
    return int((time.perf_counter() - began) * 1000)
