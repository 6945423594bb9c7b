"""A real `rebill serve` for tests that talk to Rebill over the network (the fuzzing of
tests/fuzz/, a client generated from the OpenAPI document): a SQLite database of its own under
a folder, migrated, with one sandbox store of the top plan tier and a token of every scope, served
on a free port of 127.0.0.1 until the context ends.

The server runs no background job: no billing run, regeneration, purge or batch, and no webhook
delivery (a fuzzer creates webhooks at any address it likes; nothing may leave this machine).
Its rate limit is off. `python -m tests.served` serves one in the foreground and prints its URL
and token, for a run of schemathesis or a generated client by hand.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.store import service as store_service

TOKEN_HEADER = "X-Service-Access-Token"
# What the server must not do by itself while a test drives it (rebill/settings.py).
# Its log keeps what went wrong (a traceback), not a line per request.
QUIET = {"REBILL_BACKGROUND_JOBS": "off", "REBILL_BILL_EVERY": "0", "REBILL_REGENERATE_EVERY": "0",
         "REBILL_PURGE_EVERY": "0", "REBILL_BATCH_EVERY": "0", "REBILL_DELIVER_WEBHOOKS": "0",
         "REBILL_TOKEN_CACHE_SECONDS": "0", "REBILL_LOG_REQUESTS": "off"}
SHIPS_TO = ["US", "CA", "GB", "DE", "FR", "AE", "JP", "AU"]


@dataclass
class Server:
    """A running `rebill serve`: where it answers, a token of every scope of its one store."""

    base_url: str
    token: str
    store_id: int
    database_url: str
    log: Path
    process: subprocess.Popen[bytes]

    def output(self, tail: int = 5000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def request(self, method: str, path: str, body: Any = None, *, version: str = "2021-11") -> tuple[int, Any]:
        """(status, decoded body) of one request with the token."""
        return request(self.base_url, self.token, method, path, body, version=version)


def request(base_url: str, token: str, method: str, path: str, body: Any = None, *,
            version: str = "2021-11") -> tuple[int, Any]:
    """(status, decoded body) of one JSON request with ``token`` to a running server."""
    data = json.dumps(body).encode() if body is not None else None
    sent = urllib.request.Request(f"{base_url}{path}", data=data, method=method, headers={
        TOKEN_HEADER: token, "X-Service-Version": version, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def prepare(database_url: str, *, name: str = "served") -> tuple[int, str]:
    """Migrates the database and makes a sandbox store and a token of every scope: (store id, token)."""
    upgrade(database_url)
    db = Database.from_url(database_url)
    try:
        now = SystemClock().now()
        with db.write() as conn:
            # The top plan tier, which every endpoint allows (bundle selections need it).
            store = store_service.create_store(conn, now, name=name, ships_to=SHIPS_TO, plan_tier="premium_b",
                                               default_api_version="2021-11")
            token = store_service.create_token(conn, now, store=store, name="tests")  # every scope
        return store.id, token
    finally:
        db.dispose()


@contextmanager
def serve(folder: Path, *, env: dict[str, str] | None = None, seconds: float = 60.0,
          database_url: str | None = None, args: Sequence[str] = (), rate_limit: str = "off") -> Iterator[Server]:
    """`rebill serve` on a new SQLite database in ``folder`` (or on ``database_url``, an empty
    database: a PostgreSQL one of tests/private_services.py), with ``args`` added to its command
    line (``--workers 2``); stopped (and waited for) at the end. ``folder`` keeps its log."""
    folder.mkdir(parents=True, exist_ok=True)
    database_url = database_url or f"sqlite:///{folder / 'served.db'}"
    store_id, token = prepare(database_url)
    port = free_port()
    log = folder / "serve.log"
    environment = {**os.environ, **QUIET, **(env or {})}
    environment.pop("REBILL_FAILPOINT", None)
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "rebill.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
             "--database", database_url, "--rate-limit", rate_limit, *args],
            env=environment, stdout=sink, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", token, store_id, database_url, log, process)
    try:
        _wait_until_answering(server, seconds)
        yield server
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def _wait_until_answering(server: Server, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"rebill serve exited with {server.process.returncode}:\n{server.output()}")
        try:
            status, _ = server.request("GET", "/store")
        except OSError:
            time.sleep(0.1)
            continue
        if status == 200:
            return
        raise RuntimeError(f"rebill serve answered GET /store with {status}:\n{server.output()}")
    raise RuntimeError(f"rebill serve did not answer within {seconds:g} s:\n{server.output()}")


def main() -> None:
    import signal
    import tempfile
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the server too on a plain `kill`
    with tempfile.TemporaryDirectory(prefix="rebill-served-") as folder, serve(Path(folder)) as server:
        print(f"{server.base_url}\n{TOKEN_HEADER}: {server.token}\n(Ctrl-C stops it)", flush=True)
        try:
            server.process.wait()
        except (KeyboardInterrupt, SystemExit):
            pass


if __name__ == "__main__":
    main()
