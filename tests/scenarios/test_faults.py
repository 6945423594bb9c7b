"""Issue 18, "Faults", with real processes: PostgreSQL restarted (and crashed) under a write load
on `rebill serve --workers 2`, and Redis stopped and started under it.

The servers they take down are private ones (tests/private_services.py): the suite's own
PostgreSQL and Redis serve the tests running beside this file. One cluster for the file (initdb
once); the Redis test runs on SQLite. One `rebill serve` start per test: it is most of their time.

- PostgreSQL: client threads POST customers and subscriptions, each with an Idempotency-Key,
  while the cluster is restarted (`pg_ctl -m fast`, a planned restart), then crashed (`-m
  immediate`: every server process killed, crash recovery at the next start). Every request gets
  an answer: 2xx, or 503 with `Retry-After` in the spec's error shape; never a 500, never a
  connection closed without one. The same server processes answer again within seconds. Then
  what is stored is counted: each 2xx request's row exists once, with its one `*/created` event;
  a 503 request's is absent and its retry with the same key makes it exist once, or (the one
  window no server can close: its COMMIT landed as the connection went) it exists once,
  whole, and is not retried; the schedule of every address equals a plan from scratch (no
  subscription without its charge).
- Redis: the rate limit is shared by both processes while Redis runs (one bucket: a token's
  burst spread over both processes is still 3), falls back to each process's own bucket while it
  is down (requests keep being served), and is shared again once it is back. A token revoked by
  another process while Redis is down is refused by both processes at once (revocations go
  through the database's revision, http/freshness.py, not through Redis).

Which process answered is read from the server's JSON request lines (their `pid`), matched by
the `X-Request-Id` of each reply.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.domain.schedule.audit import differences
from rebill.domain.store import repository as store_repo
from rebill.domain.store import service as store_service
from rebill.domain.unit import Unit
from rebill.models import addresses, customers, events, purchase_items
from tests.private_services import PrivatePostgres, PrivateRedis, private_postgres, private_redis
from tests.served import TOKEN_HEADER, Server, serve

# The answers a client may get while the database is away (spec 01 Errors).
FAULT_STATUSES = {503}
RECOVERY_SECONDS = 5.0


@dataclass
class Reply:
    status: int | None  # None: no answer at all (a reset, a closed connection, a timeout)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    error: str | None = None


def send(server: Server, method: str, path: str, body: Any = None, *, key: str | None = None,
         token: str | None = None, timeout: float = 30) -> Reply:
    """One request on a connection of its own (a reset belongs to this request alone, and the
    kernel hands each new connection to either of the server's processes)."""
    where = urlsplit(server.base_url)
    headers = {TOKEN_HEADER: token or server.token, "X-Service-Version": "2021-11", "Connection": "close"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if key is not None:
        headers["Idempotency-Key"] = key
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=headers)
        answer = conn.getresponse()
        raw = answer.read()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        return Reply(answer.status, {k.lower(): v for k, v in answer.getheaders()}, decoded)
    except (OSError, http.client.HTTPException) as exc:
        return Reply(None, error=f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def worker_pids(server: Server) -> list[int]:
    """The server processes uvicorn started (its "Started server process [pid]" lines)."""
    pids = []
    for line in server.output(tail=10**7).splitlines():
        if "Started server process" in line:
            pids.append(int(line.split("Started server process [", 1)[1].split("]", 1)[0]))
    return pids


def both_started(server: Server, seconds: float = 60.0) -> list[int]:
    """The two processes' pids, once both have started their application (the server answers
    as soon as one has)."""
    deadline = time.monotonic() + seconds
    while server.output(tail=10**7).count("Application startup complete") < 2:
        assert server.process.poll() is None and time.monotonic() < deadline, server.output()
        time.sleep(0.05)
    pids = worker_pids(server)
    assert len(pids) == 2, server.output()
    return pids


def escaped(server: Server) -> str:
    """The exceptions that reached uvicorn or the API's last resort (a 500), from the server's
    log: each traceback's final exception line, counted; empty when there was none."""
    found: Counter[str] = Counter()
    for record in re.split(r"\n(?=\d{4}-\d\d-\d\dT|\{)", server.output(tail=10**7)):
        if "Exception in ASGI application" in record or "unhandled error" in record:
            raised = re.findall(r"^[\w.]*(?:Error|Exception|Exit|Interrupt)\w*: .*$", record, re.MULTILINE)
            found[(raised[-1] if raised else record.splitlines()[0])[:200]] += 1
    return "\n".join(f"{count} x {what}" for what, count in found.most_common())


def assert_fault_answer(reply: Reply, what: str) -> None:
    """2xx, or 503 with Retry-After and the spec's error body; nothing else, and always an answer."""
    assert reply.status is not None, f"{what}: no answer ({reply.error})"
    if 200 <= reply.status < 300:
        return
    assert reply.status in FAULT_STATUSES, f"{what}: {reply.status} {reply.body}"
    assert int(reply.headers.get("retry-after", "0")) >= 1, f"{what}: 503 without Retry-After {reply.headers}"
    assert isinstance(reply.body, dict) and set(reply.body) == {"errors"} and reply.body["errors"], \
        f"{what}: 503 body {reply.body!r}"


# PostgreSQL restarted under a write load ---------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivatePostgres]:
    with private_postgres() as started:
        yield started


@dataclass
class Sent:
    kind: str  # customer | subscription
    key: str
    path: str
    body: dict[str, Any]
    marker: str  # the email or product title that finds its row
    began: float
    reply: Reply
    ended: float


class Load:
    """``threads`` clients, each on an address of its own, POSTing a customer then a
    subscription on its address, again and again until stopped; every request kept."""

    def __init__(self, server: Server, address_ids: list[int]) -> None:
        self.server, self.address_ids = server, address_ids
        self.sent: list[Sent] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(len(address_ids))]
        self.run_id = uuid.uuid4().hex[:8]

    def _post(self, kind: str, path: str, body: dict[str, Any], marker: str) -> None:
        key = f"{self.run_id}-{marker}"
        began = time.monotonic()
        reply = send(self.server, "POST", path, body, key=key)
        with self._lock:
            self.sent.append(Sent(kind, key, path, body, marker, began, reply, time.monotonic()))

    def _get(self, path: str) -> None:
        """A read: on PostgreSQL it runs on the event loop over a kept connection of its own
        (db/read_lanes.py), which the outage breaks too."""
        began = time.monotonic()
        reply = send(self.server, "GET", path)
        with self._lock:
            self.sent.append(Sent("read", "", path, {}, path, began, reply, time.monotonic()))

    def _run(self, n: int) -> None:
        i = 0
        while not self.stop.is_set():
            email = f"load-{self.run_id}-{n}-{i}@faults.example"
            self._post("customer", "/customers", {"email": email, "first_name": "Load", "last_name": f"T{n}"}, email)
            title = f"Fault {self.run_id} {n}-{i}"
            self._post("subscription", "/subscriptions", subscription_body(self.address_ids[n], title), title)
            self._get(f"/addresses/{self.address_ids[n]}")
            i += 1

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), "a client thread hung"

    def snapshot(self) -> list[Sent]:
        with self._lock:
            return list(self.sent)


def subscription_body(address_id: int, title: str) -> dict[str, Any]:
    first = SystemClock().now().date() + timedelta(days=10)
    return {"address_id": address_id, "product_title": title, "price": "12.50", "quantity": 1,
            "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month",
            "next_charge_scheduled_at": first.isoformat()}


def _rows(db: Database, store_id: int, kind: str, marker: str) -> int:
    with db.read() as conn:
        if kind == "customer":
            return int(conn.execute(select(func.count()).select_from(customers).where(
                customers.c.store_id == store_id, customers.c.email == marker)).scalar_one())
        return int(conn.execute(select(func.count()).select_from(purchase_items).where(
            purchase_items.c.store_id == store_id, purchase_items.c.product_title == marker)).scalar_one())


def _ids(db: Database, store_id: int, kind: str, markers: list[str]) -> dict[str, list[int]]:
    """marker -> the ids of its rows."""
    found: dict[str, list[int]] = {m: [] for m in markers}
    with db.read() as conn:
        if kind == "customer":
            rows = conn.execute(select(customers.c.email, customers.c.id).where(customers.c.store_id == store_id))
        else:
            rows = conn.execute(select(purchase_items.c.product_title, purchase_items.c.id).where(
                purchase_items.c.store_id == store_id))
        for marker, row_id in rows:
            if marker in found:
                found[marker].append(row_id)
    return found


def _homes(server: Server, count: int) -> list[int]:
    """``count`` customers with an address each, made before the faults: the client threads' homes."""
    address_ids = []
    for n in range(count):
        made = send(server, "POST", "/customers", {"email": f"home{n}@faults.example", "first_name": "H",
                                                   "last_name": f"{n}"})
        assert made.status == 201, made
        address = send(server, "POST", "/addresses", {
            "customer_id": made.body["customer"]["id"], "address1": "101 Market St", "city": "San Francisco",
            "country_code": "US", "province": "CA", "zip": "94105", "first_name": "H", "last_name": f"{n}",
            "phone": "+14155550100"})
        assert address.status == 201, address
        address_ids.append(address.body["address"]["id"])
    return address_ids


@dataclass
class Outage:
    mode: str
    cut: float  # when the stop began
    back: float  # when the start returned
    recovery: float  # seconds from ``back`` to the first 201 of a request sent after it


def _fault(cluster: PrivatePostgres, load: Load, server: Server, mode: str) -> Outage:
    """The cluster stopped in ``mode`` and started again half a second later (requests meet
    sessions ended under them, refused connections and a server starting up), then the load
    watched until a customer and a subscription sent after the start are created."""
    cut = time.monotonic()
    cluster.restart(mode, down=0.5)
    back = time.monotonic()
    deadline = back + RECOVERY_SECONDS
    while True:
        after = [s for s in load.snapshot() if s.began >= back]
        if ({s.kind for s in after if s.reply.status == 201} == {"customer", "subscription"}
                and any(s.kind == "read" and s.reply.status == 200 for s in after)):
            break
        assert time.monotonic() < deadline, (
            f"{mode}: no 201 of each kind within {RECOVERY_SECONDS} s of the start:\n"
            f"{[(s.kind, s.reply.status, s.reply.body) for s in after[-6:]]}\n{escaped(server)}")
        time.sleep(0.05)
    return Outage(mode, cut, back, min(s.began for s in after if s.reply.status == 201) - back)


def test_postgresql_restarted_and_crashed_under_a_write_load_answers_503_loses_nothing_and_recovers(
        cluster, tmp_path):
    url = cluster.create_database()
    with serve(tmp_path, database_url=url, args=["--workers", "2"]) as server:
        pids = both_started(server)
        address_ids = _homes(server, 4)
        outages = []
        with Load(server, address_ids) as load:
            time.sleep(1.0)  # the load under way
            assert any(s.reply.status == 201 for s in load.snapshot()), load.snapshot()[:5]
            # A planned restart (sessions ended, a checkpoint), then a crash (every server process
            # killed, recovery from the write-ahead log at the start), a second of load apart.
            for mode in ("fast", "immediate"):
                outages.append(_fault(cluster, load, server, mode))
                time.sleep(1.0)  # and serving on
        sent = load.sent
        assert server.process.poll() is None, server.output()
        # The same two processes: none died and was replaced.
        assert worker_pids(server) == pids, server.output()

        wrong = []
        for s in sent:
            try:
                assert_fault_answer(s.reply, f"{s.kind} {s.marker}")
            except AssertionError as exc:
                wrong.append(str(exc).splitlines()[0])
        assert wrong == [], f"{len(wrong)} of {len(sent)} answers wrong, e.g. {wrong[:5]}\n{escaped(server)}"
        assert escaped(server) == "", escaped(server)
        failed = [s for s in sent if s.reply.status in FAULT_STATUSES and s.kind != "read"]
        reads = [s for s in sent if s.kind == "read"]
        for outage in outages:
            # The reads met it too (their kept connections broke with the server) and recovered.
            assert [s for s in reads if s.reply.status == 503 and outage.cut - 1.0 < s.began < outage.back + 1.0], \
                f"no read met the {outage.mode} restart"
            met = [s for s in failed if outage.cut - 1.0 < s.began < outage.back + 1.0]
            assert met, f"the {outage.mode} restart met no request: nothing was proven ({len(sent)} sent)"
        # Once back, it stays back: from a second after each start to the next stop, every
        # request is served.
        for outage, following in zip(outages, [*(o.cut for o in outages[1:]), float("inf")]):
            late = [s.marker for s in [*failed, *reads] if s.reply.status in FAULT_STATUSES
                    and s.began > outage.back + 1.0 and s.ended < following]
            assert late == [], outage

        db = Database.from_url(url)
        try:
            store_id = server.store_id
            # A 503 request was not applied, except in the one window no server can close (its
            # COMMIT landed and the connection went before the answer: errors.DatabaseUnavailable).
            # Its transaction marked its key "applied" (domain/unit.py), so retrying it with its
            # key answers 409 (the answer was lost) and never makes a second row. Every 503 is
            # retried with its key, as a client would, until it gets an answer that is no 503.
            committed_anyway = [s for s in failed if _rows(db, store_id, s.kind, s.marker)]

            def retry(s: Sent) -> Reply:
                for _ in range(20):
                    again = send(server, "POST", s.path, s.body, key=s.key)
                    if again.status not in FAULT_STATUSES:
                        break
                    time.sleep(0.25)
                return again
            with ThreadPoolExecutor(4) as pool:
                again = list(pool.map(retry, failed))
            expected = {s.marker: (409 if s in committed_anyway else 201) for s in failed}
            assert {s.marker: r.status for s, r in zip(failed, again)} == expected, again
            # 409 "still running" within a minute of its COMMIT, "its answer was lost" after.
            assert all("still running" in str(r.body) or "answer was lost" in str(r.body)
                       for s, r in zip(failed, again) if s in committed_anyway)

            for kind, topic in (("customer", "customer/created"), ("subscription", "subscription/created")):
                mine = [s for s in sent if s.kind == kind]
                rows = _ids(db, store_id, kind, [s.marker for s in mine])
                doubled = {m: ids for m, ids in rows.items() if len(ids) != 1}
                assert doubled == {}, f"{kind}s not stored exactly once: {doubled}"
                with db.read() as conn:
                    ids = [ids[0] for ids in rows.values()]
                    logged = Counter(conn.execute(select(events.c.resource_id).where(
                        events.c.store_id == store_id, events.c.topic == topic,
                        events.c.resource_id.in_(ids))).scalars())
                assert logged == dict.fromkeys(ids, 1), f"{topic} events: {logged}"
            with db.read() as conn:
                store = store_repo.get(conn, store_id)
                assert store is not None
                every = list(conn.execute(select(addresses.c.id).where(addresses.c.store_id == store_id)).scalars())
                assert differences(Unit(conn, store, SystemClock().now()), every) == []
        finally:
            db.dispose()
    print(f"\n{len(sent)} requests, {len(failed)} answered 503 ({len(committed_anyway)} of them committed "
          f"anyway); initdb {cluster.initdb_seconds:.2f} s")
    for outage in outages:
        print(f"{outage.mode}: down {outage.back - outage.cut:.2f} s, first 201 {outage.recovery:.2f} s after the "
              f"start, {sum(1 for s in failed if outage.cut - 1.0 < s.began < outage.back + 1.0)} answered 503")


# Redis stopped and started ---------------------------------------------------------------------


def _pid_of(server: Server, request_ids: set[str], seconds: float = 5.0) -> dict[str, int]:
    """request id -> the pid of the process that answered it, from the JSON request lines."""
    deadline = time.monotonic() + seconds
    while True:
        found: dict[str, int] = {}
        for line in server.output(tail=10**7).splitlines():
            if line.startswith("{") and '"rebill.requests"' in line:
                record = json.loads(line)
                if record.get("request_id") in request_ids:
                    found[record["request_id"]] = record["pid"]
        if set(found) == request_ids or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _burst(server: Server, token: str, count: int = 8) -> list[tuple[int, int]]:
    """``count`` GET /store at once, each on a connection of its own: (status, pid) of each."""
    start = threading.Barrier(count, timeout=10)

    def one(_: int) -> Reply:
        start.wait()
        return send(server, "GET", "/store", token=token)
    with ThreadPoolExecutor(count) as pool:
        replies = list(pool.map(one, range(count)))
    for reply in replies:
        assert reply.status is not None, reply.error
        assert reply.status < 500, (reply.status, reply.body, server.output())
    pids = _pid_of(server, {r.headers["x-request-id"] for r in replies})
    return [(r.status, pids.get(r.headers["x-request-id"], 0)) for r in replies]  # type: ignore[misc]


def _new_token(server: Server) -> tuple[str, int]:
    db = Database.from_url(server.database_url)
    try:
        with db.write() as conn:
            store = store_repo.get(conn, server.store_id)
            raw = store_service.create_token(conn, SystemClock().now(), store=store, name="faults")
        with db.read() as conn:
            found = store_repo.token_by_raw(conn, raw)
    finally:
        db.dispose()
    assert found is not None
    return raw, found[0].id


def _spread(server: Server, pids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """A new token's burst that both processes answered part of (a few tries: the kernel decides)."""
    for _ in range(6):
        token, _ = _new_token(server)
        answers = _burst(server, token)
        if {pid for _, pid in answers} == set(pids):
            return token, answers
    raise AssertionError(f"six bursts never reached both processes {pids}: {answers}")


def _redis_lines(server: Server, text: str) -> set[int]:
    """The pids of the processes whose log says ``text`` (rebill.redis lines)."""
    said = set()
    for line in server.output(tail=10**7).splitlines():
        if line.startswith("{") and '"rebill.redis"' in line and text in line:
            said.add(json.loads(line)["pid"])
    return said


def test_redis_stopped_and_started_keeps_serving_and_shares_the_limit_again(tmp_path):
    redis_folder = tmp_path / "redis"
    redis_folder.mkdir()
    with private_redis(redis_folder) as redis_server:
        _redis_scenario(tmp_path, redis_server)


def _redis_scenario(tmp_path: Path, redis_server: PrivateRedis) -> None:
    env = {"REBILL_REDIS_URL": redis_server.url, "REBILL_REDIS_PREFIX": f"faults-{uuid.uuid4().hex[:8]}:",
           # Tokens stay cached an hour: a revocation must come through the revision check.
           "REBILL_TOKEN_CACHE_SECONDS": "3600", "REBILL_LOG_REQUESTS": "on"}
    # 3 deep, one request leaking every 50 s: the test's own time empties nothing.
    with serve(tmp_path / "serve", env=env, args=["--workers", "2", "--log-format", "json"],
               rate_limit="3/0.02") as server:
        pids = both_started(server)
        assert "Rate limits shared through Redis" in server.output()

        # Up: one bucket for both processes, whichever answers.
        _, shared = _spread(server, pids)
        assert Counter(status for status, _ in shared) == {200: 3, 429: 5}, shared

        # Down: each process falls back to a bucket of its own and keeps serving.
        redis_server.stop()
        _, answers = _spread(server, pids)
        # Each process lets through 3 of what it answered: more than 3 in all, since both answered.
        answered = Counter(pid for _, pid in answers)
        allowed = Counter(pid for status, pid in answers if status == 200)
        assert all(status in (200, 429) for status, _ in answers), answers
        assert allowed == {pid: min(n, 3) for pid, n in answered.items()}, answers
        assert sum(allowed.values()) > 3
        assert _redis_lines(server, "does not answer") == set(pids), server.output()
        writer, _ = _new_token(server)
        made = send(server, "POST", "/customers", {"email": "down@faults.example", "first_name": "R",
                                                   "last_name": "Down"}, token=writer)
        assert made.status == 201, made

        # A revocation still reaches both processes at once: it is read from the database.
        doomed, doomed_id = _new_token(server)
        seen: set[int] = set()
        for _ in range(6):  # both processes cache it (an answer, even a 429, resolved it)
            seen |= {pid for _, pid in _burst(server, doomed, 2)}
            if seen == set(pids):
                break
        assert seen == set(pids)
        # Revoked by another process (this one), as `rebill tokens revoke` does it.
        db = Database.from_url(server.database_url)
        try:
            with db.write() as conn:
                store_service.revoke_token(conn, SystemClock().now(), doomed_id)
        finally:
            db.dispose()
        revoked_at = time.monotonic()
        refused = _burst(server, doomed, 8)
        assert time.monotonic() - revoked_at < 1.0
        # Until both processes have answered (the kernel may hand a whole burst to one of them).
        for _ in range(6):
            if {pid for _, pid in refused} == set(pids):
                break
            refused += _burst(server, doomed, 8)
        assert {status for status, _ in refused} == {401}, refused
        assert {pid for _, pid in refused} == set(pids), refused

        # Back (a new, empty Redis on the same port): shared again once each process tries it,
        # at most a second after its last failed attempt (ratelimit_redis.RETRY_SECONDS).
        redis_server.start()
        time.sleep(1.1)
        _, again = _spread(server, pids)
        assert Counter(status for status, _ in again) == {200: 3, 429: 5}, again
        assert _redis_lines(server, "answers again") == set(pids), server.output()
        assert worker_pids(server) == pids, server.output()
    print(f"\nRedis up {shared}\nRedis down {answers}\nrevoked {refused}\nRedis back {again}")
