"""The unit of work a service runs in: one connection inside one transaction, the store it
acts for, the time of the request, and the event recorder.

Services never commit; the request or job that opened the unit does (design guide).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection

from rebill.db.statements import insert_all, insert_row
from rebill.models import events

from .store.model import Store


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


class Unit:
    __slots__ = ("conn", "store", "_now", "_release")

    def __init__(self, conn: Connection, store: Store, now: datetime | Callable[[], datetime],
                 release: Callable[..., bool | None] | None = None) -> None:
        """``now`` is the time of the request, or the clock to read it from on first use
        (most reads never need it). ``release`` ends the transaction when the unit is used
        as a context manager: it is the ``__exit__`` of whatever opened the connection."""
        self.conn = conn
        self.store = store
        self._now = now
        self._release = release

    def __enter__(self) -> "Unit":
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return None if self._release is None else self._release(*exc)

    @property
    def now(self) -> datetime:
        if callable(self._now):
            self._now = self._now()
        return self._now

    @property
    def today(self) -> date:
        """NOTE: decisions §6.12, a date "has come" at midnight in the store's timezone."""
        return self.now.astimezone(zone(self.store.timezone)).date()

    @property
    def store_id(self) -> int:
        return self.store.id

    def record_many(self, topic: str, resource_ids: list[int], *, with_id: bool = False) -> None:
        """One event per id in one statement (the reconciler writes thousands at a time);
        ``with_id`` stores ``{"id": ...}`` as a ``*/deleted`` event needs."""
        if not resource_ids:
            return
        resource = topic.split("/", 1)[0]
        insert_all(self.conn, events, [
            {"store_id": self.store.id, "topic": topic, "resource": resource, "resource_id": resource_id,
             "data": {"id": resource_id} if with_id else None, "created_at": self.now}
            for resource_id in resource_ids])

    def record(self, topic: str, resource_id: int, data: dict[str, Any] | None = None) -> None:
        """NOTE: decisions §8.1, the event row is written in the change's own transaction."""
        insert_row(self.conn, events, {
            "store_id": self.store.id,
            "topic": topic,
            "resource": topic.split("/", 1)[0],
            "resource_id": resource_id,
            "data": data,
            "created_at": self.now,
        })
