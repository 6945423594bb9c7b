"""Leaky bucket per token (decisions §9.1): ``burst`` deep, leaking ``per_second``.

Buckets live in the process. Several processes each keep their own, so an operator
running N processes behind one address multiplies the rate by N (docs/operations.md), unless
``REBILL_REDIS_URL`` shares them (ratelimit_redis.py, which falls back to these).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rebill.settings import RateLimit


class LeakyBuckets:
    # Whether the edge must await ``take_shared`` (ratelimit_redis.py) instead of ``take``.
    shared = False

    def __init__(self, default: RateLimit, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.default = default
        self.monotonic = monotonic
        self._levels: dict[int, tuple[float, float]] = {}  # token id -> (level, at)

    def take(self, token_id: int, limit: RateLimit | None = None) -> tuple[bool, int, int, int]:
        """Add one request; returns (allowed, used, burst, seconds until there is room)."""
        rule = limit or self.default
        now = self.monotonic()
        last = self._levels.get(token_id)
        level = 0.0
        if last is not None:
            level = last[0] - (now - last[1]) * rule.per_second
            if level < 0.0:
                level = 0.0
        if rule.enabled and level + 1 > rule.burst:
            self._levels[token_id] = (level, now)
            wait = math.ceil((level + 1 - rule.burst) / rule.per_second)
            return False, math.ceil(level), rule.burst, max(1, wait)
        # Switched off, the bucket still reports its level, but never above its depth.
        level = level + 1 if rule.enabled else min(level + 1, rule.burst)
        self._levels[token_id] = (level, now)
        return True, math.ceil(level), rule.burst, 0
