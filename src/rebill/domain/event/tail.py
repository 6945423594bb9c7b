"""Following the event log as it grows (`rebill events tail`, issue 14): every store's events
by id, filtered by store and by a shell-style glob of the topic.

Ids are not always committed in their order: on PostgreSQL a transaction that took id 41
may commit after the one that took 42 (events are written at the end of their unit, and the
fan-out to webhooks still runs between their INSERT and the COMMIT). Reading only past the
highest id seen would skip 41 for good, so the ids skipped over are asked again for
``GRACE`` seconds; most are ids of rolled-back transactions that never come. SQLite has one
writer at a time and never leaves such a hole behind a committed id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from fnmatch import fnmatch

from sqlalchemy import Connection, func, or_, select

from rebill.models import events

from . import repository
from .model import Event

GRACE = 10.0
# Rows read per look; a full batch means more are waiting, read at once rather than after a pause.
BATCH = 1000
# The ids skipped over that are asked again at most: beyond it (a burst of rollbacks) the oldest go.
MOST_GAPS = 1000


def newest_id(conn: Connection) -> int:
    """The highest event id of every store (0 with none): a tail starts after it."""
    return conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar() or 0


class Follower:
    """Where a tail is: the highest id read and the lower ids not seen yet."""

    def __init__(self, after: int = 0, *, store_id: int | None = None, topic: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.last = after
        self.store_id, self.topic = store_id, topic
        self.caught_up = False
        self._gaps: dict[int, float] = {}  # id -> until when it is asked again
        self._monotonic = monotonic

    def wants(self, store_id: int, topic: str) -> bool:
        return ((self.store_id is None or store_id == self.store_id)
                and (self.topic is None or fnmatch(topic, self.topic)))

    def poll(self, conn: Connection) -> list[Event]:
        """The events committed since the last look that pass the filters, in id order. The
        look reads narrow rows of every store (ids are shared by all stores, so a hole can
        only be told by looking at all of them); only the events shown are read whole."""
        seen = or_(events.c.id > self.last, events.c.id.in_(sorted(self._gaps))) if self._gaps else events.c.id > self.last
        heads = conn.execute(select(events.c.id, events.c.store_id, events.c.topic).where(seen)
                             .order_by(events.c.id).limit(BATCH)).all()
        self.caught_up = len(heads) < BATCH
        self._move([head.id for head in heads])
        wanted = [head.id for head in heads if self.wants(head.store_id, head.topic)]
        return repository.by_ids(conn, wanted)

    def _move(self, ids: list[int]) -> None:
        now = self._monotonic()
        for found in ids:
            self._gaps.pop(found, None)
        top = max(ids, default=self.last)
        if top > self.last:
            got = set(ids)
            # Only the newest MOST_GAPS holes can matter: the range may span a long rollback.
            for hole in range(max(self.last + 1, top - MOST_GAPS), top):
                if hole not in got:
                    self._gaps[hole] = now + GRACE
            self.last = top
        self._gaps = {hole: until for hole, until in self._gaps.items() if until > now}
        if len(self._gaps) > MOST_GAPS:
            self._gaps = dict(sorted(self._gaps.items())[-MOST_GAPS:])


def follow(read: Callable[[], AbstractContextManager[Connection]], follower: Follower, *, once: bool = False,
           every: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> Iterator[Event]:
    """The events as they come, looking every ``every`` seconds (each look its own short read,
    so a tail never holds a snapshot or a lock); ``once`` stops when it has caught up."""
    while True:
        with read() as conn:
            found = follower.poll(conn)
        yield from found
        if not follower.caught_up:
            continue
        if once:
            return
        sleep(every)
