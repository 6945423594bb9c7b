"""Every module of bench/ imports as the first one of its process, as `make bench` and the
commands of docs/performance.md start them (found when `bench.billing` came to import
`bench.writes`: `python -m bench.run` died of an import cycle no test had imported)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent

CHECK = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def test_each_bench_module_imports_first():
    names = [f"bench.{path.stem}" for path in sorted((ROOT / "bench").glob("*.py")) if path.stem != "__init__"]
    assert "bench.run" in names and "bench.billing" in names
    done = subprocess.run([sys.executable, "-c", CHECK, *names], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
