"""Whether an operator changed a store or a token since this process last looked (issue 14):
a clock advance, a rate or secret change, a revoked token, made by another process (the
command line while `rebill serve` runs) or by this one. Triggers bump the one row of
`revisions` on every change to `stores` or `tokens` (migration 0012); the edge asks before
every request and drops its cached tokens and stores when the number moved, so the very next
request sees the change.

- SQLite: ``PRAGMA data_version`` on the event loop's read connection changes only when
  another connection committed; the revision row is read only then (a read-only load never
  reads it). The number is the connection's own and starts afresh on a new connection, so a
  replaced read connection is always read. One look answers the requests that one pass of the
  event loop starts (``_hold_for_this_pass``).
- PostgreSQL: one query on an asyncpg connection of its own, shared by the requests that
  arrive while it runs (each request waits for a look that started after it arrived: never a
  stale answer, and never one query per request under load). The requests wait on one future
  per look, not in turn on a lock (a fifth of a read's time under load, docs/performance.md).
  The connection and the futures belong to the event loop they were made in: another loop (a
  test client without its ``with`` block) gets its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout

from rebill.db.engine import Database, asyncpg_connection

REVISION = "SELECT value FROM revisions WHERE id = 1"


# A look that takes longer fails its requests as a database away would (503 where a read
# follows): the revision is one row, and a request cancelled meanwhile ends only when its look
# does (``_Look``).
LOOK_SECONDS = 5.0


class _Look(asyncio.Future):  # type: ignore[type-arg]
    """A look's answer, awaited by every request that waits for it. A request that goes away
    (cancelled) must not cancel the others' look: refusing ``cancel`` leaves its task to be
    cancelled when the look answers or fails (asyncio's rule for a future that will not
    cancel), without ``asyncio.shield``'s extra future for every request."""

    def cancel(self, msg: object = None) -> bool:
        return False


class Freshness:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.revision: int | None = None
        self._data_version: int | None = None
        self._raw: Any = None  # the connection _data_version was read on
        self._held: Any = None  # the event loop's read connection, and its driver connection
        self._held_raw: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: asyncio.Future[bool] | None = None  # the look under way
        self._next: asyncio.Future[bool] | None = None  # the look after it, if anyone waits for one
        self._told: asyncio.Future[bool] | None = None  # the last look whose move was told
        self._async_conn: Any = None
        self._pass_of: asyncio.AbstractEventLoop | None = None  # SQLite: the loop whose pass looked

    def moved_sqlite(self) -> bool:
        """SQLite, on the event loop: whether the revision moved since the last look.

        Asked on the loop writer's connection once it has one: `data_version` stays the same
        for a connection's own commits, so this process's request writes cost no read of the
        revision (other connections' commits, another process's or a job thread's, do)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None  # not on a loop (a direct call): every call looks
        if loop is not None and self._pass_of is loop:
            return False  # told already, to a request of this pass (``_hold_for_this_pass``)
        writer = self.db.loop_writer
        raw = writer.driver_connection if writer is not None else None
        if raw is None:
            held = self.db.read_on_loop()
            if held is not self._held:  # the driver's connection, found once per held connection
                self._held, self._held_raw = held, held.conn.connection.dbapi_connection
            raw = self._held_raw
        try:
            version = raw.execute("PRAGMA data_version").fetchone()[0]
        except Exception:
            self._held = None  # a connection replaced under its holder: find it again next time
            raise
        if loop is not None:
            self._hold_for_this_pass(loop)
        if version == self._data_version and raw is self._raw:
            return False
        self._data_version, self._raw = version, raw
        row = raw.execute(REVISION).fetchone()
        return self._take(row[0] if row else 0)

    def _hold_for_this_pass(self, loop: asyncio.AbstractEventLoop) -> None:
        """The look answers every request that starts in the same pass of the event loop. Each
        of them arrived before the look: a request's task is made when its bytes are read (an
        I/O callback of this pass, or of an earlier one) and starts on a later callback, while a
        request read after the look starts in a later pass, behind ``_next_pass``, which was
        queued first. So none is told less than a look begun after it arrived would tell it
        (the rule of ``moved_postgres`` too), and under load one ``PRAGMA data_version`` serves
        the requests a pass starts together: it was a quarter of a cached read's time.

        The hold names its loop: another loop's requests (a test client without its ``with``
        block runs each request on a loop of its own) look for themselves, even when a loop
        closed before it ran ``_next_pass``."""
        self._pass_of = loop
        loop.call_soon(self._next_pass)

    def _next_pass(self) -> None:
        self._pass_of = None  # at worst one look too many, never one too few

    async def moved_postgres(self) -> bool:
        """Waits for a look that began after this request arrived: the one it starts when none
        is under way, else the next one, which starts as the current one ends and answers every
        request that arrived meanwhile. True for the first request told of a move (its caller
        drops the caches before any other resumes), False for the rest."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # asyncpg's connection and the futures belong to the loop they were made in.
            self._loop, self._running, self._next = loop, None, None
            self._drop_connection()
        if self._running is None:
            look = self._running = _Look(loop=loop)
            loop.create_task(self._look(look))
        else:
            if self._next is None:
                self._next = _Look(loop=loop)
            look = self._next
        moved = await look
        if moved and self._told is not look:
            self._told = look
            return True
        return False

    async def _look(self, look: asyncio.Future[bool]) -> None:
        try:
            try:
                async with asyncio.timeout(LOOK_SECONDS):
                    value = await self._read_postgres()
            except TimeoutError:
                self._drop_connection()  # a statement may be under way on it
                raise SQLAlchemyTimeout(f"no answer to the revision look within {LOOK_SECONDS:g} s") from None
            look.set_result(self._take(value))
        except Exception as exc:  # noqa: BLE001 - every request waiting on it meets it
            look.set_exception(exc)
            look.exception()  # retrieved: no "never retrieved" log when every waiter went away
        finally:
            if self._running is look:  # not replaced by another loop's meanwhile
                self._running, self._next = self._next, None
                if self._running is not None:
                    asyncio.get_running_loop().create_task(self._look(self._running))

    async def moved(self) -> bool:
        if self.db.inline_reads:
            return self.moved_sqlite()
        return await self.moved_postgres()

    def _take(self, value: int) -> bool:
        moved = self.revision is not None and value != self.revision
        self.revision = value
        return moved

    async def _read_postgres(self) -> int:
        # On asyncpg, as the reads are (db/read_lanes.py): a quarter of psycopg's async
        # connection's cost per look (docs/performance.md, "Reads").
        import asyncpg

        for attempt in (1, 2):
            try:
                if self._async_conn is None or self._async_conn.is_closed():
                    target, args = asyncpg_connection(self.db.engine.url)
                    url = target.set(drivername="postgresql").render_as_string(hide_password=False)
                    self._async_conn = await asyncpg.connect(url, **args)
                value = await self._async_conn.fetchval(REVISION)
                return int(value) if value is not None else 0
            except (OSError, asyncpg.exceptions.InterfaceError, asyncpg.exceptions.InternalClientError,
                    asyncpg.exceptions.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError):
                self._drop_connection()  # the server went away: connect again, once
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _drop_connection(self) -> None:
        gone, self._async_conn = self._async_conn, None
        if gone is not None:
            try:
                gone.terminate()  # no round trip: its server or its loop may be gone
            except Exception:  # noqa: BLE001 - a loop already closed: nothing left to release
                pass

    async def close(self) -> None:
        if self._async_conn is None:
            return
        if self._loop is not asyncio.get_running_loop():
            self._drop_connection()
            return
        conn, self._async_conn = self._async_conn, None
        await conn.close()
