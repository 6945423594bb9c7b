"""Deadlocks over addresses on PostgreSQL, from either side: a batch chunk's tasks lock their
addresses one by one in task order and hold them to the chunk's commit; a billing run's claim and
record lock theirs in id order. Found by the soak (bench/soak.py, issue 18), chunks of one-time
items beside the workers' billing runs: PostgreSQL gives one of the two up.

- The chunk's task given up: each retry in the same transaction met the same cycle (the earlier
  task's lock was still held), so the task was recorded as a 500. It now ends the chunk and runs
  first in the next one (jobs/batches.py).
- The billing run's claim given up: the run failed ("billing run failed" and its traceback) and
  its charges waited for the next run. The claim is now made again, as the record already was
  (domain/billing/run.py): nothing was claimed and no processor asked.

PostgreSQL only: SQLite runs one writer at a time and has no such cycle."""

from __future__ import annotations

import threading
import time
from datetime import date, timedelta

import pytest
from sqlalchemy import select, text

from rebill.domain.billing import run as billing
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.jobs import batches as job
from rebill.jobs.batches import BatchRunner
from rebill.models import addresses, async_batch_tasks
from tests.builders import charges_of, make_address, make_customer
from tests.scenarios.conftest import subscriber


def test_a_task_given_up_in_a_deadlock_with_the_chunks_own_locks_runs_in_the_next_chunk(api, monkeypatch):
    _postgresql_only(api)
    customer = make_customer(api)
    first, second = make_address(api, customer).id, make_address(api, customer).id
    day = (api.clock.now().date() + timedelta(days=5)).isoformat()
    batch = api.post("/async_batches", json={"batch_type": "onetime_create"}).json()["async_batch"]["id"]
    bodies = [{"address_id": a, "product_title": "Tea", "price": "9.90", "quantity": 1,
               "next_charge_scheduled_at": day} for a in (first, second)]
    assert api.post(f"/async_batches/{batch}/tasks", json={"tasks": [{"body": b} for b in bodies]}).status_code == 201
    assert api.post(f"/async_batches/{batch}/process").status_code == 202

    holding, done = threading.Event(), threading.Event()
    other: dict[str, int] = {}

    def billing_record() -> None:
        """Another transaction (a billing run's record) that holds the second address and
        wants the first, which the chunk's first task holds; it waits long before it looks for
        a deadlock, so that the chunk's task is the one PostgreSQL gives up."""
        with api.db.engine.connect() as conn, conn.begin():
            conn.execute(text("SET LOCAL deadlock_timeout = '20s'"))
            other["pid"] = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            conn.execute(select(addresses.c.id).where(addresses.c.id == second).with_for_update())
            holding.set()
            conn.execute(select(addresses.c.id).where(addresses.c.id == first).with_for_update())
        done.set()

    real = job.tasks.run
    started: list[threading.Thread] = []

    def second_task_meets_the_record(kind, call):
        if call.body.get("address_id") == second and not started:
            started.append(threading.Thread(target=billing_record, daemon=True))
            started[0].start()
            assert holding.wait(10)
            deadline = time.monotonic() + 10
            while not _waiting_for_a_lock(api, other["pid"]):  # it waits for the first address
                assert time.monotonic() < deadline
                time.sleep(0.01)
        return real(kind, call)

    monkeypatch.setattr(job.tasks, "run", second_task_meets_the_record)
    BatchRunner(api.client.app.services, chunk_seconds=60).run_due()
    assert done.wait(30)
    with api.db.read() as conn:
        results = conn.execute(select(async_batch_tasks.c.status, async_batch_tasks.c.result).where(
            async_batch_tasks.c.batch_id == batch).order_by(async_batch_tasks.c.id)).all()
    assert [(status, result["status_code"]) for status, result in results] == [("success", 201), ("success", 201)]
    assert api.get(f"/async_batches/{batch}").json()["async_batch"]["status"] == "completed"


def _waiting_for_a_lock(api, pid: int) -> bool:
    with api.db.read() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM pg_locks WHERE pid = :pid AND NOT granted"),
                                 {"pid": pid}).scalar_one())


def test_a_billing_claim_given_up_in_a_deadlock_is_made_again(api, at):
    _postgresql_only(api)
    at(date(2027, 3, 10))
    first, _ = subscriber(api, next_charge_scheduled_at=date(2027, 3, 10))
    second, _ = subscriber(api, next_charge_scheduled_at=date(2027, 3, 10))
    due = [c.id for address in (first, second) for c in charges_of(api, address.id)]
    holding, waiting = threading.Event(), threading.Event()
    other: dict[str, int] = {}

    def chunk() -> None:
        """A batch chunk: it holds the second address (an earlier task) and wants the first
        (the next task) once the claim waits for the second; it looks for a deadlock late, so
        that the claim is the one PostgreSQL gives up."""
        with api.db.engine.connect() as conn, conn.begin():
            conn.execute(text("SET LOCAL deadlock_timeout = '20s'"))
            other["pid"] = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            conn.execute(select(addresses.c.id).where(addresses.c.id == second.id).with_for_update())
            holding.set()
            assert waiting.wait(10)
            conn.execute(select(addresses.c.id).where(addresses.c.id == first.id).with_for_update())

    thread = threading.Thread(target=chunk, daemon=True)
    thread.start()
    assert holding.wait(10)
    claimer: dict[str, object] = {}

    def bill() -> None:
        try:
            claimer["done"] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, due,
                                              api.clock.now())
        except Exception as exc:  # noqa: BLE001 - the test reports it
            claimer["error"] = exc

    biller = threading.Thread(target=bill, daemon=True)
    biller.start()
    deadline = time.monotonic() + 10
    while not _anyone_waiting_on(api, other["pid"]):  # the claim holds the first and waits for the second
        assert time.monotonic() < deadline
        time.sleep(0.01)
    waiting.set()
    thread.join(30)
    biller.join(30)
    assert "error" not in claimer, claimer.get("error")
    assert sorted(r.charge_id for r in claimer["done"]) == sorted(due)
    assert {c.status for address in (first, second) for c in charges_of(api, address.id) if c.id in due} == {"success"}


def _postgresql_only(api) -> None:
    if api.db.dialect != "postgresql":
        pytest.skip("SQLite runs one writer at a time: no two transactions lock rows in turn")


def _anyone_waiting_on(api, pid: int) -> bool:
    """Whether another backend waits for a lock ``pid`` holds."""
    with api.db.read() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"),
                                 {"pid": pid}).scalar_one())
