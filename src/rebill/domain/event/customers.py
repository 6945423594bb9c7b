"""The customer each event is about (the `customer_id` of the 2021-11 event resource and a
filter of `GET /events`), found for a whole unit's events with one query per kind of resource.

A caller that knows the customer says so (``Unit.record(..., customer_id=...)``); that is the
only way for a deleted resource, whose row is gone when its event is written."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Connection, Table, select

from rebill.models import addresses, charges, metafields, orders, purchase_items

# resource -> the table whose `customer_id` names the owner
_TABLES: dict[str, Table] = {
    "address": addresses,
    "subscription": purchase_items,
    "onetime": purchase_items,
    "charge": charges,
    "order": orders,
}
CHUNK = 500


def _lookup(conn: Connection, table: Table, store_id: int, ids: set[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), CHUNK):
        part = ordered[start:start + CHUNK]
        found.update(conn.execute(select(table.c.id, table.c.customer_id).where(
            table.c.store_id == store_id, table.c.id.in_(part))).all())
    return found


def customer_of_owner(conn: Connection, store_id: int, resource: str, owner_id: int) -> int | None:
    """The customer a metafield's owner belongs to (itself for a customer), if any."""
    if resource == "customer":
        return owner_id
    table = _TABLES.get(resource)
    return None if table is None else _lookup(conn, table, store_id, {owner_id}).get(owner_id)


def _metafield_owners(conn: Connection, store_id: int, ids: set[int]) -> dict[int, int]:
    rows = conn.execute(select(metafields.c.id, metafields.c.owner_resource, metafields.c.owner_id).where(
        metafields.c.store_id == store_id, metafields.c.id.in_(sorted(ids)))).all()
    found = {row.id: row.owner_id for row in rows if row.owner_resource == "customer"}
    by_kind: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.owner_resource in _TABLES:
            by_kind[row.owner_resource][row.owner_id].append(row.id)
    for kind, owned in by_kind.items():
        for owner_id, customer_id in _lookup(conn, _TABLES[kind], store_id, set(owned)).items():
            for metafield_id in owned[owner_id]:
                found[metafield_id] = customer_id
    return found


def fill(conn: Connection, pending: list[Any]) -> None:
    """Sets the customer of every event in ``pending`` that has none yet, in place."""
    wanted: dict[tuple[int, str], set[int]] = defaultdict(set)
    for p in pending:
        if p.customer_id is None and (p.resource in _TABLES or p.resource == "metafield"):
            wanted[(p.store.id, p.resource)].add(p.resource_id)
    if not wanted:
        return
    found: dict[tuple[int, str], dict[int, int]] = {}
    for (store_id, resource), ids in wanted.items():
        found[(store_id, resource)] = (_metafield_owners(conn, store_id, ids) if resource == "metafield"
                                       else _lookup(conn, _TABLES[resource], store_id, ids))
    for index, p in enumerate(pending):
        if p.customer_id is not None:
            continue
        if (owner := found.get((p.store.id, p.resource), {}).get(p.resource_id)) is not None:
            pending[index] = p._replace(customer_id=owner)
