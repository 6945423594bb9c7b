"""`Idempotency-Key` on every POST (decisions §9.2, §6.12; a Rebill extension, docs/api-choices.md).

A key belongs to its store and token. The first request with a key runs and its answer is
stored; the same request again (same method, path, parsed JSON body and API version) within 24 hours gets
that answer back, status, body and headers, with a fresh `X-Request-Id`. Another request with
the key answers 422; a repeat while the first is still running answers 409. Answers with a
5xx status or 409 are not stored (the key is free again at once), and a key whose first
request died while running is free again after 60 seconds. Expiry is real time, never a
sandbox store's test clock.

A running request says it is alive: a thread of the process touches the key of every request
running there every 20 seconds (``Lease``), so only a key whose process stopped saying so is
taken over, and a request that takes longer than 60 seconds (a lock waited for, a slow payment
processor) keeps its key. A key's `created_at` is the moment its current request took it (a
take-over starts it again): every later write of that request to the key matches it, so a
request whose key was taken over (its process stopped for a minute, then went on) neither
finishes the key nor commits its changes (domain/unit.py refuses them, 409).

Keys are kept in their own transactions, before and after the request's. The request's own
transaction marks its key "applied" as it commits its changes (domain/unit.py). A process
that dies, or a database that goes away, between that commit and the storing of the answer
leaves an applied key: a repeat answers 409 (its answer was lost) instead of running again.
Decisions §6.12 accepts a second run here; Rebill is stricter, because the second run of a
create is a second record. A key whose request died before committing anything is free again
after 60 seconds, as before.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from rebill.db.engine import Database, unavailable
from rebill.domain.claimed_keys import FINISHED, LOST_ANSWER
from rebill.domain.unit import this_take
from rebill.errors import Conflict, ValidationFailed
from rebill.models import idempotency_keys

logger = logging.getLogger(__name__)

HEADER = b"idempotency-key"
KEPT = timedelta(hours=24)
ABANDONED = timedelta(seconds=60)
# Headers of an answer that belong to the moment, not to the answer.
NOT_REPLAYED = frozenset({"x-request-id", "x-service-limit", "retry-after"})


def key_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's key, checked: 1-255 printable ASCII characters (else 422). Whitespace
    around it is not part of it (RFC 9110 §5.5: a field value has none at its ends; found by an
    audit: `K` and `K ` were two keys, so a retry with a trailing space made a second record)."""
    found: bytes | None = None
    for name, value in headers:
        if name == HEADER:
            value = value.strip(b" \t")
            if not 1 <= len(value) <= 255 or any(b < 0x20 or b > 0x7E for b in value):
                raise ValidationFailed.field("Idempotency-Key", "must be 1 to 255 printable ASCII characters")
            if found is not None and found != value:
                # Which one would be the key? (found by an audit: the first was taken, where the
                # edge took the last version and token).
                raise ValidationFailed.field("Idempotency-Key", "must be sent once")
            found = value
    return None if found is None else found.decode("ascii")


def fingerprint(method: str, path: str, body: Any, *, version: str) -> str:
    """The same request: method, path, the parsed JSON body (key order and spacing aside) and
    the API version, whose answer has another shape (a 2021-01 answer is no 2021-11 one)."""
    canonical = msgspec.json.encode([method, path, body, version], order="sorted")
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class Stored:
    status: int
    headers: list[list[str]]
    body: bytes


def begin(db: Database, store_id: int, token_id: int, key: str, print_: str, now: datetime) -> Stored | None:
    """Takes the key for this request (None: run it, its key's `created_at` now ``now``: a
    ``Lease``) or returns the answer to replay."""
    table = idempotency_keys
    where = (table.c.store_id == store_id, table.c.token_id == token_id, table.c.key == key)
    with db.write() as conn:
        row = conn.execute(select(table).where(*where)).first()
        if row is None:
            _take_new(conn, store_id, token_id, key, print_, now)
            return None
        fresh = now - row.created_at < KEPT
        if fresh and row.fingerprint != print_:
            raise ValidationFailed.field("Idempotency-Key", "was already used for another request")
        if fresh and row.state == "done":
            return Stored(row.status, row.headers or [], row.body or b"")
        if fresh and row.state in ("running", "applied") and now - row.updated_at < ABANDONED:
            # Applied: its changes committed and its answer is on its way (finish comes next).
            raise Conflict("A request with this Idempotency-Key is still running")
        if fresh and row.state == FINISHED:
            # Its payment claim was finished by another (the billing run, a later request):
            # the money moved for it, once (domain/claimed_keys.py).
            raise Conflict(LOST_ANSWER)
        if fresh and row.state == "applied":
            # Its changes committed (domain/unit.py marks the key in their transaction), but
            # its answer never came to be stored (a process gone, a database away for longer
            # than finish_soon tries): running it again would apply them twice.
            raise Conflict(LOST_ANSWER)
        # Expired, or its first request died: the key starts over for this request.
        # `created_at` starts again: it names this take, which the request that lost the key
        # must not match (its 24 hours start again too).
        # As read: no touch, and not marked applied meanwhile (found by a review: on PostgreSQL
        # an UPDATE that waited for the row's lock matched a key the request had just marked).
        taken = conn.execute(update(table).where(*where, table.c.updated_at == row.updated_at,
                                                 table.c.state == row.state).values(
            fingerprint=print_, state="running", status=None, headers=None, body=None,
            created_at=now, updated_at=now)).rowcount
        if taken != 1:
            if conn.execute(select(table.c.id).where(*where)).first() is not None:
                raise Conflict("A request with this Idempotency-Key is still running")
            # The expired row was purged between the look and the update (purge_expired).
            _take_new(conn, store_id, token_id, key, print_, now)
        return None


def _take_new(conn: Any, store_id: int, token_id: int, key: str, print_: str, now: datetime) -> None:
    try:
        conn.execute(insert(idempotency_keys).values(store_id=store_id, token_id=token_id, key=key,
                                                     fingerprint=print_, state="running", created_at=now,
                                                     updated_at=now))
    except IntegrityError:  # the same key, at the same moment, from another request
        raise Conflict("A request with this Idempotency-Key is still running") from None


PURGE_BATCH = 5000


def purge_expired(db: Database, now: datetime) -> int:
    """Deletes the keys past their 24 hours (a repeat would run as new anyway) and returns
    how many went; without it the table would grow with every POST that sends a key. A key
    still running is left alone unless abandoned (60 s without news), so a long request
    never loses its key under it. A batch per transaction keeps SQLite's writer free."""
    table = idempotency_keys
    expired = (table.c.created_at < now - KEPT) & ((table.c.state == "done") | (table.c.updated_at < now - ABANDONED))
    removed = 0
    while True:
        batch = select(table.c.id).where(expired).limit(PURGE_BATCH).scalar_subquery()
        with db.write() as conn:
            count = conn.execute(delete(table).where(table.c.id.in_(batch))).rowcount
        removed += count
        if count < PURGE_BATCH:
            return removed


# How often a running request's key is touched: a third of ABANDONED, so that two touches may
# fail (a database away for a moment) before a repeat could take the key over.
HEARTBEAT_SECONDS = ABANDONED.total_seconds() / 3


class Lease:
    """The key a request running in this process holds, from ``begin`` to ``finish``; ``taken``
    is its row's `created_at`, the moment this request took it. Found by an audit: nothing
    touched a running key, so a request that waited over 60 seconds on a row lock lost its key,
    a repeat ran beside it (two records; a refund made twice), and the first one's end deleted
    the repeat's key."""

    __slots__ = ("db", "clock", "owner", "taken", "lock", "ended", "touched")

    def __init__(self, db: Database, clock: Any, owner: tuple[int, int, str], taken: datetime) -> None:
        self.db, self.clock, self.owner, self.taken = db, clock, owner, taken
        self.lock = threading.Lock()
        self.ended = False
        self.touched = time.monotonic()  # when the key was last said alive

    def hold(self) -> None:
        with _leases_lock:
            _leases.add(self)
            if not _beating:
                _beating.append(threading.Thread(target=_beat, name="rebill-idempotency-heartbeat", daemon=True))
                _beating[0].start()

    def release(self) -> datetime:
        """No more touches; the take ``finish`` must match."""
        with self.lock:
            self.ended = True
        with _leases_lock:
            _leases.discard(self)
        return self.taken

    def touch(self) -> None:
        with self.lock:
            if self.ended:
                return
            with self.db.write() as conn:
                count = conn.execute(update(idempotency_keys).where(
                    *this_take(*self.owner, self.taken)).values(updated_at=self.clock.now())).rowcount
            if count == 1:
                self.touched = time.monotonic()
            else:  # taken over after all (this process was silent for a minute): nothing to keep alive
                self.ended = True


_leases: set[Lease] = set()
_leases_lock = threading.Lock()
_beating: list[threading.Thread] = []


def _beat() -> None:
    """The process's heartbeat thread: touches the key of every request running here once its
    last touch is ``HEARTBEAT_SECONDS`` old (a look a second; requests shorter than that, nearly
    all, are never touched)."""
    while True:
        time.sleep(min(1.0, HEARTBEAT_SECONDS))
        with _leases_lock:
            running = list(_leases)
        due = time.monotonic() - HEARTBEAT_SECONDS
        for lease in running:
            if lease.touched > due:
                continue
            try:
                lease.touch()
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                if not unavailable(exc):
                    logger.error("could not touch Idempotency-Key %r", lease.owner[2], exc_info=exc)


def finish(db: Database, store_id: int, token_id: int, key: str, answer: Stored | None, now: datetime,
           taken: datetime) -> None:
    """Stores the answer, or frees the key when there is none to keep (5xx, 409, no answer),
    if the key is still the take of ``taken``."""
    table = idempotency_keys
    where = this_take(store_id, token_id, key, taken)
    with db.write() as conn:
        if answer is None or answer.status >= 500 or answer.status == 409:
            # Free, unless its changes committed ("applied"): a 503 whose COMMIT landed just
            # before the connection dropped must not run a second time. Nor while it names a
            # payment claim left for the processor's answer: whoever finishes that claim marks
            # the key, and a repeat must not pay again (domain/claimed_keys.py); it is taken
            # over, as a dead request's, after 60 seconds.
            conn.execute(delete(table).where(*where, table.c.state == "running", table.c.claim.is_(None)))
            return
        conn.execute(update(table).where(*where).values(
            state="done", status=answer.status, headers=answer.headers, body=answer.body, updated_at=now))


# How long an answer whose storing met a database outage is tried again: less than ABANDONED,
# so that a retry of the request meets 409 (still running) and then the answer, never a
# second run of a request that had committed.
FINISH_RETRY_SECONDS = 45.0
_retrying: set[asyncio.Task[None]] = set()


async def finish_soon(db: Database, lease: Lease, answer: Stored | None, now: datetime) -> None:
    """``finish`` (the lease released first, in the worker thread: a touch in flight may wait
    for SQLite's write lock, which the event loop's writer may hold), and when the database is
    away (the request's own COMMIT may just have landed before it went), again in the
    background every half second until it is back, instead of leaving the key to free itself
    while the request's changes stand."""
    def settle() -> None:
        finish(db, *lease.owner, answer, now, lease.release())
    try:
        await run_in_threadpool(settle)
    except Exception as exc:
        if not unavailable(exc):
            raise
        task = asyncio.get_running_loop().create_task(_finish_later(db, lease, answer, now))
        _retrying.add(task)
        task.add_done_callback(_retrying.discard)


async def _finish_later(db: Database, lease: Lease, answer: Stored | None, now: datetime) -> None:
    deadline = time.monotonic() + FINISH_RETRY_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        try:
            await run_in_threadpool(finish, db, *lease.owner, answer, now, lease.taken)
            return
        except Exception as exc:  # noqa: BLE001 - logged below when it is no outage
            if not unavailable(exc):
                logger.error("could not store the answer to Idempotency-Key %r", lease.owner[2], exc_info=exc)
                return
    logger.warning("the database stayed away: the answer to Idempotency-Key %r was not stored", lease.owner[2])


class Recorder:
    """Wraps ``send``: keeps the answer to store, and holds its messages until ``release``. The
    answer is stored first (``finish_soon``), then sent: a client that has its answer and
    repeats the request at once gets it replayed, never 409 "still running" (found by an
    audit: the repeat could come in between)."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self._held: list[dict[str, Any]] = []
        self.status: int | None = None
        self.headers: list[list[str]] = []
        self.body = bytearray()

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in message.get("headers", [])
                            if k.decode("latin-1").lower() not in NOT_REPLAYED]
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")
        self._held.append(message)

    async def release(self) -> None:
        """Sends what the handler answered (once)."""
        held, self._held = self._held, []
        for message in held:
            await self._send(message)

    def answer(self) -> Stored | None:
        return None if self.status is None else Stored(self.status, self.headers, bytes(self.body))


async def replay(send: Any, stored: Stored, common: list[tuple[bytes, bytes]]) -> None:
    """The stored answer, with this request's own moment headers (a fresh X-Request-Id)."""
    own = [(k, v) for k, v in common if k.decode("latin-1").lower() in NOT_REPLAYED]
    kept = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in stored.headers]
    await send({"type": "http.response.start", "status": stored.status, "headers": [*kept, *own]})
    await send({"type": "http.response.body", "body": stored.body})
