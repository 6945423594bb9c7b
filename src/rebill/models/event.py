"""The event log: one row per create, update and delete, written in the change's transaction."""

from sqlalchemy import Column, Index, String, Table

from .base import IdType, JsonType, UtcDateTime, id_column, metadata, store_column

events = Table(
    "events",
    metadata,
    id_column(),
    store_column(),
    Column("topic", String(64), nullable=False),
    Column("resource", String(32), nullable=False),
    Column("resource_id", IdType, nullable=False),
    # Facts the delivery needs once the resource may be gone (e.g. ``*/deleted`` carries the id).
    Column("data", JsonType, nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Index("ix_events_resource", "resource", "resource_id"),
    sqlite_autoincrement=True,
)
