"""The sandbox gateway (decisions §6.2, §6.12): every outcome on purpose, chosen by the token.

A word in the payment method's processor token (else in the customer's), in any case,
decides what happens: ``declined``, ``insufficient_funds``, ``expired``, ``needs_update``,
``processor_error`` fail with their error type, ``authorize_only`` authorizes without
capturing, anything else is captured.

It keeps a ledger as a processor would (``models.sandbox_payments``), in transactions of its
own: the same idempotency key always gets the first answer back and moves no money again,
even from another process or after the caller crashed before recording the answer. Tests and
the exactly-once proofs count money by this ledger.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from rebill.db.engine import Database
from rebill.db.statements import insert_row
from rebill.models import sandbox_payments

from .gateway import (
    AUTHORIZED,
    CAPTURED,
    CARD_DECLINED,
    CARD_EXPIRED,
    CUSTOMER_NEEDS_TO_UPDATE_CARD,
    FAILED,
    INSUFFICIENT_FUNDS,
    PROCESSING_ERROR,
    REFUNDED,
    Payment,
    Result,
)

# Checked in this order; the first word found decides.
OUTCOMES: tuple[tuple[str, Result], ...] = (
    ("insufficient_funds", Result(FAILED, error_type=INSUFFICIENT_FUNDS, error="Insufficient funds.")),
    ("declined", Result(FAILED, error_type=CARD_DECLINED, error="Your card was declined.")),
    ("needs_update", Result(FAILED, error_type=CUSTOMER_NEEDS_TO_UPDATE_CARD,
                            error="The customer needs to update the card.")),
    ("expired", Result(FAILED, error_type=CARD_EXPIRED, error="Your card has expired.")),
    ("processor_error", Result(FAILED, error_type=PROCESSING_ERROR, error="The processor had an error.",
                               retryable=True)),
    ("authorize_only", Result(AUTHORIZED)),
)


def decide(payment_method_token: str | None, customer_token: str | None) -> Result:
    """The outcome the tokens ask for (a pure function: the tests of every outcome use it)."""
    for token in (payment_method_token, customer_token):
        lowered = (token or "").lower()
        for word, result in OUTCOMES:
            if word in lowered:
                return result
    return Result(CAPTURED)


class SandboxGateway:
    name = "sandbox"

    def __init__(self, db: Database, now: Callable[[], datetime]) -> None:
        self._db = db
        self._now = now

    def charge(self, payment: Payment) -> Result:
        decided = decide(payment.payment_method_token, payment.customer_token)
        return self._once(payment.store_id, payment.idempotency_key, "charge", payment.reference,
                          payment.amount_minor, payment.currency, decided)

    def charge_many(self, payments: list[Payment]) -> list[Result]:
        """A batch in two statements: what the ledger already answered, then the rest in one
        transaction (the billing run pays a batch at a time). A key another caller is writing
        at the same moment sends the batch through ``charge`` one by one."""
        if not payments:
            return []
        store_id = payments[0].store_id
        if any(p.store_id != store_id for p in payments):
            return [self.charge(p) for p in payments]
        earlier = self._answered_many(store_id, [p.idempotency_key for p in payments])
        fresh: dict[str, Result] = {}
        rows = []
        for payment in payments:
            if payment.idempotency_key in earlier or payment.idempotency_key in fresh:
                continue
            decided = decide(payment.payment_method_token, payment.customer_token)
            result = Result(decided.outcome, None if decided.outcome == FAILED else f"sbx_{uuid.uuid4().hex[:24]}",
                            decided.error_type, decided.error, decided.retryable)
            fresh[payment.idempotency_key] = result
            rows.append(self._row(store_id, payment.idempotency_key, "charge", payment.reference,
                                  payment.amount_minor, payment.currency, result))
        if rows:
            try:
                with self._db.write() as conn:
                    conn.execute(insert(sandbox_payments), rows)
            except IntegrityError:
                return [self.charge(p) for p in payments]
        return [earlier.get(p.idempotency_key) or fresh[p.idempotency_key] for p in payments]

    def made(self, store_id: int, idempotency_key: str) -> Result | None:
        """The ledger's answer to a payment key (gateway.made_before)."""
        return self._answered(store_id, idempotency_key)

    def capture(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
                currency: str) -> Result:
        return self._once(store_id, idempotency_key, "capture", transaction_id, amount_minor, currency,
                          Result(CAPTURED, transaction_id=transaction_id))

    def refund(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
               currency: str) -> Result:
        return self._once(store_id, idempotency_key, "refund", transaction_id, amount_minor, currency,
                          Result(REFUNDED))

    def _once(self, store_id: int, key: str, operation: str, reference: str | None, amount_minor: int,
              currency: str, decided: Result) -> Result:
        earlier = self._answered(store_id, key)
        if earlier is not None:
            return earlier
        transaction_id = decided.transaction_id or (
            f"sbx_{uuid.uuid4().hex[:24]}" if decided.outcome != FAILED else None)
        result = Result(decided.outcome, transaction_id, decided.error_type, decided.error, decided.retryable)
        try:
            with self._db.write() as conn:
                insert_row(conn, sandbox_payments, self._row(store_id, key, operation, reference, amount_minor,
                                                             currency, result))
        except IntegrityError:
            # The same key, at the same moment, from another caller: its answer is the answer.
            earlier = self._answered(store_id, key)
            assert earlier is not None
            return earlier
        return result

    def _row(self, store_id: int, key: str, operation: str, reference: str | None, amount_minor: int,
             currency: str, result: Result) -> dict[str, object]:
        return {"store_id": store_id, "idempotency_key": key, "operation": operation, "reference": reference,
                "amount": Decimal(amount_minor), "currency": currency, "outcome": result.outcome,
                "transaction_id": result.transaction_id, "error_type": result.error_type, "error": result.error,
                "created_at": self._now()}

    def _answered_many(self, store_id: int, keys: list[str]) -> dict[str, Result]:
        with self._db.read() as conn:
            rows = conn.execute(select(sandbox_payments.c.idempotency_key, sandbox_payments.c.outcome,
                                       sandbox_payments.c.transaction_id, sandbox_payments.c.error_type,
                                       sandbox_payments.c.error)
                                .where(sandbox_payments.c.store_id == store_id,
                                       sandbox_payments.c.idempotency_key.in_(keys))).all()
        return {r.idempotency_key: Result(r.outcome, r.transaction_id, r.error_type, r.error,
                                          retryable=r.error_type == PROCESSING_ERROR) for r in rows}

    def _answered(self, store_id: int, key: str) -> Result | None:
        with self._db.read() as conn:
            row = conn.execute(select(sandbox_payments.c.outcome, sandbox_payments.c.transaction_id,
                                      sandbox_payments.c.error_type, sandbox_payments.c.error)
                               .where(sandbox_payments.c.store_id == store_id,
                                      sandbox_payments.c.idempotency_key == key)).first()
        if row is None:
            return None
        return Result(row.outcome, row.transaction_id, row.error_type, row.error,
                      retryable=row.error_type == PROCESSING_ERROR)
