"""Run the deferred regenerations whose 5-second window has passed (decisions §5.3).

Safe to run at any time and from several processes: the rows say what is due, and a replan
of an address whose charges already agree changes nothing."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from starlette.concurrency import run_in_threadpool

from rebill.clock import Clock
from rebill.db.engine import Database
from rebill.domain.schedule import pending
from rebill.domain.schedule.reconcile import replan
from rebill.domain.store import repository as stores
from rebill.domain.unit import Unit

logger = logging.getLogger("rebill.jobs")


def run_due(db: Database, clock: Clock, *, store_id: int | None = None) -> int:
    """Replans every address whose deferred regeneration is due; returns how many."""
    now = clock.now()
    with db.write() as conn:
        due: dict[int, list[int]] = defaultdict(list)
        for owner, address_id in pending.due(conn, now, store_id=store_id):
            due[owner].append(address_id)
        for owner, address_ids in due.items():
            store = stores.get(conn, owner)
            if store is not None:
                replan(Unit(conn, store, now), address_ids)
    return sum(len(ids) for ids in due.values())


class Ticker:
    """ASGI wrapper that runs ``run_due`` every ``every`` seconds while the server lives
    (started and stopped with the lifespan), and passes every other scope on."""

    def __init__(self, app: Any, db: Database, clock: Clock, every: float) -> None:
        self.app, self.db, self.clock, self.every = app, db, clock, every
        self._task: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await run_in_threadpool(run_due, self.db, self.clock)
            except Exception:  # a failed round is retried on the next tick
                logger.exception("deferred regeneration failed")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def watch() -> Any:
            message = await receive()
            if message["type"] == "lifespan.startup" and self._task is None:
                self._task = asyncio.get_running_loop().create_task(self._loop())
            elif message["type"] == "lifespan.shutdown" and self._task is not None:
                self._task.cancel()
                self._task = None
            return message
        await self.app(scope, watch, send)
