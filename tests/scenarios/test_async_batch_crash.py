"""No task runs twice, none is lost (decisions §7.7, issue 15 "Proof"): a 5,000-task batch with
10 bad tasks ends with 4,990 successes and 10 errors when `rebill serve` runs it, and the same
when that server is killed with SIGKILL in the middle and started again, or killed as a chunk of
tasks is about to commit (`REBILL_FAILPOINT=batch.before_commit`).

A task's change and its result are committed together: what a dead server was doing is rolled
back and run again by the next one once the batch's lease expires (one second here). So every
one-time item the batch made is named by exactly one task's result, and has one
`onetime/created` event. Each test has a database of its own on each backend (the harness of
tests/scenarios/test_webhook_crash.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import func, select

from rebill.clock import SystemClock
from rebill.models import async_batch_tasks, async_batches, events, purchase_items
from tests.builders import make_address, make_customer
from tests.scenarios import test_webhook_crash as harness
from tests.scenarios.test_webhook_crash import Served

TASKS, BAD = 5_000, 10
NOT_FOUND = {"status_code": 422, "output": {"errors": {"address_id": ["address not found"]}}}


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """tests/scenarios/test_webhook_crash.py's server harness, on a database of its own."""
    yield from harness.served.__wrapped__(request, tmp_path)


@pytest.fixture(autouse=True)
def _short_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REBILL_BATCH_LEASE_SECONDS", "1")
    monkeypatch.setenv("REBILL_BATCH_EVERY", "0.2")


def _bodies(served: Served, count: int, bad: int) -> list[dict[str, Any]]:
    """``count`` one-time items over 250 addresses, every (count // bad)th naming no address."""
    api = SimpleNamespace(db=served.db, store=served.store, clock=SystemClock())
    customer = make_customer(api)
    addresses = [make_address(api, customer).id for _ in range(250)]
    day = (api.clock.now().date() + timedelta(days=5)).isoformat()
    step = count // bad
    return [{"address_id": 999_999_999 if n % step == step - 1 else addresses[n % len(addresses)],
             "product_title": f"Tea {n}", "price": "9.90", "quantity": 1, "next_charge_scheduled_at": day}
            for n in range(count)]


def _submit(served: Served, bodies: list[dict[str, Any]]) -> int:
    batch_id = served.request("POST", "/async_batches", {"batch_type": "onetime_create"})["async_batch"]["id"]
    for start in range(0, len(bodies), 1000):
        tasks = [{"body": body} for body in bodies[start:start + 1000]]
        assert served.request("POST", f"/async_batches/{batch_id}/tasks", {"tasks": tasks}) == {"count": len(tasks)}
    try:
        served.request("POST", f"/async_batches/{batch_id}/process")
    except OSError:  # a server that dies at its first chunk may not have answered yet
        pass
    return batch_id


def _batch(served: Served, batch_id: int) -> dict[str, Any]:
    return served.request("GET", f"/async_batches/{batch_id}")["async_batch"]


def _wait_until_completed(served: Served, batch_id: int, seconds: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = _batch(served, batch_id)
        if batch["status"] == "completed":
            return batch
        time.sleep(0.05)
    raise AssertionError(f"not completed within {seconds} s: {_batch(served, batch_id)}\n{served.output()}")


def _committed(served: Served, batch_id: int) -> tuple[dict[str, int], int]:
    """The batch's tasks by status, and the one-time items of the store."""
    t = async_batch_tasks
    with served.db.read() as conn:
        by_status = dict(conn.execute(select(t.c.status, func.count()).where(t.c.batch_id == batch_id)
                                      .group_by(t.c.status)).all())
        made = conn.execute(select(func.count()).where(purchase_items.c.store_id == served.store.id,
                                                       purchase_items.c.kind == "onetime")).scalar_one()
    return by_status, made


def _assert_each_task_ran_once(served: Served, batch_id: int, count: int, bad: int) -> None:
    batch = _batch(served, batch_id)
    assert (batch["success_task_count"], batch["fail_task_count"], batch["total_task_count"]) == (
        count - bad, bad, count)
    t = async_batch_tasks
    with served.db.read() as conn:
        results = conn.execute(select(t.c.status, t.c.result).where(t.c.batch_id == batch_id).order_by(t.c.id)).all()
        onetimes = set(conn.execute(select(purchase_items.c.id).where(
            purchase_items.c.store_id == served.store.id, purchase_items.c.kind == "onetime")).scalars())
        created = conn.execute(select(func.count()).where(events.c.store_id == served.store.id,
                                                          events.c.topic == "onetime/created")).scalar_one()
        processed = conn.execute(select(events.c.resource_id).where(
            events.c.store_id == served.store.id, events.c.topic == "async_batch/processed")).scalars().all()
    failed = [result for status, result in results if status == "failed"]
    assert failed == [NOT_FOUND] * bad
    named = [result["output"]["onetime"]["id"] for status, result in results if status == "success"]
    assert all(result["status_code"] == 201 for status, result in results if status == "success")
    # Every item made is named by exactly one task, and was recorded once.
    assert len(named) == len(set(named)) == count - bad
    assert set(named) == onetimes and created == count - bad
    assert processed == [batch_id]


def test_a_5000_task_batch_with_10_bad_tasks_ends_with_4990_successes_and_10_errors(served):
    bodies = _bodies(served, TASKS, BAD)
    served.start()
    batch_id = _submit(served, bodies)
    _wait_until_completed(served, batch_id)
    _assert_each_task_ran_once(served, batch_id, TASKS, BAD)


def test_the_same_after_a_sigkill_in_the_middle_and_a_restart(served):
    bodies = _bodies(served, TASKS, BAD)
    served.start()
    batch_id = _submit(served, bodies)
    deadline = time.monotonic() + 120
    while _batch(served, batch_id)["success_task_count"] < TASKS // 4:
        assert time.monotonic() < deadline, served.output()
        time.sleep(0.01)
    served.kill()
    by_status, made = _committed(served, batch_id)
    with served.db.read() as conn:
        left = conn.execute(select(async_batches.c.status).where(async_batches.c.id == batch_id)).scalar_one()
    assert left == "processing"  # held by the dead server's lease
    assert 0 < by_status.get("success", 0) < TASKS - BAD
    assert made == by_status["success"]  # what committed is exactly what its results say
    served.start()
    _wait_until_completed(served, batch_id)
    _assert_each_task_ran_once(served, batch_id, TASKS, BAD)


def test_a_server_killed_as_a_chunk_commits_loses_the_chunk_and_its_successor_runs_it(served):
    bodies = _bodies(served, 1_000, 2)
    served.start(failpoint="batch.before_commit")
    batch_id = _submit(served, bodies)
    assert served.process is not None and served.process.wait(timeout=60) < 0
    by_status, made = _committed(served, batch_id)
    assert made == 0 and "success" not in by_status and by_status.get("processing")  # claimed, rolled back
    served.start()
    _wait_until_completed(served, batch_id)
    _assert_each_task_ran_once(served, batch_id, 1_000, 2)


