"""A PostgreSQL cluster and a Redis server of a test's own, for the tests that stop, crash and
restart them (tests/scenarios/test_faults.py, issue 18 "Faults").

The suite's shared PostgreSQL (127.0.0.1:5432) and Redis (6379) serve the tests running beside
these ones (`pytest -n 2`): they are never stopped. ``PrivatePostgres`` makes a cluster with
``initdb`` in a folder of its own and serves it with ``pg_ctl`` on a free port of 127.0.0.1
(trust authentication, superuser ``root`` as on the shared one, ``fsync=off``: nothing here
needs to survive a power cut, and a crash of the server process itself, ``-m immediate``, still
goes through the write-ahead log's recovery). ``PrivateRedis`` runs ``redis-server`` on a free
port with nothing saved to disk. initdb takes about 0.6 s on a quiet machine (``--no-sync``),
a start or a restart 0.1-0.3 s: one cluster per test file, a database per test.

initdb and the server refuse to run as root: as root (a container) they run as the ``postgres``
user through ``runuser``, in a folder under /tmp that user owns (pytest's own tmp folders are
private to root). Missing binaries skip the tests saying which; with REBILL_REQUIRE_POSTGRES=1
(CI) a missing initdb or pg_ctl fails them instead.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

PG_BINARIES = ("initdb", "pg_ctl")
SUPERUSER = "root"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _missing(binaries: tuple[str, ...], *, required: bool) -> None:
    """Skip (or fail when ``required``) when one of ``binaries`` is not on PATH."""
    absent = [name for name in binaries if shutil.which(name) is None]
    if absent:
        reason = f"{', '.join(absent)} not on PATH: no private server can be started"
        if required:
            pytest.fail(f"{reason} (REBILL_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)


class PrivatePostgres:
    """A PostgreSQL cluster of its own: ``start``, ``stop(mode)``, ``restart(mode)``, ``url``.

    ``mode`` is pg_ctl's shutdown mode: ``fast`` ends every session and checkpoints (a planned
    restart), ``immediate`` kills the server processes without one (a crash: the next start
    recovers from the write-ahead log)."""

    def __init__(self) -> None:
        _missing(PG_BINARIES, required=os.environ.get("REBILL_REQUIRE_POSTGRES") == "1")
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root, and there is no `postgres` user to run initdb and the server as")
        self.folder = Path(tempfile.mkdtemp(prefix="rebill-private-pg-"))
        if self.as_postgres:
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self.initdb_seconds = 0.0
        self._made = False
        self._started = False  # once started, its port is the one its clients were given

    def _run(self, *command: str, timeout: float = 60) -> None:
        argv = ["runuser", "-u", "postgres", "--", *command] if self.as_postgres else list(command)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}\n"
                               f"{self.output()}")

    def output(self, tail: int = 4000) -> str:
        """The end of the server's log."""
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        if not self._made:
            began = time.monotonic()
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", SUPERUSER, "-E", "UTF8", "--no-sync")
            self.initdb_seconds = time.monotonic() - began
            self._made = True
        # Its socket in its own folder (the default one may not exist or be writable), TCP on
        # loopback only. A port another process took between free_port and here fails the
        # first start (seen beside a busy machine's servers): it takes another. Later starts
        # keep theirs, which the test's clients know.
        for attempt in range(3):
            options = f"-k {self.folder} -c listen_addresses=127.0.0.1 -p {self.port} -c fsync=off"
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")
                break
            except RuntimeError as exc:
                if self._started or attempt == 2 or "Address already in use" not in str(exc):
                    raise
                self.port = free_port()
        self._started = True

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast", *, down: float = 0.0) -> None:
        """``pg_ctl restart -m mode``, staying down ``down`` seconds in between (stop, start)."""
        self.stop(mode)
        if down:
            time.sleep(down)
        self.start()

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def create_database(self) -> str:
        """A new empty database of the cluster: its URL."""
        name = f"rebill_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started private cluster, stopped and removed at the end (for a module-scoped fixture)."""
    cluster = PrivatePostgres()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


class PrivateRedis:
    """`redis-server` of its own on a free port, nothing saved: ``start``, ``stop``, ``url``.
    A stop is a SIGTERM (a crash loses nothing more: nothing is kept on disk); a start after it
    is a new empty server on the same port."""

    def __init__(self, folder: Path) -> None:
        _missing(("redis-server",), required=False)
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / f"redis-{self.port}.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def output(self, tail: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def start(self, seconds: float = 20.0) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--daemonize", "no", "--dir", str(self.folder)], stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + seconds
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer within {seconds:g} s:\n{self.output()}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)

    def close(self) -> None:
        self.stop()


@contextmanager
def private_redis(folder: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(folder)
    try:
        server.start()
        yield server
    finally:
        server.close()
