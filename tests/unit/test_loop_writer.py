"""SQLite writes on the event loop, committed in groups (db/loop_writer.py): what a group
shares, what one failing request keeps to itself, and that the loop never waits on a lock."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest
from sqlalchemy import text

from rebill.db.engine import Database
from rebill.db.loop_writer import WriterBusy


@pytest.fixture
def db(tmp_path):
    database = Database.from_url(f"sqlite:///{tmp_path / 'w.db'}")
    with database.write() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)"))
    yield database
    database.dispose()


def _rows(db: Database) -> list[str]:
    """What another connection sees: committed rows only."""
    raw = sqlite3.connect(db.engine.url.database)
    try:
        return [r[0] for r in raw.execute("SELECT v FROM t ORDER BY id")]
    finally:
        raw.close()


def _insert(db: Database, value: str) -> None:
    with db.loop_writer.open() as conn:
        conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": value})


def test_writes_of_one_loop_turn_share_one_commit_and_wait_for_it(db):
    commits = []
    original = db.loop_writer._commit

    def counting() -> None:
        commits.append(_rows(db))  # what others saw just before the COMMIT
        original()
    db.loop_writer._commit = counting

    async def main() -> None:
        for value in ("a", "b", "c"):
            _insert(db, value)
        waits = [db.loop_writer.committed() for _ in range(3)]
        assert _rows(db) == []  # nothing is visible, nor answered, before the COMMIT
        await asyncio.gather(*waits)
        assert _rows(db) == ["a", "b", "c"]
        _insert(db, "d")  # a later turn opens the next group
        await db.loop_writer.committed()

    asyncio.run(main())
    assert commits == [[], ["a", "b", "c"]]
    assert _rows(db) == ["a", "b", "c", "d"]


def test_a_failing_request_rolls_back_its_own_part_and_not_the_group(db):
    async def main() -> None:
        _insert(db, "kept")
        with pytest.raises(Exception, match="UNIQUE"):
            with db.loop_writer.open() as conn:
                conn.execute(text("INSERT INTO t (v) VALUES ('mine')"))
                conn.execute(text("INSERT INTO t (v) VALUES ('kept')"))  # fails: the whole request goes
        _insert(db, "after")
        await db.loop_writer.committed()

    asyncio.run(main())
    assert _rows(db) == ["kept", "after"]


def test_the_loop_never_waits_for_a_lock_another_writer_holds(db):
    async def busy_while(holding, then: str) -> None:
        with holding:
            with pytest.raises(WriterBusy):
                db.loop_writer.open()
        _insert(db, then)
        await db.loop_writer.committed()

    # A background job of this process (a worker thread) holds the writer lock.
    asyncio.run(busy_while(db.write(), "after the job"))
    # Another process holds SQLite's own lock: refused at once, not after the busy timeout.
    other = sqlite3.connect(db.engine.url.database, isolation_level=None)

    class OtherProcess:
        def __enter__(self) -> None:
            other.execute("BEGIN IMMEDIATE")

        def __exit__(self, *exc: object) -> None:
            other.execute("COMMIT")
    asyncio.run(busy_while(OtherProcess(), "after the process"))
    other.close()
    assert _rows(db) == ["after the job", "after the process"]


def test_a_thread_waiting_for_the_lock_goes_before_the_loop(db):
    lock, go = db._writer, threading.Event()

    def job() -> None:
        with lock:
            go.wait(5)
    lock._lock.acquire()  # a request's group holds it
    worker = threading.Thread(target=job)
    worker.start()
    while not lock._waiting:  # the job queues behind the group
        threading.Event().wait(0.001)
    lock.release()  # the group commits
    # Whether the job has woken yet or not, the loop does not take the lock from it.
    assert not lock.try_acquire()
    go.set()
    worker.join(5)
    assert lock.try_acquire()
    lock.release()


def test_a_failed_commit_reaches_every_request_of_the_group_and_frees_the_lock(db, monkeypatch):
    async def main() -> None:
        _insert(db, "lost-1")
        _insert(db, "lost-2")
        conn = db.loop_writer._conn

        def failing_commit() -> None:
            raise sqlite3.OperationalError("disk I/O error")
        monkeypatch.setattr(conn, "commit", failing_commit)
        waits = [db.loop_writer.committed(), db.loop_writer.committed()]
        results = await asyncio.gather(*waits, return_exceptions=True)
        assert all(isinstance(r, sqlite3.OperationalError) for r in results)
        monkeypatch.undo()
        _insert(db, "next")
        await db.loop_writer.committed()

    asyncio.run(main())
    assert _rows(db) == ["next"]
