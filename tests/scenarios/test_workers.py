"""The deployment of issue 18, process by process: `rebill worker` processes split a billing day
between them and pay each charge once, a worker killed with SIGKILL mid run has its charges paid
once by another, a worker told to stop finishes the batch it holds, and the API processes of
`rebill serve --workers 2` run the jobs in one process only, or in none beside a worker.

Every test has a database of its own (the jobs lock and the workers mark belong to a database)
and real processes. Who did what is read from the claims (a billing run's claim names its host
and process, domain/billing/claim.py ``run_name``), watched while they are held, and from each
process's log line about the jobs (jobs/scheduler.py). Money is counted in the sandbox
gateway's ledger, as a processor would count it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bench.billing import seed
from sqlalchemy import func, select

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.billing.claim import UNANSWERED
from rebill.domain.store import service as store_service
from rebill.models import charges, orders, sandbox_payments
from tests.conftest import fresh_database_url

# Background jobs that would only add noise here: the billing run is what is watched.
QUIET = {"REBILL_REGENERATE_EVERY": "0", "REBILL_PURGE_EVERY": "0", "REBILL_BATCH_EVERY": "0",
         "REBILL_DELIVER_WEBHOOKS": "0", "REBILL_LOG_REQUESTS": "off"}


@dataclass
class Day:
    """A database with one store whose ``count`` charges are all due today (bench/billing.py's
    seed: a default sandbox payment method that pays each), and the processes started on it."""

    url: str
    db: Database
    store_id: int
    charge_ids: list[int]
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    holders: Counter[int] = field(default_factory=Counter)  # pid -> batches seen claimed
    together: int = 0  # the most billing runs seen holding claims at one moment

    def start(self, *command: str, env: dict[str, str] | None = None, name: str = "worker") -> subprocess.Popen[bytes]:
        environment = {**os.environ, **QUIET, "REBILL_RATE_LIMIT": "off"}
        environment.pop("REBILL_FAILPOINT", None)
        environment.update(env or {})
        log = (self.logs / f"{name}-{len(self.processes)}.log").open("wb")
        process = subprocess.Popen([sys.executable, "-m", "rebill.cli", *command, "--database", self.url],
                                   env=environment, stdout=log, stderr=subprocess.STDOUT)
        process.log = Path(log.name)  # type: ignore[attr-defined]
        self.processes.append(process)
        return process

    def worker(self, *, env: dict[str, str] | None = None, concurrency: int = 1) -> subprocess.Popen[bytes]:
        return self.start("worker", "--concurrency", str(concurrency), env=env)

    def output(self, process: subprocess.Popen[bytes]) -> str:
        return process.log.read_text(errors="replace")  # type: ignore[attr-defined]

    def all_output(self) -> str:
        return "\n".join(f"--- {p.args}\n{self.output(p)[-4000:]}" for p in self.processes)

    def left(self) -> int:
        """Charges of the day not paid yet (queued, or claimed)."""
        with self.db.read() as conn:
            return conn.execute(select(func.count()).select_from(charges).where(
                charges.c.id.in_(self.charge_ids), charges.c.status != "success")).scalar_one()

    def claims(self) -> dict[int, str]:
        with self.db.read() as conn:
            return dict(conn.execute(select(charges.c.id, charges.c.claimed_by).where(
                charges.c.store_id == self.store_id, charges.c.claimed_by.is_not(None))).all())

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Notes the process of every billing run seen claiming charges, until the block ends
        (not of claims held before it: a dead worker's)."""
        stop = threading.Event()
        seen = set(self.claims().values())

        def watch() -> None:
            while not stop.is_set():
                runs = {run.removesuffix(UNANSWERED) for run in self.claims().values()}
                self.together = max(self.together, len(runs))
                for run in runs - seen:
                    seen.add(run)
                    self.holders[holder(run)] += 1
                time.sleep(0.01)
        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)

    def wait_paid(self, seconds: float = 240) -> None:
        deadline = time.monotonic() + seconds
        while self.left():
            for process in self.processes:
                if process.poll() not in (None, 0, -signal.SIGKILL, -signal.SIGTERM):
                    raise AssertionError(f"{process.args} exited with {process.returncode}\n{self.all_output()}")
            assert time.monotonic() < deadline, f"{self.left()} charges still unpaid\n{self.all_output()}"
            time.sleep(0.1)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)

    def assert_each_paid_once(self) -> None:
        with self.db.read() as conn:
            taken = Counter(conn.execute(select(sandbox_payments.c.reference).where(
                sandbox_payments.c.store_id == self.store_id, sandbox_payments.c.outcome == "captured")).scalars())
            statuses = Counter(conn.execute(select(charges.c.status).where(charges.c.id.in_(self.charge_ids))).scalars())
            numbers = sorted(conn.execute(select(orders.c.number).where(orders.c.store_id == self.store_id)).scalars())
        assert statuses == {"success": len(self.charge_ids)}
        # One order a charge, numbered 1, 2, 3... in the store without a gap or a repeat, though
        # the workers' batches took their numbers turn about (order/repository.py ``number``).
        assert numbers == list(range(1, len(self.charge_ids) + 1))
        assert {f"charge {i}" for i in self.charge_ids} == set(taken)  # none missing, none else paid
        assert set(taken.values()) == {1}, [ref for ref, n in taken.items() if n > 1][:10]
        assert self.claims() == {}


def holder(run: str) -> int:
    """The process id in a billing run's claim (``host:pid:random``, maybe ``:unanswered``)."""
    return int(run.split(":")[1])


@contextmanager
def billing_day(backend: str, tmp_path: Path, count: int) -> Iterator[Day]:
    with fresh_database_url(backend, tmp_path) as url:
        store, _ = seed(url, count)
        db = Database.from_url(url)
        with db.read() as conn:
            ids = list(conn.execute(select(charges.c.id).where(
                charges.c.store_id == store.id, charges.c.status == "queued",
                charges.c.scheduled_at <= SystemClock().now().date())).scalars())
        assert len(ids) == count
        day = Day(url, db, store.id, ids, tmp_path)
        try:
            yield day
        finally:
            day.stop_all()
            db.dispose()


def test_two_workers_on_postgresql_split_a_billing_day_and_pay_each_charge_once(tmp_path):
    with billing_day("postgresql", tmp_path, 3000) as day:
        with day.watching():
            workers = [day.worker(env={"REBILL_BILL_EVERY": "3600"}) for _ in range(2)]
            day.wait_paid()
        day.stop_all()
        assert [w.returncode for w in workers] == [0, 0], day.all_output()
        day.assert_each_paid_once()
        # Both did work: each held batches of the day (at 500 charges a batch, 6 in all).
        assert set(day.holders) == {w.pid for w in workers}, (day.holders, day.all_output())
        for worker in workers:
            assert f"background jobs: process {worker.pid} runs them (worker" in day.output(worker)


def test_one_worker_with_concurrency_two_runs_two_billing_runs_side_by_side(tmp_path):
    with billing_day("postgresql", tmp_path, 3000) as day:
        with day.watching():
            worker = day.worker(env={"REBILL_BILL_EVERY": "3600"}, concurrency=2)
            day.wait_paid()
        day.stop_all()
        assert worker.returncode == 0, day.all_output()
        day.assert_each_paid_once()
        assert set(day.holders) == {worker.pid} and day.together == 2, (day.holders, day.together)
        assert f"process {worker.pid} runs them (worker, concurrency 2)" in \
            day.output(worker)


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_a_worker_killed_mid_billing_run_has_its_charges_paid_once_by_another(tmp_path, backend):
    with billing_day(backend, tmp_path, 800) as day:
        # The first dies (SIGKILL, no cleanup) right after the processor paid its first batch,
        # before anything of it was recorded: its charges stay claimed by it.
        doomed = day.worker(env={"REBILL_BILL_EVERY": "3600", "REBILL_FAILPOINT": "billing.after_gateway"})
        assert doomed.wait(timeout=120) == -signal.SIGKILL, day.all_output()
        held = day.claims()
        assert held and {holder(run) for run in held.values()} == {doomed.pid}
        with day.watching():
            # Another takes them over once the claims are stale (2 s here, 60 by default), and
            # pays them with the same idempotency keys: the processor answers what it did.
            survivor = day.worker(env={"REBILL_BILL_EVERY": "1", "REBILL_CLAIM_STALE_SECONDS": "2"})
            day.wait_paid()
        day.stop_all()
        assert survivor.returncode == 0, day.all_output()
        day.assert_each_paid_once()
        assert set(day.holders) == {survivor.pid}


def _left_unclaimed_then_paid_by_another(day: Day) -> None:
    """A process stopped mid day recorded what it claimed: the rest waits, unclaimed, and a
    worker started then pays it, each charge once."""
    assert day.claims() == {}, day.all_output()
    assert 0 < day.left() < len(day.charge_ids)
    worker = day.worker(env={"REBILL_BILL_EVERY": "3600"})
    day.wait_paid()
    day.stop_all()
    assert worker.returncode == 0
    day.assert_each_paid_once()


def test_a_worker_told_to_stop_finishes_the_batch_it_holds_and_takes_no_other(tmp_path):
    with billing_day("postgresql", tmp_path, 2000) as day:
        first = day.worker(env={"REBILL_BILL_EVERY": "3600"})
        deadline = time.monotonic() + 120
        while not day.claims():  # its first batch is claimed: it is mid run
            assert time.monotonic() < deadline and first.poll() is None, day.all_output()
            time.sleep(0.01)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0, day.all_output()
        assert re.search(rf"worker {first.pid}: SIGTERM, stopping", day.output(first))
        assert f"worker {first.pid}: stopped" in day.output(first)
        _left_unclaimed_then_paid_by_another(day)


def test_a_server_told_to_stop_finishes_the_billing_batch_its_jobs_hold(tmp_path):
    """Found by an audit: `rebill serve`'s shutdown cancelled its running jobs, which ended the
    wait for them at once; the process exited mid batch (an async batch's chunk, a billing
    run's batch), left its claims to lapse and logged a CancelledError traceback. Its jobs'
    threads now finish the batch they hold, as a worker's do."""
    with billing_day("postgresql", tmp_path, 2000) as day:
        server = day.start("serve", "--port", str(free_port()), "--jobs", "on", name="serve",
                           env={"REBILL_BILL_EVERY": "0.2"})
        deadline = time.monotonic() + 120
        while not day.claims():  # its first batch is claimed: the billing run is mid run
            assert time.monotonic() < deadline and server.poll() is None, day.all_output()
            time.sleep(0.01)
        server.send_signal(signal.SIGTERM)
        # uvicorn ends by raising the signal again once its shutdown is complete.
        assert server.wait(timeout=60) in (0, -signal.SIGTERM), day.all_output()
        output = day.output(server)
        assert "Application shutdown complete" in output, output
        assert "CancelledError" not in output and "Traceback" not in output, output
        _left_unclaimed_then_paid_by_another(day)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _jobs_lines(day: Day, process: subprocess.Popen[bytes]) -> list[tuple[int, str]]:
    """(pid, what) of each `background jobs:` line of a process's log."""
    return [(int(pid), what) for pid, what in re.findall(r"background jobs: (?:off in )?process (\d+) ([^\n]*)",
                                                         day.output(process))]


def _serve(day: Day, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return day.start("serve", "--port", str(free_port()), "--workers", "2", *extra, name="serve",
                     env={"REBILL_BILL_EVERY": "0.5", **(env or {})})


def _until(check, day: Day, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, day.all_output()
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_serve_with_two_processes_and_no_worker_runs_the_jobs_in_one_which_another_replaces(tmp_path, backend):
    with billing_day(backend, tmp_path, 600) as day:
        with day.watching():
            server = _serve(day)
            _until(lambda: len(_jobs_lines(day, server)) >= 2, day)
            day.wait_paid()
        lines = _jobs_lines(day, server)
        leaders = [pid for pid, what in lines if what.startswith("runs them")]
        standing = [pid for pid, what in lines if what.startswith("stands by")]
        assert len(leaders) == 1 and len(standing) == 1, lines
        [leader] = leaders
        assert set(day.holders) == {leader}  # one process billed, the other none
        day.assert_each_paid_once()
        # The leader dies: the other process takes the jobs over within a check or two.
        os.kill(leader, signal.SIGKILL)
        _until(lambda: (standing[0], "runs them (it holds the deployment's jobs lock)") in _jobs_lines(day, server),
               day, 30)


def test_beside_a_worker_the_api_processes_run_no_jobs(tmp_path):
    with billing_day("postgresql", tmp_path, 600) as day:
        with day.watching():
            off = _serve(day, "--jobs", "off")
            _until(lambda: len(_jobs_lines(day, off)) >= 2, day)
            worker = day.worker(env={"REBILL_BILL_EVERY": "1"})
            # `auto` API processes started beside a worker leave the jobs to it.
            _until(lambda: f"process {worker.pid} runs them (worker" in day.output(worker), day)
            auto = _serve(day)
            _until(lambda: len(_jobs_lines(day, auto)) >= 2, day)
            day.wait_paid()
        assert [what for _, what in _jobs_lines(day, off)] == ["(REBILL_BACKGROUND_JOBS=off)"] * 2
        assert sorted(what for _, what in _jobs_lines(day, auto)) == [
            "leaves them to `rebill worker` processes", "stands by (another process holds the jobs lock)"]
        api_pids = {pid for pid, _ in _jobs_lines(day, off) + _jobs_lines(day, auto)}
        assert len(api_pids) == 4 and worker.pid not in api_pids
        assert set(day.holders) == {worker.pid}, (day.holders, day.all_output())
        day.assert_each_paid_once()


def test_two_workers_share_webhook_deliveries_and_async_batches_and_do_each_once(tmp_path, monkeypatch):
    """Deliveries and batches are shared through their leases (jobs/deliver.py, jobs/batches.py):
    two workers beside an API that runs no job send each delivery once and run each task once,
    and both take part (a batch runner starts one waiting batch a look, not every store's)."""
    from tests.receiver import Receiver
    from tests.scenarios import test_async_batch_crash as batches
    from tests.scenarios.test_webhook_crash import Served

    monkeypatch.setenv("REBILL_BACKGROUND_JOBS", "off")  # the API server's (Served.start)
    with fresh_database_url("postgresql", tmp_path) as url:
        upgrade(url)
        db = Database.from_url(url)
        now = SystemClock().now()
        shops = []
        with db.write() as conn:
            for name in ("first", "second"):
                store = store_service.create_store(conn, now, name=name, ships_to=["US"])
                shops.append((store, store_service.create_token(conn, now, store=store, name="tests")))
        receiver = Receiver(delay=0.02).start()
        first = Served(url, db, *shops[0], tmp_path)
        day = Day(url, db, shops[0][0].id, [], tmp_path)
        seen: set[int] = set()
        try:
            first.start()
            second = Served(url, db, *shops[1], tmp_path, port=first.port, process=first.process)
            bodies = [(served, batches._bodies(served, 400, 4)) for served in (first, second)]
            first.request("POST", "/webhooks", {"address": receiver.url, "topic": "customer/created"})
            env = {"REBILL_BILL_EVERY": "3600", "REBILL_BATCH_EVERY": "0.2", "REBILL_DELIVERY_LEASE_SECONDS": "30",
                   "REBILL_DELIVER_WEBHOOKS": "1"}
            workers = [day.worker(env=env) for _ in range(2)]
            for worker in workers:
                _until(lambda w=worker: f"process {w.pid} runs them (worker" in day.output(w), day)
            stop = threading.Event()

            def watch() -> None:  # the processes seen holding a lease
                from rebill.models import async_batches, webhook_deliveries
                while not stop.is_set():
                    with db.read() as conn:
                        for table in (async_batches, webhook_deliveries):
                            for name in conn.execute(select(table.c.claimed_by).where(
                                    table.c.claimed_by.is_not(None))).scalars():
                                seen.add(int(name.split(":")[1]))
                    time.sleep(0.01)
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                for n in range(200):
                    first.request("POST", "/customers", {"email": f"shared{n}@example.com", "first_name": "S",
                                                         "last_name": f"W{n}"})
                submitted = [(served, batches._submit(served, these), these) for served, these in bodies]
                for served, batch_id, _ in submitted:
                    batches._wait_until_completed(served, batch_id)
                first.wait_until_all_succeeded(200)
            finally:
                stop.set()
                watcher.join(timeout=10)
            day.stop_all()
            assert [w.returncode for w in workers] == [0, 0], day.all_output()
            for served, batch_id, _ in submitted:
                batches._assert_each_task_ran_once(served, batch_id, 400, 4)
        finally:
            day.stop_all()
            first.stop()
            receiver.stop()
            db.dispose()
        ids = [r.headers["webhook-id"] for r in receiver.received]
        assert len(ids) == len(set(ids)) == 200  # each delivery sent once
        assert seen == {w.pid for w in workers}, (seen, day.all_output())


def test_a_worker_waits_for_the_schema_instead_of_migrating_and_stops_at_once_meanwhile(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    day = Day(url, None, 0, [], tmp_path)  # type: ignore[arg-type]
    try:
        bored = day.worker()  # told to stop while it waits
        waiting = day.worker()
        for worker in (bored, waiting):
            _until(lambda w=worker: "waiting for `rebill migrate`" in day.output(w), day)
        bored.send_signal(signal.SIGTERM)
        assert bored.wait(timeout=30) == 0, day.all_output()
        assert "runs them" not in day.output(waiting)
        upgrade(url)  # what `rebill migrate` (or a starting `rebill serve`) does
        _until(lambda: f"process {waiting.pid} runs them (worker" in day.output(waiting), day)
        day.stop_all()
        assert waiting.returncode == 0, day.all_output()
    finally:
        day.stop_all()
