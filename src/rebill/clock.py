"""The one source of business time. Nothing else calls ``datetime.now()``.

Services receive a :class:`Clock`; tests use :class:`FrozenClock` and move it. Times are
timezone-aware UTC with whole seconds, because no API output carries fractions (decisions §2.4).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc).replace(microsecond=0)


class FrozenClock:
    """A clock that only moves when told to; safe to share between threads."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = (start or datetime(2026, 1, 15, 12, 0, 0, tzinfo=timezone.utc)).replace(microsecond=0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime) -> None:
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        with self._lock:
            self._now = when.astimezone(timezone.utc).replace(microsecond=0)

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        with self._lock:
            self._now += delta if delta is not None else timedelta(**kwargs)
            return self._now
