"""Orders in storage (models.orders). The billing run writes them; the orders API reads them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select

from rebill.models import order_items, orders


def insert_many(conn: Connection, rows: list[dict[str, Any]], item_ids: list[list[int]]) -> list[int]:
    """Inserts ``rows`` (all with the same keys) and each one's purchase items; their ids in order."""
    if not rows:
        return []
    result = conn.execute(insert(orders).returning(orders.c.id, sort_by_parameter_order=True), rows)
    ids = [row[0] for row in result]
    pairs = [{"order_id": order_id, "purchase_item_id": item_id, "store_id": rows[0]["store_id"]}
             for order_id, items in zip(ids, item_ids) for item_id in items]
    if pairs:
        conn.execute(insert(order_items), pairs)
    return ids


def of_charge(conn: Connection, store_id: int, charge_id: int) -> list[Any]:
    stmt = select(orders).where(orders.c.store_id == store_id, orders.c.charge_id == charge_id)
    return list(conn.execute(stmt.order_by(orders.c.id)))
