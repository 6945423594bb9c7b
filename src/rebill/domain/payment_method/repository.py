"""Payment method look-ups needed before payment methods have their endpoints."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from rebill.db.statements import insert_row
from rebill.models import payment_methods


def get(conn: Connection, store_id: int, payment_method_id: int) -> Any:
    stmt = select(payment_methods).where(payment_methods.c.store_id == store_id,
                                         payment_methods.c.id == payment_method_id)
    return conn.execute(stmt).first()


def of_customers(conn: Connection, store_id: int, customer_ids: list[int]) -> list[Any]:
    if not customer_ids:
        return []
    stmt = select(payment_methods).where(payment_methods.c.store_id == store_id,
                                         payment_methods.c.customer_id.in_(set(customer_ids)))
    return list(conn.execute(stmt.order_by(payment_methods.c.id)))


def many(conn: Connection, store_id: int, ids: list[int]) -> dict[int, Any]:
    if not ids:
        return {}
    stmt = select(payment_methods).where(payment_methods.c.store_id == store_id,
                                         payment_methods.c.id.in_(set(ids)))
    return {row.id: row for row in conn.execute(stmt)}


def insert_payment_method(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, payment_methods, values)
