"""The records a metafield can belong to (decisions §7.2, §7.6: the owner must exist in the
store), found and locked for the write that names them.

Owners are named by (`owner_resource`, `owner_id`), not by a foreign key, so the database
cannot keep a metafield from outliving its owner; the locks do. Each owner has an anchor row
that its deleters lock first (decisions §4.7 and docs/architecture.md, "Parent and child"):

- a customer: itself (customer delete takes it ``FOR UPDATE``);
- an address, a subscription, a charge: their address (address delete, subscription delete
  and the reconciler that deletes charges all lock it first), after a key-share lock on the
  customer (customer delete removes its addresses without locking them);
- an order, the store: themselves.

The anchor is taken ``FOR NO KEY UPDATE``: a deleter waits for this write and then sees the
new metafield, and two metafield writes of one owner queue, so the limit of 50 holds.
Parents are taken ``FOR KEY SHARE``, which only a delete conflicts with. PostgreSQL only:
SQLite serializes writers anyway and renders no locks. No charge row is locked, so a billing
run that holds charges and waits for their address cannot wait on this write in a cycle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, select

from rebill.models import addresses, charges, customers, orders, purchase_items, stores

from ..charge import repository as charge_repository


def _lock(conn: Connection, table: Table, row_id: int | None, store_id: int, *, anchor: bool) -> bool:
    if row_id is None:
        return False
    id_column = table.c.id
    stmt = select(id_column).where(id_column == row_id)
    if table is not stores:
        stmt = stmt.where(table.c.store_id == store_id)
    stmt = stmt.with_for_update(key_share=True, read=not anchor)
    return conn.execute(stmt).first() is not None


def _parents(conn: Connection, resource: str, store_id: int, owner_id: int) -> Any:
    """(customer_id, address_id) of an address, subscription or charge, or None."""
    if resource == "address":
        stmt = select(addresses.c.customer_id, addresses.c.id).where(addresses.c.id == owner_id,
                                                                    addresses.c.store_id == store_id)
    else:
        table = purchase_items if resource == "subscription" else charges
        stmt = select(table.c.customer_id, table.c.address_id).where(table.c.id == owner_id,
                                                                    table.c.store_id == store_id)
        if resource == "subscription":
            stmt = stmt.where(purchase_items.c.kind == "subscription")
    return conn.execute(stmt).first()


def _under_address(conn: Connection, store_id: int, resource: str, owner_id: int) -> bool:
    """Customer (key share), then the address as the anchor; then the owner is read again,
    since a deleter that held the address may have removed it meanwhile."""
    found = _parents(conn, resource, store_id, owner_id)
    if found is None:
        return False
    _lock(conn, customers, found[0], store_id, anchor=False)
    if not _lock(conn, addresses, found[1], store_id, anchor=True) and resource != "charge":
        return False
    # Read again: a deleter that held the address may have removed the owner meanwhile, a
    # queued charge of a deleted address included (only a processed charge outlives it).
    return _parents(conn, resource, store_id, owner_id) is not None


def exists_locked(conn: Connection, store_id: int, resource: str, owner_id: int, now: datetime) -> bool:
    """Whether the owner exists in the store (as its own GET would show it), locked as the
    module docstring says until the unit ends."""
    if resource == "store":
        # NOTE: decisions §7.6, the store's `owner_id` is the id `GET /store` shows.
        return owner_id == store_id and _lock(conn, stores, owner_id, store_id, anchor=True)
    if resource == "customer":
        return _lock(conn, customers, owner_id, store_id, anchor=True)
    if resource == "order":
        return _lock(conn, orders, owner_id, store_id, anchor=True)
    # NOTE: decisions §6.9, a charge out of sight (processed over 90 days ago) is no owner.
    if resource == "charge" and charge_repository.get(conn, store_id, owner_id, now) is None:
        return False
    if resource in ("address", "subscription", "charge"):
        return _under_address(conn, store_id, resource, owner_id)
    raise AssertionError(f"unknown owner resource {resource}")
