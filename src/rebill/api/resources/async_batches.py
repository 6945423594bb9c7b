"""Async batches, both versions (decisions §7.7 items 9-12, issue 15): make a batch of one type,
add its tasks, submit it, read it and its tasks' results. The batch job of `rebill serve` runs
it (jobs/batches.py), never a request."""

from __future__ import annotations

from typing import Any

from rebill.domain.batch import service
from rebill.domain.batch.model import MAX_TASKS_PER_CALL
from rebill.errors import ValidationFailed
from rebill.json_limits import MAX_NESTING

from .. import tasks
from ..call import Call, Reply
from ..declared import CREATED, NO_FIELDS, bulk, created, one, page, whole
from ..fields import Field, Schema
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_batches", "write_batches"
# A task's body is checked as an object here (no NUL anywhere: PostgreSQL could not store it)
# and as its endpoint's body when it runs.
TASK = Schema(Field("body", "object", required=True, nullable=False))


@endpoints.get("/async_batches", scope=READ, reply=page("async_batches"))
def list_batches(call: Call) -> Reply:
    query = call.list_query("async_batches")
    with call.read() as unit:
        return call.page("async_batches", service.list_page(unit, query), unit, query)


@endpoints.post("/async_batches", scope=WRITE, body="async_batch.create", reply=created("async_batch"))
def create_batch(call: Call) -> Reply:
    """Also needs the scope of the endpoint its tasks call (a `discount_create` batch
    `write_discounts`, docs/scopes.md): a batch does nothing its token could not do itself.
    403 without it."""
    body = call.version.schemas["async_batch.create"].parse(call.body)
    kind = tasks.batch_type(call.version.name, body["batch_type"])
    tasks.require_scope(call, kind)
    with call.write() as unit:
        return call.created("async_batch", service.create(unit, kind.name, call.version.name, call.token.id))


@endpoints.get("/async_batches/{batch_id:id}", scope=READ, reply=one("async_batch"))
def get_batch(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("async_batch", service.get(unit, call.path["batch_id"]))


def _bodies(body: dict[str, Any]) -> list[dict[str, Any]]:
    """NOTE: issue 15, `{"tasks": [{"body": {...}}, ...]}` with 1 to 1,000 tasks; each body is
    checked when its task runs, as its endpoint checks it."""
    items = body.get("tasks")
    if items is None:
        raise ValidationFailed.field("tasks", "is required")
    if not isinstance(items, list):
        raise ValidationFailed.field("tasks", "must be an array")
    if not 1 <= len(items) <= MAX_TASKS_PER_CALL:
        raise ValidationFailed.field("tasks", f"must hold 1 to {MAX_TASKS_PER_CALL:,} tasks")
    errors: dict[str, Any] = {}
    bodies: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors[str(index)] = ["must be an object"]
            continue
        try:
            bodies.append(TASK.parse(item)["body"])
        except ValidationFailed as exc:
            errors[str(index)] = exc.errors
    if errors:
        raise ValidationFailed({"tasks": errors})
    return bodies


# `{"tasks": [{"body": ...}]}` puts each body three levels down: the call allows them, so that a
# task takes every body its endpoint takes (found by an audit: a body of depth 29 to 32 was
# refused here and accepted by its endpoint); a deeper body is refused as a whole call still.
TASK_WRAPPER_LEVELS = 3


@endpoints.post("/async_batches/{batch_id:id}/tasks", scope=WRITE, reply=whole("count", status=CREATED),
                body=bulk("tasks", TASK, max_items=MAX_TASKS_PER_CALL),
                body_nesting=MAX_NESTING + TASK_WRAPPER_LEVELS)
def add_tasks(call: Call) -> Reply:
    """Also needs the scope of the endpoint the batch's tasks call (docs/scopes.md); 403 without it."""
    with call.read() as unit:  # 404 and the batch type's scope before any body error
        batch = service.get(unit, call.path["batch_id"])
    tasks.require_scope(call, tasks.of(batch.version, batch.batch_type))
    bodies = _bodies(call.body)
    with call.write() as unit:
        count = service.add_tasks(unit, service.get(unit, batch.id), bodies)
    return Reply({"count": count}, call.version.created_status)


@endpoints.post("/async_batches/{batch_id:id}/process", scope=WRITE, body=NO_FIELDS,
                reply=one("async_batch", status=202))
def process_batch(call: Call) -> Reply:
    """Accepted (202, spec 01 Errors): the batch job runs the tasks in the background. Also needs
    the scope of the endpoint the batch's tasks call (docs/scopes.md); 403 without it."""
    with call.read() as unit:
        batch = service.get(unit, call.path["batch_id"])
    tasks.require_scope(call, tasks.of(batch.version, batch.batch_type))
    with call.write() as unit:
        reply = call.one("async_batch", service.submit(unit, batch.id), status=202)
    service.submitted()
    return reply


@endpoints.get("/async_batches/{batch_id:id}/tasks", scope=READ, reply=page("async_batch_tasks"))
def list_tasks(call: Call) -> Reply:
    """Also needs the read half of the scope of the endpoint the tasks call (docs/scopes.md): a
    task shows what was sent and what the endpoint answered."""
    with call.read() as unit:  # 404 and the batch type's scope before any query error
        batch = service.get(unit, call.path["batch_id"])
    tasks.require_scope(call, tasks.of(batch.version, batch.batch_type), reading=True)
    query = call.list_query("async_batch_tasks")
    with call.read() as unit:
        return call.page("async_batch_tasks", service.task_page(unit, batch.id, query), unit, query)
