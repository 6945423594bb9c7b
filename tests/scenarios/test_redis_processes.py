"""Issue 18 with real processes: two `rebill serve` on one database and one Redis share a
token's rate-limit bucket, and a token revoked on the command line is refused by both within a
second; without `REBILL_REDIS_URL`, `rebill serve` says at start that the limit is per process.

Skipped only when no Redis answers at 127.0.0.1:6379. Keys under a prefix of the test's own,
deleted at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import redis

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.domain.store import repository as store_repo
from rebill.domain.store import service as store_service
from tests.served import QUIET, TOKEN_HEADER, free_port, prepare

REDIS = "redis://127.0.0.1:6379/0"


def _redis_answers() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except (redis.RedisError, OSError):
        return False


pytestmark = pytest.mark.skipif(not _redis_answers(), reason="no Redis answers at 127.0.0.1:6379")


@pytest.fixture
def prefix() -> Iterator[str]:
    own = f"rebill-test:{uuid.uuid4().hex}:"
    yield own
    server = redis.Redis.from_url(REDIS)
    keys = list(server.scan_iter(match=f"{own}*"))
    if keys:
        server.delete(*keys)


def _get(base_url: str, token: str) -> tuple[int, dict[str, str]]:
    sent = urllib.request.Request(f"{base_url}/store", headers={TOKEN_HEADER: token, "X-Service-Version": "2021-11"})
    try:
        with urllib.request.urlopen(sent, timeout=10) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}
    except urllib.error.HTTPError as refused:
        return refused.code, {k.lower(): v for k, v in refused.headers.items()}


@contextmanager
def _serve(database_url: str, log: Path, env: dict[str, str], token: str) -> Iterator[str]:
    port = free_port()
    environment = {**os.environ, **QUIET, "REBILL_TOKEN_CACHE_SECONDS": "3600", **env}
    for name in ("REBILL_FAILPOINT", "REBILL_REDIS_URL", "REBILL_REDIS_PREFIX"):
        if name not in env:
            environment.pop(name, None)
    with log.open("wb") as sink:
        # 3 deep, leaking one request every 50 s: the test's own time empties nothing.
        process = subprocess.Popen(
            [sys.executable, "-m", "rebill.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
             "--database", database_url, "--rate-limit", "3/0.02"],
            env=environment, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                urllib.request.urlopen(f"{base_url}/openapi.json", timeout=2).close()
                break
            except (OSError, urllib.error.HTTPError):
                time.sleep(0.1)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def test_two_serve_processes_share_one_bucket_and_a_revocation_within_a_second(tmp_path, prefix):
    database_url = f"sqlite:///{tmp_path / 'shared.db'}"
    _, token = prepare(database_url)
    env = {"REBILL_REDIS_URL": REDIS, "REBILL_REDIS_PREFIX": prefix}
    with ExitStack() as stack:
        one = stack.enter_context(_serve(database_url, tmp_path / "one.log", env, token))
        two = stack.enter_context(_serve(database_url, tmp_path / "two.log", env, token))
        for log in ("one.log", "two.log"):
            assert "Rate limits shared through Redis (127.0.0.1:6379/0)" in (tmp_path / log).read_text()
        seen = [_get(url, token) for url in (one, two, one, two)]
        assert [status for status, _ in seen] == [200, 200, 200, 429]
        assert [headers["x-service-limit"] for _, headers in seen] == ["1/3", "2/3", "3/3", "3/3"]
        assert int(seen[3][1]["retry-after"]) >= 1

        # A second token, cached by both processes (an hour), then revoked on the command line.
        db = Database.from_url(database_url)
        try:
            with db.write() as conn:
                store = store_repo.all_stores(conn)[0]
                other = store_service.create_token(conn, SystemClock().now(), store=store, name="other")
            with db.read() as conn:
                found = store_repo.token_by_raw(conn, other)
        finally:
            db.dispose()
        assert found is not None
        assert _get(one, other)[0] == 200 and _get(two, other)[0] == 200
        done = subprocess.run([sys.executable, "-m", "rebill.cli", "tokens", "revoke", str(found[0].id),
                               "--database", database_url], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        revoked_at = time.monotonic()
        assert _get(two, other)[0] == 401 and _get(one, other)[0] == 401
        assert time.monotonic() - revoked_at < 1.0


def test_without_redis_serve_says_the_limit_is_per_process(tmp_path):
    database_url = f"sqlite:///{tmp_path / 'alone.db'}"
    _, token = prepare(database_url)
    with _serve(database_url, tmp_path / "alone.log", {}, token):
        said = (tmp_path / "alone.log").read_text()
    assert "Rate limits are per process (no REBILL_REDIS_URL)" in said
