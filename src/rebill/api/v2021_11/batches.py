"""The head (2021-11) contract of async batches and their tasks (decisions §7.7 items 9-10,
issue 15): serializers, the create schema and the two lists, merged by ``contract.py``."""

from __future__ import annotations

from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.batch.model import BATCH_STATUSES, TASK_STATUSES, AsyncBatch, Task

from .serializers import ts


def async_batch(b: AsyncBatch) -> dict[str, Any]:
    return {
        "id": b.id,
        "batch_type": b.batch_type,
        "closed_at": ts(b.closed_at),
        "created_at": ts(b.created_at),
        "fail_task_count": b.fail_task_count,
        "status": b.status,
        "submitted_at": ts(b.submitted_at),
        "success_task_count": b.success_task_count,
        "total_task_count": b.total_task_count,
        "updated_at": ts(b.updated_at),
        "version": b.version,
    }


def async_batch_task(t: Task) -> dict[str, Any]:
    return {
        "id": t.id,
        "batch_id": t.batch_id,
        "body": t.body,
        "created_at": ts(t.created_at),
        # NOTE: decisions §7.7 item 10, null until the task ran; then {"status_code", "output"}.
        "result": t.result,
        "status": t.status,
        "updated_at": ts(t.updated_at),
    }


SERIALIZERS: dict[str, Serializer] = {"async_batch": async_batch, "async_batch_task": async_batch_task}
SCHEMAS: dict[str, Schema] = {
    "async_batch.create": Schema(Field("batch_type", "str", required=True, nullable=False, min_length=1,
                                       max_length=48)),
}

@q.typed(type="string")
def _batch_type(value: str) -> str:
    """A type is read in any case and without the spaces around it, as a create reads it (found
    by an audit: `?batch_type=DISCOUNT_CREATE` found none of the batches it had made)."""
    return q.text(value).strip().lower()


# NOTE: spec 01 Sorting, Async batch: id-desc, sorted by id or created_at. Tasks list in the
# order they run (docs/api-choices.md, Async batches).
LISTS: dict[str, ListContract] = {
    "async_batches": ListContract(
        plural="async_batches",
        kind="async_batch",
        filters={"batch_type": ("batch_type", _batch_type), "status": ("status", q.choice(*BATCH_STATUSES)),
                 **q.window("created_at", "updated_at")},
        sorts=("id", "created_at"),
        default_sort="id-desc",
    ),
    "async_batch_tasks": ListContract(
        plural="async_batch_tasks",
        kind="async_batch_task",
        filters={"ids": ("ids", q.ids), "status": ("status", q.choice(*TASK_STATUSES))},
        sorts=("id",),
        default_sort="id-asc",
    ),
}
