"""A frozen process does not stall the others (issue 18, "Faults"; PostgreSQL).

A process paused mid transaction (SIGSTOP, a machine suspended, a VM migrating) keeps its
session and its row locks: PostgreSQL cannot tell it from a slow one, and TCP keepalives are
answered by the paused machine's kernel. Before `REBILL_IDLE_TRANSACTION_SECONDS`, a worker
frozen as a batch chunk was about to commit held the batch's row: the process that took the
batch over after its lease waited on that row for as long as the first stayed frozen, and with
it one of its write threads. Now PostgreSQL ends a session idle that long inside a transaction
(db/engine.py): its locks go, the other process finishes the batch, and the frozen one, let go,
finds its transaction gone and commits nothing. Each task still runs once.

The harness is tests/scenarios/test_async_batch_crash.py's: a database of its own, `rebill
serve` processes on it (both run the background jobs, `REBILL_BACKGROUND_JOBS=on`, as workers
do), the batch's lease one second.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scenarios import test_async_batch_crash as batches
from tests.scenarios import test_webhook_crash as harness
from tests.scenarios.test_webhook_crash import Served

IDLE_SECONDS = 2


@pytest.fixture(params=["postgresql"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    yield from harness.served.__wrapped__(request, tmp_path)


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REBILL_BATCH_LEASE_SECONDS", "1")
    monkeypatch.setenv("REBILL_BATCH_EVERY", "0.2")
    monkeypatch.setenv("REBILL_BACKGROUND_JOBS", "on")
    monkeypatch.setenv("REBILL_FAILPOINT_SIGNAL", "SIGSTOP")
    monkeypatch.setenv("REBILL_IDLE_TRANSACTION_SECONDS", str(IDLE_SECONDS))


def _state(pid: int) -> str:
    """The process's state letter (T: stopped), from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _wait_until_stopped(pid: int, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while _state(pid) != "T":
        assert time.monotonic() < deadline, "the server never reached its failpoint"
        time.sleep(0.02)


def test_a_worker_frozen_mid_chunk_does_not_stall_the_one_that_takes_its_batch_over(served):
    bodies = batches._bodies(served, 1_000, 2)
    served.start(failpoint="batch.before_commit")
    frozen = served.process
    assert frozen is not None
    batch_id = batches._submit(served, bodies)
    _wait_until_stopped(frozen.pid)
    by_status, made = batches._committed(served, batch_id)
    assert made == 0 and "success" not in by_status, served.output()  # its chunk is open, holding its rows

    served.process, served.port = None, 0  # a second server, on a port of its own
    took_over = time.monotonic()
    served.start()
    # Without the setting, this waited on the frozen one's lock of the batch row for good.
    batches._wait_until_completed(served, batch_id, seconds=60)
    assert time.monotonic() - took_over < 45
    batches._assert_each_task_ran_once(served, batch_id, 1_000, 2)

    # Let go, the frozen one finds its session ended: its chunk commits nothing.
    frozen.send_signal(signal.SIGCONT)
    time.sleep(IDLE_SECONDS)
    assert frozen.poll() is None  # it lives on, as after a database blip
    batches._assert_each_task_ran_once(served, batch_id, 1_000, 2)
    output = served.output()
    # A database failure of the job, told as one warning line, not a chunk's failure (which
    # would make the batch go on one task at a time) nor an error with a traceback.
    assert "WARNING rebill.jobs: async batches: the database was busy or unreachable" in output, output
    assert "idle-in-transaction timeout" in output and "Traceback" not in output, output
    frozen.kill()
    frozen.wait(timeout=30)
