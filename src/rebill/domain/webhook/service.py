"""Webhook subscription use cases (decisions §8.2, issue 14). A webhook belongs to the API
version it was created in: its topics, `included_objects` and payloads are that version's,
whichever version later reads or changes it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy import update as update_rows

from rebill.errors import NotFound, ValidationFailed
from rebill.models import webhook_deliveries, webhook_payloads

from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository, rules
from .model import PENDING, Webhook, WebhookCreate, WebhookUpdate

TAKEN = "this address already receives this topic"


def get(unit: Unit, webhook_id: int, *, lock: bool = False) -> Webhook:
    found = repository.get(unit.conn, unit.store_id, webhook_id, lock=lock)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def _check(unit: Unit, values: dict[str, Any], version: str, policy: str, other_than: int = 0) -> None:
    sandbox = unit.store.sandbox
    rules.check(values, version, sandbox=sandbox, private=rules.private_allowed(policy, sandbox=sandbox))
    # One subscription per address and topic: a second would send every event twice. The
    # store's row lock makes the look and the write one step, so that two identical requests
    # at once (a client retrying) cannot both find the pair free (PostgreSQL; SQLite has one
    # writer at a time).
    repository.lock_store(unit.conn, unit.store_id)
    key = rules.address_key(values["address"])
    if any(rules.address_key(address) == key for address in repository.addresses_of_topic(
            unit.conn, unit.store_id, values["topic"], other_than=other_than)):
        raise ValidationFailed.field("address", TAKEN)


def create(unit: Unit, command: WebhookCreate, version: str, *, policy: str = "sandbox") -> Webhook:
    """``policy``: the deployment's REBILL_WEBHOOK_PRIVATE_ADDRESSES (rules.private_allowed)."""
    values = {"address": command.address.strip(), "topic": command.topic,
              "included_objects": list(dict.fromkeys(command.included_objects or []))}
    _check(unit, values, version, policy)
    webhook_id = repository.insert(unit.conn, {
        **values, "store_id": unit.store_id, "api_version": version, "disabled_at": None,
        "created_at": unit.now, "updated_at": unit.now})
    unit.record("webhook/created", webhook_id)
    return get(unit, webhook_id)


def update(unit: Unit, webhook_id: int, command: WebhookUpdate, *, policy: str = "sandbox") -> Webhook:
    current = get(unit, webhook_id, lock=True)
    changes = command.changes()
    if "address" in changes:
        changes["address"] = changes["address"].strip()
    if "included_objects" in changes:
        changes["included_objects"] = list(dict.fromkeys(changes["included_objects"] or []))
    whole = {"address": current.address, "topic": current.topic, "included_objects": current.included_objects,
             **changes}
    _check(unit, whole, current.api_version, policy, other_than=current.id)
    changed = {k: v for k, v in changes.items() if getattr(current, k) != v}
    if not changed:
        return current
    repository.update_one(unit.conn, unit.store_id, webhook_id, {**changed, "updated_at": unit.now})
    unit.record("webhook/updated", webhook_id, changed=changed)
    return get(unit, webhook_id)


def delete_webhook(unit: Unit, webhook_id: int) -> None:
    """Its deliveries go with it (their rows cascade); payloads no other webhook's delivery
    names go too."""
    get(unit, webhook_id, lock=True)
    payload_ids = set(unit.conn.execute(select(webhook_deliveries.c.payload_id).where(
        webhook_deliveries.c.webhook_id == webhook_id)).scalars())
    repository.delete_one(unit.conn, unit.store_id, webhook_id)
    if payload_ids:
        still = set(unit.conn.execute(select(webhook_deliveries.c.payload_id).where(
            webhook_deliveries.c.payload_id.in_(payload_ids))).scalars())
        gone = sorted(payload_ids - still)
        for start in range(0, len(gone), 500):
            unit.conn.execute(delete(webhook_payloads).where(webhook_payloads.c.id.in_(gone[start:start + 500])))
    unit.record("webhook/deleted", webhook_id, {"id": webhook_id})


def enable(unit: Unit, webhook_id: int) -> Webhook:
    """A disabled webhook receives again: new events, and its pending deliveries at once
    (Rebill's extension, docs/api-choices.md, Webhooks)."""
    current = get(unit, webhook_id, lock=True)
    if current.disabled_at is None:
        return current
    repository.update_one(unit.conn, unit.store_id, webhook_id, {"disabled_at": None, "updated_at": unit.now})
    unit.conn.execute(update_rows(webhook_deliveries).where(
        webhook_deliveries.c.webhook_id == webhook_id, webhook_deliveries.c.status == PENDING)
        .values(next_attempt_at=unit.now, updated_at=unit.now))
    unit.record("webhook/enabled", webhook_id)
    return get(unit, webhook_id)
