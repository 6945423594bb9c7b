"""The leaky bucket of decisions §9.1 shared by every process through Redis (issue 18).

One Lua script per request does the whole leak-then-add on the server, so two processes can
never both read a level and both write their own plus one (no read-modify-write). The time is
Redis's own (``TIME``): the processes' monotonic clocks are not comparable, the server's is one
clock for all of them. A bucket's key expires once it would have drained, so idle tokens leave
nothing behind.

Redis down keeps the API serving (docs/operations.md, "Redis"): the first failure is logged,
the process falls back to its own buckets (the per-process limit of ``LeakyBuckets``) and
tries Redis again only after ``RETRY_SECONDS``, so an outage costs one failed attempt per
process per retry, not a timeout per request. The recovery is logged too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError, ResponseError

from rebill.settings import RateLimit, shown_url

from .ratelimit import LeakyBuckets

logger = logging.getLogger("rebill.redis")

# Seconds between two attempts to reach Redis while it is down.
RETRY_SECONDS = 1.0
# Seconds a connect or a reply may take: Redis on the local network answers in well under a
# millisecond, and a request must not hang on a Redis that accepts but never answers.
TIMEOUT_SECONDS = 0.25

# KEYS[1] the bucket; ARGV burst, per_second, enabled ("1"/"0"). Returns {allowed, used, wait}
# with the arithmetic of LeakyBuckets.take (integers: Lua numbers returned to Redis truncate).
LEAK_AND_ADD = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local enabled = ARGV[3] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'level', 'at')
local level = 0
if state[1] then
  level = tonumber(state[1]) - (now - tonumber(state[2])) * rate
  if level < 0 then level = 0 end
end
local allowed = 1
local wait = 0
if enabled and level + 1 > burst then
  allowed = 0
  wait = math.max(1, math.ceil((level + 1 - burst) / rate))
elseif enabled then
  level = level + 1
else
  level = math.min(level + 1, burst)
end
redis.call('HSET', KEYS[1], 'level', string.format('%.17g', level), 'at', string.format('%.17g', now))
-- Drained after burst / rate seconds; at most ten years, written as an integer (a huge
-- number would print as 1e+15, which PEXPIRE refuses).
local ttl = math.min(math.ceil(burst / rate * 1000) + 1000, 315360000000)
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return {allowed, math.ceil(level), wait}
"""


def client_name(prefix: str) -> str:
    """The connection's name in Redis: the key prefix and the process id (a name has no spaces)."""
    return "".join(c if c.isprintable() and not c.isspace() else "_" for c in f"{prefix}{os.getpid()}")


class SharedBuckets(LeakyBuckets):
    """``take_shared`` asks Redis; the inherited ``take`` is the per-process fallback."""

    shared = True

    def __init__(self, default: RateLimit, url: str, prefix: str = "rebill:",
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__(default, monotonic)
        self.url, self.prefix = url, prefix
        self._client: Any = None
        self._script: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._down_until: float | None = None  # monotonic time of the next attempt while down
        self._busy = False  # a round trip under way on this loop
        self._waiting: list[tuple[str, list[Any], asyncio.Future[Any]]] = []

    def _connected(self) -> Any:
        # A client's connections belong to the event loop they were made in: another loop (a
        # test client without its `with` block) gets a client of its own.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = aioredis.Redis.from_url(
                self.url, socket_connect_timeout=TIMEOUT_SECONDS, socket_timeout=TIMEOUT_SECONDS,
                # No retries inside the client: a failure falls back at once (module docstring).
                retry=Retry(NoBackoff(), 0),
                # `CLIENT LIST` tells an operator which process holds which connection.
                client_name=client_name(self.prefix))
            self._script = self._client.register_script(LEAK_AND_ADD)
            self._loop = loop
            self._busy, self._waiting = False, []
        return self._script

    @property
    def down(self) -> bool:
        return self._down_until is not None

    async def take_shared(self, token_id: int, limit: RateLimit | None = None) -> tuple[bool, int, int, int]:
        rule = limit or self.default
        if self._down_until is not None and time.monotonic() < self._down_until:
            return self.take(token_id, limit)
        try:
            allowed, used, wait = await self._run(f"{self.prefix}bucket:{token_id}",
                                                  [rule.burst, repr(float(rule.per_second)),
                                                   "1" if rule.enabled else "0"])
        except (RedisError, OSError) as exc:
            if self._down_until is None:
                # A refusal of the script (a Redis that forbids EVAL, a full memory) is not an
                # outage: said as what it is, so that an operator does not look for a network fault.
                what = "refuses the rate limit's script" if isinstance(exc, ResponseError) else "does not answer"
                logger.warning("Redis at %s %s (%s): rate limits are per process until it answers",
                               shown_url(self.url), what, exc)
            self._down_until = time.monotonic() + RETRY_SECONDS
            return self.take(token_id, limit)
        if self._down_until is not None:
            logger.warning("Redis at %s answers again: rate limits are shared", shown_url(self.url))
            self._down_until = None
        return bool(allowed), int(used), rule.burst, int(wait)

    async def _run(self, key: str, args: list[Any]) -> Any:
        """The script for one request. Requests that arrive while a round trip is under way go
        together in the next one, a pipeline of one script each (each still atomic, none waiting
        for another's answer): under load a process makes one round trip per batch instead of one
        per request (docs/performance.md, "The rate limit through Redis")."""
        script = self._connected()
        if self._busy:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiting.append((key, args, future))
            return await future
        self._busy = True
        try:
            return await script(keys=[key], args=args)
        finally:
            if self._waiting:
                asyncio.get_running_loop().create_task(self._drain())  # busy until drained
            else:
                self._busy = False

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    results = await self._pipeline([(key, args) for key, args, _ in batch])
                except Exception as exc:  # the connection: every request of the batch falls back
                    results = [exc] * len(batch)
                for (_, _, future), result in zip(batch, results):
                    if future.done():
                        continue  # its request went away (a client that hung up)
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._busy = False

    async def _pipeline(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        """EVALSHA for each call in one round trip; a Redis that lost its scripts (restarted)
        gets the script again, and only the calls it refused are sent again (the others ran)."""
        results: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in (1, 2):
            pipe = self._client.pipeline(transaction=False)
            for i in todo:
                key, args = calls[i]
                pipe.evalsha(self._script.sha, 1, key, *args)
            answers = await pipe.execute(raise_on_error=False)
            for i, answer in zip(todo, answers):
                results[i] = answer
            todo = [i for i in todo if isinstance(results[i], NoScriptError)]
            if not todo or attempt == 2:
                break
            await self._client.script_load(LEAK_AND_ADD)
        return results

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.aclose()
            except (RedisError, OSError, RuntimeError):
                pass  # a client of a loop already closed: nothing left to release
