"""Async batches and their tasks (decisions §7.7, issue 15): a batch is a list of calls of one
endpoint, stored as rows, run by the job runner of `rebill serve` one store's batch at a time.

Each task keeps the body it was sent and, once run, the endpoint's answer (`result`). The
batch keeps its counters; a worker's lease on it says who runs it (in real time: a batch
whose worker died is taken over once the lease expires)."""

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, Integer, String, Table, text

from .base import IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

# At most one batch of a store runs at a time (issue 15): the database refuses a second.
PROCESSING = text("status = 'processing'")
# Submitted and waiting for its store's turn.
WAITING = text("status = 'not_started' AND submitted_at IS NOT NULL")
# Tasks still to run (a `processing` one was claimed by a worker that may have died).
OPEN = text("status IN ('pending', 'processing')")

async_batches = Table(
    "async_batches",
    metadata,
    id_column(),
    store_column(),
    Column("batch_type", String(48), nullable=False),
    Column("status", String(16), nullable=False),  # not_started | processing | completed | failed
    # The API version of the request that made it: its tasks run and render in that version.
    Column("version", String(10), nullable=False),
    # The token that made it: the source of its tasks' events.
    Column("token_id", IdType, nullable=True),
    Column("total_task_count", Integer, nullable=False),
    Column("success_task_count", Integer, nullable=False),
    Column("fail_task_count", Integer, nullable=False),
    Column("submitted_at", UtcDateTime(), nullable=True),
    # The order batches were sent for processing in, within a second (`submitted_at` keeps
    # whole seconds, as every time the API shows): one more than the greatest so far.
    Column("submitted_seq", BigInteger, nullable=True),
    Column("closed_at", UtcDateTime(), nullable=True),
    Column("claimed_by", String(64), nullable=True),
    Column("claimed_until", UtcDateTime(), nullable=True),
    *timestamps(),
    Index("ix_async_batches_processing", "store_id", unique=True, postgresql_where=PROCESSING,
          sqlite_where=PROCESSING),
    Index("ix_async_batches_waiting", "submitted_at", "id", postgresql_where=WAITING, sqlite_where=WAITING),
    sqlite_autoincrement=True,
)

async_batch_tasks = Table(
    "async_batch_tasks",
    metadata,
    id_column(),
    Column("batch_id", IdType, ForeignKey("async_batches.id", ondelete="CASCADE"), nullable=False),
    Column("store_id", IdType, nullable=False),
    # `json`, not `jsonb`, on PostgreSQL: the body is run as it was sent, and jsonb rewrites
    # numbers (-0.0 became 0.0 and passed a rule its endpoint refused; 1e16 became an integer;
    # found by an audit).
    Column("body", JSON(), nullable=False),
    Column("status", String(16), nullable=False),  # pending | processing | success | failed
    # {"status_code": n, "output": <the endpoint's answer>} once the task ran.
    Column("result", JsonType, nullable=True),
    *timestamps(),
    Index("ix_async_batch_tasks_batch", "batch_id", "id"),
    Index("ix_async_batch_tasks_open", "batch_id", "id", postgresql_where=OPEN, sqlite_where=OPEN),
    sqlite_autoincrement=True,
)

__all__ = ["async_batches", "async_batch_tasks"]
