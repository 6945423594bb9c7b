"""A long-running process takes what it built at start out of the cycle collector (rebill/heap.py):
the server's entry point and the long commands freeze their heap, after collecting what is garbage."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rebill import heap
from rebill.cli import app as cli

runner = CliRunner()


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_freeze_collects_the_garbage_first_then_keeps_the_living_out_of_collections():
    garbage = _Node()
    gone = weakref.ref(garbage)
    del garbage
    alive = _Node()
    try:
        heap.freeze()
        assert gone() is None  # not kept for good by the freeze
        assert gc.get_freeze_count() > 0
        kept = weakref.ref(alive)
        del alive
        gc.collect()
        assert kept() is not None  # frozen: the full collection did not walk it
    finally:
        gc.unfreeze()
    gc.collect()
    assert kept() is None  # unfrozen, collected as any other


def test_the_server_process_freezes_what_its_import_built(tmp_path: Path):
    """uvicorn imports `rebill.asgi` in each API process (`rebill serve`, also with --workers)."""
    env = {**os.environ, "REBILL_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}", "REBILL_METRICS": "off"}
    said = subprocess.run([sys.executable, "-c", "import gc, rebill.asgi; print(gc.get_freeze_count(), "
                           "len(gc.get_objects()))"], env=env, capture_output=True, text=True, timeout=60)
    assert said.returncode == 0, said.stderr
    frozen, tracked = map(int, said.stdout.split())
    assert frozen > 50_000 and tracked < frozen / 10


@pytest.fixture
def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert runner.invoke(cli, ["migrate", "--database", url]).exit_code == 0
    made = runner.invoke(cli, ["stores", "create", "shop", "--sandbox", "--database", url])
    assert made.exit_code == 0, made.output
    return url


@pytest.mark.parametrize("command", [["bill"], ["schedule", "regenerate"], ["clock", "advance", "--store", "shop",
                                                                          "--days", "1"]])
def test_the_long_commands_freeze_before_their_run(migrated: str, monkeypatch: pytest.MonkeyPatch, command):
    calls: list[int] = []
    monkeypatch.setattr(heap, "freeze", lambda: calls.append(1))
    result = runner.invoke(cli, [*command, "--database", migrated])
    assert result.exit_code == 0, result.output
    assert calls == [1]


def test_the_worker_freezes_before_its_jobs_start(migrated: str, monkeypatch: pytest.MonkeyPatch):
    """The worker's run ends at once here (its metrics address is taken), after the freeze."""
    from tests.unit.test_cli import worker_on_a_taken_metrics_address
    calls: list[int] = []
    monkeypatch.setattr(heap, "freeze", lambda: calls.append(1))
    result, _ = worker_on_a_taken_metrics_address(migrated)
    assert result.exit_code == 2, result.output
    assert calls == [1]
