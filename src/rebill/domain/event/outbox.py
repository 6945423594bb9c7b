"""Events on their way into the database (decisions §8.1): what a unit of work records is
buffered on its connection and written when the unit ends, in its own transaction, together
with the webhook deliveries it becomes (the outbox, domain/webhook/fanout.py).

Written at the end rather than at once because a webhook's payload is the resource as a GET
answers it once the change is complete (issue 14): a subscription's `subscription/created`
is rendered after its charges are planned, not halfway through. Buffering also lets a unit's
events go in one statement and their customers be found with one query per kind.

Flushed by ``Unit.__exit__`` (a request's unit, or a savepoint of the SQLite loop writer) and,
for units opened without a context, by a listener on every COMMIT: no transaction commits
with events still in memory. A ROLLBACK (or a failed unit) drops them with the change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, event

from rebill.db.statements import insert_many, insert_row
from rebill.models import events

from . import customers as owners

KEY = "rebill_outbox"


class Pending(NamedTuple):
    store: Any  # the unit's Store
    topic: str
    resource: str
    resource_id: int
    data: dict[str, Any] | None
    customer_id: int | None
    changed: tuple[str, ...] | None
    origin: str
    token_id: int | None
    created_at: datetime


class Recorded(NamedTuple):
    """An event as written: what the fan-out to webhooks needs."""

    id: int
    pending: Pending


# What turns recorded events into webhook deliveries (domain/webhook/fanout.py installs it):
# kept as a hook so that the event log does not import the webhooks that read it.
FanOut = Callable[[Connection, list[Recorded]], None]
_fan_out: list[FanOut] = []


def on_recorded(hook: FanOut) -> None:
    if hook not in _fan_out:
        _fan_out.append(hook)


def buffer(conn: Connection) -> list[Pending]:
    found: list[Pending] | None = conn.info.get(KEY)
    if found is None:
        found = conn.info[KEY] = []
    return found


def add(conn: Connection, entries: Iterable[Pending]) -> None:
    buffer(conn).extend(entries)


def discard(conn: Connection) -> None:
    if conn.invalidated:
        # The connection went (a database restart): reading its info would raise and hide the
        # real error; SQLAlchemy has already cleared the info of a dropped connection.
        return
    conn.info.pop(KEY, None)


def flush(conn: Connection) -> list[Recorded]:
    """Writes the buffered events and their deliveries; returns what was written."""
    pending: list[Pending] | None = conn.info.pop(KEY, None)
    if not pending:
        return []
    owners.fill(conn, pending)
    rows = [{
        "store_id": p.store.id, "topic": p.topic, "resource": p.resource, "resource_id": p.resource_id,
        "customer_id": p.customer_id, "data": p.data, "origin": p.origin, "token_id": p.token_id,
        "updated_attributes": list(p.changed) if p.changed is not None else None, "created_at": p.created_at,
    } for p in pending]
    # One row (most requests) through the prepared single insert, more in one executemany.
    ids = [insert_row(conn, events, rows[0])] if len(rows) == 1 else insert_many(conn, events, rows)
    recorded = [Recorded(i, p) for i, p in zip(ids, pending)]
    for hook in _fan_out:
        hook(conn, recorded)
    return recorded


@event.listens_for(Engine, "commit")
def _before_commit(conn: Connection) -> None:
    # Units opened without a context (jobs, the billing run) end with their transaction.
    if conn.info.get(KEY):
        try:
            flush(conn)
        except BaseException:
            # SQLAlchemy counts the transaction as ended once its COMMIT began and rolls nothing
            # back: the driver's own rollback, or the connection would go back to the pool
            # inside its transaction (SQLite's engine resets nothing on check-in).
            discard(conn)
            if not conn.invalidated:  # a dropped connection has nothing to roll back
                try:
                    conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001 - the flush's own error is the one to answer
                    pass
            raise


@event.listens_for(Engine, "rollback")
def _on_rollback(conn: Connection) -> None:
    discard(conn)
