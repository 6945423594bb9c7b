"""The unit of work a service runs in: one connection inside one transaction, the store it
acts for, the time of the request, and the event recorder.

Services never commit; the request or job that opened the unit does (design guide).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date, datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, bindparam, or_, update

from rebill.db.prepared import Prepared
from rebill.errors import Conflict
from rebill.models import idempotency_keys

from .event import outbox
from .store.model import Store
from .webhook import fanout  # noqa: F401 - registers the fan-out of events to webhooks

# The source of the changes made while a request runs (set by the API for its handler, whose
# thread or task it follows): a change a token asked for is the token's, even when the code
# that makes it is the billing run's (a manual process, a capture, a clock advance).
REQUEST_SOURCE: ContextVar[tuple[str, int | None] | None] = ContextVar("rebill_request_source", default=None)
# The Idempotency-Key of the request running, as (store id, token id, key, the moment the
# request took it) (api/idempotency.py): a unit that commits changes marks the key "applied"
# in its own transaction, so that a request whose COMMIT landed but whose answer was lost is
# never run a second time.
REQUEST_KEY: ContextVar[tuple[int, int, str, datetime] | None] = ContextVar("rebill_request_key", default=None)
# The same key while ``before_the_call`` keeps it from being marked: the claim before a
# processor call names it (domain/claimed_keys.py).
CALLING_KEY: ContextVar[tuple[int, int, str, datetime] | None] = ContextVar("rebill_calling_key", default=None)


class KeyTakenOver(Conflict):
    default = ("This request's Idempotency-Key was taken over by a repeat after a minute without news of it "
               "(its process stopped): none of its changes were recorded; the repeat's answer is the one to read")


def this_take(store_id: Any, token_id: Any, key: Any, taken: Any) -> tuple[Any, ...]:
    """The key as the request that took it at ``taken`` holds it: not done, not taken over
    (its `created_at` names its current take, api/idempotency.py). Values or bind parameters."""
    table = idempotency_keys
    return (table.c.store_id == store_id, table.c.token_id == token_id, table.c.key == key,
            table.c.created_at == taken, or_(table.c.state == "running", table.c.state == "applied"))


_APPLIED = Prepared(update(idempotency_keys).where(
    *this_take(bindparam("store_id"), bindparam("token_id"), bindparam("key"), bindparam("taken"))
).values(state="applied"))


def mark_applied(conn: Connection) -> None:
    """Marks the running request's key "applied" in the transaction of ``conn``, and refuses
    that transaction when a repeat took the key over meanwhile (found by an audit: a process
    stopped for over a minute went on and committed beside the repeat, two records). Run where
    a request's changes are written: a unit's exit, the writing of events of a transaction
    opened without a context (the billing run's record, a capture's, a refund's; found by an
    audit: those never marked it), a clock advance's move (found by an audit: with nothing
    due, a repeat after a lost answer moved the clock again)."""
    keyed = REQUEST_KEY.get()
    if keyed is not None:
        store_id, token_id, key, taken = keyed
        if _APPLIED.run(conn, store_id=store_id, token_id=token_id, key=key, taken=taken) != 1:
            raise KeyTakenOver()


outbox.on_recorded(lambda conn, _recorded: mark_applied(conn))


@contextmanager
def before_the_call() -> Iterator[None]:
    """The units of a request that calls the payment processor, before its call (a claim, a
    checkout priced again): their changes are no outcome, and do not mark the key applied. A
    call the processor leaves unanswered (503) keeps its claim, and the same key finishes it;
    the units that record the processor's answer mark the key (found by an audit: a refund
    whose process died after recording it was run again, and refunded again, after 60 s)."""
    calling = CALLING_KEY.set(REQUEST_KEY.get() or CALLING_KEY.get())
    marked = REQUEST_KEY.set(None)
    try:
        yield
    finally:
        REQUEST_KEY.reset(marked)
        CALLING_KEY.reset(calling)


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


class Unit:
    __slots__ = ("conn", "store", "_now", "_release", "origin", "token_id", "_recorded", "replans", "writes")

    def __init__(self, conn: Connection, store: Store, now: datetime | Callable[[], datetime],
                 release: Callable[..., bool | None] | None = None, *, origin: str | None = None,
                 token_id: int | None = None, writes: bool = False) -> None:
        """``now`` is the time of the request, or the clock to read it from on first use
        (most reads never need it). ``release`` ends the transaction when the unit is used
        as a context manager: it is the ``__exit__`` of whatever opened the connection.
        ``origin`` and ``token_id`` say who made the changes (the `source` of their events),
        unless a request is running: then they are the request's (``REQUEST_SOURCE``).
        ``writes``: a request's write unit (api/call.py), which marks the request's key as it
        commits even when it records no event."""
        self.conn = conn
        self.store = store
        self._now = now
        self._release = release
        asked = REQUEST_SOURCE.get()
        if asked is not None:
            origin, token_id = asked
        self.origin = origin or "system"
        self.token_id = token_id
        self._recorded = False  # whether this unit buffered events (reads never do)
        self.writes = writes
        # Addresses whose replan the unit's owner runs later, once for many changes (a chunk of
        # an async batch's tasks, jobs/batches.py), each with the address as a change locked
        # and read it (or None); None: every replan runs at once.
        self.replans: dict[int, Any] | None = None

    def __enter__(self) -> "Unit":
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        # The events and their deliveries go in before the transaction (or the loop writer's
        # savepoint) ends; a failed unit takes its events with it.
        if exc[0] is not None:
            if self._recorded:
                outbox.discard(self.conn)
        elif self._recorded or self.writes:
            try:
                if self._recorded:
                    outbox.flush(self.conn)  # marks the request's key applied (mark_applied above)
                else:
                    # A request's write that records no event (an async batch's) marks it too
                    # (found by a review: such a request, its key taken over, committed beside
                    # the repeat).
                    mark_applied(self.conn)
            except BaseException as failed:  # the transaction ends as for a failed unit
                outbox.discard(self.conn)
                if self._release is not None:
                    self._release(type(failed), failed, failed.__traceback__)
                raise
        return None if self._release is None else self._release(*exc)

    @property
    def now(self) -> datetime:
        if callable(self._now):
            self._now = self._now()
        return self._now

    @property
    def today(self) -> date:
        """NOTE: decisions §6.12, a date "has come" at midnight in the store's timezone."""
        return self.now.astimezone(zone(self.store.timezone)).date()

    @property
    def store_id(self) -> int:
        return self.store.id

    def record_many(self, topic: str, resource_ids: list[int], *, with_id: bool = False,
                    customer_ids: dict[int, int] | None = None,
                    changed: dict[int, Iterable[str]] | None = None) -> None:
        """One event per id (the reconciler records thousands at a time); ``with_id`` stores
        ``{"id": ...}`` as a ``*/deleted`` event needs; ``customer_ids`` names the customer of
        ids whose row may be gone (domain/event/customers.py finds the others); ``changed``
        names, per id, the fields its update changed (as ``record``'s ``changed``)."""
        if not resource_ids:
            return
        self._recorded = True
        resource = topic.split("/", 1)[0]
        known = customer_ids or {}
        names = changed or {}
        outbox.add(self.conn, (
            outbox.Pending(self.store, topic, resource, resource_id, {"id": resource_id} if with_id else None,
                           resource_id if resource == "customer" else known.get(resource_id), _sorted(names.get(resource_id)), self.origin, self.token_id,
                           self.now)
            for resource_id in resource_ids))

    def record(self, topic: str, resource_id: int, data: dict[str, Any] | None = None, *,
               customer_id: int | None = None, changed: Iterable[str] | None = None) -> None:
        """NOTE: decisions §8.1, the event is written in the change's own transaction.
        ``changed`` names the fields an update changed (the event's `updated_attributes`)."""
        self._recorded = True
        resource = topic.split("/", 1)[0]
        if resource == "customer":  # a customer's events are its own
            customer_id = resource_id
        outbox.buffer(self.conn).append(outbox.Pending(
            self.store, topic, resource, resource_id, data, customer_id,
            _sorted(changed), self.origin, self.token_id, self.now))


def _sorted(names: Iterable[str] | None) -> tuple[str, ...] | None:
    return tuple(sorted(names)) if names is not None else None
