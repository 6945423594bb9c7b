"""Events become deliveries (decisions §8.1, §8.4; issue 14): in the transaction that records
them, each event of a subscribed topic gets one delivery per enabled webhook of its store,
with its payload rendered now, so that every attempt (a retry, a replay) sends the same body.

The payload is what a GET of the resource answers in the webhook's version, with its
`included_objects` (decisions §8.2); a `*/deleted` event carries the id alone. Rendering
belongs to the API (the version's serializers), which installs it with ``install``: the
domain never imports the HTTP contract. Webhooks that share a version and `included_objects`
share one payload row per event."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import Connection

from rebill.db.statements import insert_all, insert_many, insert_row
from rebill.models import webhook_deliveries, webhook_payloads

from ..event import outbox
from . import repository
from .model import PENDING
from .topics import is_deleted

# (conn, store, now, version, resource, ids, included_objects) -> {id: body}; ids whose
# resource is gone are left out and sent as deleted ones are.
Renderer = Callable[[Connection, Any, datetime, str, str, list[int], tuple[str, ...]], dict[int, bytes]]
_renderer: list[Renderer] = []
_listeners: list[Callable[[], None]] = []
_encode = msgspec.json.Encoder().encode


def install(renderer: Renderer) -> None:
    _renderer[:] = [renderer]


def on_new_deliveries(listener: Callable[[], None]) -> None:
    """``listener`` is told (from any thread) whenever a flush wrote deliveries: the delivery
    runner of this process looks at once instead of at its next tick."""
    if listener not in _listeners:
        _listeners.append(listener)


def no_longer(listener: Callable[[], None]) -> None:
    """``listener``'s runner stopped: it is told no more (nor kept alive by this list)."""
    if listener in _listeners:
        _listeners.remove(listener)


def id_only(resource: str, resource_id: int) -> bytes:
    return _encode({resource: {"id": resource_id}})


def render(conn: Connection, store: Any, now: datetime, version: str, resource: str, ids: list[int],
            includes: tuple[str, ...]) -> dict[int, bytes]:
    if not _renderer:
        # Loud rather than lost: every process that records events installs the renderer
        # (rebill.api.payloads, imported by the app, the CLI and the workers).
        raise RuntimeError("no webhook payload renderer is installed")
    return _renderer[0](conn, store, now, version, resource, ids, includes)


def fan_out(conn: Connection, recorded: list[outbox.Recorded]) -> None:
    by_store: dict[int, list[outbox.Recorded]] = defaultdict(list)
    for r in recorded:
        by_store[r.pending.store.id].append(r)
    made = False
    for store_id, items in by_store.items():
        hooks = repository.enabled(conn, store_id)
        if not hooks:
            continue
        by_topic: dict[str, list[list[Any]]] = defaultdict(list)
        for hook in hooks:
            by_topic[hook[1]].append(hook)
        wanted = [(r, hook) for r in items for hook in by_topic.get(r.pending.topic, ())]
        if wanted:
            # The webhooks were read unlocked: one a concurrent delete removed gets nothing.
            alive = repository.held(conn, store_id, {hook[0] for _, hook in wanted})
            wanted = [(r, hook) for r, hook in wanted if hook[0] in alive]
        if wanted:
            _deliveries(conn, items[0].pending.store, wanted)
            made = True
    if made:
        told()


def told() -> None:
    """Tells this process's delivery runner that deliveries were written."""
    for listener in _listeners:
        listener()


def _deliveries(conn: Connection, store: Any, wanted: list[tuple[outbox.Recorded, list[Any]]]) -> None:
    # One body per (event, version, included objects), rendered for all events of a kind at once.
    shapes: dict[tuple[str, tuple[str, ...], str], set[int]] = defaultdict(set)
    for r, (_, _, version, included) in wanted:
        p = r.pending
        if not is_deleted(p.topic):
            shapes[(version, tuple(included), p.resource)].add(p.resource_id)
    now = wanted[-1][0].pending.created_at
    bodies: dict[tuple[str, tuple[str, ...], str], dict[int, bytes]] = {
        shape: render(conn, store, now, shape[0], shape[2], sorted(ids), shape[1]) for shape, ids in shapes.items()}

    payload_of: dict[tuple[int, str, tuple[str, ...]], int] = {}
    payload_rows: list[dict[str, Any]] = []
    keys: list[tuple[int, str, tuple[str, ...]]] = []
    seen: set[tuple[int, str, tuple[str, ...]]] = set()
    for r, (_, _, version, included) in wanted:
        p = r.pending
        shape = (version, tuple(included)) if not is_deleted(p.topic) else ("", ())
        key = (r.id, *shape)
        if key in seen:
            continue
        seen.add(key)
        body = bodies.get((*shape, p.resource), {}).get(p.resource_id) if shape[0] else None
        payload_rows.append({"store_id": store.id, "event_id": r.id,
                             "body": body if body is not None else id_only(p.resource, p.resource_id)})
        keys.append(key)
    # One payload (most flushes) through the prepared single insert, more in one executemany.
    ids = ([insert_row(conn, webhook_payloads, payload_rows[0])] if len(payload_rows) == 1
           else insert_many(conn, webhook_payloads, payload_rows))
    payload_of.update(zip(keys, ids))

    rows = []
    for r, (webhook_id, _, version, included) in wanted:
        p = r.pending
        shape = (version, tuple(included)) if not is_deleted(p.topic) else ("", ())
        rows.append({
            "store_id": store.id, "webhook_id": webhook_id, "event_id": r.id, "payload_id": payload_of[(r.id, *shape)],
            "topic": p.topic, "resource": p.resource, "resource_id": p.resource_id, "status": PENDING,
            "attempts": 0, "next_attempt_at": p.created_at, "created_at": p.created_at, "updated_at": p.created_at,
        })
    insert_all(conn, webhook_deliveries, rows)


outbox.on_recorded(fan_out)
