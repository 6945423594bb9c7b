"""The layers of docs/architecture.md, read from the source: the domain never imports the HTTP
edge or the API contract, and the billing engine's modules import each other one way only.

Read from every module's AST (function-level imports included, which an import-time check
would miss until the function runs), not by importing anything."""

from __future__ import annotations

import ast
from pathlib import Path

import rebill

SRC = Path(rebill.__file__).parent
DOMAIN = "rebill.domain"
BILLING = "rebill.domain.billing"
FORBIDDEN_IN_DOMAIN = ("rebill.http", "rebill.api")


def _sources(package: str) -> dict[str, tuple[str, bool]]:
    """{module name: (source, is a package's __init__)} of every module under ``package``."""
    root = SRC.joinpath(*package.split(".")[1:])
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        found[name] = (path.read_text(), is_package)
    return found


def imported(module: str, source: str, is_package: bool = False) -> set[str]:
    """Every module name ``source`` imports, anywhere in it, made absolute: for
    ``from X import y`` both X and X.y (y may be a module of package X)."""
    names: set[str] = set()
    here = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                origin = f"{base}.{node.module}" if node.module else base
            else:
                origin = node.module or ""
            names.add(origin)
            names.update(f"{origin}.{alias.name}" for alias in node.names)
    return names


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def import_cycle(sources: dict[str, tuple[str, bool]]) -> list[str] | None:
    """A cycle among the modules of ``sources`` (as a path that ends where it starts), or None."""
    graph = {name: sorted(n for n in imported(name, source, is_package) if n in sources and n != name)
             for name, (source, is_package) in sources.items()}
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        path.append(name)
        for target in graph[name]:
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(name)
        return None

    for name in graph:
        cycle = visit(name)
        if cycle:
            return cycle
    return None


def test_the_domain_never_imports_the_http_edge_or_the_api():
    found = {
        (module, name)
        for module, (source, is_package) in _sources(DOMAIN).items()
        for name in imported(module, source, is_package)
        if any(_within(name, layer) for layer in FORBIDDEN_IN_DOMAIN)
    }
    assert found == set(), "the domain must not know the HTTP edge or the API contract"


def test_the_billing_package_has_no_import_cycle():
    sources = _sources(BILLING)
    assert {f"{BILLING}.run", f"{BILLING}.manual", f"{BILLING}.money_back"} <= set(sources)
    assert import_cycle(sources) is None


def test_the_checks_see_relative_and_function_level_imports():
    """The checks themselves: a cycle made only through a function-level relative import, as
    run and money_back once had, is found, and so is a relative import of the HTTP layer."""
    sources = {
        "pkg": ("", True),
        "pkg.run": ("def run_store():\n    from .money_back import finish\n    finish()\n", False),
        "pkg.money_back": ("from . import run\n", False),
        "pkg.claim": ("from pkg import run\n", False),
    }
    assert import_cycle(sources) in (["pkg.run", "pkg.money_back", "pkg.run"],
                                     ["pkg.money_back", "pkg.run", "pkg.money_back"])
    del sources["pkg.money_back"]
    assert import_cycle(sources) is None
    assert "rebill.http.render" in imported("rebill.domain.metafield.rules",
                                            "def check():\n    from ...http.render import x\n")
    assert "rebill.api" in imported("rebill.domain", "from .. import api\n", is_package=True)
