"""Async batches and tasks as the domain sees them (decisions §7.7 items 9-12)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

# A batch: being filled (and, once submitted, waiting for its store's turn), running, done.
NOT_STARTED, PROCESSING, COMPLETED, FAILED = "not_started", "processing", "completed", "failed"
BATCH_STATUSES = (NOT_STARTED, PROCESSING, COMPLETED, FAILED)
# A task: waiting, claimed by the worker running its batch, done either way.
PENDING, SUCCESS = "pending", "success"
TASK_STATUSES = (PENDING, PROCESSING, SUCCESS, FAILED)

# NOTE: issue 15, 1 to 1,000 tasks a call and at most 10,000 a batch.
MAX_TASKS_PER_CALL = 1_000
MAX_TASKS = 10_000


class AsyncBatch(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py)."""

    id: int
    store_id: int
    batch_type: str
    status: str
    version: str
    token_id: int | None
    total_task_count: int
    success_task_count: int
    fail_task_count: int
    submitted_at: datetime | None
    closed_at: datetime | None
    claimed_by: str | None
    claimed_until: datetime | None
    created_at: datetime
    updated_at: datetime


class Task(msgspec.Struct):
    id: int
    batch_id: int
    store_id: int
    body: dict[str, Any]
    status: str
    result: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
