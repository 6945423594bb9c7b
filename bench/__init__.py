"""The benchmarks of `make bench` (docs/performance.md) and what several of them share."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import rebill

# Set (`bench.writes --unfrozen`, or by hand for `bench.billing`; inherited by child processes):
# the benches leave the heap unfrozen (rebill/heap.py), to measure what the freeze saves.
UNFROZEN = "REBILL_BENCH_UNFROZEN"


def compile_sources() -> None:
    """Every module of Rebill and the benches compiled beforehand: a process counted under
    callgrind would otherwise count the compiling of the sources it is the first to import
    (about a billion instructions)."""
    root = Path(__file__).parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "bench"), *rebill.__path__], check=True)


def callgrind(code: str, out: Path) -> int:
    """The instructions of a child Python process running ``code`` under valgrind's callgrind
    (its profile written to ``out``). One hash seed: set and dict orders, and so the work, the
    same in every run."""
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code],
                   check=True, capture_output=True, cwd=Path(__file__).parent.parent,
                   env={**os.environ, "PYTHONHASHSEED": "0"})
    return int(re.search(r"^summary: (\d+)", out.read_text(), re.M).group(1))  # type: ignore[union-attr]

