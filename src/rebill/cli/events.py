"""`rebill events tail`: the event log as it grows, one line per event (issue 14)."""

from __future__ import annotations

import sys
from datetime import UTC
from itertools import islice
from typing import Optional

import typer

from rebill.domain.event.model import Event

from .common import DatabaseOption, open_database, store_named

app = typer.Typer(name="events", help="The event log: every change, who made it and what it changed.",
                  no_args_is_help=True)


@app.command("tail")
def events_tail(
    store: Optional[str] = typer.Option(None, "--store", help="Store name (default: every store)"),
    topic: Optional[str] = typer.Option(None, "--topic", help="Topics matching a shell-style glob, e.g. 'charge/*'"),
    from_start: bool = typer.Option(False, "--from-start", help="Begin with the oldest event, not the next one"),
    once: bool = typer.Option(False, "--once", hidden=True, help="Print what is there and stop (tests, scripts)"),
    limit: Optional[int] = typer.Option(None, "--limit", hidden=True, min=1, help="Stop after N lines"),
    database: Optional[str] = DatabaseOption,
) -> None:
    """Print events as they happen, one line each, until Ctrl-C.

    A line: time (UTC), store, topic, object id, customer, origin, token and the attributes an
    update changed."""
    from rebill.domain.event import tail
    from rebill.domain.store import repository as stores_repo
    db = open_database(database)
    with db.read() as conn:
        store_id = store_named(conn, store).id if store is not None else None
        start = 0 if from_start else tail.newest_id(conn)
        names = {s.id: s.name for s in stores_repo.all_stores(conn)}
    follower = tail.Follower(start, store_id=store_id, topic=topic)
    try:
        for event in islice(tail.follow(db.read, follower, once=once), limit):
            if event.store_id not in names:  # a store created since the tail began
                with db.read() as conn:
                    names = {s.id: s.name for s in stores_repo.all_stores(conn)}
            # Plain stdout, flushed per line: a tail is read through pipes (grep, tee) as it runs.
            sys.stdout.write(line(event, names.get(event.store_id, str(event.store_id))) + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a tail ends
    finally:
        db.dispose()


def line(event: Event, store: str) -> str:
    """One event on one line. Absent fields show as '-', so that the columns line up; the
    attributes an update changed come last, on updates only."""
    token = event.token_name or (f"#{event.token_id}" if event.token_id else "-")  # a deleted token keeps its id
    parts = [event.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"), store, event.topic,
             f"id={event.resource_id}", f"customer={event.customer_id or '-'}", f"origin={event.origin or '-'}",
             f"token={token}"]
    if event.updated_attributes:
        parts.append("updated=" + ",".join(event.updated_attributes))
    return "  ".join(parts)
