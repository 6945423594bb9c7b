"""docs/scopes.md is the contract for scopes: every operation appears there with its scope
and versions, and every operation but the login probes declares a scope."""

import re
from pathlib import Path

import pytest

from rebill.app import RESOURCES

DOC = Path(__file__).resolve().parents[2] / "docs" / "scopes.md"
OPERATIONS = [op for module in RESOURCES for op in module.endpoints.operations]


def _doc_rows() -> dict[tuple[str, str], tuple[str, str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        for method, path in re.findall(r"`(GET|POST|PUT|DELETE) ([^`]+)`", cells[0]):
            rows[(method, _doc_path(path))] = (cells[1], cells[2])
    return rows


def _doc_path(path: str) -> str:
    return re.sub(r"\{(\w+?)(_id)?(:\w+)?\}", "{id}", path)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: f"{op.method} {op.path}")
def test_every_operation_is_in_the_scope_table_with_its_scope_and_versions(op):
    rows = _doc_rows()
    key = (op.method, _doc_path(op.path))
    assert key in rows, f"{key} missing from docs/scopes.md"
    versions, scope = rows[key]
    expected_versions = "both" if len(op.versions) == 2 else next(iter(op.versions))
    assert versions == expected_versions
    if op.scope is None:
        assert scope == "any valid token"
    else:
        assert scope.startswith(f"`{op.scope}`")


def test_only_the_login_probes_need_no_scope():
    assert {op.path for op in OPERATIONS if op.scope is None} == {"/", "/token_information"}
