"""Discount look-ups needed before the discounts resource has its endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from rebill.db.statements import insert_row
from rebill.models import discounts


def find(conn: Connection, store_id: int, *, discount_id: int | None = None, code: str | None = None) -> Any:
    stmt = select(discounts).where(discounts.c.store_id == store_id)
    if discount_id is not None:
        stmt = stmt.where(discounts.c.id == discount_id)
    else:
        stmt = stmt.where(discounts.c.code == code)
    return conn.execute(stmt).first()


def many(conn: Connection, store_id: int, ids: list[int]) -> dict[int, Any]:
    if not ids:
        return {}
    stmt = select(discounts).where(discounts.c.store_id == store_id, discounts.c.id.in_(set(ids)))
    return {row.id: row for row in conn.execute(stmt)}


def usable_now(row: Any, now: datetime) -> bool:
    """Enabled and within its start and end (spec 02 Discount status)."""
    if row.status != "enabled":
        return False
    if row.starts_at is not None and row.starts_at > now:
        return False
    return row.ends_at is None or row.ends_at > now


def insert_discount(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, discounts, values)
