"""One gateway for every store: each call goes to the processor of the store it names (issue 16).

The sandbox serves stores without a processor of their own; a Stripe store gets a client built
from its settings, kept while they stay the same. The store's row is read again whenever a
client is wanted (one primary-key read, next to a call to Stripe), and the cache is keyed by a
fingerprint of the settings, so a ``rebill stores processor`` change made by any process is
used from the next payment on, with no restart and no revision to watch.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rebill.db.engine import Database

from . import processors
from .gateway import CAPTURED, Gateway, GatewayUnavailable, Payment, Result, charge_all, made_before
from .sandbox import SandboxGateway
from .vault import Vault, VaultError

logger = logging.getLogger("rebill.payment")
# A charge of 0 (a 100 % discount, a free box) is paid without asking any processor: Stripe
# refuses a PaymentIntent of 0, and the sandbox must not decline what no card could (found by
# an audit: a free box with a "declined" token went into dunning on the sandbox, paid on Stripe).
NOTHING_TO_TAKE = Result(CAPTURED, asked=False)


class ProcessorRouter:
    name = processors.SANDBOX  # what a caller that knows no store sees

    def __init__(self, db: Database, now: Callable[[], datetime], vault: Vault, *, timeout: float = 30.0,
                 stripe_options: dict[str, Any] | None = None) -> None:
        self._db, self._vault, self._timeout = db, vault, timeout
        self._stripe_options = stripe_options or {}
        self.sandbox = SandboxGateway(db, now)
        self._clients: dict[int, tuple[str, Any]] = {}  # store id -> (fingerprint, StripeGateway)
        self._lock = threading.Lock()

    # Which processor -------------------------------------------------------------

    def for_store(self, store_id: int) -> Gateway:
        """The store's processor. A Stripe store whose keys cannot be read (REBILL_SECRET_KEY
        missing or another one) raises GatewayUnavailable: its payments wait, claimed."""
        account = self.stripe_account(store_id)
        if account is None:
            return self.sandbox
        with self._lock:
            cached = self._clients.get(store_id)
            if cached is not None and cached[0] == account.fingerprint:
                return cached[1]
        from .stripe_gateway import StripeGateway  # the stripe library only where a store uses it
        client = StripeGateway(account, timeout=self._timeout, **self._stripe_options)
        with self._lock:
            self._clients[store_id] = (account.fingerprint, client)
        return client

    def stripe_account(self, store_id: int) -> processors.StripeAccount | None:
        """The store's Stripe settings decrypted (the webhook secret included), None on the sandbox."""
        try:
            with self._db.read() as conn:
                return processors.stripe_account(conn, store_id, self._vault)
        except VaultError as exc:
            logger.error("store %s: its Stripe keys cannot be read: %s", store_id, exc)
            raise GatewayUnavailable(str(exc)) from None

    def stripe_for(self, store_id: int) -> Any:
        """The store's StripeGateway (its ``client`` is a ``stripe.StripeClient``), None on the sandbox."""
        gateway = self.for_store(store_id)
        return None if gateway is self.sandbox else gateway

    def name_for(self, store_id: int) -> str:
        with self._db.read() as conn:
            return processors.processor_of(conn, store_id)

    # The gateway, routed ---------------------------------------------------------

    def charge(self, payment: Payment) -> Result:
        if payment.amount_minor == 0:
            return NOTHING_TO_TAKE
        return self.for_store(payment.store_id).charge(payment)

    def charge_many(self, payments: list[Payment]) -> list[Result | None]:
        """Each store's payments through its processor (the sandbox's in one batch)."""
        by_store: dict[int, list[int]] = defaultdict(list)
        results: list[Result | None] = [None] * len(payments)
        for index, payment in enumerate(payments):
            if payment.amount_minor == 0:
                results[index] = NOTHING_TO_TAKE
            else:
                by_store[payment.store_id].append(index)
        for store_id, indexes in by_store.items():
            try:
                gateway = self.for_store(store_id)
            except GatewayUnavailable:
                continue
            for index, result in zip(indexes, charge_all(gateway, [payments[i] for i in indexes])):
                results[index] = result
        return results

    def made(self, store_id: int, idempotency_key: str) -> Result | None:
        return made_before(self.for_store(store_id), store_id, idempotency_key)

    def capture(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
                currency: str) -> Result:
        return self.for_store(store_id).capture(store_id, idempotency_key, transaction_id, amount_minor, currency)

    def refund(self, store_id: int, idempotency_key: str, transaction_id: str, amount_minor: int,
               currency: str) -> Result:
        return self.for_store(store_id).refund(store_id, idempotency_key, transaction_id, amount_minor, currency)
