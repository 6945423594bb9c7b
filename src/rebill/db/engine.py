"""Engines for SQLite (embedded, WAL, foreign keys) and PostgreSQL (psycopg 3, pooled).

Transactions: the request or job owns them (design guide). ``write()`` opens one that takes
SQLite's write lock up front (``BEGIN IMMEDIATE``) so two writers never deadlock on a lock
upgrade; on PostgreSQL it is an ordinary READ COMMITTED transaction. ``read()`` opens a plain
transaction on SQLite (one snapshot for every statement of the read) and runs in autocommit
on PostgreSQL, where READ COMMITTED gives each statement its own snapshot anyway.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import psycopg
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from .loop_writer import LoopWriter, WriterLock
from .read_lanes import ReadLanes

# Read connections a PostgreSQL API process keeps open on its event loop (db/read_lanes.py):
# as many as it has reads in flight under load (wrk's 16 connections, a proxy's pool).
READ_LANES = 16

# JSON columns go through msgspec (several times faster than the json module on list pages).
_json_encoder = msgspec.json.Encoder(decimal_format="string")
JSON_OPTIONS = {
    "json_serializer": lambda value: _json_encoder.encode(value).decode(),
    "json_deserializer": msgspec.json.decode,
}


# PostgreSQL's deadlock_detected and serialization_failure: the database rolled the whole
# transaction back, so running it again is safe (api/routing.py does, for plain handlers).
RETRYABLE_STATES = frozenset({"40P01", "40001"})


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transaction the database gave up on for a concurrent one's sake."""
    return getattr(getattr(exc, "orig", None), "sqlstate", None) in RETRYABLE_STATES


# Connection exceptions (class 08), the server shutting down or starting (57P01-57P03), and a
# session it ended for idling inside a transaction (25P03, ``idle_transaction_seconds`` below).
_GONE_CLASSES = ("08", "57P01", "57P02", "57P03", "25P03")


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database could not be reached or dropped the connection (a
    restart, a failover, a pool with no connection free in time), as opposed to a statement
    it refused. The request answers 503 with Retry-After (errors.DatabaseUnavailable); the
    dead connections are thrown away, so the next request reconnects."""
    if isinstance(exc, SQLAlchemyTimeout):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig or exc
    # The driver's own error: SQLAlchemy's asyncpg adapter carries asyncpg's as its cause.
    for each in (exc, exc.__cause__):
        if each is None:
            continue
        sqlstate = getattr(each, "sqlstate", None)
        if sqlstate is not None:
            return str(sqlstate).startswith(_GONE_CLASSES)
        # Refused, reset or closed: neither driver gives these a SQLSTATE. asyncpg's
        # InterfaceError is its "the underlying connection is closed". Its InternalClientError
        # ("cannot switch to state 12; another operation (2) is in progress") is a connection
        # whose server said FATAL (a shutdown) and whose socket's end had not yet been read
        # when a read took it: the connection is as gone as a closed one.
        if isinstance(each, (psycopg.OperationalError, asyncpg.exceptions.InterfaceError,
                             asyncpg.exceptions.InternalClientError, ConnectionError)):
            return True
    # SQLite's busy timeout ran out: another process held the write lock for 30 s.
    return isinstance(exc, sqlite3.OperationalError) and "database is locked" in str(exc)


# Seconds to make a PostgreSQL connection (psycopg's connect_timeout, at least 2; asyncpg's
# timeout).
CONNECT_SECONDS = 5


def asyncpg_connection(url: URL) -> tuple[URL, dict[str, Any]]:
    """The URL (no query) and connect arguments of an asyncpg connection to the database of
    ``url``, a libpq one. asyncpg takes none of libpq's client parameters (found by a review:
    `keepalives_idle` or `sslmode` in REBILL_DATABASE_URL made every read a 500, and a
    `connect_timeout` went to the server as a setting it does not know): `sslmode` becomes its
    `ssl`, `connect_timeout` its `timeout` (0, libpq's "no limit": asyncpg's default),
    `application_name` a server setting; the rest (keepalives, `options`...) are the writes'."""
    def value(name: str) -> str | None:
        found = url.query.get(name)
        return found[-1] if isinstance(found, tuple) else found
    args: dict[str, Any] = {}
    try:
        seconds = float(value("connect_timeout") or CONNECT_SECONDS)
    except ValueError:
        seconds = CONNECT_SECONDS
    if seconds > 0:
        args["timeout"] = seconds
    if value("sslmode"):
        args["ssl"] = value("sslmode")
    if value("application_name"):
        args["server_settings"] = {"application_name": value("application_name")}
    return url.set(drivername="postgresql+asyncpg", query={}), args


class FolderUnusable(Exception):
    """The SQLite database's folder cannot be made (the command line says so in one line)."""


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and pick the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def make_engine(url: str, *, echo: bool = False, idle_transaction_seconds: float = 0) -> Engine:
    """``idle_transaction_seconds`` (PostgreSQL; 0: none): the server ends a session that sat
    that long inside a transaction without a statement, and so frees its row locks. Rebill
    never waits on anything but the database inside a transaction (gateway calls and webhook
    sends are outside them), so such a session belongs to a frozen process (SIGSTOP, a machine
    paused): without it, a worker frozen mid batch chunk stalled every other worker that
    reached one of its rows, for as long as it stayed frozen."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, echo=echo)
    # A server that takes the connection and never answers (a frozen machine, a proxy whose
    # backend hung) held the start and every request for good (found by an audit): a connection
    # not made in this long fails as the database away (503). The URL's own value stands.
    connect_args: dict[str, Any] = {} if "connect_timeout" in parsed.query else {"connect_timeout": CONNECT_SECONDS}
    if idle_transaction_seconds > 0:
        # PostgreSQL takes at most 2^31 - 1 ms (24 days); the settings allow a year.
        timeout_ms = min(max(1, round(idle_transaction_seconds * 1000)), 2**31 - 1)
        # Added to the URL's own `options` (a search_path...), which connect_args would replace
        # (found by a review).
        own = parsed.query.get("options")
        own = " ".join(own) if isinstance(own, tuple) else own
        connect_args["options"] = " ".join(filter(None, [own, f"-c idle_in_transaction_session_timeout={timeout_ms}"]))
    # No pre-ping: it costs a round trip per checkout. A connection that dropped fails its
    # first statement, SQLAlchemy invalidates it and the pool replaces it.
    return create_engine(url, echo=echo, pool_size=20, max_overflow=10, pool_recycle=1800, connect_args=connect_args,
                         **JSON_OPTIONS)


# Migrations drop columns with plain ALTER TABLE ... DROP COLUMN (docs/operations.md).
SQLITE_MINIMUM = (3, 35, 0)


def _sqlite_engine(url: str, *, echo: bool) -> Engine:
    if sqlite3.sqlite_version_info < SQLITE_MINIMUM:
        raise RuntimeError(f"Rebill needs SQLite {'.'.join(map(str, SQLITE_MINIMUM))} or newer; "
                           f"Python's sqlite3 module uses SQLite {sqlite3.sqlite_version}")
    database = make_url(url).database
    if database and database != ":memory:":
        folder = Path(database).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # read-only, not ours, a file in the way (found by an audit: a traceback)
            raise FolderUnusable(f"cannot use the database's folder {folder}: {exc.strerror or exc}") from None
    engine = create_engine(
        url,
        echo=echo,
        # The driver's own transaction handling is switched off; we emit BEGIN ourselves.
        connect_args={"check_same_thread": False, "isolation_level": None, "timeout": 30},
        pool_size=20,
        max_overflow=10,
        # Every unit of work ends in COMMIT or ROLLBACK itself; no reset needed on check-in.
        pool_reset_on_return=None,
        **JSON_OPTIONS,
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        # The loop writer's savepoint per request (db/loop_writer.py) keeps its sub-journal in
        # temporary storage: in a file, that cost 55-80 µs of kernel time a create
        # (docs/performance.md, "SQLite writes against the floor"). It holds one request's
        # changed pages, a few KiB.
        cursor.execute("PRAGMA temp_store=MEMORY")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("rebill_write", False)
        # Straight to the driver: this runs on every request and needs no SQLAlchemy machinery.
        conn.connection.dbapi_connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


class Database:
    """The engine plus the two ways to open a unit of work."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        # SQLite reads run on the event loop: an in-process read takes microseconds and, in
        # WAL mode, never waits for a writer, so a thread hop would cost more than the query.
        # PostgreSQL reads cross the network and run in worker threads like all its writes.
        self.inline_reads = self.dialect == "sqlite"
        self._writer = WriterLock() if self.dialect == "sqlite" else None
        self._loop_read: HeldRead | None = None
        # SQLite writes of requests run on the loop too, committed together (loop_writer.py).
        self.loop_writer = LoopWriter(engine, self._writer) if self._writer is not None else None
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT") if self.dialect == "postgresql" \
            else None
        self._async_reads: ReadLanes | None = None

    @property
    def async_reads(self) -> ReadLanes | None:
        """PostgreSQL: the connections of the API's reads, on asyncpg, so that a read waiting
        for its rows holds no worker thread and leaves the event loop free (issue 18). The
        handlers stay plain functions: ``AsyncConnection.run_sync`` runs one in a greenlet whose
        every round trip is awaited on the loop (api/routing.py). Autocommit, as ``read()``.
        Made on first use; None on SQLite, whose reads are on the loop already.

        asyncpg rather than psycopg's async connection, which the rest of Rebill uses: for the
        same statement it costs a third of the CPU (35 against 102 µs a read, docs/performance.md),
        and a read's CPU is what bounds the reads a process serves. The statements are compiled
        for each driver (db/prepared.py keys them by driver), and every test of the suite runs
        its reads through it on PostgreSQL."""
        if self._autocommit is None:
            return None
        if self._async_reads is None:
            # No pool under the lanes: they keep their connections themselves (db/read_lanes.py).
            url, connect_args = asyncpg_connection(self.engine.url)
            engine = create_async_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool,
                                         connect_args=connect_args, **JSON_OPTIONS)
            self._async_reads = ReadLanes(engine, READ_LANES, broken=unavailable)
        return self._async_reads

    async def close_loop_reads(self) -> None:
        """The event loop of the reads ends (the server's lifespan): its idle read connections
        are closed on it. Left open, they could only be dropped from the next loop, where
        closing them fails, and the garbage collector found them checked out."""
        if self._async_reads is not None:
            await self._async_reads.close()

    def engines(self) -> tuple[Engine, ...]:
        """Every engine made so far (PostgreSQL's reads get one on first use): for statement
        listeners."""
        reads = self._async_reads
        return (self.engine,) if reads is None else (self.engine, reads.engine.sync_engine)

    def pool_figures(self) -> tuple[int, int, int]:
        """(connections kept at most, in use, open and idle) of every pool of this process:
        the thread pool's engine and, on PostgreSQL once used, the read lanes."""
        pool = self.engine.pool
        size = getattr(pool, "size", None)
        kept, out, idle = (size(), pool.checkedout(), pool.checkedin()) if size is not None else (0, 0, 0)  # type: ignore[attr-defined]
        lanes = self._async_reads
        if lanes is not None:
            kept, out, idle = kept + lanes.size, out + lanes.checkedout(), idle + lanes.checkedin()
        return kept, out, idle

    @classmethod
    def from_url(cls, url: str, *, echo: bool = False, idle_transaction_seconds: float = 0) -> "Database":
        return cls(make_engine(url, echo=echo, idle_transaction_seconds=idle_transaction_seconds))

    @contextmanager
    def read(self) -> Iterator[Connection]:
        if self._autocommit is not None:
            # PostgreSQL reads run in autocommit: at READ COMMITTED every statement takes its
            # own snapshot inside a transaction too, so BEGIN and ROLLBACK would add two
            # round trips and no consistency. SQLite keeps its transaction: there it is what
            # gives a list and its includes one snapshot.
            with self._autocommit.connect() as conn:
                yield conn
            return
        with self.engine.connect() as conn:
            with conn.begin():
                yield conn

    def read_on_loop(self) -> HeldRead:
        """A read on the event-loop thread (SQLite only). That thread runs one request at
        a time, so it keeps one connection instead of checking one out per request."""
        loop = self._loop_read
        if loop is None or loop.conn.closed:
            loop = self._loop_read = HeldRead(self.engine.connect())
        return loop

    @contextmanager
    def write(self) -> Iterator[Connection]:
        if self._writer is not None:
            # SQLite has one writer at a time. Writers of this process queue on a lock of
            # their own instead of on SQLite's, whose busy handler sleeps in steps of up to
            # 100 ms: with 16 connections writing, those sleeps cost most of a write's time
            # (docs/performance.md). Other processes still meet SQLite's lock and its timeout.
            with self._writer:
                with self.engine.connect() as conn:
                    conn = conn.execution_options(rebill_write=True)
                    with conn.begin():
                        yield conn
            return
        with self.engine.connect() as conn:
            conn = conn.execution_options(rebill_write=True)
            with conn.begin():
                yield conn

    def analyze(self, *tables: str) -> None:
        """PostgreSQL: refresh the planner's statistics of ``tables`` now. After a bulk load
        (an import, a regeneration of every charge) the statistics say the tables are nearly
        empty until autovacuum comes round, and the planner then scans whole tables for
        single-row look-ups (docs/operations.md). SQLite keeps no statistics unless asked and
        its queries are written not to need them: nothing to do."""
        if self.dialect != "postgresql":
            return
        with self._autocommit.connect() as conn:  # type: ignore[union-attr]
            for table in tables:
                conn.exec_driver_sql(f'ANALYZE "{table}"')

    def dispose(self) -> None:
        if self._async_reads is not None:
            # Its connections belong to an event loop that may be gone: detached and dropped,
            # not closed (the server closes the sockets as the process ends).
            self._async_reads.abandon()
            self._async_reads.engine.sync_engine.dispose(close=False)
            self._async_reads = None
        if self.loop_writer is not None:
            self.loop_writer.close()
        if self._loop_read is not None:
            self._loop_read.conn.close()
            self._loop_read = None
        self.engine.dispose()


class HeldRead:
    """A read on a connection held across requests: the context of ``Database.read_on_loop``
    (SQLite) and of a PostgreSQL read on the event loop (``Call.held``, db/read_lanes.py); a
    class rather than a generator context manager because every such read goes through it.

    No transaction up front: a lone prepared read is one statement, a consistent snapshot
    by itself. Statements through SQLAlchemy autobegin one, ended here; a read has nothing
    to keep, so ROLLBACK ends the snapshot as well as COMMIT would."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __enter__(self) -> Connection:
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        if self.conn.in_transaction():
            self.conn.rollback()
