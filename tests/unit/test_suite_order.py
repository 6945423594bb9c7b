"""The suite's own scheduling (tests/conftest.py): the files named to run first exist, so that a
renamed file does not silently fall back to the end of the run and bring back its long tail."""

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_named_to_run_first_exists():
    assert [path for path in LONGEST_FIRST if not (ROOT / path).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
