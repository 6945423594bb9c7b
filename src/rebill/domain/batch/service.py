"""Async batch use cases (decisions §7.7, issue 15): make a batch, add its tasks, submit it,
read it. Running it is the batch job's (jobs/batches.py); which endpoint a batch type calls
belongs to the API (api/tasks.py), which checks the type before it gets here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rebill.errors import NotFound, ValidationFailed

from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository
from .model import MAX_TASKS, NOT_STARTED, PENDING, AsyncBatch

_listeners: list[Callable[[], None]] = []
SUBMITTED = "cannot be added once the batch was submitted for processing"


def on_submitted(listener: Callable[[], None]) -> None:
    """``listener`` is told (from any thread, after the commit) that a batch was submitted:
    the batch job of this process looks at once instead of at its next tick."""
    if listener not in _listeners:
        _listeners.append(listener)


def submitted() -> None:
    for listener in list(_listeners):
        listener()


def get(unit: Unit, batch_id: int) -> AsyncBatch:
    found = repository.get(unit.conn, unit.store_id, batch_id)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def create(unit: Unit, batch_type: str, version: str, token_id: int | None) -> AsyncBatch:
    batch_id = repository.insert(unit.conn, {
        "store_id": unit.store_id, "batch_type": batch_type, "status": NOT_STARTED, "version": version,
        "token_id": token_id, "total_task_count": 0, "success_task_count": 0, "fail_task_count": 0,
        "submitted_at": None, "closed_at": None, "claimed_by": None, "claimed_until": None,
        "created_at": unit.now, "updated_at": unit.now})
    return get(unit, batch_id)


def add_tasks(unit: Unit, batch: AsyncBatch, bodies: list[dict[str, Any]]) -> int:
    """NOTE: decisions §7.7 item 12, a batch takes no tasks once its processing was accepted;
    issue 15, at most 10,000 tasks in a batch."""
    if batch.status != NOT_STARTED or batch.submitted_at is not None:
        raise ValidationFailed.field("tasks", SUBMITTED)
    if not repository.grow(unit.conn, unit.store_id, batch.id, len(bodies), unit.now):
        again = get(unit, batch.id)  # the batch as the refusal found it
        if again.status != NOT_STARTED or again.submitted_at is not None:
            raise ValidationFailed.field("tasks", SUBMITTED)
        raise ValidationFailed.field("tasks", f"would take the batch past {MAX_TASKS:,} tasks "
                                              f"(it has {again.total_task_count:,})")
    repository.insert_tasks(unit.conn, [{
        "batch_id": batch.id, "store_id": unit.store_id, "body": body, "status": PENDING, "result": None,
        "created_at": unit.now, "updated_at": unit.now} for body in bodies])
    return len(bodies)


def submit(unit: Unit, batch_id: int) -> AsyncBatch:
    """Accepted once: the batch waits for its store's turn (``submitted_at`` set, still
    `not_started`) and the batch job runs it. Callers tell ``submitted()`` after the commit."""
    get(unit, batch_id)  # 404 first
    if not repository.submit(unit.conn, unit.store_id, batch_id, unit.now):
        again = get(unit, batch_id)
        if again.submitted_at is not None or again.status != NOT_STARTED:
            raise ValidationFailed.field("status", "the batch was already submitted for processing")
        raise ValidationFailed.field("tasks", "the batch has no tasks to process")
    return get(unit, batch_id)


def task_page(unit: Unit, batch_id: int, query: ListQuery) -> PageResult:
    get(unit, batch_id)  # 404 for an unknown batch or another store's
    return repository.task_page(unit.conn, unit.store_id, batch_id, query)
