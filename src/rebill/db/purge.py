"""Deleting old rows in batches, a transaction per batch (the retention purges of the purge job:
domain/webhook/retention.py, domain/event/retention.py).

No index serves the look for old rows (one on the age column would cost every write of the table
for a read once an hour): each batch starts past the last one's ids (the primary key), so that a
run reads the table about once and never again the rows it deleted (PostgreSQL keeps them until
its vacuum); the last, short batch reads the rest and ends the run. ``old`` is in the DELETE's
own WHERE too, so PostgreSQL checks it again on a row another transaction changed meanwhile
(READ COMMITTED): such a row stays, and may end its batch early; the next run takes the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Table, delete, select

from .engine import Database


def delete_old(db: Database, table: Table, old: ColumnElement[bool], *, batch: int,
               returning: Sequence[Any] = (), then: Callable[[Connection, Sequence[Row[Any]]], None] | None = None) -> int:
    """Deletes the rows of ``table`` where ``old``, ``batch`` at a time; ``then`` gets each batch's
    deleted rows (their id and ``returning``) in that batch's transaction. Returns how many went."""
    removed, after = 0, 0
    while True:
        ids = select(table.c.id).where(table.c.id > after, old).order_by(table.c.id).limit(batch)
        with db.write() as conn:
            gone = conn.execute(delete(table).where(table.c.id.in_(ids.scalar_subquery()), old)
                                .returning(table.c.id, *returning)).all()
            if gone and then is not None:
                then(conn, gone)
        removed += len(gone)
        if len(gone) < batch:
            return removed
        after = max(row.id for row in gone)
