"""A sandbox store's test clock (decisions §6.11, §6.12): its "now" is the real time plus an
offset that only grows. Every "today" of the store (due charges, retries, capture windows,
the 90 days) follows it; other stores keep the real time, and so do the 5-second
regeneration window and idempotency keys, which are about real waiting.

The offset travels with the store row, which the token cache keeps; an advance made by this
process is seen here at once (``_advanced``), and other processes see it at their next
request, when the revision of stores has moved (http/freshness.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from .model import Store

# The latest offset this process wrote, by store (id and secret: one process may serve two
# databases, as the test suite does, where ids repeat).
_advanced: dict[tuple[int, str], int] = {}


def _key(store: Store) -> tuple[int, str]:
    return store.id, store.client_secret


def offset(store: Store) -> timedelta:
    if not store.sandbox:
        return timedelta(0)
    return timedelta(seconds=max(store.clock_offset_seconds, _advanced.get(_key(store), 0)))


def clock_for(store: Store, real_now: Callable[[], datetime]) -> Callable[[], datetime]:
    """The store's clock: the real one itself for every store that never moved its clock."""
    if not store.sandbox or not (store.clock_offset_seconds or _key(store) in _advanced):
        return real_now
    return lambda: real_now() + offset(store)


def moved(store: Store, seconds: int) -> None:
    _advanced[_key(store)] = max(seconds, _advanced.get(_key(store), 0))
