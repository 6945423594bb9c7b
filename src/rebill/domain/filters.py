"""Filter builders shared by every repository: the list filters of spec 01/02 mean the
same thing on every resource (``*_min`` inclusive lower bound, ``*_max`` inclusive upper
bound, ``ids`` a set of ids)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Table

Filter = Callable[[Any], Any]


def time_window(table: Table) -> dict[str, Filter]:
    return {
        "created_at_min": lambda v: table.c.created_at >= v,
        "created_at_max": lambda v: table.c.created_at <= v,
        "updated_at_min": lambda v: table.c.updated_at >= v,
        "updated_at_max": lambda v: table.c.updated_at <= v,
        "ids": lambda v: table.c.id.in_(v),
    }


def where(stmt: Any, table_filters: dict[str, Filter], filters: dict[str, Any]) -> Any:
    for name, value in filters.items():
        stmt = stmt.where(table_filters[name](value))
    return stmt
