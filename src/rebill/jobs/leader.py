"""Which process of a deployment runs the background jobs (issue 18, docs/operations.md,
"Background jobs").

Two marks, both held by the operating system or the database on behalf of a live process, so
that a process that dies (even by SIGKILL) gives them up without running any code:

- the **jobs lock**, exclusive: in ``auto`` mode (``REBILL_BACKGROUND_JOBS``) a process runs the
  jobs only while it holds it, so `rebill serve --workers 4` has one process ticking the
  billing run, not four. The others try again every ``CHECK_SECONDS`` and one takes over
  within that time once the holder is gone;
- the **workers mark**, shared: every `rebill worker` holds it, and an ``auto`` process that
  finds it held runs nothing (the workers do).

On PostgreSQL both are session advisory locks (``pg_try_advisory_lock``,
``pg_advisory_lock_shared``) on a connection of their own, outside the pool, named in
``pg_stat_activity.application_name``; the session ends with its process and PostgreSQL drops
its locks. A holder whose connection breaks (PostgreSQL restarted) has lost the lock: it stops
its jobs and asks again. On SQLite they are ``flock`` locks on two files beside the database
(``rebill.db-jobs.lock``, ``rebill.db-workers.lock``): SQLite serves one machine, and the
kernel drops a dead process's locks.

The locks only keep the work in one place; what keeps it correct is the claims: every job is
safe to run in several processes at once (domain/billing/claim.py, the leases of deliveries and
batches), so a moment with two leaders (a connection cut that PostgreSQL has not noticed yet)
costs some duplicate looks, never a double payment.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from pathlib import Path
from typing import IO, Protocol

import psycopg
from sqlalchemy.engine import make_url

from rebill.db.engine import Database

logger = logging.getLogger("rebill.jobs")

# How often a process that does not lead asks for the jobs lock again, and a leader checks that
# it still holds it and that no worker started meanwhile.
CHECK_SECONDS = 1.0


def _key(name: str) -> int:
    """A fixed signed 64-bit advisory lock key, the same in every process and version."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


LEADER_KEY = _key("rebill.jobs.leader")
WORKERS_KEY = _key("rebill.jobs.workers")


class Locks(Protocol):
    def lead(self) -> bool:
        """Takes or keeps the jobs lock without waiting; whether this process holds it now."""

    def workers_alive(self) -> bool:
        """Whether a `rebill worker` holds the workers mark now."""

    def mark_worker(self) -> bool:
        """Takes or keeps the workers mark (a worker calls it every check); whether it is held."""

    def close(self) -> None:
        """Gives up whatever this process holds."""


def locks_for(db: Database, role: str, idle_seconds: float = 0) -> Locks:
    url = db.engine.url
    if db.dialect == "postgresql":
        plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
        return PostgresLocks(plain, f"rebill {role} {os.getpid()}", idle_seconds)
    return FileLocks(Path(make_url(str(url)).database or ""))


class PostgresLocks:
    """Session advisory locks on a connection of this process's own.

    ``idle_seconds`` (``REBILL_IDLE_TRANSACTION_SECONDS``; 0: none): PostgreSQL ends the lock
    session once it has sent nothing for that long. A live holder asks every
    ``CHECK_SECONDS``; one that stopped asking is frozen (SIGSTOP, a suspended VM), and without
    this its jobs lock kept every other process of an ``auto`` deployment from running the
    jobs for as long as it stayed frozen. Let go, it finds its session gone at its next check,
    stops its jobs and asks again (the moment with two leaders above)."""

    def __init__(self, url: str, name: str, idle_seconds: float = 0) -> None:
        self.url, self.name = url, name[:63]
        self._options = ""
        if idle_seconds > 0:
            idle_ms = min(max(round(idle_seconds * 1000), round(3 * CHECK_SECONDS * 1000)), 2**31 - 1)
            self._options = f"-c idle_session_timeout={idle_ms}"
        self._conn: psycopg.Connection | None = None
        self._leading = self._marked = False
        self._failing = False  # said once per outage, not at every check

    def _connection(self) -> psycopg.Connection:
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5,
                                                application_name=self.name, options=self._options)
            self._leading = self._marked = False  # a new session holds nothing yet
        return conn

    def _ask(self, sql: str, *params: object) -> object:
        """One statement on the lock connection; a broken connection is dropped with whatever
        it held (its session is gone, and its locks with it)."""
        try:
            row = self._connection().execute(sql, params).fetchone()
        except psycopg.Error as exc:
            self._drop()
            if not self._failing:
                logger.warning("background jobs: the lock connection of process %d failed (%s); asking again "
                               "every %g s", os.getpid(), exc, CHECK_SECONDS)
            self._failing = True
            raise
        self._failing = False
        return row[0] if row else None

    def lead(self) -> bool:
        try:
            if self._leading:
                self._ask("SELECT 1")  # the session, and so the lock, is still there
            else:
                self._leading = bool(self._ask("SELECT pg_try_advisory_lock(%s)", LEADER_KEY))
        except psycopg.Error:
            return False
        return self._leading

    def workers_alive(self) -> bool:
        # A transaction-level try in autocommit: taken and given back at once, and refused
        # while any worker holds the mark shared.
        try:
            return not self._ask("SELECT pg_try_advisory_xact_lock(%s)", WORKERS_KEY)
        except psycopg.Error:
            return False  # cannot tell: lead() has failed too, and nothing runs

    def mark_worker(self) -> bool:
        try:
            if self._marked:
                self._ask("SELECT 1")
            else:
                # Waits at most for an API process's instant look (workers_alive).
                self._ask("SELECT pg_advisory_lock_shared(%s)", WORKERS_KEY)
                self._marked = True
        except psycopg.Error:
            return False
        return True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._leading = self._marked = False
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def close(self) -> None:
        # Given back before the connection closes: the session's end frees them too, but a
        # moment later, when its server process has gone.
        if self._conn is not None and not self._conn.closed and (self._leading or self._marked):
            try:
                self._conn.execute("SELECT pg_advisory_unlock_all()")
            except psycopg.Error:
                pass
        self._drop()


class FileLocks:
    """``flock`` on two files beside the SQLite database."""

    def __init__(self, database: Path) -> None:
        self.leader_path = database.with_name(database.name + "-jobs.lock")
        self.workers_path = database.with_name(database.name + "-workers.lock")
        self._leader: IO[bytes] | None = None
        self._workers: IO[bytes] | None = None
        self._probe: IO[bytes] | None = None

    @staticmethod
    def _open(path: Path) -> IO[bytes]:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("ab")

    def lead(self) -> bool:
        if self._leader is not None:
            return True
        handle = self._open(self.leader_path)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._leader = handle
        return True

    def workers_alive(self) -> bool:
        probe = self._probe = self._probe or self._open(self.workers_path)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False

    def mark_worker(self) -> bool:
        if self._workers is not None:
            return True
        handle = self._open(self.workers_path)
        try:
            # Refused only during an API process's instant look: the next check marks it.
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._workers = handle
        return True

    def close(self) -> None:
        for handle in (self._leader, self._workers, self._probe):
            if handle is not None:
                handle.close()  # closing the file gives its lock up
        self._leader = self._workers = self._probe = None
