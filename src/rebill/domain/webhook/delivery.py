"""Deliveries as background work, in the billing run's shape (design guide, "Background
work"): find the due ones, claim them with a lease, send outside any transaction
(jobs/deliver.py), record every outcome in one transaction.

- Due: pending, its next attempt come (in its store's time: a sandbox store's test clock moves
  its retries too), its webhook enabled, no live lease on it, and no earlier pending delivery
  of the same webhook and resource: per webhook and resource, deliveries go out in the order
  of their events, one at a time (issue 14).
- The claim is a conditional UPDATE: on PostgreSQL a second worker waits for the first's row
  locks and then finds the lease taken; SQLite has one writer at a time. A worker that dies
  leaves a lease that expires (real time), and the delivery goes out again with the same
  `webhook-id`: at least once, never lost.
- Recording checks the lease is still this worker's; a 2xx ends the delivery, anything else
  schedules the next attempt (domain/webhook/retries.py) or, after the 20th, fails it for
  good, disables its webhook and tells the store's log (`webhook/disabled`, decisions §8.4).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, bindparam, exists, literal_column, null, or_, select, update

from rebill.db.prepared import Prepared
from rebill.db.statements import insert_all
from rebill.models import stores, webhook_attempts, webhook_deliveries, webhook_payloads, webhooks

from ..store import clock as store_clock
from ..store import repository as store_repo
from ..store.model import Store
from ..unit import Unit
from . import retries
from .model import FAILED, PENDING, SUCCEEDED, message_id

d = webhook_deliveries
_earlier = d.alias("earlier")
# Literal, not bound: SQLite uses a partial index only when the query names its condition.
_PENDING = literal_column("'pending'")
EXCERPT = 512


class Outgoing(NamedTuple):
    """A claimed delivery, with all it takes to send it."""

    id: int
    store_id: int
    webhook_id: int
    address: str
    topic: str
    resource: str
    resource_id: int
    body: bytes
    attempts: int
    replay: bool
    test: bool  # a test delivery: one attempt, no retries, never disables its webhook
    # Its store's test clock at the claim: the attempt's start is logged in the store's time as
    # it was then, not as a clock advance made while the attempt ran left it (found by an audit).
    offset: timedelta = timedelta(0)

    @property
    def message_id(self) -> str:
        return message_id(self.id)


class Outcome(NamedTuple):
    started_at: datetime  # real time
    status_code: int | None
    latency_ms: int
    response: str | None
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300 and self.error is None


def _offsets(conn: Connection) -> list[tuple[int, int]]:
    """Sandbox stores whose test clock runs ahead: their deliveries fall due earlier."""
    return [tuple(row) for row in conn.execute(select(stores.c.id, stores.c.clock_offset_seconds).where(
        stores.c.sandbox.is_(True), stores.c.clock_offset_seconds > 0))]  # type: ignore[misc]


# An uninstalled store's deliveries wait until it is installed again, as its billing does
# (docs/webhooks.md; found by an audit: its receivers kept getting its customers). A look at
# the delivery's store by its key: the uninstalled stores may be many.
_INSTALLED = ~exists().where(stores.c.id == d.c.store_id, stores.c.installed.is_(False))


def _come(real_now: datetime, offsets: Iterable[tuple[int, int]], store_id: int | None) -> Any:
    """Deliveries whose next attempt has come in their store's time."""
    ahead = dict(offsets)
    if store_id is not None:
        return and_(d.c.store_id == store_id,
                    d.c.next_attempt_at <= real_now + timedelta(seconds=ahead.get(store_id, 0)))
    return or_(d.c.next_attempt_at <= real_now, *(
        and_(d.c.store_id == sid, d.c.next_attempt_at <= real_now + timedelta(seconds=seconds))
        for sid, seconds in ahead.items()))


def _in_line() -> Any:
    """An earlier pending delivery of the same webhook and resource exists: this one waits."""
    return exists().where(_earlier.c.webhook_id == d.c.webhook_id, _earlier.c.resource == d.c.resource,
                          _earlier.c.resource_id == d.c.resource_id, _earlier.c.status == _PENDING,
                          _earlier.c.id < d.c.id, _earlier.c.event_id.is_not(None))


def due(conn: Connection, real_now: datetime, *, limit: int, store_id: int | None = None,
        skip: Iterable[int] = (), addresses_full: Iterable[str] = ()) -> list[tuple[int, str]]:
    """(id, address) of due deliveries in id order; ``skip`` leaves out those this worker
    already holds (its lease may outlive the attempt by a moment), ``addresses_full`` those
    to addresses whose receiver has no room now: a receiver with a backlog of due deliveries
    ahead in id order would otherwise fill every look, and the others' would wait for it."""
    earlier = _in_line()
    # A test delivery (no event) goes out at once, to a disabled webhook too, and holds no
    # event's delivery back.
    test = d.c.event_id.is_(None)
    stmt = (select(d.c.id, webhooks.c.address).join(webhooks, webhooks.c.id == d.c.webhook_id)
            .where(d.c.status == _PENDING, _come(real_now, _offsets(conn), store_id),
                   or_(webhooks.c.disabled_at.is_(None), test),
                   or_(d.c.claimed_until.is_(None), d.c.claimed_until < real_now), or_(test, ~earlier), _INSTALLED)
            .order_by(d.c.id).limit(limit))
    held = set(skip)
    if held:
        stmt = stmt.where(d.c.id.not_in(held))
    full = set(addresses_full)
    if full:
        stmt = stmt.where(webhooks.c.address.not_in(full))
    return [(row[0], row[1]) for row in conn.execute(stmt)]


def next_due(conn: Connection, store_id: int) -> datetime | None:
    """The store-time moment the store's next pending delivery falls due (the test clock
    stops there: domain/billing/due.py). One waiting behind an earlier delivery of its
    webhook and resource is not due: it goes out after that one, at a stop of its own."""
    stmt = (select(d.c.next_attempt_at).join(webhooks, webhooks.c.id == d.c.webhook_id)
            .where(d.c.store_id == store_id, d.c.status == _PENDING, webhooks.c.disabled_at.is_(None),
                   or_(d.c.event_id.is_(None), ~_in_line()), _INSTALLED)
            .order_by(d.c.next_attempt_at).limit(1))
    return conn.execute(stmt).scalar()


def claim(conn: Connection, ids: list[int], worker: str, real_now: datetime, lease: timedelta) -> list[Outgoing]:
    if not ids:
        return []
    taken = list(conn.execute(
        update(d).where(d.c.id.in_(ids), d.c.status == _PENDING,
                        or_(d.c.claimed_until.is_(None), d.c.claimed_until < real_now))
        .values(claimed_by=worker, claimed_until=real_now + lease).returning(d.c.id)).scalars())
    if not taken:
        return []
    rows = conn.execute(
        select(d.c.id, d.c.store_id, d.c.webhook_id, webhooks.c.address, d.c.topic, d.c.resource, d.c.resource_id,
               webhook_payloads.c.body, d.c.attempts, d.c.replayed, d.c.event_id)
        .join(webhooks, webhooks.c.id == d.c.webhook_id)
        .join(webhook_payloads, webhook_payloads.c.id == d.c.payload_id)
        .where(d.c.id.in_(taken)).order_by(d.c.id))
    return [Outgoing(r.id, r.store_id, r.webhook_id, r.address, r.topic, r.resource, r.resource_id, bytes(r.body),
                     r.attempts, bool(r.replayed), r.event_id is None)
            for r in rows]


SEND, GONE, LATER = "send", "gone", "later"


def still_to(conn: Connection, outgoing: Outgoing, worker: str) -> str:
    """Whether a delivery claimed a while ago still goes where it was claimed for: ``SEND``;
    ``GONE`` when it is no longer this worker's to send (its webhook was deleted with it, or
    another worker took it over); ``LATER`` when its webhook was disabled or now has another
    address, or its store was uninstalled (released: a later claim sends it there, once enabled
    or installed again). Found by an audit: the
    deliveries a runner had queued behind a slow receiver went out after `DELETE /webhooks/{id}`
    had answered, and to the old address after a `PUT` had changed it."""
    row = conn.execute(select(d.c.claimed_by, webhooks.c.address, webhooks.c.disabled_at, stores.c.installed)
                       .join(webhooks, webhooks.c.id == d.c.webhook_id).join(stores, stores.c.id == d.c.store_id)
                       .where(d.c.id == outgoing.id)).first()
    if row is None or row.claimed_by != worker:
        return GONE
    if row.address != outgoing.address or (row.disabled_at is not None and not outgoing.test) or not row.installed:
        return LATER
    return SEND


def release(conn: Connection, ids: list[int], worker: str) -> None:
    """Gives up this worker's leases on ``ids`` (claimed, never sent)."""
    conn.execute(update(d).where(d.c.id.in_(ids), d.c.claimed_by == worker)
                 .values(claimed_by=None, claimed_until=None))


def stores_of(conn: Connection, ids: Iterable[int]) -> dict[int, Store]:
    return {store_id: store for store_id in set(ids) if (store := store_repo.get(conn, store_id)) is not None}


_SETTLE = Prepared(update(d).where(d.c.id == bindparam("_id"), d.c.claimed_by == bindparam("_worker")).values(
    {name: bindparam(name) for name in ("status", "attempts", "next_attempt_at", "last_status_code", "last_error",
                                        "last_attempt_at", "succeeded_at", "updated_at")}
    | {"claimed_by": null(), "claimed_until": null()}))


def record(conn: Connection, done: list[tuple[Outgoing, Outcome]], worker: str, real_now: datetime,
           real_clock: Any) -> list[int]:
    """Writes the outcome of every attempt in ``done`` (one transaction, the caller's);
    returns the webhooks this disabled. Only deliveries whose lease is still this worker's
    are recorded: one that another worker took over is that worker's to record."""
    if not done:
        return []
    # Locked (PostgreSQL): a webhook deleted meanwhile takes its deliveries with it, and an
    # attempt of one would fail the whole batch on its foreign key; once the delete has
    # committed they are gone from here, and until this commits the delete waits.
    ours = set(conn.execute(select(d.c.id).where(d.c.id.in_([o.id for o, _ in done]), d.c.claimed_by == worker)
                            .order_by(d.c.id).with_for_update(key_share=True)).scalars())
    found = stores_of(conn, (o.store_id for o, _ in done))
    updates, attempts, exhausted = [], [], []
    for outgoing, outcome in done:
        if outgoing.id not in ours:
            continue
        store = found.get(outgoing.store_id)
        store_now = store_clock.clock_for(store, real_clock)() if store is not None else real_now
        # The log reads in the store's time, as its other times do (a sandbox store's test
        # clock shows its retry schedule); the header's timestamp stays real.
        started_at = outcome.started_at + outgoing.offset
        number = outgoing.attempts + 1
        row = {"_id": outgoing.id, "_worker": worker, "attempts": number, "last_status_code": outcome.status_code,
               "last_error": outcome.error, "last_attempt_at": store_now, "updated_at": store_now,
               "succeeded_at": None, "next_attempt_at": None}
        if outcome.succeeded:
            row.update(status=SUCCEEDED, succeeded_at=store_now)
        elif not outgoing.test and (wait := retries.after(number)) is not None:
            row.update(status=PENDING, next_attempt_at=store_now + wait)
        elif outgoing.test:
            row.update(status=FAILED)
        else:
            row.update(status=FAILED)
            exhausted.append((outgoing, store, store_now))
        updates.append(row)
        attempts.append({"delivery_id": outgoing.id, "store_id": outgoing.store_id, "number": number,
                         "replay": int(outgoing.replay), "started_at": started_at,
                         "status_code": outcome.status_code, "latency_ms": outcome.latency_ms,
                         "response": outcome.response, "error": outcome.error})
    _SETTLE.run_many(conn, updates)
    insert_all(conn, webhook_attempts, attempts)
    return _disable(conn, exhausted)


def _disable(conn: Connection, exhausted: list[tuple[Outgoing, Store | None, datetime]]) -> list[int]:
    """NOTE: decisions §8.4, after the last failed attempt the webhook is disabled and the
    store is told, in its event log."""
    disabled = []
    for outgoing, store, store_now in exhausted:
        changed = conn.execute(update(webhooks).where(webhooks.c.id == outgoing.webhook_id,
                                                      webhooks.c.disabled_at.is_(None))
                               .values(disabled_at=store_now, updated_at=store_now)).rowcount
        if changed and store is not None:
            Unit(conn, store, store_now, origin="webhook").record(
                "webhook/disabled", outgoing.webhook_id,
                {"id": outgoing.webhook_id, "delivery_id": outgoing.id, "topic": outgoing.topic})
            disabled.append(outgoing.webhook_id)
    return disabled
