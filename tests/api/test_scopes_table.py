"""docs/scopes.md is the contract for scopes: every operation appears there with its scope
and versions, and every operation but the login probes declares a scope. Two kinds of path need no
token at all, Stripe's webhook events (issue 16) and the reference (issue 17): they are no
operations, and they are the only exceptions."""

import re
from pathlib import Path

import pytest

from rebill.app import RESOURCES
from rebill.http import docs, edge, processor_events

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
        for also in op.also_needs:  # a second scope the endpoint needs, named in its row
            assert f"and `{also}`" in scope


def test_only_the_login_probes_need_no_scope():
    assert {op.path for op in OPERATIONS if op.scope is None} == {"/", "/token_information"}


def test_only_stripes_events_need_no_token_and_the_table_says_so():
    """The edge's one exception to the token check (http/edge.py) is Stripe's webhook path, whole:
    not an operation of the route table (which would take a token), and written in the table."""
    assert not any(op.path.startswith("/processors") for op in OPERATIONS)
    assert _doc_rows()[("POST", _doc_path("/processors/stripe/events/{key}"))] == (
        "none (Stripe calls it)", "no token: the Stripe signature of the store's endpoint secret")
    key = "k" * 32
    assert processor_events.endpoint_key(f"/processors/stripe/events/{key}") == key
    for path in ("/processors/stripe/events", f"/processors/stripe/events/{key}/", f"/processors/stripe/events/{key}/x",
                 f"/processors/other/events/{key}", "/processors/stripe/events/short", f"/x/processors/stripe/events/{key}",
                 "/", "/token_information"):
        assert processor_events.endpoint_key(path) is None, path
    # The edge takes the exception from that module alone: no other path skips the token.
    source = Path(edge.__file__).read_text()
    assert source.count("endpoint_key(") == 1 and "Unauthorized()" in source


def test_the_reference_needs_no_token_only_on_its_own_paths_and_the_table_says_so():
    """The edge's other exception (http/edge.py): the document, the page and the page's assets."""
    rows = _doc_rows()
    assert rows[("GET", "/openapi.json")][1] == "no token: the OpenAPI document"
    assert rows[("GET", "/docs")][1] == "no token: the reference page"
    assert not any(op.path in ("/openapi.json", "/docs") or op.path.startswith("/docs/") for op in OPERATIONS)
    for path in ("/openapi.json", "/docs", "/docs/static/swagger-ui.css", "/docs/static/anything"):
        assert docs.is_docs_path(path), path
    for path in ("/docs/", "/openapi.json/x", "/openapi", "/docsx", "/docs/static", "/x/docs", "/", "/openapi.JSON"):
        assert not docs.is_docs_path(path), path
    source = Path(edge.__file__).read_text()
    assert source.count("is_docs_path(") == 1
