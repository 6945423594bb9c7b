"""Webhook subscriptions and their deliveries (decisions §8): the outbox that turns each event
into one delivery per subscribed webhook, in the event's own transaction, and the log of every
attempt to send one.

A delivery names its payload rather than holding it: the webhooks of a store that share a
version and `included_objects` share one body, written once per event."""

from sqlalchemy import Column, ForeignKey, Index, Integer, LargeBinary, String, Table, text

from .base import IdType, JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

webhooks = Table(
    "webhooks",
    metadata,
    id_column(),
    store_column(),
    Column("address", String(2048), nullable=False),
    Column("topic", String(64), nullable=False),
    Column("included_objects", JsonType, nullable=False),
    # NOTE: the API version the webhook was created in renders its payloads (issue 14).
    Column("api_version", String(10), nullable=False),
    # Set when its deliveries failed for good (decisions §8.4); a disabled webhook gets no new
    # deliveries and sends none of its pending ones until it is enabled again.
    Column("disabled_at", UtcDateTime(), nullable=True),
    *timestamps(),
    Index("ix_webhooks_store_topic", "store_id", "topic"),
    sqlite_autoincrement=True,
)

webhook_payloads = Table(
    "webhook_payloads",
    metadata,
    id_column(),
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("event_id", IdType, nullable=True),  # None for a test delivery's
    # The exact bytes every attempt sends, so that a retry or a replay resends the same body.
    Column("body", LargeBinary, nullable=False),
    sqlite_autoincrement=True,
)

PENDING = text("status = 'pending'")

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    id_column(),
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False),
    Column("webhook_id", IdType, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False),
    # None for a test delivery (`POST /webhooks/{id}/test`), which no event caused.
    Column("event_id", IdType, nullable=True),
    Column("payload_id", IdType, ForeignKey("webhook_payloads.id", ondelete="CASCADE"), nullable=False),
    Column("topic", String(64), nullable=False),
    # The resource the event is about: deliveries of one webhook and resource go out in order.
    Column("resource", String(32), nullable=False),
    Column("resource_id", IdType, nullable=False),
    Column("status", String(16), nullable=False),  # pending | succeeded | failed
    Column("attempts", Integer, nullable=False),
    # 1 once a replay asked for the current series of attempts: each attempt of it is marked
    # `replay` in the log, its retries too (migration 0023).
    Column("replayed", Integer, nullable=False, server_default=text("0")),
    # In the store's time (a sandbox store's test clock moves its retries too).
    Column("next_attempt_at", UtcDateTime(), nullable=True),
    # A worker's lease, in real time: a delivery whose worker died is sent again once it expires.
    Column("claimed_by", String(64), nullable=True),
    Column("claimed_until", UtcDateTime(), nullable=True),
    Column("last_status_code", Integer, nullable=True),
    Column("last_error", String(512), nullable=True),
    Column("last_attempt_at", UtcDateTime(), nullable=True),
    Column("succeeded_at", UtcDateTime(), nullable=True),
    *timestamps(),
    Index("ix_webhook_deliveries_due", "next_attempt_at", postgresql_where=PENDING, sqlite_where=PENDING),
    # The earlier pending deliveries of one webhook and resource: a delivery waits for them.
    Index("ix_webhook_deliveries_order", "webhook_id", "resource", "resource_id", "id", postgresql_where=PENDING,
          sqlite_where=PENDING),
    Index("ix_webhook_deliveries_store", "store_id", "id"),
    Index("ix_webhook_deliveries_webhook", "webhook_id", "id"),
    # Whether any delivery still names a payload: the retention purge deletes a payload once
    # none does (domain/webhook/retention.py), and a webhook's delete likewise.
    Index("ix_webhook_deliveries_payload", "payload_id"),
    sqlite_autoincrement=True,
)

webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    id_column(),
    Column("delivery_id", IdType, ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("store_id", IdType, nullable=False),
    Column("number", Integer, nullable=False),
    Column("replay", Integer, nullable=False),  # 1 for an attempt asked by a replay
    Column("started_at", UtcDateTime(), nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("latency_ms", Integer, nullable=False),
    # The first bytes of the answer, or what went wrong (timeout, refused...).
    Column("response", String(512), nullable=True),
    Column("error", String(512), nullable=True),
    sqlite_autoincrement=True,
)

__all__ = ["webhooks", "webhook_payloads", "webhook_deliveries", "webhook_attempts"]
