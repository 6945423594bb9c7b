"""A billing run finishing an abandoned payment (run.finish_abandoned, decisions §6.5) takes
over only the stale claim it read, never a charge whose run recorded its answer in between.

Found by the soak (bench/soak.py, issue 18): a worker read a claim as stale (on a sandbox store
a moved test clock makes every claim held look a day old; with a slow processor a batch may hold
claims past the 60 s), the run holding it recorded the last attempt its dunning allows, declined
(the charge closed, its subscription cancelled) and let go, and the worker then claimed the
charge, no longer claimed, and paid it a fifth time of four, with the card the customer had
meanwhile replaced. Both databases (the `api` fixture)."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pytest
from sqlalchemy import select, update

from rebill.domain.billing import claim as claims
from rebill.domain.billing import run as billing
from rebill.domain.payment.gateway import Payment
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.domain.store import repository as store_repo
from rebill.models import charges, payment_methods, sandbox_payments, stores
from tests.builders import charges_of, key_taken_over
from tests.scenarios.conftest import subscriber

START = date(2027, 3, 10)
HOLDER = "host:1:slow-run"


def test_a_stale_claim_let_go_before_the_takeover_leaves_the_charge_to_its_dunning(api, at, monkeypatch):
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(dunning={
            "first_retry_days": 1, "retry_every_days": 3, "max_attempts": 1, "on_max_retries": "cancel_subscriptions"}))
        store = store_repo.get(conn, api.store.id)
    at(START)
    address, _ = subscriber(api, token="pm_declined", next_charge_scheduled_at=START)
    [charge] = charges_of(api, address.id)
    now = api.clock.now()
    gateway = SandboxGateway(api.db, api.clock.now)
    # A run took the charge long ago and is still paying it.
    with api.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge.id).values(
            claimed_by=HOLDER, claimed_at=now - 2 * claims.STALE_AFTER))
    real = billing.process

    def holder_records_first(db, gateway_, store_, ids, now_, **kw):
        # Between the takeover's read of the stale claims and its claim: the holder records
        # its answer (its last attempt, declined: the charge closes) and lets go, and the
        # customer gives a card that pays.
        real(db, gateway_, store_, ids, now_, run=HOLDER)
        with api.db.write() as conn:
            conn.execute(update(payment_methods).where(payment_methods.c.store_id == api.store.id)
                         .values(processor_payment_method_token="pm_new_card"))
        return real(db, gateway_, store_, ids, now_, **kw)

    monkeypatch.setattr(billing, "process", holder_records_first)
    assert billing.finish_abandoned(api.db, gateway, store, now) == 0
    monkeypatch.undo()
    [after] = [c for c in charges_of(api, address.id) if c.id == charge.id]
    assert (after.status, after.charge_attempts, after.error_type) == ("error", 1, "CLOSED_MAX_RETRIES_REACHED")
    with api.db.read() as conn:
        asked = Counter(conn.execute(select(sandbox_payments.c.outcome).where(
            sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.reference == f"charge {charge.id}")).scalars())
    assert asked == Counter({"failed": 1})  # one attempt, the one the dunning allows


def test_a_stale_claim_still_held_is_finished_with_its_own_attempts_key(api, at):
    """What the takeover is for: a run that died after the processor charged is finished once,
    with the same key (the ledger answers what it did)."""
    at(START)
    address, charge, now, gateway = _paid_by_a_dead_run(api)
    assert billing.finish_abandoned(api.db, gateway, api.store, now) == 1
    [after] = [c for c in charges_of(api, address.id) if c.id == charge.id]
    assert (after.status, after.charge_attempts) == ("success", 1)
    assert _ledger(api, charge) == ["captured"]


def test_a_clock_advance_whose_key_was_taken_over_stops_rather_than_finishing_the_next_claim(api, at):
    """A request that runs the billing run (a clock advance) and whose Idempotency-Key a
    repeat took over (its process stopped for a minute) is refused where it records: it stops
    there with the refusal (found by a review: the refusal was taken for a claim "no answer
    again" and the run went on to the next one). The charge stays for the repeat to finish."""
    from rebill.domain.unit import KeyTakenOver
    at(START)
    address, _ = subscriber(api, token="pm_ok", next_charge_scheduled_at=START)
    [charge] = charges_of(api, address.id)
    now = api.clock.now()
    _stale_claim(api, charge, now)
    with pytest.raises(KeyTakenOver), key_taken_over(api, now):
        billing.finish_abandoned(api.db, SandboxGateway(api.db, api.clock.now), api.store, now)
    [after] = [c for c in charges_of(api, address.id) if c.id == charge.id]
    assert after.status == "queued"


def test_an_abandoned_payment_whose_method_was_deleted_since_is_what_the_processor_made(api, at):
    """Found by an audit (on Stripe; the sandbox alike): a run died after the processor charged,
    the customer's method was deleted, and the run finishing the stale claim recorded "no
    payment method" without asking: the next attempt, with a new card, charged again. Asked
    what the attempt's key made, it records that payment."""
    from rebill.domain.payment_method import service as methods
    from rebill.domain.unit import Unit
    at(START)
    address, charge, now, gateway = _paid_by_a_dead_run(api)
    with api.db.write() as conn:
        for method_id in conn.execute(select(payment_methods.c.id).where(
                payment_methods.c.customer_id == charge.customer_id)).scalars().all():
            methods.delete(Unit(conn, api.store, now), method_id)
    assert billing.finish_abandoned(api.db, gateway, api.store, now) == 1
    [after] = [c for c in charges_of(api, address.id) if c.id == charge.id]
    assert (after.status, after.charge_attempts) == ("success", 1)
    assert _ledger(api, charge) == ["captured"]


def _paid_by_a_dead_run(api):
    """A charge due now whose run died after the processor charged it: its payment in the
    ledger, never recorded, and the run's claim stale. (address, charge, now, gateway)."""
    address, _ = subscriber(api, token="pm_ok", next_charge_scheduled_at=START)
    [charge] = charges_of(api, address.id)
    now = api.clock.now()
    gateway = SandboxGateway(api.db, api.clock.now)
    gateway.charge(Payment(store_id=api.store.id, idempotency_key=billing.idempotency_key(charge.id, 1),
                           reference=f"charge {charge.id}", amount_minor=int(charge.total_price * 100),
                           currency=charge.currency, customer_token=None, payment_method_token="pm_ok",
                           payment_type="CREDIT_CARD"))
    _stale_claim(api, charge, now)
    return address, charge, now, gateway


def _stale_claim(api, charge, now):
    with api.db.write() as conn:
        conn.execute(update(charges).where(charges.c.id == charge.id).values(
            claimed_by=HOLDER, claimed_at=now - 2 * claims.STALE_AFTER))


def _ledger(api, charge):
    with api.db.read() as conn:
        return conn.execute(select(sandbox_payments.c.outcome).where(
            sandbox_payments.c.store_id == api.store.id,
            sandbox_payments.c.reference == f"charge {charge.id}")).scalars().all()
