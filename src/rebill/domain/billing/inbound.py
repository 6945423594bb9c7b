"""What a processor's webhook event changes (issue 16): each event applied once per store, in
the transaction of its effect, with the events Rebill records for it (origin ``processor``).

- The event's id goes into ``processor_events`` first (``ON CONFLICT DO NOTHING``): a replay
  finds it and changes nothing; a second delivery running at the same moment waits for the
  first's transaction (PostgreSQL) and then finds it too; a failed effect rolls the id back
  with it, so the processor's next delivery tries again.
- A payment's outcome (``PaymentSettled``) finishes the attempt its idempotency key names when
  Rebill has no answer for it: the charge is open at that attempt and its claim is marked
  unanswered (a timeout, a payment still processing: ``claim.UNANSWERED``), stale (its run
  died) or gone; or that attempt was recorded as a retryable ``PROCESSING_ERROR`` (a 500 whose
  payment Stripe did not show by its key) and the payment succeeded after all. It is recorded
  by ``outcome.record`` under a claim of its own, as the run records it, so whichever of the
  event and the next run comes first records it and the other finds nothing to do. A payment
  on its way (a live claim without the mark) is its run's to record.
- A refund total (``Refunded``) records what the processor refunded beyond ``total_refunds``
  (a refund made in Stripe's Dashboard) as an API refund records it; a refund Rebill made is
  already counted by then. A charge claimed right now (a capture or a refund on its way) is a
  409: the event is not remembered and the processor sends it again later.
- Payment methods: new details (and an invalid card whose expiry moved later is `unvalidated`
  again: the card network renewed it), or `invalid` when detached or their customer deleted.
"""

from __future__ import annotations

import logging
import re
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import msgspec
from sqlalchemy import Connection, delete, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from rebill.db.engine import Database, retryable
from rebill.errors import Conflict
from rebill.models import charges, payment_methods, processor_events

from .. import claimed_keys
from ..address import repository as address_repo
from ..charge import repository as charge_repo
from ..charge.model import ERROR, PARTIALLY_REFUNDED, QUEUED, SUCCESS, Charge
from ..customer import repository as customers
from ..money import minor_digits
from ..payment.gateway import CAPTURED, PROCESSING_ERROR
from ..payment.inbound import Fact, InboundEvent, MethodUnusable, MethodUpdated, PaymentSettled, Refunded
from ..store.model import Store
from ..unit import Unit
from . import claim as claims
from .money_back import record_refund
from .outcome import record

ORIGIN = "processor"  # the `source.origin` of the events an applied processor event records
APPLIED, REPLAYED, UNCHANGED, IGNORED = "applied", "already applied", "nothing to change", "ignored"
# NOTE: spec 01 and 02 Events, a payment method's change is its customer's event.
METHOD_TOPIC = "customer/payment_method_updated"
# The key of a charge's payment attempt (run.idempotency_key).
CHARGE_KEY = re.compile(r"rebill-charge-([0-9]{1,18})-attempt-([0-9]{1,9})")
TRIES = 4
# How long an applied event's id is kept: past Stripe's retries (3 days) and the 30 days in which
# an event can be sent again from its Dashboard. A signature is refused after 5 minutes anyway.
KEPT = timedelta(days=30)
PURGE_BATCH = 5000
logger = logging.getLogger("rebill.payment")


def apply(db: Database, store: Store, now: datetime, received_at: datetime, event: InboundEvent) -> str:
    """Applies ``event`` for ``store`` once: APPLIED, REPLAYED (applied before), UNCHANGED (a
    verified event that changes nothing here, remembered all the same) or IGNORED (a type no fact
    comes from: not remembered). ``now`` is the store's time, ``received_at`` the real time."""
    if event.fact is None:
        return IGNORED
    for tries in range(1, TRIES + 1):
        try:
            with db.write() as conn:
                if not _remember(conn, store.id, event, received_at):
                    return REPLAYED
                changed = _apply(Unit(conn, store, now, origin=ORIGIN), event.processor, event.fact)
            return APPLIED if changed else UNCHANGED
        except DBAPIError as exc:
            # PostgreSQL gave the transaction up for a concurrent one's sake: nothing of it was
            # kept, the id included, so it is applied again from the start.
            if tries == TRIES or not retryable(exc):
                raise
    raise AssertionError("unreachable")


def purge(db: Database, now: datetime) -> int:
    """Forgets the event ids received more than KEPT ago (real time), a batch per transaction;
    returns how many went (the purge job of `rebill serve`, beside the idempotency keys')."""
    table, removed = processor_events, 0
    key = tuple_(table.c.store_id, table.c.processor, table.c.event_id)
    while True:
        batch = select(table.c.store_id, table.c.processor, table.c.event_id).where(
            table.c.received_at < now - KEPT).limit(PURGE_BATCH)
        with db.write() as conn:
            count = conn.execute(delete(table).where(key.in_(batch))).rowcount
        removed += count
        if count < PURGE_BATCH:
            return removed


def _remember(conn: Connection, store_id: int, event: InboundEvent, received_at: datetime) -> bool:
    """Whether the event is new to the store (its id now written); False: applied before."""
    insert = postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert
    stmt = (insert(processor_events)
            .values(store_id=store_id, processor=event.processor, event_id=event.event_id, type=event.type[:100],
                    received_at=received_at)
            .on_conflict_do_nothing(index_elements=["store_id", "processor", "event_id"])
            .returning(processor_events.c.event_id))
    return conn.execute(stmt).first() is not None


def _apply(unit: Unit, processor: str, fact: Fact) -> bool:
    if isinstance(fact, PaymentSettled):
        return _settle(unit, processor, fact)
    if isinstance(fact, Refunded):
        return _refunded(unit, fact)
    if isinstance(fact, MethodUpdated):
        return _method_updated(unit, fact)
    return _methods_unusable(unit, fact)


# A payment's outcome ---------------------------------------------------------------------------

def _settle(unit: Unit, processor: str, fact: PaymentSettled) -> bool:
    if fact.store_ref != str(unit.store_id):
        # Another store's payment: every endpoint of a Stripe account gets all its events.
        return False
    key = CHARGE_KEY.fullmatch(fact.idempotency_key)
    if key is None:
        # A checkout's payment: its claim holds the attempt, and the billing run finishes it
        # with the same key (run.finish_abandoned); the event is acknowledged.
        return False
    charge_id, attempt = int(key[1]), int(key[2])
    conn = unit.conn
    home = conn.execute(select(charges.c.address_id).where(
        charges.c.id == charge_id, charges.c.store_id == unit.store_id)).scalar()
    if home is None:
        return False
    # The address first, as the run's claim and record take it: no run claims or records this
    # charge until this transaction ends, and no deadlock with one.
    address_repo.lock(conn, unit.store_id, [home])
    charge = charge_repo.many(conn, unit.store_id, [charge_id]).get(charge_id)
    if charge is None:
        return False
    claimed_at = conn.execute(select(charges.c.claimed_at).where(charges.c.id == charge_id)).scalar()
    if _unanswered(charge, claimed_at, attempt, unit.now):
        counted_as = charge
    elif _recorded_as_unknown(charge, attempt, fact):
        # The failure recorded was no answer: this attempt's outcome replaces it, as the same
        # attempt (the attempts count stays).
        counted_as = msgspec.structs.replace(charge, charge_attempts=attempt - 1)
    else:
        if fact.result.outcome == CAPTURED and charge.status in (QUEUED, ERROR) and charge.charge_attempts >= attempt:
            logger.warning("store %s: charge %s's attempt %s was paid in Stripe after Rebill recorded it as "
                           "failed; compare it with the Dashboard", unit.store_id, charge_id, attempt)
        return False
    if (fact.amount_minor, fact.currency) != (_minor(charge.total_price, charge.currency), charge.currency):
        logger.warning("store %s: charge %s's attempt %s was for another amount in Stripe; left as it is",
                       unit.store_id, charge_id, attempt)
        return False
    mine = f"processor-event:{uuid.uuid4().hex}"
    same_claim = (charges.c.claimed_by.is_(None) if charge.claimed_by is None
                  else charges.c.claimed_by == charge.claimed_by)
    taken = conn.execute(update(charges).where(charges.c.id == charge_id, charges.c.store_id == unit.store_id,
                                               same_claim)
                         .values(claimed_by=mine, claimed_at=unit.now).returning(charges.c.id)).scalar()
    if taken is None:
        return False
    record(unit, mine, [(counted_as, fact.result, _method_of(conn, unit.store_id, charge, fact.method_token))],
           processor)
    # A keyed request that left the claim (a process that died after the processor answered):
    # its repeat answers 409, its payment made (found by a review: it answered 422 "success").
    claimed_keys.finished(conn, [charge.claimed_by])
    return True


def _unanswered(charge: Charge, claimed_at: datetime | None, attempt: int, now: datetime) -> bool:
    """The charge waits for this attempt's outcome and no run is about to record it."""
    if charge.status not in (QUEUED, ERROR) or charge.charge_attempts + 1 != attempt:
        return False
    if charge.claimed_by is None:
        return True  # a claim released by hand (docs/operations.md): the outcome is Stripe's
    stale = claimed_at is not None and claimed_at <= now - claims.STALE_AFTER
    return charge.claimed_by.endswith(claims.UNANSWERED) or stale


def _recorded_as_unknown(charge: Charge, attempt: int, fact: PaymentSettled) -> bool:
    """This attempt was recorded as a retryable PROCESSING_ERROR (a 500, no payment found by its
    key), Stripe says it was paid, and no later attempt has started."""
    return (charge.status == ERROR and charge.charge_attempts == attempt and charge.error_type == PROCESSING_ERROR
            and charge.claimed_by is None and fact.result.outcome == CAPTURED)


def _method_of(conn: Connection, store_id: int, charge: Charge, token: str | None) -> int | None:
    """The customer's method the payment used, else the one the charge last used."""
    if token:
        found = conn.execute(select(payment_methods.c.id).where(
            payment_methods.c.store_id == store_id, payment_methods.c.customer_id == charge.customer_id,
            payment_methods.c.processor_payment_method_token == token).order_by(payment_methods.c.id).limit(1)).scalar()
        if found is not None:
            return int(found)
    return charge.payment_method_id


# A refund made in the processor's Dashboard ----------------------------------------------------

def _refunded(unit: Unit, fact: Refunded) -> bool:
    conn = unit.conn
    charge_id = conn.execute(select(charges.c.id).where(
        charges.c.store_id == unit.store_id, charges.c.external_transaction_id == fact.transaction_id)
        .order_by(charges.c.id).limit(1).with_for_update()).scalar()
    charge = charge_repo.many(conn, unit.store_id, [charge_id]).get(charge_id) if charge_id is not None else None
    if charge is None or charge.currency != fact.currency:
        return False
    known = _minor(charge.total_refunds, charge.currency)
    if fact.refunded_minor <= known:
        return False  # counted already: a refund Rebill made, or an older event
    if charge.status not in (SUCCESS, PARTIALLY_REFUNDED):
        logger.warning("store %s: Stripe says charge %s (%s) was refunded, but it is %s; left as it is",
                       unit.store_id, charge.id, fact.transaction_id, charge.status)
        return False
    if charge.claimed_by is not None:
        # A capture or a refund of Rebill's own is on its way: its refund may be the one this
        # event counts. Not remembered: the processor sends the event again later.
        raise Conflict("The charge is being captured or refunded by Rebill right now; send the event again later")
    more = min(fact.refunded_minor, _minor(charge.total_price, charge.currency)) - known
    if more <= 0:
        return False
    record_refund(unit, charge, Decimal(more).scaleb(-minor_digits(charge.currency)))
    return True


# Payment methods -------------------------------------------------------------------------------

def _method_updated(unit: Unit, fact: MethodUpdated) -> bool:
    rows = _methods(unit, payment_methods.c.processor_payment_method_token == fact.method_token)
    told: set[int] = set()
    for row in rows:
        before = row["payment_details"] or {}
        details = {**before, **fact.details}
        changes: dict[str, Any] = {}
        if details != before:
            changes["payment_details"] = details
        if row["status"] == "invalid" and _expiry(details) > _expiry(before) > (0, 0):
            # A renewed card (new expiry from the card network): its next charge will tell.
            changes.update(status="unvalidated", status_reason=None)
        if changes:
            _save_method(unit, row["id"], changes)
            told.add(row["customer_id"])
    unit.record_many(METHOD_TOPIC, sorted(told))
    return bool(told)


def _methods_unusable(unit: Unit, fact: MethodUnusable) -> bool:
    condition = (payment_methods.c.processor_payment_method_token == fact.method_token if fact.method_token
                 else payment_methods.c.processor_customer_token == fact.customer_token)
    told: set[int] = set()
    for row in _methods(unit, condition):
        if row["status"] != "invalid":
            _save_method(unit, row["id"], {"status": "invalid", "status_reason": fact.reason[:255]})
            told.add(row["customer_id"])
    unit.record_many(METHOD_TOPIC, sorted(told))
    return bool(told)


def _methods(unit: Unit, condition: Any) -> list[Any]:
    """The store's methods matching ``condition``, read again under their customers' locks
    (taken in id order), as every write of a method holds its customer's (payment_method/service.py)."""
    columns = (payment_methods.c.id, payment_methods.c.customer_id)
    found = unit.conn.execute(select(*columns).where(payment_methods.c.store_id == unit.store_id, condition)).all()
    for customer_id in sorted({row.customer_id for row in found}):
        customers.exists_in_store(unit.conn, unit.store_id, customer_id, lock="update")
    if not found:
        return []
    return list(unit.conn.execute(
        select(payment_methods.c.id, payment_methods.c.customer_id, payment_methods.c.payment_details,
               payment_methods.c.status)
        .where(payment_methods.c.store_id == unit.store_id, payment_methods.c.id.in_([row.id for row in found]))
        .order_by(payment_methods.c.id).with_for_update()).mappings())


def _save_method(unit: Unit, method_id: int, changes: dict[str, Any]) -> None:
    unit.conn.execute(update(payment_methods).where(payment_methods.c.id == method_id,
                                                    payment_methods.c.store_id == unit.store_id)
                      .values(**changes, updated_at=unit.now))


def _expiry(details: dict[str, Any]) -> tuple[int, int]:
    year, month = details.get("exp_year"), details.get("exp_month")
    return (year, month) if isinstance(year, int) and isinstance(month, int) else (0, 0)


def _minor(amount: Decimal, currency: str) -> int:
    return int(amount.scaleb(minor_digits(currency)))
