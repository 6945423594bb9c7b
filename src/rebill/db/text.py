"""SQL text functions that mean the same on both databases."""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class unicode_lower(FunctionElement[str]):  # noqa: N801 (an SQL function's name)
    """Lower case as Python's ``str.lower`` has it, also on SQLite, whose own ``lower()`` leaves
    every letter outside ASCII as it is (found by a review: a deleted discount's code `ÉTÉ10`
    was not found by `été10`). PostgreSQL's ``lower()`` follows the database's locale."""

    type = String()
    inherit_cache = True


@compiles(unicode_lower)
def _lower(element: Any, compiler: Any, **kw: Any) -> str:
    return f"lower({compiler.process(element.clauses, **kw)})"


@compiles(unicode_lower, "sqlite")
def _sqlite_lower(element: Any, compiler: Any, **kw: Any) -> str:
    return f"rebill_lower({compiler.process(element.clauses, **kw)})"  # db/engine.py registers it


def python_lower(value: Any) -> Any:
    """``rebill_lower`` on every SQLite connection (db/engine.py)."""
    return value.lower() if isinstance(value, str) else value
