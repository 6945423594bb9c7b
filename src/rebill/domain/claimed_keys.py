"""A keyed request's claim, and who finishes it (decisions §9.2, §6.5; docs/api-choices.md,
"Idempotency keys").

A request that calls the payment processor (a process, a capture, a refund, a checkout's
charge) claims the charge or checkout before the call and records the answer after it. When it
dies in between (or its record fails), the claim goes stale and whoever takes it over next
finishes that payment with its own key: a repeat of the request, another request, or the
billing run. Found by an audit: when the billing run finished a dead request's refund, the
request's repeat with the same key found no claim left and refunded again (twice the money
back); a payment's repeat answered 422 (already paid) for a payment that was its own.

So the request's key names its claim (``idempotency_keys.claim``, written in the claim's own
transaction), and a claim's finisher marks the key of the request that made it ``finished`` in
the transaction that records the answer. A repeat of that request then answers 409 "applied,
but its answer was lost", as after any lost answer, and never runs again; the dead request's
key is not freed on its 5xx while it names a claim (api/idempotency.py). A request that finds
its own key finished as it claims (the finisher's record committed just before) is refused
the same way, before any processor is asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Connection, and_, not_, select, update

from rebill.errors import Conflict
from rebill.models import idempotency_keys

from .unit import CALLING_KEY, REQUEST_KEY, KeyTakenOver, this_take

FINISHED = "finished"
LOST_ANSWER = ("The request with this Idempotency-Key was applied, but its answer was lost: read the resource to see "
               "the result")


def _running_key() -> tuple[int, int, str, datetime] | None:
    """The running request's key, also inside ``before_the_call`` (a claim's transaction)."""
    return CALLING_KEY.get() or REQUEST_KEY.get()


def _base(claimed_by: str) -> str:
    """The run a claim was made under: a request's runs are plain hex; what a claim appends
    (a refund's amounts, ``:unanswered``) follows a colon."""
    return claimed_by.split(":", 1)[0]


def note(conn: Connection, run: str) -> None:
    """In the claim's transaction: the running request's key names ``run``. Refused when the
    key is no longer this request's: finished by another (409, its answer lost) or taken over."""
    keyed = _running_key()
    if keyed is None:
        return
    store_id, token_id, key, taken = keyed
    if conn.execute(update(idempotency_keys).where(*this_take(store_id, token_id, key, taken))
                    .values(claim=_base(run))).rowcount == 1:
        return
    state = conn.execute(select(idempotency_keys.c.state).where(
        idempotency_keys.c.store_id == store_id, idempotency_keys.c.token_id == token_id,
        idempotency_keys.c.key == key, idempotency_keys.c.created_at == taken)).scalar()
    if state == FINISHED:
        raise Conflict(LOST_ANSWER)
    raise KeyTakenOver()


def finished(conn: Connection, claims: Iterable[str | None]) -> None:
    """In the transaction that records the answers of claims taken over: the requests that
    made them (their keys still running: their answers never came) are done. The running
    request's own key is left to it: its own record marks it applied."""
    runs = sorted({_base(claim) for claim in claims if claim})
    if not runs:
        return
    table = idempotency_keys
    stmt = update(table).where(table.c.claim.in_(runs), table.c.state == "running")
    keyed = _running_key()
    if keyed is not None:
        store_id, token_id, key, _taken = keyed
        stmt = stmt.where(not_(and_(table.c.store_id == store_id, table.c.token_id == token_id, table.c.key == key)))
    # `updated_at` stays: it is real time, the keys' own (its callers have the store's, which a
    # test clock moves), and the dead request's is past its 60 seconds already.
    conn.execute(stmt.values(state=FINISHED))


def names(conn: Connection, claimed_by: str | None) -> bool | None:
    """Whether the running request's key names the claim ``claimed_by`` (its own, left by its
    first try, now taken over by its repeat); None for a request without a key."""
    keyed = _running_key()
    if keyed is None:
        return None
    if claimed_by is None:
        return False
    store_id, token_id, key, taken = keyed
    table = idempotency_keys
    return conn.execute(select(table.c.claim).where(
        table.c.store_id == store_id, table.c.token_id == token_id, table.c.key == key,
        table.c.created_at == taken)).scalar() == _base(claimed_by)


def let_go(conn: Connection) -> None:
    """The running request's claim ended with nothing of its own done (it finished another's
    abandoned operation and answers 409 "send it again"): its key names no claim any more, so
    that its 409 frees it at once for that repeat."""
    keyed = _running_key()
    if keyed is not None:
        conn.execute(update(idempotency_keys).where(*this_take(*keyed)).values(claim=None))
