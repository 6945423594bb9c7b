"""Head (2021-11) shapes of `async_batch` and `async_batch_task` (decisions §7.7 items 9-10,
issue 15): what ``v2021_11/batches.py`` renders. 2021-01 derives its own through
``v2021_01/batches.py``."""

from __future__ import annotations

from rebill.api.shapes import Shape, any_object, datetime_offset, enum, integer, nullable, obj, string
from rebill.domain.batch.model import BATCH_STATUSES, MAX_TASKS, TASK_STATUSES

_count = integer(minimum=0, maximum=MAX_TASKS)

async_batch = obj({
    "id": integer(),
    # One of its version's batch types (api/tasks.py TYPES).
    "batch_type": string(),
    "closed_at": nullable(datetime_offset()),
    "created_at": datetime_offset(),
    "fail_task_count": _count,
    "status": enum(*BATCH_STATUSES),
    "submitted_at": nullable(datetime_offset()),
    "success_task_count": _count,
    "total_task_count": _count,
    "updated_at": datetime_offset(),
    # The version the batch was made in: its tasks run in it.
    "version": enum("2021-01", "2021-11"),
})

async_batch_task = obj({
    "id": integer(),
    "batch_id": integer(),
    # The endpoint's body plus the path's ids (decisions §7.7 item 11), as the client sent it.
    "body": any_object(),
    "created_at": datetime_offset(),
    # NOTE: decisions §7.7 item 10, null until the task ran; then the endpoint's status and the
    # body it answered (null for a 204).
    "result": nullable(obj({"status_code": integer(minimum=100, maximum=599), "output": nullable(any_object())})),
    "status": enum(*TASK_STATUSES),
    "updated_at": datetime_offset(),
})

SHAPES: dict[str, Shape] = {"async_batch": async_batch, "async_batch_task": async_batch_task}
