"""Deferred regenerations (decisions §5.3): an update with ``commit=false`` leaves the
address's queued charges as they are for 5 seconds, flagged ``has_uncommitted_changes``;
then :func:`run_due` replans them. Any replan of the address in the meantime clears it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from rebill.db.among import among_bound
from rebill.db.prepared import Prepared
from rebill.models import pending_regenerations

# NOTE: spec 01 Limits, the charge regeneration window after a commit=false update.
WINDOW = timedelta(seconds=5)


def defer(conn: Connection, store_id: int, address_id: int, now: datetime) -> None:
    """The address's regeneration is due ``WINDOW`` after ``now`` (a later deferral moves it on).
    One upsert: a caller may not hold the address's lock (the billing run cancelling a customer's
    subscriptions elsewhere, billing/outcome.py), and an UPDATE-then-INSERT of two writers at
    once would break the key (found by a review)."""
    table = pending_regenerations
    insert = postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(table).values(address_id=address_id, store_id=store_id, due_at=now + WINDOW)
    conn.execute(stmt.on_conflict_do_update(index_elements=[table.c.address_id],
                                            set_={"due_at": stmt.excluded.due_at}))


_clear_one = Prepared(delete(pending_regenerations).where(pending_regenerations.c.address_id == bindparam("id")))
_clear_many = Prepared(delete(pending_regenerations).where(among_bound(pending_regenerations.c.address_id, "ids")))


def clear(conn: Connection, address_ids: list[int]) -> None:
    if len(address_ids) == 1:  # prepared: every replan of one address
        _clear_one.run(conn, id=address_ids[0])
        return
    _clear_many.run(conn, ids=sorted(set(address_ids)))


def due(conn: Connection, now: datetime, *, store_id: int | None = None) -> list[tuple[int, int]]:
    """(store id, address id) of every deferred regeneration whose time has come."""
    table = pending_regenerations
    stmt = select(table.c.store_id, table.c.address_id).where(table.c.due_at <= now)
    if store_id is not None:
        stmt = stmt.where(table.c.store_id == store_id)
    return [(r[0], r[1]) for r in conn.execute(stmt.order_by(table.c.store_id, table.c.address_id))]


def of_store(conn: Connection, store_id: int) -> list[int]:
    """The addresses of the store whose regeneration is deferred, due or not (a clock
    advance runs them all: billing/travel.py)."""
    table = pending_regenerations
    return list(conn.execute(select(table.c.address_id).where(table.c.store_id == store_id)
                             .order_by(table.c.address_id)).scalars())


def waiting(conn: Connection, address_id: int) -> Any:
    table = pending_regenerations
    return conn.execute(select(table.c.due_at).where(table.c.address_id == address_id)).scalar()
