"""A real `rebill serve --workers 2` with `REBILL_METRICS=on` and `--log-format json` (issue 18):
whichever process answers a scrape answers for both, their request counts summed (each process's
within a second) and their pools' gauges summed over the live processes only; the directory of their files is emptied at the start
and removed at a clean stop; every line the server writes is one JSON object, a request's with
its request id, store, route, status and duration, a job's with its run, result and duration.

Requests go out on new connections from several threads at once until the log shows that each
process served some (the kernel hands connections to either), so the sum is a sum of two."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.customer import service as customer_service
from rebill.domain.customer.model import CustomerCreate
from rebill.domain.store import service as store_service
from rebill.domain.unit import Unit

ROUTE = "/customers/{customer_id}"
QUIET = {"REBILL_REGENERATE_EVERY": "0", "REBILL_PURGE_EVERY": "0", "REBILL_BATCH_EVERY": "0",
         "REBILL_DELIVER_WEBHOOKS": "0", "REBILL_TOKEN_CACHE_SECONDS": "0", "REBILL_BILL_EVERY": "1"}


def _free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _prepare(url: str) -> tuple[int, str, int]:
    """A store, a token and a customer: (store id, token, customer id)."""
    upgrade(url)
    db = Database.from_url(url)
    try:
        now = SystemClock().now()
        with db.write() as conn:
            store = store_service.create_store(conn, now, name="metrics", default_api_version="2021-11")
            token = store_service.create_token(conn, now, store=store, name="metrics")
            customer = customer_service.create(Unit(conn, store, now), CustomerCreate(
                email="metrics@example.com", first_name="Ada", last_name="Lovelace"))
        return store.id, token, customer.id
    finally:
        db.dispose()


class Served:
    def __init__(self, base: str, token: str, log: Path) -> None:
        self.base, self.token, self.log = base, token, log

    def get(self, path: str, *, token: bool = True) -> tuple[int, dict[str, str], bytes]:
        headers = {"X-Service-Access-Token": self.token, "Connection": "close"} if token else {"Connection": "close"}
        sent = urllib.request.Request(self.base + path, headers=headers)
        try:
            with urllib.request.urlopen(sent, timeout=30) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as refused:
            return refused.code, dict(refused.headers), refused.read()

    def lines(self) -> list[dict[str, Any]]:
        text = self.log.read_text(errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, _, body = self.get("/metrics", token=False)
        assert status == 200, body
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def _count(samples: dict[Any, float]) -> float:
    key = ("rebill_http_requests_total",
           tuple(sorted({"method": "GET", "route": ROUTE, "version": "2021-11", "status": "200"}.items())))
    return samples.get(key, 0.0)


def _wait_for(check: Any, seconds: float, what: str, served: Served) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} within {seconds} s; the server wrote:\n{served.log.read_text()[-3000:]}")


def test_two_server_processes_are_counted_together_and_log_json_lines(tmp_path):
    url = f"sqlite:///{tmp_path / 'rebill.db'}"
    store_id, token, customer_id = _prepare(url)
    metrics_dir = tmp_path / "metrics"
    port = _free_port()
    # The folder of a previous run whose process is gone: its counts are that run's, removed at
    # start; what else the directory holds is not the server's (found by an audit: a database
    # there was deleted), and stays.
    dead = metrics_dir / f"serve-{port}-999999999"
    dead.mkdir(parents=True)
    (dead / "counter_1.db").write_bytes(b"not a file of prometheus_client's" * 64)
    (metrics_dir / "rebill.db").write_bytes(b"someone else's")
    env = {**os.environ, **QUIET, "REBILL_METRICS": "on", "REBILL_METRICS_DIR": str(metrics_dir)}
    for name in ("REBILL_FAILPOINT", "PROMETHEUS_MULTIPROC_DIR", "REBILL_LOG_FORMAT", "REBILL_LOG_REQUESTS"):
        env.pop(name, None)
    log = tmp_path / "serve.err"
    with log.open("wb") as err, (tmp_path / "serve.out").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "rebill.cli", "serve", "--port", str(port), "--database", url, "--workers", "2",
             "--rate-limit", "off", "--log-format", "json"], env=env, stdout=out, stderr=err)
    served = Served(f"http://127.0.0.1:{port}", token, log)
    path = f"/customers/{customer_id}"
    answered = [0]  # every 200 of `path`: what the sum must say

    def read() -> int:
        status = served.get(path)[0]
        answered[0] += status == 200
        return status
    try:
        def answering() -> bool:
            try:
                return read() == 200
            except OSError:
                return False
        _wait_for(answering, 60, "rebill serve answered", served)
        assert not dead.exists() and (metrics_dir / "rebill.db").exists()

        def pids_serving() -> set[int]:
            return {line["pid"] for line in served.lines() if line.get("route") == ROUTE}
        with ThreadPoolExecutor(8) as pool:
            while len(pids_serving()) < 2 and answered[0] < 2000:
                assert list(pool.map(lambda _: read(), range(40))) == [200] * 40
        assert len(pids_serving()) == 2, f"one process served all {answered[0]} requests"
        # Each process's figures in files of its own; any scrape sums them, each process's
        # requests there within a second (the process hands its sums over once a second).
        assert len({f.name.split("_")[-1] for f in metrics_dir.glob("serve-*/counter_*.db")}) == 2
        _wait_for(lambda: _count(served.samples()) == answered[0], 5, "every request counted", served)
        for _ in range(8):
            assert _count(served.samples()) == answered[0]
        # The pools' gauges: each process samples its own every second; the sum is of both.
        _wait_for(lambda: served.samples().get(("rebill_db_pool_size", ())) == 40, 10, "the pools summed", served)

        # The lines: every one is JSON; a request's names its request id, store, route, status, time.
        status, headers, _ = served.get(path)
        assert status == 200
        answered[0] += 1
        request_id = headers["x-request-id"]
        [line] = _wait_for(lambda: [x for x in served.lines() if x.get("request_id") == request_id], 10,
                           "the request's line", served)
        assert line["logger"] == "rebill.requests" and line["level"] == "info"
        assert (line["store_id"], line["route"], line["path"], line["status"], line["version"], line["method"]) == (
            store_id, ROUTE, path, 200, "2021-11", "GET")
        assert 0 < line["duration_ms"] < 10_000 and line["time"].endswith("+00:00")
        # A job's: the billing run ticks every second in the process that runs the jobs.
        run = _wait_for(lambda: [x for x in served.lines() if x.get("job") == "billing_run"], 15,
                        "a billing run's line", served)[0]
        assert run["logger"] == "rebill.jobs" and run["result"] == "ok" and len(run["job_id"]) == 16
        assert run["duration_ms"] >= 0 and run["count"] == 0 and run["store_id"] is None
        assert any(x["logger"].startswith("uvicorn") for x in served.lines())  # uvicorn's own lines too

        # A worker killed outright: the server starts another; its counts stay in the sum, its
        # pool's gauges leave it. Every request handed over first: a SIGKILL loses what its
        # process had not handed over yet (up to a second of requests, docs/operations.md).
        _wait_for(lambda: _count(served.samples()) == answered[0], 10, "every request counted before the kill", served)
        victim = next(iter(pids_serving()))
        os.kill(victim, signal.SIGKILL)
        # 90 s: the supervisor pings the live worker before it restarts the dead one, and the new
        # one starts from a fresh interpreter (spawn); under the suite's load that took past 30 s
        # once in CI. What is checked is that it comes back, not how fast.
        _wait_for(lambda: len({x["pid"] for x in served.lines() if x.get("message", "").startswith(
            "Started server process")}) >= 3, 90, "a new worker", served)
        _wait_for(answering, 30, "the server answered again", served)
        _wait_for(lambda: served.samples().get(("rebill_db_pool_size", ())) == 40, 15,
                  "the dead worker's pool forgotten", served)
        # What the dead process had handed over stays in the sum (its requests were counted
        # above, more than a second before it died).
        _wait_for(lambda: _count(served.samples()) == answered[0], 10, "every request still counted", served)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    # The run's folder removed at the clean stop, nothing else.
    assert [p.name for p in metrics_dir.iterdir()] == ["rebill.db"]


def _one_server(tmp_path: Path, url: str, token: str, path: str, env: dict[str, str],
                drop: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], Served, Path]:
    """One `rebill serve` process (no rate limit) with ``env`` added and ``drop`` left out of
    the environment, its stderr in ``serve.err``; returned once ``path`` answers 200."""
    port = _free_port()
    environment = {**os.environ, **QUIET, **env}
    for name in ("REBILL_FAILPOINT", "PROMETHEUS_MULTIPROC_DIR", "REBILL_LOG_FORMAT", *drop):
        environment.pop(name, None)
    log = tmp_path / "serve.err"
    with log.open("wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "rebill.cli", "serve", "--port", str(port), "--database",
                                    url, "--rate-limit", "off"], env=environment, stdout=subprocess.DEVNULL,
                                   stderr=err)
    served = Served(f"http://127.0.0.1:{port}", token, log)

    def answering() -> bool:
        try:
            return served.get(path)[0] == 200
        except OSError:
            return False
    try:
        _wait_for(answering, 60, "rebill serve answered", served)
    except BaseException:
        process.kill()
        process.wait(timeout=30)
        raise
    return process, served, log


def test_text_lines_when_asked_and_no_metrics_by_default(tmp_path):
    """Text is the default format, without a line per request unless REBILL_LOG_REQUESTS=on
    (settings.py, ``request_lines``); /metrics is off unless REBILL_METRICS=on."""
    url = f"sqlite:///{tmp_path / 'rebill.db'}"
    store_id, token, customer_id = _prepare(url)
    process, served, log = _one_server(tmp_path, url, token, f"/customers/{customer_id}",
                                       {"REBILL_LOG_REQUESTS": "on"}, drop=("REBILL_METRICS",))
    try:
        assert served.get("/metrics")[0] == 404 and served.get("/metrics", token=False)[0] == 401
        status, headers, _ = served.get(f"/customers/{customer_id}")
        wanted = (f"rebill.requests: GET /customers/{customer_id} 200 ", f"request_id={headers['x-request-id']}",
                  f"store_id={store_id}", "route=/customers/{customer_id}", "status=200", "duration_ms=")
        _wait_for(lambda: any(all(w in line for w in wanted) for line in log.read_text().splitlines()), 10,
                  "the request's text line", served)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def test_one_process_stopped_by_sigterm_removes_its_metrics_directory(tmp_path):
    """docs/operations.md: the directory goes at a clean stop (found by an audit: uvicorn sends
    SIGTERM to itself again after its graceful stop, and the default handler ended a single
    process before it removed the directory). The start line says the limit is off when it is."""
    url = f"sqlite:///{tmp_path / 'rebill.db'}"
    _, token, customer_id = _prepare(url)
    metrics_dir = tmp_path / "metrics"
    process, served, log = _one_server(tmp_path, url, token, f"/customers/{customer_id}", {
        "REBILL_METRICS": "on", "REBILL_METRICS_DIR": str(metrics_dir), "REBILL_REDIS_URL": "redis://127.0.0.1:1/0"})
    try:
        assert any(metrics_dir.glob("serve-*/counter_*.db"))
        assert "Rate limits off" in log.read_text()
    finally:
        process.terminate()
        code = process.wait(timeout=30)
    assert code == 128 + signal.SIGTERM, log.read_text()
    assert "Application shutdown complete" in log.read_text()
    assert list(metrics_dir.iterdir()) == []


def test_an_unknown_log_format_stops_the_start():
    done = subprocess.run([sys.executable, "-m", "rebill.cli", "serve", "--log-format", "xml"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "log format must be one of text, json" in done.stderr
