"""Capturing an authorized charge and refunding a paid one (decisions §6.7, §6.8, §6.12).

Both follow the run's shape: claim the charge (so no capture, refund or payment overlaps
another), ask the gateway with a key derived from the charge's state (a repeat after a crash
is the same request to the processor), then record the answer in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select, update

from rebill.db.engine import Database
from rebill.errors import Conflict, ServiceUnavailable, ValidationFailed
from rebill.models import charges

from ..charge import repository as charge_repo
from ..charge.model import PARTIALLY_REFUNDED, PENDING, REFUNDED, SUCCESS, Charge
from ..money import minor_digits, places_problem
from ..payment.gateway import Gateway, GatewayUnavailable, Result
from ..store.model import Store
from ..unit import Unit
from . import claim as claims
from .access import TIER_A, require_tier, visible
from .outcome import count_use, items_of, make_orders

# NOTE: decisions §6.7, §6.12: 7 x 24 hours, the end itself still allowed.
CAPTURE_WINDOW = timedelta(days=7)


def capture(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> Charge:
    require_tier(store, TIER_A, "Capturing a payment")
    charge = visible(db, store, charge_id, now)
    if charge.status != PENDING:
        raise ValidationFailed.field("status", f"only a pending (authorized) charge can be captured; this one is "
                                               f"{charge.status}")
    assert charge.authorized_at is not None
    # A pending charge still claimed is a capture whose answer was never recorded (only a
    # capture claims a pending charge): it is finished with the same key whatever the time,
    # since the processor may have captured inside the window (decisions §6.5: no lost outcome).
    if now - charge.authorized_at > CAPTURE_WINDOW and charge.claimed_by is None:
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
        make_orders(unit, held, items_of(unit, held))
        unit.record("charge/paid", held.id)
    return _claimed(db, store, charge_id, now, (PENDING,), ask, apply)


def _refund_amount(charge: Charge, amount: Decimal | None, full: bool) -> Decimal:
    """NOTE: decisions §6.8, §6.12: what this refund takes from ``charge``, at most what is left."""
    if charge.status not in (SUCCESS, PARTIALLY_REFUNDED):
        raise ValidationFailed.field("status", f"only a paid charge can be refunded; this one is {charge.status}")
    left = charge.total_price - charge.total_refunds
    if full:
        amount = left  # NOTE: decisions §6.12, `amount` is then ignored
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
# its answer on the way is known, and the next refund of the charge finishes it first.
REFUND = ":refund:"


def refund(db: Database, gateway: Gateway, store: Store, charge_id: int, amount: Decimal | None,
           full: bool, now: datetime) -> Charge:
    charge = visible(db, store, charge_id, now)
    _refund_amount(charge, amount, full)  # refused before any claim
    finished = _finish_dead_refund(db, gateway, store, charge_id, now)
    if finished is not None:
        after = visible(db, store, charge_id, now)
        if (after.status == REFUNDED if full else amount is not None and _minor(amount, charge.currency) == finished):
            return after  # this very refund, asked again: done now
        raise Conflict(f"An earlier refund of {Decimal(finished).scaleb(-minor_digits(charge.currency))} that had "
                       "not answered has now been completed; send this refund again if it is still wanted")
    taken: list[Decimal] = []

    def check(held: Charge) -> str:
        # Again on the charge as the claim holds it: a refund recorded since the first read
        # has changed what is left (a full refund takes only the rest).
        taken.append(_refund_amount(held, amount, full))
        return f"{REFUND}{_minor(held.total_refunds, held.currency)}:{_minor(taken[0], held.currency)}"

    def ask(held: Charge) -> Result:
        return _ask_refund(gateway, store, held, _minor(held.total_refunds, held.currency),
                           _minor(taken[0], held.currency))

    def apply(unit: Unit, held: Charge, result: Result) -> None:
        _record_refund(unit, held, taken[0])
    return _claimed(db, store, charge_id, now, (SUCCESS, PARTIALLY_REFUNDED), ask, apply, check)


def _ask_refund(gateway: Gateway, store: Store, held: Charge, before: int, amount_minor: int) -> Result:
    # The refunds before it name it: a retry after a crash is the same refund to the processor.
    # In minor units: "5", "5.0" and "5.00" are one amount and must be one key.
    key = f"rebill-charge-{held.id}-refund-{before}-{amount_minor}"
    return gateway.refund(store.id, key, held.external_transaction_id or "", amount_minor, held.currency)


def _record_refund(unit: Unit, held: Charge, amount: Decimal) -> None:
    refunded = held.total_refunds + amount
    _save(unit, held.id, {"total_refunds": refunded,
                          "status": REFUNDED if refunded >= held.total_price else PARTIALLY_REFUNDED})
    unit.record("charge/refunded", held.id)


def _finish_dead_refund(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> int | None:
    """A refund whose claim went stale without an answer recorded (its process died, or the
    processor could not be reached) is asked again with its own key, under a claim that names
    it again, and recorded; returns its amount in minor units, or None when there was none (or
    the processor refused it: nothing was refunded). A live one answers 409."""
    with db.read() as conn:
        claimed_by = conn.execute(select(charges.c.claimed_by).where(
            charges.c.id == charge_id, charges.c.store_id == store.id)).scalar()
    if claimed_by is None or REFUND not in claimed_by:
        return None
    before, amount_minor = (int(part) for part in claimed_by.split(REFUND, 1)[1].split(":"))

    def ask(held: Charge) -> Result:
        return _ask_refund(gateway, store, held, before, amount_minor)

    def apply(unit: Unit, held: Charge, result: Result) -> None:
        if _minor(held.total_refunds, held.currency) == before:
            _record_refund(unit, held, Decimal(amount_minor).scaleb(-minor_digits(held.currency)))
    try:
        _claimed(db, store, charge_id, now, (SUCCESS, PARTIALLY_REFUNDED), ask, apply,
                 lambda held: f"{REFUND}{before}:{amount_minor}")
    except ValidationFailed:  # the processor refused it
        return None
    return amount_minor


def _claimed(db: Database, store: Store, charge_id: int, now: datetime, statuses: tuple[str, ...],
             ask: Callable[[Charge], Result], apply: Callable[[Unit, Charge, Result], None],
             check: Callable[[Charge], str] | None = None) -> Charge:
    """Claims the charge, runs ``check`` on it under the claim (what it returns is written into
    the claim before the processor is asked), asks, and records ``apply`` under the claim."""
    run = uuid.uuid4().hex[:16]
    with db.write() as conn:
        if not claims.claim(conn, store.id, [charge_id], run, now, statuses=statuses):
            raise Conflict("The charge is being processed by another request")
        held = charge_repo.get(conn, store.id, charge_id, now)
        assert held is not None
        if check is not None:  # a refusal here rolls the claim back with it
            mark = check(held)
            conn.execute(update(charges).where(charges.c.id == charge_id, charges.c.claimed_by == run)
                         .values(claimed_by=f"{run}{mark}"))
            run = f"{run}{mark}"
    try:
        result = ask(held)
    except GatewayUnavailable:
        # Nothing is known of this call: the processor may have acted. The claim stays (409
        # meanwhile); once it is stale, the next capture finishes the capture with the same
        # key, even past the 7 days, the next refund finishes the refund its claim names
        # (_finish_dead_refund), and the billing run either if nobody asks (finish_abandoned).
        raise ServiceUnavailable() from None
    except Exception:
        _release(db, store, charge_id, run)
        raise
    with db.write() as conn:
        unit = Unit(conn, store, now)
        fresh = charge_repo.get(conn, store.id, charge_id, now)
        if fresh is None or fresh.claimed_by != run:
            raise Conflict("The charge was taken over by another request")
        if result.succeeded:
            apply(unit, fresh, result)
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

