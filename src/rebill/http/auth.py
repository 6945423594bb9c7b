"""Token resolution with an in-process cache, so a request normally costs no query for
authentication. The cache is dropped whenever a store or a token changed anywhere
(``freshness.py``): a revoked token, an uninstalled store, a moved test clock are seen at the
next request. ``ttl`` bounds how long an entry lives besides."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from rebill.db.engine import Database, unavailable
from rebill.domain.store import repository
from rebill.domain.store.model import Store, Token

from .freshness import Freshness

Resolved = tuple[Token, Store]
logger = logging.getLogger("rebill")
# Rebill's tokens are 46 characters (`rb_` and 43); a longer value is no token of any store,
# answered 401 without a look-up and kept out of the cache (found by an audit: 9,500 random 60 KB
# tokens held 550 MB of a process in the cache of unknown tokens, and each cost a query).
MAX_TOKEN_LENGTH = 128


class TokenResolver:
    def __init__(self, db: Database, *, ttl: float, monotonic: Callable[[], float] = time.monotonic,
                 max_entries: int = 10_000) -> None:
        self.db, self.ttl, self.monotonic, self.max_entries = db, ttl, monotonic, max_entries
        self._cache: dict[str, tuple[float, Resolved | None]] = {}
        # Counts the drops: a look-up that was under way when the cache was dropped may have
        # read the token before the change, and is not kept.
        self._drops = 0
        self._quiet_until = 0.0  # the next outage line (_unsure)
        self.freshness = Freshness(db)

    def check_sqlite(self) -> None:
        """``check`` on SQLite, without a coroutine: the edge calls it on every request."""
        try:
            moved = self.freshness.moved_sqlite()
        except Exception as exc:  # noqa: BLE001 - unsure is stale: read from the database this time
            self._unsure(exc)
            moved = True
        if moved:
            self._drop()

    async def check(self) -> None:
        """Drops the cache when a store or token changed since the last request (any process)."""
        if self.db.inline_reads:
            self.check_sqlite()
            return
        try:
            moved = await self.freshness.moved_postgres()
        except Exception as exc:  # noqa: BLE001 - unsure is stale: read from the database this time
            self._unsure(exc)
            moved = True
        if moved:
            self._drop()

    def _unsure(self, exc: Exception) -> None:
        """Logs a failed look at the revision: a database that is away is said once in ten
        seconds, in a line (every request of an outage meets it); anything else in full."""
        if not unavailable(exc):
            logger.warning("could not read the revision of stores and tokens", exc_info=exc)
            return
        now = self.monotonic()
        if now >= self._quiet_until:
            self._quiet_until = now + 10.0
            logger.warning("could not read the revision of stores and tokens: the database is unavailable (%s)",
                           exc.__class__.__name__)

    def _drop(self) -> None:
        self._cache.clear()
        self._drops += 1

    def _lookup(self, raw: str) -> Resolved | None:
        with self.db.read() as conn:
            return repository.token_by_raw(conn, raw)

    def cached(self, raw: str) -> tuple[bool, Resolved | None]:
        """(found, resolved) from the cache alone: the common case needs no coroutine."""
        if len(raw) > MAX_TOKEN_LENGTH:
            return True, None
        hit = self._cache.get(raw)
        if hit is not None and hit[0] > self.monotonic():
            return True, hit[1]
        return False, None

    async def resolve(self, raw: str) -> Resolved | None:
        found, resolved = self.cached(raw)
        if found:
            return resolved
        now, drops = self.monotonic(), self._drops
        resolved = await run_in_threadpool(self._lookup, raw)
        if drops != self._drops:
            return resolved  # answers the request that asked, from before the drop: not kept
        if len(self._cache) >= self.max_entries:
            self._cache.clear()
        self._cache[raw] = (now + self.ttl, resolved)
        return resolved
