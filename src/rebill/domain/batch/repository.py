"""Async batches and their tasks in the database. Every statement is scoped to one store
(decisions §1.1); the batch runner's own statements are in ``work.py``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_all, insert_row
from rebill.models import async_batch_tasks, async_batches

from ..filters import Filter, time_window, where
from ..listing import ListQuery, PageResult, fetch_page
from .model import MAX_TASKS, NOT_STARTED, AsyncBatch, Task

b, t = async_batches, async_batch_tasks
_select = select(*columns_for(AsyncBatch, b.c))
_by_id = Prepared(_select.where(b.c.id == bindparam("id"), b.c.store_id == bindparam("store_id")))
_tasks = select(*columns_for(Task, t.c))
# Tasks join a batch only while it is open and below its limit: the count and the check are
# one statement, so two calls at once cannot pass 10,000 between them.
_grow = Prepared(update(b).where(
    b.c.id == bindparam("id"), b.c.store_id == bindparam("store_id"), b.c.status == NOT_STARTED,
    b.c.submitted_at.is_(None), b.c.total_task_count + bindparam("count") <= MAX_TASKS,
).values(total_task_count=b.c.total_task_count + bindparam("count"), updated_at=bindparam("now")))
_sent = b.alias("sent")
_submit = Prepared(update(b).where(
    b.c.id == bindparam("id"), b.c.store_id == bindparam("store_id"), b.c.status == NOT_STARTED,
    b.c.submitted_at.is_(None), b.c.total_task_count > 0,
).values(submitted_at=bindparam("now"), updated_at=bindparam("now"),
          # One more than any batch's so far: the order of sending within a second.
          submitted_seq=select(func.coalesce(func.max(_sent.c.submitted_seq), 0) + 1).scalar_subquery()))

FILTERS: dict[str, Filter] = {
    **time_window(b),
    "batch_type": lambda v: b.c.batch_type == v,
    "status": lambda v: b.c.status == v,
}
TASK_FILTERS: dict[str, Filter] = {
    "ids": lambda v: t.c.id.in_(v),
    "status": lambda v: t.c.status == v,
}


def get(conn: Connection, store_id: int, batch_id: int) -> AsyncBatch | None:
    row = _by_id.one(conn, id=batch_id, store_id=store_id)
    return AsyncBatch(*row) if row else None


def insert(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, b, values)


def page(conn: Connection, store_id: int, query: ListQuery) -> PageResult:
    stmt = where(_select.where(b.c.store_id == store_id), FILTERS, query.filters)
    return fetch_page(conn, stmt, b, query, AsyncBatch)


def grow(conn: Connection, store_id: int, batch_id: int, count: int, now: Any) -> bool:
    """Counts ``count`` more tasks in the batch if it still takes them; whether it did."""
    return _grow.run(conn, id=batch_id, store_id=store_id, count=count, now=now) == 1


def insert_tasks(conn: Connection, rows: list[dict[str, Any]]) -> None:
    insert_all(conn, t, rows)


def submit(conn: Connection, store_id: int, batch_id: int, now: Any) -> bool:
    return _submit.run(conn, id=batch_id, store_id=store_id, now=now) == 1


def task_page(conn: Connection, store_id: int, batch_id: int, query: ListQuery) -> PageResult:
    stmt = where(_tasks.where(t.c.batch_id == batch_id, t.c.store_id == store_id), TASK_FILTERS, query.filters)
    return fetch_page(conn, stmt, t, query, Task)
