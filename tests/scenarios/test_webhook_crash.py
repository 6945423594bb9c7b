"""At least once across crashes (decisions §8.4, issue 14 "Proof"): a real `rebill serve`
process killed with SIGKILL while deliveries are in flight to a slow receiver, or right after
it claimed some (`REBILL_FAILPOINT=deliver.after_claim`), then started again, loses none of
them: every event reaches the receiver, and a repeat always carries the `webhook-id` and body
of the first try.

Each test has a database of its own on each backend (the server's delivery job sends every
store's due deliveries: other tests' leftovers would share its slots), and leases of one
second, so that the restarted server takes over the dead one's claims at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

from rebill.api import payloads  # noqa: F401 - the renderer the outbox needs for the builders' events
from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.store import service as store_service
from rebill.domain.unit import Unit
from rebill.domain.webhook import service as webhook_service
from rebill.domain.webhook.model import WebhookCreate
from rebill.models import webhook_deliveries
from tests.builders import make_customer
from tests.conftest import fresh_database_url
from tests.receiver import Receiver
from tests.scenarios.test_webhook_outage import assert_at_least_once_never_two_bodies_per_id

d = webhook_deliveries
V11 = "2021-11"


@dataclass
class Served:
    """A database of its own with one sandbox store and its token, and the `rebill serve`
    processes started on it."""

    url: str
    db: Database
    store: Any
    token: str
    logs: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    def start(self, *, failpoint: str | None = None, answering: bool = True) -> None:
        """Starts `rebill serve` and, if ``answering``, waits until it answers."""
        env = {**os.environ, "REBILL_DELIVERY_LEASE_SECONDS": "1", "REBILL_BILL_EVERY": "0",
               "REBILL_REGENERATE_EVERY": "0", "REBILL_PURGE_EVERY": "0", "REBILL_TOKEN_CACHE_SECONDS": "0"}
        env.pop("REBILL_FAILPOINT", None)
        env.pop("REBILL_DELIVER_WEBHOOKS", None)
        if failpoint:
            env["REBILL_FAILPOINT"] = failpoint
        self.port = self.port or _free_port()
        log = (self.logs / f"serve-{time.monotonic_ns()}.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rebill.cli", "serve", "--port", str(self.port), "--database", self.url,
             "--rate-limit", "off"], env=env, stdout=log, stderr=subprocess.STDOUT)
        if not answering:
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"rebill serve exited with {self.process.returncode}: {self.output()}")
            try:
                self.request("GET", "/webhooks")
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"rebill serve did not answer within 60 s: {self.output()}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=30) == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.logs.glob("serve-*.log")))

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        sent = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method, headers={
            "X-Service-Access-Token": self.token, "X-Service-Version": V11, "Content-Type": "application/json"})
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return json.loads(answer.read() or b"null")

    def deliveries(self) -> list[tuple[int, str, int, str | None, int]]:
        """(id, status, attempts, claimed_by, event id) of the store's deliveries."""
        with self.db.read() as conn:
            rows = conn.execute(select(d.c.id, d.c.status, d.c.attempts, d.c.claimed_by, d.c.event_id)
                                .where(d.c.store_id == self.store.id).order_by(d.c.id))
            return [tuple(row) for row in rows]  # type: ignore[misc]

    def wait_until_all_succeeded(self, count: int, *, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = self.deliveries()
            if len(found) == count and {row[1] for row in found} == {"succeeded"}:
                return
            time.sleep(0.1)
        raise AssertionError(f"not all succeeded within {seconds} s: {self.deliveries()}\n{self.output()}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    with fresh_database_url(request.param, tmp_path) as url:
        upgrade(url)
        db = Database.from_url(url)
        now = SystemClock().now()
        with db.write() as conn:
            store = store_service.create_store(conn, now, name="crash", ships_to=["US"])
            token = store_service.create_token(conn, now, store=store, name="tests")
        served = Served(url, db, store, token, tmp_path)
        try:
            yield served
        finally:
            served.stop()
            db.dispose()


def _assert_every_event_arrived(served: Served, receiver: Receiver) -> int:
    """Every event's delivery reached the receiver, a repeat only under its `webhook-id` and
    with its body; returns how many requests were repeats."""
    found = served.deliveries()
    assert len({row[4] for row in found}) == len(found)  # one delivery per event
    assert_at_least_once_never_two_bodies_per_id(receiver.received, {f"msg_{row[0]}" for row in found})
    return len(receiver.received) - len(found)


def test_a_server_killed_with_deliveries_in_flight_loses_none_on_restart(served):
    receiver = Receiver(delay=1.0).start()
    try:
        served.start()
        served.request("POST", "/webhooks", {"address": receiver.url, "topic": "customer/created"})
        for n in range(50):
            served.request("POST", "/customers", {"email": f"crash{n}@example.com", "first_name": "Crash",
                                                  "last_name": f"Test{n}"})
        # Kill once the receiver holds requests (each for a second): their answers are lost.
        deadline = time.monotonic() + 30
        while not (len(receiver.received) >= 20 and receiver.active > 0):
            assert time.monotonic() < deadline, served.output()
            time.sleep(0.01)
        served.kill()
        left = served.deliveries()
        assert len(left) == 50
        in_flight = [row for row in left if row[1] == "pending" and row[3] is not None]
        assert in_flight, left  # claimed by the dead server, their leases still running
        served.start()
        served.wait_until_all_succeeded(50)
    finally:
        served.stop()
        receiver.stop()
    repeats = _assert_every_event_arrived(served, receiver)
    assert repeats > 0  # the answers lost with the server: sent again, under the same ids


def test_a_server_killed_right_after_claiming_loses_nothing_on_restart(served):
    receiver = Receiver(delay=0.1).start()
    try:
        api = SimpleNamespace(db=served.db, store=served.store, clock=SystemClock())
        with served.db.write() as conn:
            webhook_service.create(Unit(conn, served.store, api.clock.now()),
                                   WebhookCreate(address=receiver.url, topic="customer/created"), V11)
        for _ in range(20):
            make_customer(api)
        served.start(failpoint="deliver.after_claim", answering=False)
        assert served.process is not None and served.process.wait(timeout=60) == -signal.SIGKILL
        claimed = [row for row in served.deliveries() if row[3] is not None]
        assert claimed and {row[1] for row in claimed} == {"pending"} and {row[2] for row in claimed} == {0}
        assert receiver.received == []
        served.start()
        served.wait_until_all_succeeded(20)
    finally:
        served.stop()
        receiver.stop()
    assert _assert_every_event_arrived(served, receiver) == 0
