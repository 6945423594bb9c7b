"""Webhook subscriptions and deliveries as the domain sees them (decisions §8)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

# Delivery statuses: waiting to go out (or to be tried again), done, given up.
PENDING, SUCCEEDED, FAILED = "pending", "succeeded", "failed"
STATUSES = (PENDING, SUCCEEDED, FAILED)


class Webhook(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py)."""

    id: int
    store_id: int
    address: str
    topic: str
    included_objects: list[str]
    api_version: str
    disabled_at: datetime | None
    created_at: datetime
    updated_at: datetime


class WebhookCreate(msgspec.Struct, kw_only=True):
    address: str
    topic: str
    included_objects: list[str] | None = None


class WebhookUpdate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Only the fields that were sent are set."""

    address: str | UnsetType = UNSET
    topic: str | UnsetType = UNSET
    included_objects: list[str] | None | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not UNSET}


class Attempt(msgspec.Struct):
    id: int
    delivery_id: int
    store_id: int
    number: int
    replay: int
    started_at: datetime
    status_code: int | None
    latency_ms: int
    response: str | None
    error: str | None


class Delivery(msgspec.Struct):
    """One event on its way to one webhook, with the log of its attempts (``attempt_log``,
    filled by the repository when asked)."""

    id: int
    store_id: int
    webhook_id: int
    event_id: int | None
    payload_id: int
    topic: str
    resource: str
    resource_id: int
    status: str
    attempts: int
    next_attempt_at: datetime | None
    claimed_by: str | None
    claimed_until: datetime | None
    last_status_code: int | None
    last_error: str | None
    last_attempt_at: datetime | None
    succeeded_at: datetime | None
    created_at: datetime
    updated_at: datetime
    attempt_log: list[Attempt] = []

    @property
    def message_id(self) -> str:
        return message_id(self.id)


def message_id(delivery_id: int) -> str:
    """The Standard Webhooks `webhook-id`: one per delivery, the same on every retry and replay,
    so that a receiver can tell a repeat from a new message."""
    return f"msg_{delivery_id}"
