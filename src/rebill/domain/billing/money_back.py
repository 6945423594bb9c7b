"""Capturing an authorized charge and refunding a paid one (decisions §6.7, §6.8, §6.12).

Both follow the run's shape: claim the charge (so no capture, refund or payment overlaps
another), ask the gateway with a key derived from the charge's state (a repeat after a crash
is the same request to the processor), then record the answer in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import select, update

from rebill.db.engine import Database
from rebill.errors import Conflict, ServiceUnavailable, ValidationFailed
from rebill.models import charges, stores

from .. import claimed_keys
from ..charge import repository as charge_repo
from ..charge.model import PARTIALLY_REFUNDED, PENDING, REFUNDED, SUCCESS, Charge, capturable
from ..money import minor_digits, places_problem
from ..payment import processors
from ..payment.gateway import Gateway, GatewayUnavailable, Result
from ..store.model import Store
from ..unit import Unit, before_the_call
from . import claim as claims
from .access import TIER_A, require_tier, visible
from .outcome import as_charged, count_use, items_of, make_orders


def require_access(store: Store) -> None:
    """NOTE: decisions §6.6, plan tier A; asked by the router too (as ``manual.require_access``)."""
    require_tier(store, TIER_A, "Capturing a payment")


def capture(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> Charge:
    require_access(store)
    charge = visible(db, store, charge_id, now)
    if charge.status != PENDING:
        raise ValidationFailed.field("status", f"only a pending (authorized) charge can be captured; this one is "
                                               f"{charge.status}")
    assert charge.authorized_at is not None
    # A pending charge still claimed is a capture whose answer was never recorded (only a
    # capture claims a pending charge): it is finished with the same key whatever the time,
    # since the processor may have captured inside the window (decisions §6.5: no lost outcome).
    if not capturable(charge.authorized_at, charge.claimed_by, now):
        raise ValidationFailed.field("status", "the authorization is more than 7 days old and can no longer be "
                                               "captured")
    return _capture(db, gateway, store, charge_id, now)


def _capture(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> Charge:
    def ask(held: Charge) -> Result:
        return gateway.capture(store.id, f"rebill-charge-{held.id}-capture", held.external_transaction_id or "",
                               _minor(held.total_price, held.currency), held.currency)

    def apply(unit: Unit, held: Charge, result: Result) -> None:
        _save(unit, held.id, {"status": SUCCESS, "processed_at": unit.now})
        count_use(unit, held)
        make_orders(unit, held, as_charged(held, items_of(unit, held)))
        unit.record("charge/paid", held.id)
    return _claimed(db, store, charge_id, now, (PENDING,), ask, apply)


def _refund_amount(charge: Charge, amount: Decimal | None, full: bool) -> Decimal:
    """NOTE: decisions §6.8, §6.12: what this refund takes from ``charge``, at most what is left."""
    if charge.status not in (SUCCESS, PARTIALLY_REFUNDED):
        raise ValidationFailed.field("status", f"only a paid charge can be refunded; this one is {charge.status}")
    left = charge.total_price - charge.total_refunds
    if full:
        # NOTE: decisions §6.12, `amount` is then ignored: nothing left is the charge's state,
        # not a fault of a field that was not sent (a charge paid at 0.00, or refunded whole).
        if left <= 0:
            raise ValidationFailed.field("full_refund", "nothing is left to refund on this charge")
        amount = left
    if amount is None:
        raise ValidationFailed.field("amount", "is required unless full_refund is true")
    problem = places_problem(amount, charge.currency)
    if problem:
        raise ValidationFailed.field("amount", problem)
    if amount <= 0:
        raise ValidationFailed.field("amount", "must be greater than 0")
    if amount > left:
        raise ValidationFailed.field("amount", f"is more than what is left to refund ({left})")
    return amount


# A refund writes what it asks into its claim before it calls the processor (its run, then
# REFUND, the refunds before it and its amount, both in minor units): a refund that died or lost
# its answer on the way is known, and the refund that next takes the charge's claim finishes it.
REFUND = ":refund:"


def refund(db: Database, gateway: Gateway, store: Store, charge_id: int, amount: Decimal | None,
           full: bool, now: datetime) -> Charge:
    charge = visible(db, store, charge_id, now)
    _refund_amount(charge, amount, full)  # refused before any claim

    def wanted(held: Charge) -> Decimal:
        # Again on the charge as the claim holds it: a refund recorded since the first read
        # has changed what is left (a full refund takes only the rest).
        return _refund_amount(held, amount, full)

    def asks_the_same(held: Charge, before: int, amount_minor: int) -> bool:
        # NOTE: decisions §6.5, §6.8: the abandoned refund asked what this one asks (a retry of
        # a refund whose answer was lost): all that was left, or the same amount.
        if full:
            return before + amount_minor >= _minor(held.total_price, held.currency)
        return amount is not None and _minor(amount, held.currency) == amount_minor
    after, finished, own = _refund_claimed(db, gateway, store, charge_id, now, wanted, asks_the_same)
    if after is None and finished is not None:
        # The abandoned refund it took over was refused by the processor: nothing was
        # refunded, so this refund is made now, as with no abandoned claim.
        after, finished, own = _refund_claimed(db, gateway, store, charge_id, now, wanted, asks_the_same)
    if finished is None:
        assert after is not None
        return after  # this request's own refund, made and recorded
    earlier = Decimal(finished).scaleb(-minor_digits(charge.currency))
    if after is None:
        raise Conflict(f"An earlier refund of {earlier} that had not answered was refused by the payment "
                       "processor; send this refund again")
    if own:
        return after  # this request alone held the claim and recorded its refund
    raise Conflict(f"An earlier refund of {earlier} that had not answered has now been completed; send this "
                   "refund again if it is still wanted")


class _NoAbandonedRefund(Exception):
    """The claim taken holds no abandoned refund: rolled back with the claim."""


def _refund_claimed(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime,
                    wanted: Callable[[Charge], Decimal] | None,
                    same: Callable[[Charge, int, int], bool] | None = None
                    ) -> tuple[Charge | None, int | None, bool]:
    """Claims the charge and refunds under the claim. The claim it took over, read in the
    claim's own transaction, decides which refund: a stale claim naming a refund is that
    abandoned refund, asked again with its own key and recorded; the answer is the charge and
    that refund's amount in minor units (None and the amount when the processor refused it:
    nothing was refunded). Otherwise it is the refund of ``wanted(held)``: the charge and None
    (without ``wanted``, _NoAbandonedRefund). The last value: whether the refund recorded is
    the request's own, its own or an abandoned one asking the same (``same``); only then does
    its record mark the request's Idempotency-Key (found by an audit: finishing another's
    refund marked the key of a request that then answered 409 "send it again", and the key,
    kept as applied, could never send it)."""
    asked: list[tuple[int, int]] = []  # (the refunds before it, its amount), minor units
    abandoned: list[int] = []
    own: list[bool] = []

    def check(held: Charge, taken_over: str | None, keyed_own: bool | None) -> str:
        # NOTE: decisions §6.5, §6.8: a claim read before claiming may be a live refund that
        # has ended since; finishing it again would send its key again, get the processor's
        # replay, and answer 200 for a refund this request never made. Only the claim this
        # request took over makes it the finisher, and only one request takes over a claim.
        if taken_over is not None and REFUND in taken_over:
            before, amount_minor = (int(part) for part in taken_over.split(REFUND, 1)[1].split(":"))
            abandoned.append(amount_minor)
            # A keyed request's own is the claim its key names (found by a review: another
            # key's refund of the same amount took a dead one as its own: one refund made, two
            # answered); without a key, one asking the same is taken for its retry.
            own.append(keyed_own if keyed_own is not None else same is not None and same(held, before, amount_minor))
        elif wanted is None:
            raise _NoAbandonedRefund()
        else:
            before, amount_minor = _minor(held.total_refunds, held.currency), _minor(wanted(held), held.currency)
            own.append(True)
        asked.append((before, amount_minor))
        return f"{REFUND}{before}:{amount_minor}"

    def ask(held: Charge) -> Result:
        return _ask_refund(gateway, store, held, *asked[0])

    def apply(unit: Unit, held: Charge, result: Result) -> None:
        before, amount_minor = asked[0]
        if _minor(held.total_refunds, held.currency) == before:  # always, under the claim
            record_refund(unit, held, Decimal(amount_minor).scaleb(-minor_digits(held.currency)))
    try:
        after = _claimed(db, store, charge_id, now, (SUCCESS, PARTIALLY_REFUNDED), ask, apply, check,
                         for_the_request=lambda: own[0])
    except ValidationFailed:
        if abandoned:  # the processor refused the abandoned refund; this request's own 422s go on
            return None, abandoned[0], False
        raise
    return after, abandoned[0] if abandoned else None, own[0]


def _ask_refund(gateway: Gateway, store: Store, held: Charge, before: int, amount_minor: int) -> Result:
    # The refunds before it name it: a retry after a crash is the same refund to the processor.
    # In minor units: "5", "5.0" and "5.00" are one amount and must be one key.
    key = f"rebill-charge-{held.id}-refund-{before}-{amount_minor}"
    return gateway.refund(store.id, key, held.external_transaction_id or "", amount_minor, held.currency)


def record_refund(unit: Unit, held: Charge, amount: Decimal) -> None:
    """NOTE: decisions §6.8, §6.12: ``amount`` more refunded, and the status that makes."""
    refunded = held.total_refunds + amount
    _save(unit, held.id, {"total_refunds": refunded,
                          "status": REFUNDED if refunded >= held.total_price else PARTIALLY_REFUNDED})
    unit.record("charge/refunded", held.id)


def _finish_dead_refund(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> int | None:
    """The billing run's finishing of a refund whose claim went stale without an answer recorded
    (run.finish_abandoned): its amount in minor units, or None when the claim it took named no
    refund (a request finished it meanwhile) or the processor refused it. A live claim: 409."""
    try:
        after, finished, _ = _refund_claimed(db, gateway, store, charge_id, now, None)
    except _NoAbandonedRefund:
        return None
    return finished if after is not None else None


def _claimed(db: Database, store: Store, charge_id: int, now: datetime, statuses: tuple[str, ...],
             ask: Callable[[Charge], Result], apply: Callable[[Unit, Charge, Result], None],
             check: Callable[[Charge, str | None, bool | None], str] | None = None,
             for_the_request: Callable[[], bool] = lambda: True) -> Charge:
    """Claims the charge, runs ``check`` on it under the claim, with the claim it took over
    (None, or a stale one; what ``check`` returns is written into the claim before the
    processor is asked), asks, and records ``apply`` under the claim; that record marks the
    request's Idempotency-Key unless ``for_the_request()`` says it is another's operation."""
    run = uuid.uuid4().hex[:16]
    with db.write() as conn:
        # The store's row first, shared, as a change of processor locks it (processors._settled)
        # and before the charge's, in the order of the writes that lock both (a change of the
        # store's rates replans its addresses under its row's lock).
        conn.execute(select(stores.c.id).where(stores.c.id == store.id).with_for_update(read=True))
        # NOTE: decisions §6.5: read in the claim's own transaction, the row locked (on SQLite
        # the writer holds the database), so it is the very claim replaced below.
        taken_over = conn.execute(select(charges.c.claimed_by).where(
            charges.c.id == charge_id, charges.c.store_id == store.id).with_for_update()).scalar()
        if not claims.claim(conn, store.id, [charge_id], run, now, statuses=statuses):
            raise Conflict("The charge is being processed by another request")
        held = charge_repo.get(conn, store.id, charge_id, now)
        assert held is not None
        # A capture or refund goes to the processor that took the payment, which holds the
        # money and its id (found by an audit: after a switch from Stripe to the sandbox, the
        # sandbox "refunded" and "captured" Stripe's payments). Asked under the store's lock
        # (above), so the processor stays the store's until this claim commits, and a change
        # after it waits for the claim's answer (processors._settled). A refusal here (422)
        # rolls the claim back.
        paid_by, now_by = held.payment_processor, processors.processor_of(conn, store.id)
        if paid_by is not None and paid_by != now_by:
            raise ValidationFailed.field("payment_processor", f"the charge was paid through {paid_by} and the store "
                                                              f"now uses {now_by}: its capture and refunds go through "
                                                              f"{paid_by} only")
        if check is not None:  # a refusal here rolls the claim back with it
            # Whether the claim taken over is this request's own (its key names it), read
            # before this claim's own ``note`` below names the new one.
            mark = check(held, taken_over, claimed_keys.names(conn, taken_over))
            conn.execute(update(charges).where(charges.c.id == charge_id, charges.c.claimed_by == run)
                         .values(claimed_by=f"{run}{mark}"))
            run = f"{run}{mark}"
        claimed_keys.note(conn, run)
    try:
        result = ask(held)
    except GatewayUnavailable:
        # Nothing is known of this call: the processor may have acted. The claim stays (409
        # meanwhile); once it is stale, the next capture finishes the capture with the same
        # key, even past the 7 days, the next refund to take the claim finishes the refund it
        # names (_refund_claimed), and the billing run either if nobody asks (finish_abandoned).
        raise ServiceUnavailable() from None
    except Exception:
        _release(db, store, charge_id, run)
        raise
    with (nullcontext() if for_the_request() else before_the_call()), db.write() as conn:
        unit = Unit(conn, store, now)
        fresh = charge_repo.get(conn, store.id, charge_id, now)
        if fresh is None or fresh.claimed_by != run:
            raise Conflict("The charge was taken over by another request")
        if result.succeeded:
            apply(unit, fresh, result)
            claimed_keys.finished(conn, [taken_over])  # the request that left it, if any
        if not for_the_request():
            claimed_keys.let_go(conn)
        _save(unit, charge_id, {"claimed_by": None, "claimed_at": None})
    if not result.succeeded:
        raise ValidationFailed.field("base", result.error or "the payment processor refused")
    return visible(db, store, charge_id, now)


def _release(db: Database, store: Store, charge_id: int, run: str) -> None:
    with db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge_id, charges.c.store_id == store.id,
                                           charges.c.claimed_by == run).values(claimed_by=None, claimed_at=None))


def _save(unit: Unit, charge_id: int, values: dict[str, Any]) -> None:
    charge_repo.update_one(unit.conn, unit.store_id, charge_id, {**values, "updated_at": unit.now})


def _minor(amount: Decimal, currency: str) -> int:
    return int(amount.scaleb(minor_digits(currency)))

