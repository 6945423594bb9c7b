"""The delivery log and what can be done with it (Rebill's extension, issue 14): every delivery
with its attempts; a test delivery; replaying one delivery, or every failed one since a time.

A replay sends the same body with the same `webhook-id` (a receiver that already has it knows
it), as a new series of attempts with the usual retries; attempts of a replay are marked in the
log. A test delivery is a delivery no event caused: the store's newest record of the webhook's
resource, rendered as a real payload of its topic would be."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, bindparam, func, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.errors import NotFound, ValidationFailed
from rebill.models import (
    addresses,
    charges,
    customers,
    orders,
    products,
    purchase_items,
    webhook_attempts,
    webhook_deliveries,
    webhook_payloads,
    webhooks,
)

from ..filters import Filter, where
from ..listing import ListQuery, PageResult, fetch_page
from ..unit import Unit
from . import fanout, repository, service
from .model import FAILED, PENDING, SUCCEEDED, Attempt, Delivery, Webhook
from .topics import is_deleted, resource_of

d = webhook_deliveries
_select = select(*columns_for(Delivery, d.c, leave_out=("attempt_log",)))
_by_id = Prepared(_select.where(d.c.id == bindparam("id"), d.c.store_id == bindparam("store_id")))
_attempts = select(*columns_for(Attempt, webhook_attempts.c))

FILTERS: dict[str, Filter] = {
    "webhook_id": lambda v: d.c.webhook_id == v,
    "status": lambda v: d.c.status == v,
    "topic": lambda v: d.c.topic == v,
    "created_at_min": lambda v: d.c.created_at >= v,
    "created_at_max": lambda v: d.c.created_at <= v,
}

# The records a test delivery samples, newest first.
_SAMPLES = {
    "customer": (customers, None),
    "address": (addresses, None),
    "subscription": (purchase_items, purchase_items.c.kind == "subscription"),
    "charge": (charges, None),
    "order": (orders, None),
    "product": (products, None),
}


def _with_attempts(conn: Connection, found: list[Delivery]) -> list[Delivery]:
    if not found:
        return found
    by_delivery: dict[int, list[Attempt]] = defaultdict(list)
    stmt = _attempts.where(webhook_attempts.c.delivery_id.in_([x.id for x in found])).order_by(webhook_attempts.c.id)
    for row in conn.execute(stmt):
        by_delivery[row.delivery_id].append(Attempt(*row))
    for delivery in found:
        delivery.attempt_log = by_delivery.get(delivery.id, [])
    return found


def get(unit: Unit, delivery_id: int) -> Delivery:
    row = _by_id.one(unit.conn, id=delivery_id, store_id=unit.store_id)
    if row is None:
        raise NotFound()
    return _with_attempts(unit.conn, [Delivery(*row)])[0]


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    stmt = where(_select.where(d.c.store_id == unit.store_id), FILTERS, query.filters)
    result = fetch_page(unit.conn, stmt, d, query, Delivery)
    _with_attempts(unit.conn, result.rows)
    return result


def body_of(unit: Unit, delivery: Delivery) -> bytes:
    found = unit.conn.execute(select(webhook_payloads.c.body).where(
        webhook_payloads.c.id == delivery.payload_id, webhook_payloads.c.store_id == unit.store_id)).scalar()
    return bytes(found or b"")


def _again(unit: Unit, ids: list[int]) -> None:
    unit.conn.execute(update(d).where(d.c.id.in_(ids), d.c.store_id == unit.store_id).values(
        status=PENDING, attempts=0, replayed=1, next_attempt_at=unit.now, claimed_by=None, claimed_until=None,
        succeeded_at=None, updated_at=unit.now))


def replay(unit: Unit, delivery_id: int) -> Delivery:
    """NOTE: issue 14, the same body and `webhook-id`, sent again."""
    delivery = get(unit, delivery_id)
    webhook = service.get(unit, delivery.webhook_id)
    if webhook.disabled_at is not None:
        raise ValidationFailed.field("webhook_id", "the webhook is disabled: enable it before replaying")
    if delivery.status == PENDING:
        raise ValidationFailed.field("status", "the delivery is still pending: it goes out on its own")
    _again(unit, [delivery.id])
    fanout.told()
    return get(unit, delivery_id)


def replay_failed(unit: Unit, since: datetime, webhook_id: int | None = None) -> list[int]:
    """Every failed delivery created since ``since`` (of one webhook), sent again; returns
    their ids. Those of disabled webhooks are left: enabling a webhook comes first."""
    conditions = [d.c.store_id == unit.store_id, d.c.status == FAILED, d.c.created_at >= since]
    if webhook_id is not None:
        # An id the body names that is not the store's is a bad field (422), as everywhere.
        named = repository.get(unit.conn, unit.store_id, webhook_id)
        if named is None:
            raise ValidationFailed.field("webhook_id", "webhook not found")
        if named.disabled_at is not None:
            raise ValidationFailed.field("webhook_id", "the webhook is disabled: enable it before replaying")
        conditions.append(d.c.webhook_id == webhook_id)
    ids = list(unit.conn.execute(select(d.c.id).join(webhooks, webhooks.c.id == d.c.webhook_id)
                                 .where(and_(*conditions), webhooks.c.disabled_at.is_(None))
                                 .order_by(d.c.id)).scalars())
    for start in range(0, len(ids), 500):
        _again(unit, ids[start:start + 500])
    if ids:
        fanout.told()
    return ids


def _sample(unit: Unit, resource: str) -> int | None:
    table, condition = _SAMPLES[resource]
    stmt = select(func.max(table.c.id)).where(table.c.store_id == unit.store_id)
    if condition is not None:
        stmt = stmt.where(condition)
    return unit.conn.execute(stmt).scalar()


def test(unit: Unit, webhook_id: int) -> Delivery:
    """NOTE: decisions §8.2, `POST /webhooks/{id}/test`: one delivery of the webhook's topic,
    queued now and sent by the delivery job like any other (never on the request's path)."""
    # Locked: a delete waits for the delivery (then takes it with the webhook), or goes first (404).
    webhook: Webhook = service.get(unit, webhook_id, lock=True)
    resource = resource_of(webhook.topic)
    sample = _sample(unit, resource)
    body: bytes | None = None
    if sample is not None and not is_deleted(webhook.topic):
        body = fanout.render(unit.conn, unit.store, unit.now, webhook.api_version, resource, [sample],
                             tuple(webhook.included_objects)).get(sample)
    if body is None:
        body = fanout.id_only(resource, sample or 0)
    payload_id = insert_row(unit.conn, webhook_payloads, {"store_id": unit.store_id, "event_id": None, "body": body})
    delivery_id = insert_row(unit.conn, d, {
        "store_id": unit.store_id, "webhook_id": webhook.id, "event_id": None, "payload_id": payload_id,
        "topic": webhook.topic, "resource": resource, "resource_id": sample or 0, "status": PENDING, "attempts": 0,
        "next_attempt_at": unit.now, "claimed_by": None, "claimed_until": None, "last_status_code": None,
        "last_error": None, "last_attempt_at": None, "succeeded_at": None, "created_at": unit.now,
        "updated_at": unit.now})
    fanout.told()
    return get(unit, delivery_id)


def counts(unit: Unit, webhook_id: int) -> dict[str, Any]:
    """How many deliveries of the webhook are in each status."""
    rows = unit.conn.execute(select(d.c.status, func.count()).where(
        d.c.store_id == unit.store_id, d.c.webhook_id == webhook_id).group_by(d.c.status)).all()
    found = {status: count for status, count in rows}
    return {status: found.get(status, 0) for status in (PENDING, SUCCEEDED, FAILED)}


# The command line's reads (`rebill webhooks list | deliveries | replay | enable`): an operator
# names webhooks and deliveries by id, across stores, and reads the log as one table.

class LogLine(NamedTuple):
    """A delivery as a row of the log table: with its webhook's address and its latest attempt."""

    delivery: Delivery
    address: str
    last: Attempt | None


def webhooks_of(conn: Connection, store_id: int | None = None) -> list[Webhook]:
    """The webhooks of one store (of every store when None), by id."""
    stmt = select(*columns_for(Webhook, webhooks.c)).order_by(webhooks.c.id)
    if store_id is not None:
        stmt = stmt.where(webhooks.c.store_id == store_id)
    return [Webhook(*row) for row in conn.execute(stmt)]


def store_id_of(conn: Connection, kind: str, found_id: int) -> int | None:
    """The store a webhook or a delivery (``kind``) belongs to; None when there is none."""
    table = {"webhook": webhooks, "delivery": d}[kind]
    return conn.execute(select(table.c.store_id).where(table.c.id == found_id)).scalar()


def log_lines(conn: Connection, *, store_id: int | None = None, webhook_id: int | None = None,
              failing: bool = False, limit: int = 50) -> list[LogLine]:
    """The newest ``limit`` deliveries first, in two queries whatever the limit. ``failing``:
    those whose latest attempt failed, given up or waiting for their next retry: not
    succeeded, with attempts (a replay sets them back to 0, and only an attempt fails one)."""
    stmt = _select.add_columns(webhooks.c.address).join(webhooks, webhooks.c.id == d.c.webhook_id)
    if store_id is not None:
        stmt = stmt.where(d.c.store_id == store_id)
    if webhook_id is not None:
        stmt = stmt.where(d.c.webhook_id == webhook_id)
    if failing:
        stmt = stmt.where(d.c.status != SUCCEEDED, d.c.attempts > 0)
    rows = conn.execute(stmt.order_by(d.c.id.desc()).limit(limit)).all()
    found = [Delivery(*row[:-1]) for row in rows]
    latest = (select(func.max(webhook_attempts.c.id))
              .where(webhook_attempts.c.delivery_id.in_([x.id for x in found]))
              .group_by(webhook_attempts.c.delivery_id))
    last = {a.delivery_id: a for a in (Attempt(*row) for row in conn.execute(
        _attempts.where(webhook_attempts.c.id.in_(latest))))} if found else {}
    return [LogLine(delivery, row[-1], last.get(delivery.id)) for delivery, row in zip(found, rows)]
