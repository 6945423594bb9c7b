"""Reading the event log (`GET /events`): the store's events, newest first, with the name of
the token that made each change."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select

from rebill.db.prepared import Prepared
from rebill.models import events, tokens

from ..filters import Filter, where
from ..listing import ListQuery, PageResult, fetch_page
from .model import Event

_select = (select(events.c.id, events.c.store_id, events.c.topic, events.c.resource, events.c.resource_id,
                  events.c.customer_id, events.c.data, events.c.origin, events.c.token_id,
                  events.c.updated_attributes, events.c.created_at, tokens.c.name.label("token_name"))
           .select_from(events.outerjoin(tokens, tokens.c.id == events.c.token_id)))
_by_id = Prepared(_select.where(events.c.id == bindparam("id"), events.c.store_id == bindparam("store_id")))


def _verb(value: str) -> object:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return events.c.topic.like(f"%/{escaped}", escape="\\")


FILTERS: dict[str, Filter] = {
    "object_type": lambda v: events.c.resource == v,
    "object_id": lambda v: events.c.resource_id == v,
    "verb": _verb,
    "customer_id": lambda v: events.c.customer_id == v,
    "created_at_min": lambda v: events.c.created_at >= v,
    "created_at_max": lambda v: events.c.created_at <= v,
}


def get(conn: Connection, store_id: int, event_id: int) -> Event | None:
    row = _by_id.one(conn, id=event_id, store_id=store_id)
    return Event(*row) if row else None


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_select.where(events.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, events, query, Event)


def by_ids(conn: Connection, ids: list[int]) -> list[Event]:
    """The events of ``ids`` of any store, in id order (`rebill events tail` reads across stores)."""
    if not ids:
        return []
    return [Event(*row) for row in conn.execute(_select.where(events.c.id.in_(ids)).order_by(events.c.id))]
