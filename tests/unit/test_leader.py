"""Which process runs the background jobs (jobs/leader.py, issue 18): the jobs lock is held by
one process at a time and passes on when its holder goes; the workers mark tells API processes
that workers run the jobs; on PostgreSQL a holder whose connection broke has lost the lock.
Each test has a database of its own: the locks belong to a database, and the suite's shared
one may have an app of another test holding them."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.clock import FrozenClock
from rebill.db.engine import Database
from rebill.jobs import scheduler
from rebill.jobs.leader import FileLocks, PostgresLocks, locks_for
from rebill.settings import RateLimit, Settings
from tests.conftest import fresh_database_url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path):
    with fresh_database_url(request.param, tmp_path) as url:
        database = Database.from_url(url)
        yield database
        database.dispose()


def test_one_process_holds_the_jobs_lock_and_another_takes_it_when_it_goes(db):
    first, second = locks_for(db, "serve"), locks_for(db, "serve")
    try:
        assert first.lead() is True
        assert second.lead() is False
        assert first.lead() is True  # kept, not taken twice
        first.close()
        assert second.lead() is True
        assert first.lead() is False
    finally:
        first.close()
        second.close()


def test_the_workers_mark_is_seen_while_a_worker_holds_it_and_shared_between_workers(db):
    api, one, two = locks_for(db, "serve"), locks_for(db, "worker"), locks_for(db, "worker")
    try:
        assert api.workers_alive() is False
        assert one.mark_worker() is True and two.mark_worker() is True  # shared: both hold it
        assert api.workers_alive() is True
        one.close()
        assert api.workers_alive() is True
        two.close()
        assert api.workers_alive() is False
        # The look takes the mark for an instant only: a worker marks itself right after.
        assert one.mark_worker() is True and api.workers_alive() is True
    finally:
        for locks in (api, one, two):
            locks.close()


def test_on_sqlite_the_locks_are_files_beside_the_database(tmp_path):
    db = Database.from_url(f"sqlite:///{tmp_path / 'shop.db'}")
    try:
        locks = locks_for(db, "serve")
        assert isinstance(locks, FileLocks)
        assert locks.lead() and locks.workers_alive() is False
        assert {p.name for p in tmp_path.iterdir()} >= {"shop.db-jobs.lock", "shop.db-workers.lock"}
        locks.close()
    finally:
        db.dispose()


def test_on_postgresql_a_leader_whose_connection_broke_has_lost_the_lock(tmp_path):
    with fresh_database_url("postgresql", tmp_path) as url:
        db = Database.from_url(url)
        first, second = locks_for(db, "serve"), locks_for(db, "serve")
        try:
            assert isinstance(first, PostgresLocks) and first.lead()
            # The lock's session is named for its process, for an operator's look.
            with psycopg.connect(url, autocommit=True) as admin:
                [(pid, name)] = admin.execute(
                    "SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE 'rebill serve %' "
                    "AND datname = current_database()"  # other servers on the machine have theirs
                ).fetchall()
                assert second.lead() is False
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            deadline = time.monotonic() + 10
            while not second.lead():
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert first.lead() is False  # its session is gone: it reconnects and finds the lock taken
            second.close()
            assert first.lead() is True
        finally:
            first.close()
            second.close()
            db.dispose()


def test_on_postgresql_a_leader_that_stops_asking_loses_the_lock_after_the_idle_setting(tmp_path):
    """A frozen leader (SIGSTOP: its session lives on, idle) lets another process lead once
    REBILL_IDLE_TRANSACTION_SECONDS have passed (at least three checks), instead of keeping
    the deployment's jobs for as long as it stays frozen. A live one asks every second."""
    with fresh_database_url("postgresql", tmp_path) as url:
        db = Database.from_url(url)
        frozen, other = locks_for(db, "serve", 0.5), locks_for(db, "serve", 0.5)
        kept, waiting = locks_for(db, "serve", 0), locks_for(db, "serve", 0)
        try:
            assert frozen.lead() and not other.lead()
            for _ in range(4):  # a live leader keeps it: asked every check, well within 3 s
                time.sleep(1.0)
                assert frozen.lead() and not other.lead()
            began = time.monotonic()
            while not other.lead():  # the frozen one no longer asks
                assert time.monotonic() - began < 10
                time.sleep(0.1)
            assert time.monotonic() - began >= 2.9  # three checks' worth, not the 0.5 asked
            assert frozen.lead() is False  # let go: its session is gone, the lock another's
            other.close()
            # Without the setting, a silent holder keeps the lock.
            assert kept.lead() and not waiting.lead()
            time.sleep(3.5)
            assert not waiting.lead() and kept.lead()
        finally:
            for locks in (frozen, other, kept, waiting):
                locks.close()
            db.dispose()


def _settings(**kw):
    return Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                    regenerate_every=0, bill_every=0, purge_every=3600, deliver_webhooks=False, batch_every=0, **kw)


def _migrated(db):
    from rebill.db.migrate import upgrade
    upgrade(db.engine.url.render_as_string(hide_password=False))


def _until(check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_in_auto_mode_one_app_of_two_runs_the_jobs_and_the_other_takes_over_when_it_stops(db, monkeypatch):
    monkeypatch.setattr(scheduler, "CHECK_SECONDS", 0.05)
    _migrated(db)
    clock = FrozenClock()
    first, second = (create_app(_settings(), db=db, clock=clock) for _ in range(2))
    one, two = TestClient(first), TestClient(second)
    one.__enter__()
    try:
        two.__enter__()
        try:
            assert first.scheduler is not None
            time.sleep(0.3)  # several checks of the second
            assert second.scheduler is None and first.scheduler is not None
            one.__exit__(None, None, None)  # the first process stops: its lock goes with it
            assert first.scheduler is None
            _until(lambda: second.scheduler is not None)
        finally:
            two.__exit__(None, None, None)
    finally:
        one.__exit__(None, None, None)


def test_in_auto_mode_no_app_runs_the_jobs_while_a_worker_holds_the_mark(db, monkeypatch):
    monkeypatch.setattr(scheduler, "CHECK_SECONDS", 0.05)
    _migrated(db)
    app = create_app(_settings(), db=db, clock=FrozenClock())
    worker = locks_for(db, "worker")
    try:
        with TestClient(app):
            assert app.scheduler is not None
            worker.mark_worker()
            _until(lambda: app.scheduler is None)  # it steps down at its next check
            worker.close()
            _until(lambda: app.scheduler is not None)  # and runs them again once the worker is gone
    finally:
        worker.close()


@pytest.mark.parametrize("mode, runs", [("on", True), ("off", False)])
def test_on_and_off_need_no_lock(db, mode, runs):
    holder = locks_for(db, "serve")
    try:
        assert holder.lead()  # another process leads: `on` runs anyway, `off` never
        _migrated(db)
        app = create_app(_settings(background_jobs=mode), db=db, clock=FrozenClock())
        with TestClient(app):
            assert (app.scheduler is not None) is runs
    finally:
        holder.close()
