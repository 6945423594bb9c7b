"""Paying charges: claim (one transaction), pay through the gateway (outside any
transaction: it is the processor's side), record (one transaction). Every step is safe to
repeat; a crash between any two leaves claimed charges that the next run finishes once their
claim is stale, with the same idempotency keys (decisions §6.5, design guide)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError

from rebill import failpoints
from rebill.db.among import among, unindexed
from rebill.db.engine import Database, retryable
from rebill.errors import ServiceError
from rebill.models import addresses as address_table
from rebill.models import charges, payment_methods

from .. import claimed_keys
from ..address import repository as address_repo
from ..charge import repository as charge_repo
from ..charge.model import ERROR, PENDING, QUEUED, Charge
from ..money import minor_digits
from ..payment.gateway import (
    FAILED,
    Gateway,
    GatewayUnavailable,
    Payment,
    Result,
    charge_all,
    made_before,
    processor_name,
)
from ..schedule.reconcile import replan
from ..store.model import Store
from ..unit import KeyTakenOver, Unit, before_the_call
from . import claim as claims
from . import sweep
from .money_back import REFUND, _capture, _finish_dead_refund  # finish_abandoned: their own steps and keys
from .outcome import Recorded, record

# NOTE: decisions §6.12, no method to charge: the customer must add or update one.
NO_METHOD = Result(FAILED, error_type="CUSTOMER_NEEDS_TO_UPDATE_CARD",
                   error="The customer has no payment method to charge.")
BATCH = 500
ORIGIN = "billing_run"  # the `source.origin` of the events a run records


@dataclass
class Summary:
    processed: int = 0
    paid: int = 0
    pending: int = 0
    failed: int = 0
    retried: int = 0  # of the failed and paid: charges that had failed before
    closed: int = 0
    amounts: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))  # paid, per currency

    def add(self, recorded: Recorded, was_retry: bool) -> None:
        self.processed += 1
        self.retried += was_retry
        if recorded.status == "success":
            self.paid += 1
            self.amounts[recorded.currency] += recorded.amount
        elif recorded.status == "pending":
            self.pending += 1
        else:
            self.failed += 1
            self.closed += recorded.closed


def idempotency_key(charge_id: int, attempt: int) -> str:
    """One key per charge attempt: a repeated call for the same attempt is the same payment."""
    return f"rebill-charge-{charge_id}-attempt-{attempt}"


# Tries of a batch's record when the database gives it up in a deadlock (process).
RECORD_TRIES = 4


def process(db: Database, gateway: Gateway, store: Store, charge_ids: list[int], now: datetime, *,
            run: str | None = None, stale_after: timedelta = claims.STALE_AFTER,
            summary: Summary | None = None, due_on: claims.DueOn | None = None,
            skip_locked: bool = False, taking_over: str | None = None) -> list[Recorded]:
    """Claims, pays and records ``charge_ids`` (those no other run holds; with ``due_on``, a
    billing run's, only those still due that day; with ``taking_over``, only while that stale
    claim holds them, claim.py). With ``skip_locked`` it waits for no other
    transaction: the charges whose address another one holds (another worker's claim or
    record, a request's replan) are left out, for a later batch or run."""
    # A request's own run (a manual process) names its key's claim (domain/claimed_keys.py).
    keyed, run = run is not None, run or claims.run_name()
    for attempt in range(1, RECORD_TRIES + 1):
        try:
            found, methods, unanswered = _claim(db, store, charge_ids, run, now, stale_after, due_on, skip_locked,
                                                taking_over, keyed)
            break
        except DBAPIError as exc:
            # PostgreSQL gave the claim up in a deadlock (another transaction locking addresses
            # out of order: a batch chunk's tasks lock theirs one by one): nothing was claimed
            # and no processor was asked, so it is simply claimed again.
            if attempt == RECORD_TRIES or not retryable(exc):
                raise
    failpoints.hit("billing.after_claim")
    answers = _pay(gateway, store, found, methods, set(unanswered))
    failpoints.hit("billing.after_gateway")
    _mark_unanswered(db, store, run, {c.id for c in found} - {c.id for c, _, _ in answers})
    processor = processor_name(gateway, store.id)
    for attempt in range(1, RECORD_TRIES + 1):
        try:
            with db.write() as conn:
                recorded = record(Unit(conn, store, now, origin=ORIGIN), run, answers, processor)
                # The requests whose claims this run took over, their answers now recorded.
                claimed_keys.finished(conn, [unanswered[done.charge_id] for done in recorded
                                             if done.charge_id in unanswered])
                failpoints.hit("billing.before_commit")
            break
        except DBAPIError as exc:
            # PostgreSQL gave the record up for a concurrent transaction's sake (deadlock):
            # nothing of it was kept and the answers are in hand, so it is recorded again.
            # Past the last try the claims stay and a later run finishes them (same keys).
            if attempt == RECORD_TRIES or not retryable(exc):
                raise
    failpoints.hit("billing.after_record")
    if summary is not None:
        for done in recorded:
            summary.add(done, done.retry)
    return recorded


def _claim(db: Database, store: Store, charge_ids: list[int], run: str, now: datetime, stale_after: timedelta,
           due_on: claims.DueOn | None, skip_locked: bool, taking_over: str | None, keyed: bool = False
           ) -> tuple[list[Charge], dict[int, dict[str, Any]], dict[int, str]]:
    """The claim's transaction (process): the charges claimed, the methods that pay them, and
    those of them whose claim this one took over, with that claim (a run that died or got no
    answer: their attempt may have been made). ``keyed``: a request's claim, which its key
    names (domain/claimed_keys.py)."""
    with before_the_call(), db.write() as conn:
        unit = Unit(conn, store, now, origin=ORIGIN)
        # The charges' addresses first, as every replan locks them (PostgreSQL): a replan that
        # read a charge before this claim must finish before the claim, or it could rewrite or
        # delete a charge this run is paying (and deadlock with it).
        rows = conn.execute(select(charges.c.id, charges.c.address_id, charges.c.claimed_by).where(
            charges.c.store_id == store.id, among(charges.c.id, charge_ids))).all()
        homes = {charge_id: address_id for charge_id, address_id, _ in rows}
        held_before = {charge_id: claimed_by for charge_id, _, claimed_by in rows if claimed_by is not None}
        held = set(address_repo.lock(conn, store.id, sorted(set(homes.values())), skip_locked=skip_locked))
        if skip_locked:
            charge_ids = [i for i in charge_ids if homes.get(i) in held]
        # NOTE: decisions §6.3, a charge with uncommitted changes is regenerated first.
        waiting = list(conn.execute(select(charges.c.address_id).distinct().where(
            charges.c.store_id == store.id, among(charges.c.id, charge_ids), charges.c.has_uncommitted_changes)).scalars())
        if waiting:
            replan(unit, waiting)
        claimed = claims.claim(conn, store.id, charge_ids, run, now, stale_after, due_on=due_on,
                               taking_over=taking_over)
        by_id = charge_repo.many(conn, store.id, claimed)
        found = [by_id[i] for i in claimed if i in by_id]
        methods = _methods(conn, store.id, found)
        if keyed and claimed:
            claimed_keys.note(conn, run)
    return found, methods, {charge_id: held_before[charge_id] for charge_id in claimed if charge_id in held_before}


def _mark_unanswered(db: Database, store: Store, run: str, charge_ids: set[int]) -> None:
    """The charges whose payment got no answer keep their claim, marked: the processor's event
    about that attempt may finish them before the next run asks again (billing/inbound.py)."""
    if charge_ids:
        with db.write() as conn:
            conn.execute(update(charges).where(charges.c.store_id == store.id, among(charges.c.id, charge_ids),
                                               charges.c.claimed_by == run)
                         .values(claimed_by=claims.unanswered(run)))


def _pay(gateway: Gateway, store: Store, found: list[Charge], methods: dict[int, dict[str, Any]],
         unanswered: set[int]) -> list[tuple[Charge, Result, int | None]]:
    """Every payment of the batch. A charge whose answer is unknown (the gateway could not be
    reached) stays claimed and out of the answers: a later run asks again with the same key.
    Asked again, an attempt (``unanswered``) whose payment method has gone since is what the
    processor made of its key, if anything, before it is "no payment method"; with a method,
    the processor answers the key as it first did (the sandbox's ledger, Stripe's replay or the
    PaymentIntent the key made)."""
    payments = []
    answers: list[tuple[Charge, Result, int | None]] = []
    for charge in found:
        method = methods.get(charge.id)
        key = idempotency_key(charge.id, charge.charge_attempts + 1)
        if method is None:
            if charge.id in unanswered:
                try:
                    made = made_before(gateway, store.id, key)
                except GatewayUnavailable:
                    continue  # still unknown: the claim stays, marked, for a later run
                if made is not None:  # paid (or declined) by a method since removed
                    answers.append((charge, made, None))
                    continue
            answers.append((charge, NO_METHOD, None))
            continue
        payments.append((charge, method["id"], Payment(
            store_id=store.id, idempotency_key=key,
            reference=f"charge {charge.id}", amount_minor=int(charge.total_price.scaleb(minor_digits(charge.currency))),
            currency=charge.currency, customer_token=method["processor_customer_token"],
            payment_method_token=method["processor_payment_method_token"], payment_type=method["payment_type"])))
    results = charge_all(gateway, [p for _, _, p in payments])
    for (charge, method_id, _), result in zip(payments, results):
        if result is not None:
            answers.append((charge, result, method_id))
    return answers


def _methods(conn: Any, store_id: int, found: list[Charge]) -> dict[int, dict[str, Any]]:
    """NOTE: decisions §6.12, the address's payment method, else the customer's default."""
    if not found:
        return {}
    address_ids = {c.address_id for c in found}
    chosen = dict(conn.execute(select(address_table.c.id, address_table.c.payment_method_id)
                               .where(among(address_table.c.id, address_ids))).all())
    customer_ids = {c.customer_id for c in found}
    rows = conn.execute(select(payment_methods).where(
        unindexed(payment_methods.c.store_id) == store_id,
        among(payment_methods.c.customer_id, customer_ids))).mappings().all()
    by_id = {row["id"]: dict(row) for row in rows}
    default = {row["customer_id"]: dict(row) for row in rows if row["is_default"]}
    out = {}
    for charge in found:
        method = by_id.get(chosen.get(charge.address_id)) or default.get(charge.customer_id)
        if method is not None:
            out[charge.id] = method
    return out


def run_store(db: Database, gateway: Gateway, store: Store, now: Callable[[], datetime], *,
              until: date | None = None, summary: Summary | None = None,
              progress: Callable[[int], None] | None = None,
              stale_after: timedelta = claims.STALE_AFTER,
              stop: Callable[[], bool] | None = None) -> Summary:
    """The billing run of one store: every charge due on or before ``until`` (default, and at
    most, the store's today), in batches. Several runs of a store may go side by side (worker
    processes, a worker's ``--concurrency``): they split the due charges between them.

    Two passes. The first takes batches without waiting for any lock (``skip_locked``): a run
    reads the charges no live claim holds and claims those whose address it can lock at once,
    so runs side by side take disjoint batches and never queue behind each other. The second
    reads again from the start and waits for its locks as a single run always did: a charge
    the first pass left because a request was replanning its address meanwhile is paid in this
    run, not the next. ``stop`` is asked before each batch: a worker told to stop finishes the
    batch it holds (its claims are recorded) and takes no other."""
    summary = summary or Summary()
    stopping = stop or (lambda: False)
    finish_abandoned(db, gateway, store, now(), summary)
    if not store.installed:
        # An uninstalled store charges nobody (found by an audit: its due charges were paid,
        # though its merchant took the service away): its payments in flight are recorded
        # (above), its due charges wait for a reinstall, and are due then (docs/operations.md).
        return summary
    with db.read() as conn:
        due = sweep.anything_due(Unit(conn, store, now()))
    if due:
        with db.write() as conn:
            unit = Unit(conn, store, now(), origin=ORIGIN)
            sweep.release_queued_orders(unit)
            sweep.flag_uncaptured(unit)
            sweep.close_lapsed(unit)
    for skip_locked in (True, False):
        for day, batch in _due_batches(db, store, now, until, stale_after):
            if stopping():
                return summary
            done = process(db, gateway, store, batch, now(), summary=summary, stale_after=stale_after, due_on=day,
                           skip_locked=skip_locked)
            if progress is not None:
                progress(len(done))
    # After the day's payments: the next charges they planned are announced in the same run.
    with db.read() as conn:
        coming = sweep.upcoming_due(Unit(conn, store, now()))
    if coming:
        with db.write() as conn:
            sweep.tell_upcoming(Unit(conn, store, now(), origin=ORIGIN))
    return summary


def finish_abandoned(db: Database, gateway: Gateway, store: Store, now: datetime,
                     summary: Summary | None = None) -> int:
    """Payments, captures and refunds whose claim went stale with no answer recorded (their
    process died, or the processor did not answer and nobody asked again): each is asked again
    with its own key and recorded, so money the processor may have moved never stays unrecorded
    (decisions §6.5). Payments too, with the same attempt's key: among them a manual process of
    a charge dated later, which no batch of the run would pick before its date. The billing run
    calls it; returns how many it finished. (Here rather than in money_back, whose capture and
    refund steps it reuses: money_back then needs nothing from the run, and the package's
    imports stay acyclic, tests/unit/test_layering.py.)"""
    with db.read() as conn:
        rows = conn.execute(select(charges.c.id, charges.c.status, charges.c.claimed_by).where(
            charges.c.store_id == store.id, charges.c.claimed_by.is_not(None),
            charges.c.claimed_at <= now - claims.STALE_AFTER)).all()
    finished = 0
    for charge_id, status, claimed_by in rows:
        try:
            if status in (QUEUED, ERROR):  # a payment: the same attempt, the same key
                # Only the claim read here: its run may have recorded its answer since.
                finished += len(process(db, gateway, store, [charge_id], now, summary=summary,
                                        taking_over=claimed_by))
            elif status == PENDING:  # only a capture claims a pending charge
                _capture(db, gateway, store, charge_id, now)
                finished += 1
            elif REFUND in claimed_by:
                finished += _finish_dead_refund(db, gateway, store, charge_id, now) is not None
        except KeyTakenOver:  # the request running this (a clock advance) lost its key: it stops
            raise
        except ServiceError:  # no answer again, refused, or a request took it meanwhile: next run
            continue
    # Checkout payments too (a package of their own, which builds on this one's outcome).
    from ..checkout import charge as checkout_charge
    return finished + checkout_charge.finish_abandoned(db, gateway, store, now)


def _due_batches(db: Database, store: Store, now: Callable[[], datetime], until: date | None,
                 stale_after: timedelta) -> Iterator[tuple[claims.DueOn, list[int]]]:
    after = 0
    while True:
        with db.read() as conn:
            moment = now()
            day = _due_on(Unit(conn, store, moment).today, until)
            batch = claims.due(conn, store.id, day, after_id=after, limit=BATCH,
                               claimable_at=moment - stale_after)
        if not batch:
            return
        yield day, batch
        after = batch[-1]


def count_due(db: Database, store: Store, now: datetime, until: date | None = None) -> int:
    with db.read() as conn:
        return len(claims.due(conn, store.id, _due_on(Unit(conn, store, now).today, until), limit=10_000_000))


def _due_on(today: date, until: date | None) -> claims.DueOn:
    return claims.DueOn(queued=min(until, today) if until is not None else today, retries=today)

