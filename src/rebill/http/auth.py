"""Token resolution with a short in-process cache, so a request normally costs no query
for authentication. Revocations and uninstalls take effect within ``ttl`` seconds."""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from rebill.db.engine import Database
from rebill.domain.store import repository
from rebill.domain.store.model import Store, Token

Resolved = tuple[Token, Store]


class TokenResolver:
    def __init__(self, db: Database, *, ttl: float, monotonic: Callable[[], float] = time.monotonic,
                 max_entries: int = 10_000) -> None:
        self.db, self.ttl, self.monotonic, self.max_entries = db, ttl, monotonic, max_entries
        self._cache: dict[str, tuple[float, Resolved | None]] = {}

    def _lookup(self, raw: str) -> Resolved | None:
        with self.db.read() as conn:
            return repository.token_by_raw(conn, raw)

    async def resolve(self, raw: str) -> Resolved | None:
        now = self.monotonic()
        hit = self._cache.get(raw)
        if hit is not None and hit[0] > now:
            return hit[1]
        resolved = await run_in_threadpool(self._lookup, raw)
        if len(self._cache) >= self.max_entries:
            self._cache.clear()
        self._cache[raw] = (now + self.ttl, resolved)
        return resolved
