"""schemathesis against 2021-11's document: tests/fuzz/test_schemathesis.py says what and why;
a module of its own so that another worker runs it beside 2021-01's, with its own server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz.test_schemathesis import run_schemathesis
from tests.served import Server, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("fuzz-2021-11")) as running:
        yield running


def test_schemathesis_finds_nothing_in_2021_11(server: Server, tmp_path: Path) -> None:
    run_schemathesis(server, "2021-11", tmp_path)
