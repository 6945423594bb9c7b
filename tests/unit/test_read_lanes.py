"""db/read_lanes.py: which connections a read gives back after it failed. A connection goes back
only when it is known to be idle; the rest are closed so that the next read connects again
(issue 18, "Faults": a 500 in CI came from a connection handed on in the middle of a failure)."""

from __future__ import annotations

import asyncio
import threading

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from rebill.db.engine import unavailable
from rebill.db.read_lanes import ReadLanes


class _Conn:
    def __init__(self, number: int) -> None:
        self.number = number
        self.invalidated = False
        self.closed = False
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def invalidate(self) -> None:
        self.invalidated = True

    async def close(self) -> None:
        self.closed = True
        self.closed_on = asyncio.get_running_loop()


class _Engine:
    def __init__(self) -> None:
        self.opened: list[_Conn] = []

    async def connect(self) -> _Conn:
        conn = _Conn(len(self.opened))
        self.opened.append(conn)
        return conn


def _lanes(size: int = 4) -> tuple[ReadLanes, _Engine]:
    engine = _Engine()
    return ReadLanes(engine, size, broken=unavailable), engine  # type: ignore[arg-type]


async def _fail_with(lanes: ReadLanes, exc: BaseException) -> _Conn:
    with pytest.raises(type(exc)):
        async with lanes.connection() as conn:
            raise exc
    return conn


def test_a_read_that_refused_its_input_gives_its_connection_back():
    async def scenario():
        lanes, engine = _lanes()
        conn = await _fail_with(lanes, ValueError("a 404, a refused filter"))
        assert not conn.closed and lanes.checkedin() == 1
        async with lanes.connection() as again:
            assert again is conn
        assert len(engine.opened) == 1
    asyncio.run(scenario())


def test_a_cancelled_read_closes_its_connection_and_keeps_the_idle_ones():
    async def scenario():
        lanes, engine = _lanes()
        async with lanes.connection() as idle, lanes.connection() as other:
            pass  # given back inner first: ``idle`` is the next one taken
        busy_then_cancelled = None
        started = asyncio.Event()

        async def read():
            nonlocal busy_then_cancelled
            async with lanes.connection() as conn:
                busy_then_cancelled = conn
                started.set()
                await asyncio.sleep(60)
        task = asyncio.create_task(read())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Its statement may have been half sent: the connection is closed, not handed on.
        assert busy_then_cancelled is idle  # it took the idle one...
        assert idle.closed and idle.invalidated
        # A cancellation says nothing of the server: the other connection stays.
        assert not other.closed
        assert lanes.checkedout() == 0 and lanes.checkedin() == 1
        async with lanes.connection() as next_one:
            assert next_one is other
        assert len(engine.opened) == 2
    asyncio.run(scenario())


def test_a_connection_in_a_broken_state_is_an_outage_and_drops_every_idle_one():
    async def scenario():
        lanes, engine = _lanes()
        async with lanes.connection() as first, lanes.connection() as second:
            pass
        assert lanes.checkedin() == 2
        adapted = Exception("cannot switch to state 12; another operation (2) is in progress")
        adapted.__cause__ = asyncpg.exceptions.InternalClientError(str(adapted))
        failed = await _fail_with(lanes, DBAPIError("SELECT 1", {}, adapted))
        assert failed.closed
        assert first.closed and second.closed  # the idle one went with it: a restart
        assert lanes.checkedin() == 0 and lanes.checkedout() == 0
    asyncio.run(scenario())


def test_closing_at_the_loops_end_closes_the_idle_connections_on_that_loop_only():
    lanes, engine = _lanes()

    async def first_loop():
        async with lanes.connection(), lanes.connection():
            pass
        assert lanes.checkedin() == 2

    async def shutdown():
        await lanes.close()

    asyncio.run(first_loop())
    asyncio.run(shutdown())  # another loop's shutdown: not its connections to close
    assert lanes.checkedin() == 2 and not any(conn.closed for conn in engine.opened)

    async def serve_then_shut_down():
        async with lanes.connection():
            pass  # a new loop: the old idle ones are left, one is opened here
        await lanes.close()
    asyncio.run(serve_then_shut_down())
    assert engine.opened[-1].closed and not engine.opened[-1].invalidated
    assert lanes.checkedin() == 0 and lanes.checkedout() == 0


def test_two_running_loops_close_each_others_connections_on_the_loop_that_opened_them():
    """Two clients at once (a test's second client beside the session's): a read of the first
    loop gives back its connection after the second loop took the lanes over, and the second
    finds the first's idle ones. Each is closed on its own loop, never left to the garbage
    collector (SQLAlchemy warned of a connection collected checked out, CI's SAWarning)."""
    lanes, engine = _lanes()
    first = asyncio.new_event_loop()
    thread = threading.Thread(target=first.run_forever, daemon=True)
    thread.start()
    try:
        held = threading.Event()
        release = threading.Event()

        async def long_read():
            async with lanes.connection():
                held.set()
                await asyncio.get_running_loop().run_in_executor(None, release.wait)

        async def short_read():
            async with lanes.connection():
                pass

        async def two_reads():
            async with lanes.connection(), lanes.connection():
                pass

        asyncio.run_coroutine_threadsafe(two_reads(), first).result()  # two idle on the first loop
        reading = asyncio.run_coroutine_threadsafe(long_read(), first)
        held.wait(5)
        second = asyncio.new_event_loop()
        second.run_until_complete(short_read())  # takes the lanes over
        release.set()
        reading.result(5)
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), first).result()
        *of_first, opened_by_second = engine.opened
        assert len(of_first) == 2 and all(conn.closed_on is first for conn in of_first)
        assert not opened_by_second.closed and lanes.checkedin() == 1
        second.close()
    finally:
        first.call_soon_threadsafe(first.stop)
        thread.join(5)
        first.close()


def test_a_disposed_database_leaves_no_read_connection_checked_out_for_the_collector(database):
    """A test client's loop ended with a read connection idle in the lanes, then the database
    was disposed: the collector found the connection checked out and SQLAlchemy warned (CI's
    SAWarning, at whichever test ran next). Disposing detaches the idle ones."""
    if database.dialect != "postgresql":
        pytest.skip("PostgreSQL's read lanes")
    import gc
    import warnings

    from sqlalchemy import text
    from sqlalchemy.exc import SAWarning

    from rebill.db.engine import Database

    db = Database.from_url(database.engine.url.render_as_string(hide_password=False))
    lanes = db.async_reads
    assert lanes is not None

    async def read(lanes: ReadLanes) -> None:
        async with lanes.connection() as conn:
            await conn.execute(text("SELECT 1"))

    loop = asyncio.new_event_loop()
    loop.run_until_complete(read(lanes))
    loop.close()
    assert lanes.checkedin() == 1
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        db.dispose()
        assert lanes.checkedin() == 0
        del lanes
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, SAWarning)]
