"""Which charges are due, and the claim that lets exactly one run pay a charge.

A claim is a conditional UPDATE: it takes charges that are open (queued or in error) and not
claimed, or whose claim is older than ``STALE_AFTER`` (its run died). On PostgreSQL a second
run's UPDATE waits for the first's row locks and then finds the claim taken; SQLite runs one
writer at a time. Billing runs side by side (several workers) do not wait on each other: each
reads only claimable charges and locks their addresses with ``SKIP LOCKED`` before claiming
(run.py), so each takes the charges no other holds and the conditional UPDATE stays what makes
a charge paid once. The claim commits before the gateway is called, so a crash after the call
leaves a claimed charge whose retry repeats the same call with the same idempotency key.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import ColumnElement, Connection, and_, or_, select, true, update

from rebill.db.among import among
from rebill.models import charges

from ..charge.model import ERROR, QUEUED

# How long a claim holds before another run may take the charge over (decisions §6.5).
STALE_AFTER = timedelta(seconds=60)
# Appended to a payment's claim once the processor's answer is known to be lost (a timeout, a
# payment still processing): the claim stays until the next run asks again with the same key,
# and meanwhile the processor's own event may finish it (issue 16, billing/inbound.py). A claim
# without it is a payment on its way, whose run records it.
UNANSWERED = ":unanswered"


def run_name() -> str:
    """A billing run's name, which its claims carry (``claimed_by``, 64 characters): the host
    and process that hold them, so that a claim held for long names its holder, and a random
    part of its own (``host:pid:random``, at most 45 characters, with UNANSWERED at most 56)."""
    return f"{socket.gethostname()[:20]}:{os.getpid()}:{uuid.uuid4().hex[:16]}"


def unanswered(run: str) -> str:
    return f"{run}{UNANSWERED}"


@dataclass(frozen=True)
class DueOn:
    """What a billing run pays: queued charges dated on or before ``queued`` (`rebill bill
    --until`, at most the store's today) and charges in error whose retry date has come by
    ``retries``, the store's today, whatever ``--until`` says (decisions §6.12: found by an audit,
    `--until` before today left due retries alone)."""

    queued: date
    retries: date


def _is_due(due_on: DueOn) -> ColumnElement[bool]:
    return or_(and_(charges.c.status == QUEUED, charges.c.scheduled_at <= due_on.queued),
               and_(charges.c.status == ERROR, charges.c.retry_date <= due_on.retries))


def due(conn: Connection, store_id: int, due_on: DueOn, *, after_id: int = 0, limit: int = 500,
        claimable_at: datetime | None = None) -> list[int]:
    """NOTE: decisions §6.5, queued charges whose date has come and errored charges whose
    retry date has, in id order from ``after_id``. With ``claimable_at`` only those a claim
    could take: unclaimed, or claimed at or before it (their run died). Billing runs side by
    side read past the batches the others hold instead of reading them again."""
    stmt = (select(charges.c.id)
            .where(charges.c.store_id == store_id, charges.c.id > after_id, _is_due(due_on))
            .order_by(charges.c.id).limit(limit))
    if claimable_at is not None:
        stmt = stmt.where(or_(charges.c.claimed_by.is_(None), charges.c.claimed_at <= claimable_at))
    return list(conn.execute(stmt).scalars())


def claim(conn: Connection, store_id: int, ids: list[int], run: str, now: datetime,
          stale_after: timedelta = STALE_AFTER, statuses: tuple[str, ...] = (QUEUED, ERROR),
          due_on: DueOn | None = None, taking_over: str | None = None) -> list[int]:
    """Claims those of ``ids`` in ``statuses`` that no live run holds; returns the ids claimed.
    A capture or a refund claims its charge the same way, so none of them overlaps another.
    With ``due_on`` (a billing run) only those still due that day: a run whose list was read
    before another run or a manual process recorded a failure must not try it again the same
    day (decisions §6.12, the next attempt is on its retry date), nor a ninth time once closed.
    With ``taking_over`` (the finishing of an abandoned payment) only while that stale claim is
    still there: its run may have recorded its answer and let go since the claim was read, and
    the charge, closed or due again on a later date, is then no longer this one's to pay."""
    if not ids:
        return []
    held = (or_(charges.c.claimed_by.is_(None), charges.c.claimed_at <= now - stale_after) if taking_over is None
            else and_(charges.c.claimed_by == taking_over, charges.c.claimed_at <= now - stale_after))
    stmt = (update(charges)
            .where(charges.c.store_id == store_id, among(charges.c.id, ids),
                   charges.c.status.in_(statuses),
                   _is_due(due_on) if due_on is not None else true(),
                   held)
            .values(claimed_by=run, claimed_at=now)
            .returning(charges.c.id))
    return sorted(conn.execute(stmt).scalars())
