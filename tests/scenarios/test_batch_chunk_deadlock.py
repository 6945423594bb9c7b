"""A batch task that PostgreSQL picks as a deadlock's victim is run again in the next chunk, not
answered 500 (jobs/batches.py).

Found by the soak (bench/soak.py, issue 18): a chunk of one-time item tasks locks each task's
address in task order and holds the locks to its commit; a billing run's record locks its
addresses in id order. The chunk held address X (an earlier task) and wanted Y, the run held Y
and wanted X: PostgreSQL gave the task up, and each retry in the same transaction met the same
cycle (the earlier task's lock was still held), so the task was recorded as a 500. PostgreSQL
only: SQLite runs one writer at a time and has no such cycle."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from rebill.jobs import batches as job
from rebill.jobs.batches import BatchRunner
from rebill.models import addresses, async_batch_tasks
from tests.builders import make_address, make_customer


def test_a_task_given_up_in_a_deadlock_with_the_chunks_own_locks_runs_in_the_next_chunk(api, monkeypatch):
    if api.db.dialect != "postgresql":
        pytest.skip("SQLite runs one writer at a time: no two transactions lock rows in turn")
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
