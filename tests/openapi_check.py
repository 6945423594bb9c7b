"""Every reply the suite receives, checked against the OpenAPI document (issue 17,
docs/openapi.md "The check of every reply").

``ResponseChecker`` holds a reply to the document of the version that gave it: the status is one
the operation documents, the body matches that status's schema (jsonschema, Draft 2020-12, the
dialect of OpenAPI 3.1), the headers it requires are there. Validators are compiled once per
(version, operation, status) and cached: a check costs a path match and one validation.

The plugin (loaded by tests/conftest.py) wraps ``TestClient.request``, so every test client of
every app is checked. ``REBILL_OPENAPI_CHECK`` chooses what a mismatch does:

- ``strict`` (the default): the test that got the reply fails with the problems;
- ``report``: collected per worker and merged at the end of the session into
  ``var/openapi-mismatches.json`` (each problem once, with its count and a test that met it), and
  counted in the terminal summary: a survey of a large change, nothing fails;
- ``off``: no check.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonschema import Draft202012Validator
from starlette.routing import compile_path
from starlette.testclient import TestClient

from rebill.api.openapi.edge_paths import DOCS_PATH, EDGE_PATHS
from rebill.api.routing import Operation

# What the edge and the router answer before any operation is known (http/edge.py): a path
# that matches no route, or a method the path does not take, or an operation of the other version.
NO_ROUTE = frozenset({400, 401, 403, 404, 426, 429})
NO_METHOD = frozenset({401, 403, 405, 426, 429})
OTHER_VERSION = frozenset({401, 403, 426, 429, 501})
_INDEX = re.compile(r"/\d+(?=/|$)")


@dataclass(frozen=True)
class Mismatch:
    """One reply outside the document. ``key`` groups replies with the same problem."""

    version: str
    method: str
    path: str  # the document's path template
    status: int
    problem: str

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        return (self.version, self.method, self.path, self.status, self.problem)

    def __str__(self) -> str:
        return f"{self.version} {self.method} {self.path} -> {self.status}: {self.problem}"


@dataclass(frozen=True)
class _Route:
    regex: re.Pattern[str]
    template: str
    methods: dict[str, Operation]


class ResponseChecker:
    def __init__(self, operations: list[Operation], documents: Callable[[str], dict[str, Any]],
                 versions: tuple[str, ...]) -> None:
        self.documents, self.versions = documents, versions
        by_path: dict[str, dict[str, Operation]] = {}
        for op in operations:
            by_path.setdefault(op.path, {})[op.method] = op
        self.routes = []
        for path, methods in by_path.items():
            regex, template, _ = compile_path(path)
            self.routes.append(_Route(regex, template, methods))
        self._validators: dict[tuple[str, str, str, str], Any] = {}

    def _route(self, path: str) -> _Route | None:
        for route in self.routes:
            if route.regex.match(path):
                return route
        return None

    def check(self, method: str, path: str, version: str | None, status: int, headers: Mapping[str, str],
              body: bytes) -> list[Mismatch]:
        """The ways the reply leaves the document (none: it is documented)."""
        if path in EDGE_PATHS or path.startswith(DOCS_PATH + "/") or \
                any(path.startswith(p.split("{")[0]) and "{" in p for p in EDGE_PATHS):
            return []  # the edge's own paths: their tests check them
        head = method == "HEAD"
        method = "GET" if head else method
        version = version if version in self.versions else self.versions[0]
        route = self._route(path)
        op = route.methods.get(method) if route is not None else None
        template = route.template if route is not None else _INDEX.sub("/{id}", path)

        def mismatch(problem: str) -> list[Mismatch]:
            return [Mismatch(version, method, template, status, problem)]

        if op is None or version not in op.versions:
            allowed = NO_ROUTE if route is None else NO_METHOD if op is None else OTHER_VERSION
            if status not in allowed:
                return mismatch("status not documented (no operation answers it)")
            if head:
                return []  # a reply to HEAD has the headers of the GET and no body (RFC 9110 9.3.2)
            return self._body(version, ("error",), status, body, mismatch)
        responses = self.documents(version)["paths"][template][method.lower()]["responses"]
        if str(status) not in responses:
            return mismatch("status not documented")
        problems = [] if head else self._body(version, (template, method.lower(), str(status)), status, body,
                                              mismatch)
        response = self._resolve(version, responses[str(status)])
        for name, spec in (response.get("headers") or {}).items():
            spec = self._resolve(version, spec)
            if spec.get("required") and name.lower() not in headers:
                problems += mismatch(f"header {name} missing")
        return problems

    def _resolve(self, version: str, item: dict[str, Any]) -> dict[str, Any]:
        target = item.get("$ref")
        if not target:
            return item
        node: Any = self.documents(version)
        for part in target.lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node  # type: ignore[no-any-return]

    def _body(self, version: str, where: tuple[str, ...], status: int, body: bytes,
              mismatch: Callable[[str], list[Mismatch]]) -> list[Mismatch]:
        validator = self._validator(version, where, status)
        if validator is None:
            return [] if not body else mismatch("a body where the document says none")
        try:
            data = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return mismatch("the body is not JSON")
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        return [m for e in errors[:5] for m in mismatch(_describe(e))]

    def _validator(self, version: str, where: tuple[str, ...], status: int) -> Any:
        key = (version, *where)
        if key not in self._validators:
            document = self.documents(version)
            if where == ("error",):
                pointer = "#/components/schemas/Error"
            else:
                template, method, code = where
                declared = document["paths"][template][method]["responses"][code]
                content = (self._resolve(version, declared).get("content") or {}).get("application/json")
                if content is None:
                    self._validators[key] = None
                    return None
                escaped = template.replace("~", "~0").replace("/", "~1")
                base = declared.get("$ref") or f"#/paths/{escaped}/{method}/responses/{code}"
                pointer = base + "/content/application~1json/schema"
            # The document itself is the root: its `$ref`s resolve in it; its other keys are
            # no JSON Schema keywords and are ignored.
            self._validators[key] = Draft202012Validator({**document, "$ref": pointer})
        return self._validators[key]


def _describe(error: Any) -> str:
    """A problem named by where it is (list indices as ``*``, so one problem of many records is
    one problem) and what it is, short."""
    where = "/".join("*" if isinstance(p, int) else str(p) for p in error.absolute_path) or "(body)"
    if error.validator == "additionalProperties":
        message = "not declared: " + ", ".join(re.findall(r"'([^']+)'", error.message.split("(", 1)[-1]))
    elif error.validator == "required":
        message = error.message
    else:
        value = repr(error.instance)
        value = value if len(value) <= 60 else value[:57] + "..."
        message = f"{value} fails {error.validator} {str(error.validator_value)[:80]}"
    return f"{where}: {message}"


# The plugin ----------------------------------------------------------------------------------

MODE = os.environ.get("REBILL_OPENAPI_CHECK", "strict").strip().lower() or "strict"
ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "var" / "openapi-mismatches.json"
PARTS = ROOT / "var" / "openapi-mismatches.parts"


class OpenApiMismatch(AssertionError):
    """A reply outside the document (strict mode)."""


class Collector:
    def __init__(self) -> None:
        self.checker: ResponseChecker | None = None
        self.checked = 0
        self.seen: dict[tuple[str, str, str, int, str], list[Any]] = {}  # key -> [count, first test]

    def _checker(self) -> ResponseChecker:
        if self.checker is None:
            from rebill.api import openapi
            from rebill.api.versions import VERSIONS
            self.checker = ResponseChecker(openapi.operations(), openapi.document, tuple(VERSIONS))
        return self.checker

    def check(self, response: Any) -> None:
        request = response.request
        version = response.headers.get("x-service-version") or request.headers.get("x-service-version")
        try:
            found = self._checker().check(request.method, request.url.path, version, response.status_code,
                                          response.headers, response.content)
        except Exception as exc:  # a fault of the check, not of the reply: reported, never hidden
            if MODE == "strict":
                raise
            found = [Mismatch(version or "?", request.method, request.url.path, response.status_code,
                              f"the check failed: {type(exc).__name__}: {exc}"[:300])]
        self.checked += 1
        if not found:
            return
        if MODE == "strict":
            raise OpenApiMismatch("reply outside the OpenAPI document:\n" + "\n".join(f"  {m}" for m in found))
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        for mismatch in found:
            entry = self.seen.setdefault(mismatch.key, [0, test])
            entry[0] += 1


COLLECTOR = Collector()


def pytest_configure(config: pytest.Config) -> None:
    if MODE == "off":
        return
    if MODE not in ("report", "strict"):
        raise pytest.UsageError(f"REBILL_OPENAPI_CHECK={MODE!r}: use report, strict or off")
    if not hasattr(config, "workerinput"):  # the controller (or the only process): a fresh report
        shutil.rmtree(PARTS, ignore_errors=True)
    original = TestClient.request
    if getattr(original, "_openapi_checked", False):
        return

    def request(self: TestClient, method: str, url: Any, **kw: Any) -> Any:
        response = original(self, method, url, **kw)
        COLLECTOR.check(response)
        return response
    request._openapi_checked = True  # type: ignore[attr-defined]
    TestClient.request = request  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if MODE != "report":
        return
    worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
    PARTS.mkdir(parents=True, exist_ok=True)
    part = {"checked": COLLECTOR.checked, "seen": [[*key, *value] for key, value in COLLECTOR.seen.items()]}
    (PARTS / f"{worker}.json").write_text(json.dumps(part))
    if hasattr(session.config, "workerinput"):
        return
    checked, merged = 0, {}
    for path in sorted(PARTS.glob("*.json")):
        data = json.loads(path.read_text())
        checked += data["checked"]
        for version, method, template, status, problem, count, test in data["seen"]:
            entry = merged.setdefault((version, method, template, status, problem), [0, test])
            entry[0] += count
    kinds = [{"version": k[0], "method": k[1], "path": k[2], "status": k[3], "problem": k[4], "count": v[0],
              "example_test": v[1]} for k, v in merged.items()]
    kinds.sort(key=lambda k: (-k["count"], k["version"], k["path"], k["method"], k["status"], k["problem"]))
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"replies_checked": checked, "mismatched_replies": sum(k["count"] for k in kinds),
                                  "problems": len(kinds), "mismatches": kinds}, indent=1) + "\n")
    session.config._openapi_summary = (checked, len(kinds), sum(k["count"] for k in kinds))  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summary = getattr(config, "_openapi_summary", None)
    if summary is not None:
        checked, problems, replies = summary
        terminalreporter.write_line(f"OpenAPI check (report): {checked} replies checked, {replies} outside the "
                                    f"document, {problems} distinct problems: {REPORT.relative_to(ROOT)}")
