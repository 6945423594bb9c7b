"""The head (2021-11) contract of webhooks, their delivery log and the event log (decisions §8,
03-real-fields "webhook" and "event", issue 14): serializers, request schemas and list
contracts, merged by ``contract.py``.

A webhook renders the fields of the real service (`id`, `address`, `topic`,
`included_objects`) and Rebill's own: the version its payloads use, whether it is enabled, its
times. Deliveries (`webhook_delivery`) are Rebill's extension, with their attempts."""

from __future__ import annotations

from typing import Any

import msgspec

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Field, Schema
from rebill.domain.event.model import Event
from rebill.domain.webhook.model import STATUSES, Attempt, Delivery, Webhook
from rebill.domain.webhook.rules import MAX_ADDRESS
from rebill.domain.webhook.topics import TOPICS

from .serializers import ts


def webhook(w: Webhook) -> dict[str, Any]:
    return {
        "id": w.id,
        "address": w.address,
        "topic": w.topic,
        "included_objects": list(w.included_objects),
        "api_version": w.api_version,
        "status": "disabled" if w.disabled_at is not None else "enabled",
        "disabled_at": ts(w.disabled_at),
        "created_at": ts(w.created_at),
        "updated_at": ts(w.updated_at),
    }


def _attempt(a: Attempt) -> dict[str, Any]:
    return {
        "number": a.number,
        "replay": bool(a.replay),
        "started_at": ts(a.started_at),
        "status_code": a.status_code,
        "latency_ms": a.latency_ms,
        "response": a.response,
        "error": a.error,
    }


def webhook_delivery(x: Delivery) -> dict[str, Any]:
    return {
        "id": x.id,
        "webhook_id": x.webhook_id,
        "event_id": x.event_id,
        # The Standard Webhooks `webhook-id` every attempt of this delivery carries.
        "message_id": x.message_id,
        "topic": x.topic,
        "object_type": x.resource,
        "object_id": x.resource_id,
        "test": x.event_id is None,
        "status": x.status,
        "attempt_count": x.attempts,
        "next_attempt_at": ts(x.next_attempt_at),
        "last_attempt_at": ts(x.last_attempt_at),
        "last_status_code": x.last_status_code,
        "last_error": x.last_error,
        "succeeded_at": ts(x.succeeded_at),
        "created_at": ts(x.created_at),
        "updated_at": ts(x.updated_at),
        "attempts": [_attempt(a) for a in x.attempt_log],
    }


def event(e: Event) -> dict[str, Any]:
    """NOTE: 03-real-fields "event (2021-11)" saw `created_at` naive; its preamble leaves the
    datetime form to decisions §2.4, which gives 2021-11 the offset (as for metafields)."""
    return {
        "id": e.id,
        "created_at": ts(e.created_at),
        "custom_attributes": [],
        "customer_id": e.customer_id,
        "description": e.description,
        "object_id": e.resource_id,
        "object_type": e.resource,
        "source": {
            "account_email": None,
            "account_id": None,
            "api_token_id": e.token_id,
            "api_token_name": e.token_name,
            "origin": e.origin,
            "user_type": "api_token" if e.token_id is not None else None,
        },
        "updated_attributes": list(e.updated_attributes or []),
        "verb": e.verb,
    }


def payload(body: bytes) -> Any:
    """The stored body as JSON, for the log's single-delivery view."""
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


def topic_fields(*versions: str) -> tuple[Field, ...]:
    """A webhook body: its topics and related objects are those of the Events tables of
    ``versions`` (domain/webhook/topics.py), checked by the domain and stated by the document. A
    webhook is created in the request's version, and keeps its own when a request of the other
    version updates it: an update may name the topics of either."""
    tables = [TOPICS[v] for v in versions]
    return (
        Field("address", "str", required=True, nullable=False, min_length=1, max_length=MAX_ADDRESS),
        Field("topic", "str", required=True, nullable=False, min_length=1, max_length=64,
              domain_values=frozenset(topic for table in tables for topic in table)),
        # NOTE: spec 01 Events: `included_objects` is an array of related objects' names.
        Field("included_objects", "list", items="str",
              domain_values=frozenset(name for table in tables for names in table.values() for name in names)),
    )


EITHER = ("2021-11", "2021-01")

SERIALIZERS: dict[str, Serializer] = {"webhook": webhook, "webhook_delivery": webhook_delivery, "event": event}
SCHEMAS: dict[str, Schema] = {
    "webhook.create": Schema(*topic_fields("2021-11")),
    "webhook.update": Schema(*topic_fields(*EITHER)),
    "webhook_delivery.replay": Schema(
        Field("since", "str", required=True, nullable=False, convert=q.parse_datetime),
        Field("webhook_id", "int"),
    ),
}

# NOTE: spec 01 Sorting, Webhook: id-desc, sorted by id.
LISTS: dict[str, ListContract] = {
    "webhooks": ListContract(
        plural="webhooks",
        kind="webhook",
        filters={"topic": ("topic", q.text), "address": ("address", q.text)},
        sorts=("id",),
        default_sort="id-desc",
    ),
    "webhook_deliveries": ListContract(
        plural="webhook_deliveries",
        kind="webhook_delivery",
        filters={"webhook_id": ("webhook_id", q.integer), "status": ("status", q.choice(*STATUSES)),
                 "topic": ("topic", q.text), **q.window("created_at")},
        sorts=("id",),
        default_sort="id-desc",
    ),
    # NOTE: issue 14, newest first, with cursors; the filters of the public event list.
    "events": ListContract(
        plural="events",
        kind="event",
        filters={"object_type": ("object_type", q.text), "object_id": ("object_id", q.integer),
                 "verb": ("verb", q.text), "customer_id": ("customer_id", q.integer), **q.window("created_at")},
        sorts=("id",),
        default_sort="id-desc",
    ),
}
