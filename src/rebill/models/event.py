"""The event log: one row per change, written in the change's transaction (decisions §8.1),
readable as the 2021-11 event resource (03-real-fields "event") and turned into webhook
deliveries in that same transaction (models/webhook.py)."""

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
    # The customer the resource belongs to, when it belongs to one (a filter of GET /events).
    Column("customer_id", IdType, nullable=True),
    # Facts the delivery needs once the resource may be gone (e.g. ``*/deleted`` carries the id).
    Column("data", JsonType, nullable=True),
    # Who made the change: api, cli, billing_run, test_clock, ... and the token, when one did.
    Column("origin", String(16), nullable=True),
    Column("token_id", IdType, nullable=True),
    # The names of the fields an update changed.
    Column("updated_attributes", JsonType, nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Index("ix_events_resource", "resource", "resource_id"),
    Index("ix_events_store_customer", "store_id", "customer_id"),
    sqlite_autoincrement=True,
)
