"""PostgreSQL reads on the event loop: async connections kept open across requests.

A ``GET`` handler runs in a greenlet over one of these (``AsyncConnection.run_sync``, api/routing.py),
so a read waiting for PostgreSQL holds no thread. Taking a connection from SQLAlchemy's pool and
giving it back cost two greenlet hops and the pool's bookkeeping per request, about as much as
the read's own statement (docs/performance.md): the lanes keep up to ``size`` connections open
and hand them out from a plain list. Reads run in autocommit, so a connection has no
transaction to end between two requests.

Connections belong to the event loop that opened them. The server's shutdown closes them on
that loop (``close``, from the ASGI lifespan, api/routing.py). A new loop that finds another's
(a test's client after another's, without a shutdown between) starts with no lane; the old
loop's connections are closed on that loop while it runs (a read of it giving one back
included), else from the new one. The engine has no pool of its own (``NullPool``): a pool
would count the old loop's connections as checked out for ever.

When PostgreSQL goes away, the request that meets it answers 503 (errors.DatabaseUnavailable)
and every idle lane is dropped with its broken connection; the next request connects again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

logger = logging.getLogger(__name__)

# How long a read waits for a lane when every one is busy before it answers 503 (as the
# thread pool's engine waits for a pooled connection).
WAIT_SECONDS = 30.0


class ReadLanes:
    def __init__(self, engine: AsyncEngine, size: int, *, broken: Any) -> None:
        """``broken(exc)`` says whether an exception means the connection is gone
        (db/engine.py ``unavailable``)."""
        self.engine = engine
        self.size = size
        self._broken = broken
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[AsyncConnection] = []
        self._open = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closing: set[asyncio.Future[None]] = set()  # closes under way, held till done

    async def run_sync(self, fn: Any, *args: Any) -> Any:
        """``fn(connection, *args)`` in a greenlet over a lane (``AsyncConnection.run_sync``):
        the read path's one call per request, without an async generator's cost."""
        conn = await self._take()
        try:
            result = await conn.run_sync(fn, *args)
        except BaseException as exc:
            await self._after_failure(conn, exc)
            raise
        self._give_back(conn)
        return result

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        conn = await self._take()
        try:
            yield conn
        except BaseException as exc:
            await self._after_failure(conn, exc)
            raise
        else:
            self._give_back(conn)

    async def _after_failure(self, conn: AsyncConnection, exc: BaseException) -> None:
        if self._broken(exc) or conn.invalidated:
            await self._drop(conn)
        elif not isinstance(exc, Exception):
            # Cancelled (the server shutting down): a statement may be half sent or its
            # rows half read, and the next read would find the connection busy.
            await self._drop(conn, only=True)
        else:
            self._give_back(conn)

    async def _take(self) -> AsyncConnection:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Another event loop's connections do not serve this one (see the module's note):
            # the idle ones are closed on their loop if it still runs, else from here.
            stale, old = self._idle, self._loop
            self._loop, self._idle, self._open, self._waiting = loop, [], 0, deque()
            if old is not None and old.is_running():
                # Its loop still runs in another thread (two test clients): closed there.
                asyncio.run_coroutine_threadsafe(self._close_all(stale), old)
            else:
                await self._close_all(stale)
        while True:
            if self._idle:
                return self._idle.pop()
            if self._open < self.size:
                self._open += 1
                try:
                    return await self.engine.connect()
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            waiter = loop.create_future()
            self._waiting.append(waiter)
            try:
                await asyncio.wait_for(waiter, WAIT_SECONDS)
            except asyncio.TimeoutError:
                raise SQLAlchemyTimeout(f"no PostgreSQL read connection free within {WAIT_SECONDS:g} s") from None
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)

    def _give_back(self, conn: AsyncConnection) -> None:
        if asyncio.get_running_loop() is not self._loop:
            # Taken on a loop that has since been replaced, which is this one: closed on it.
            # Left to the collector, SQLAlchemy would find it checked out and warn.
            closing = asyncio.ensure_future(self._close(conn, invalidate=False))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            return
        self._idle.append(conn)
        self._wake()

    async def _drop(self, conn: AsyncConnection, *, only: bool = False) -> None:
        """The connection is broken, and so, most likely, is every idle one (a restart of the
        server): all are closed (``only``: just this one), and the next requests connect again."""
        if asyncio.get_running_loop() is not self._loop:
            return
        dropped = [conn]
        if not only:
            dropped, self._idle = [conn, *self._idle], []
        self._open -= len(dropped)
        self._wake()
        for each in dropped:
            await self._close(each, invalidate=True)

    @classmethod
    async def _close_all(cls, conns: list[AsyncConnection]) -> None:
        for conn in conns:
            await cls._close(conn, invalidate=False)

    @staticmethod
    async def _close(conn: AsyncConnection, *, invalidate: bool) -> None:
        try:
            if invalidate:
                await conn.invalidate()
            await conn.close()
        except Exception:  # noqa: BLE001 - the connection is gone either way
            logger.debug("closing a read connection failed", exc_info=True)

    async def close(self) -> None:
        """Closes the idle connections, from the loop that opened them (its end: the
        server's shutdown). Reads still running keep theirs and give them back as usual."""
        if self._loop is not asyncio.get_running_loop():
            return
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn in idle:
            await self._close(conn, invalidate=False)

    def abandon(self) -> None:
        """The lanes are done with (``Database.dispose``) and their loop may be gone, so nothing
        can be awaited on it: each idle connection is detached from SQLAlchemy's bookkeeping,
        its socket left to close with it. Left checked out, the collector made SQLAlchemy warn
        of a connection it found unreturned (CI's SAWarning, after a test client whose loop
        had ended)."""
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn in idle:
            try:
                conn.sync_connection.connection.detach()  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - already closed or invalidated: nothing to detach
                logger.debug("detaching a read connection failed", exc_info=True)

    def _wake(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # The figures of ``rebill_db_pool_*`` (observability/metrics.py), as a pool's.

    def checkedout(self) -> int:
        return self._open - len(self._idle)

    def checkedin(self) -> int:
        return len(self._idle)
