"""Webhook subscriptions in the database. Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import stores, webhooks

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, fetch_page
from .model import Webhook

_select = select(*columns_for(Webhook, webhooks.c))
_by_id = Prepared(_select.where(webhooks.c.id == bindparam("id"), webhooks.c.store_id == bindparam("store_id")))
# Every write reads this (the outbox): prepared, one statement per unit for all its topics.
_enabled = Prepared(select(webhooks.c.id, webhooks.c.topic, webhooks.c.api_version, webhooks.c.included_objects)
                    .where(webhooks.c.store_id == bindparam("store_id"), webhooks.c.disabled_at.is_(None))
                    .order_by(webhooks.c.id))

FILTERS: dict[str, Filter] = {
    **time_window(webhooks),
    "topic": lambda v: webhooks.c.topic == v,
    "address": lambda v: webhooks.c.address == v,
}


def get(conn: Connection, store_id: int, webhook_id: int, *, lock: bool = False) -> Webhook | None:
    if lock:
        stmt = _select.where(webhooks.c.id == webhook_id, webhooks.c.store_id == store_id).with_for_update()
        found = conn.execute(stmt).first()
        return Webhook(*found) if found else None
    row = _by_id.one(conn, id=webhook_id, store_id=store_id)
    return Webhook(*row) if row else None


def enabled(conn: Connection, store_id: int) -> list[list[Any]]:
    """(id, topic, api_version, included_objects) of every enabled webhook of the store."""
    return _enabled.all(conn, store_id=store_id)


def held(conn: Connection, store_id: int, webhook_ids: set[int]) -> set[int]:
    """Which of ``webhook_ids`` still exist, each held with a key share lock until the unit
    ends (PostgreSQL): a delete takes the webhook's update lock first, so a delivery is never
    written for a webhook deleted meanwhile (its foreign key would refuse the whole change)."""
    if not webhook_ids:
        return set()
    if conn.dialect.name == "sqlite":
        # One writer at a time (BEGIN IMMEDIATE, db/engine.py): the webhooks this transaction
        # read are the ones that exist until it commits. The look cost a create with five
        # webhooks a third of its fan-out (an IN list compiled per call).
        return set(webhook_ids)
    stmt = (select(webhooks.c.id).where(webhooks.c.store_id == store_id, webhooks.c.id.in_(sorted(webhook_ids)))
            .order_by(webhooks.c.id).with_for_update(key_share=True, read=True))
    return set(conn.execute(stmt).scalars())


def lock_store(conn: Connection, store_id: int) -> None:
    """Holds the store's row until the transaction ends. `NO KEY UPDATE`: rows being added
    elsewhere in the store (their foreign keys take a key-share lock) do not wait for it."""
    conn.execute(select(stores.c.id).where(stores.c.id == store_id).with_for_update(key_share=True))


def addresses_of_topic(conn: Connection, store_id: int, topic: str, *, other_than: int = 0) -> list[str]:
    stmt = select(webhooks.c.address).where(webhooks.c.store_id == store_id, webhooks.c.topic == topic,
                                            webhooks.c.id != other_than)
    return list(conn.execute(stmt).scalars())


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_select.where(webhooks.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, webhooks, query, Webhook)


def insert(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, webhooks, values)


def update_one(conn: Connection, store_id: int, webhook_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(webhooks).where(webhooks.c.id == webhook_id, webhooks.c.store_id == store_id)
                 .values(**values))


def delete_one(conn: Connection, store_id: int, webhook_id: int) -> None:
    conn.execute(delete(webhooks).where(webhooks.c.id == webhook_id, webhooks.c.store_id == store_id))
