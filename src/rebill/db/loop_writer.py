"""SQLite writes on the event loop, committed together (group commit).

A request's write in WAL mode takes tens of microseconds of SQLite's time, and its COMMIT
(the WAL frames of every page it touched) about as much again. Two costs used to dominate:
handing the write to a worker thread (about 70 µs of the loop's time per request) and one
COMMIT per request. Here the write runs on the loop thread itself, and every write that
starts while a transaction is open joins it, each inside its own SAVEPOINT; the transaction
commits once, at the loop's next turn, and only then do those requests answer. A request
that fails rolls back to its savepoint and leaves the others alone. Nobody is told "done"
before the COMMIT that makes it so (docs/performance.md, docs/operations.md).

The loop never blocks on a lock: the process's writer lock is taken only when free and
SQLite's with a zero busy timeout. When either is held (a background job of this process,
another process), ``WriterBusy`` tells the dispatcher to try the request again a little
later (api/routing.py). Sending such requests to worker threads instead would be
self-sustaining: each would hold the lock in turn, and every request arriving meanwhile
would find it held and join them, at thread speed, for as long as the load lasts.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from typing import Any

from sqlalchemy import Connection, Engine


class WriterBusy(Exception):
    """The write lock is taken: this write must wait, off the event loop."""


def _is_busy(exc: BaseException) -> bool:
    original = getattr(exc, "orig", exc)
    return isinstance(original, sqlite3.OperationalError) and (
        getattr(original, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
        or "locked" in str(original))


class WriterLock:
    """The process's SQLite writer lock. Worker threads (background jobs, the rare request
    that waited too long on the loop) block on it; the loop only takes it when it is free
    and no thread is waiting, so that a steady stream of requests cannot starve a job."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self._waiting = 0

    def __enter__(self) -> None:
        with self._count:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._count:
                self._waiting -= 1

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def try_acquire(self) -> bool:
        return not self._waiting and self._lock.acquire(blocking=False)

    def release(self) -> None:
        self._lock.release()


class LoopWriter:
    """One held connection whose open transaction collects the loop's writes."""

    def __init__(self, engine: Engine, lock: WriterLock) -> None:
        self._engine = engine
        self._lock = lock  # the process's writer lock (Database.write takes it too)
        self._conn: Connection | None = None
        self._raw: Any = None
        self._open = False  # a transaction is open and its COMMIT is scheduled
        self._waiting: list[asyncio.Future[None]] = []  # requests answered by that COMMIT
        # When a request last found the lock taken (monotonic): a background job that writes
        # in a loop leaves the lock free a moment after its transaction when this is recent.
        self.refused_at = 0.0

    def open(self) -> "_Savepoint":
        """Join the open transaction, or open one; the caller's block is one savepoint."""
        if not self._open:
            self._begin()
        self._raw.execute("SAVEPOINT request")
        return _Savepoint(self)

    @property
    def driver_connection(self) -> Any:
        """The driver's connection the loop's writes go through (None until the first write)."""
        return self._raw

    def committed(self) -> asyncio.Future[None]:
        """Resolves when the transaction holding this request's write has committed."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return future

    def _begin(self) -> None:
        if not self._lock.try_acquire():
            self.refused_at = time.monotonic()
            raise WriterBusy()
        try:
            conn = self._conn
            if conn is None or conn.closed:
                conn = self._engine.connect().execution_options(rebill_write=True)
                self._raw = conn.connection.dbapi_connection
                self._raw.execute("PRAGMA busy_timeout=0")  # never wait on the loop
                self._conn = conn
            conn.begin()  # BEGIN IMMEDIATE (engine.py), or SQLITE_BUSY at once
        except Exception as exc:
            self._lock.release()
            if _is_busy(exc):
                self.refused_at = time.monotonic()
                raise WriterBusy() from None
            raise
        # The COMMIT runs once the requests now on the loop have had their turn.
        asyncio.get_running_loop().call_soon(self._commit)
        self._open = True

    def _commit(self) -> None:
        waiting, self._waiting, self._open = self._waiting, [], False
        error: BaseException | None = None
        try:
            self._conn.commit()  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - every waiting request hears of it
            error = exc
            try:
                self._conn.rollback()  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - the connection is gone; the next write reconnects
                self._conn = None
        finally:
            self._lock.release()
        for future in waiting:
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _Savepoint:
    """One request's part of the open transaction: released on success, rolled back on error."""

    __slots__ = ("_writer",)

    def __init__(self, writer: LoopWriter) -> None:
        self._writer = writer

    def __enter__(self) -> Connection:
        return self._writer._conn  # type: ignore[return-value]

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        raw = self._writer._raw
        if exc_type is not None:
            raw.execute("ROLLBACK TO request")
        raw.execute("RELEASE request")
