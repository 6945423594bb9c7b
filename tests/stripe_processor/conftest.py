"""Stripe stores against the suite's Stripe (fake.py here: localstripe with our layer for
idempotency keys, faults and test cards), started once per test process on a free port of
127.0.0.1. Nothing here reaches a network: the store's `--api-base` points at the fake.

Each store gets a secret key of its own, so the fake keeps its idempotency keys apart (Stripe
scopes them by account): the SQLite and PostgreSQL runs share one fake and their charge ids
(so their keys) repeat.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import stripe
from cryptography.fernet import Fernet
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.db.engine import Database
from rebill.domain.payment import processors
from rebill.domain.payment.vault import Vault
from rebill.settings import RateLimit, Settings
from tests.builders import charges_of, make_address, make_customer, make_subscription
from tests.conftest import Api, make_api

ROOT = Path(__file__).resolve().parents[2]
SECRET_KEY = Fernet.generate_key().decode()  # REBILL_SECRET_KEY of the Stripe tests
EXP = {"exp_month": 12, "exp_year": 2034, "cvc": "123"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class FakeStripe:
    url: str

    def _control(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def fault(self, path: str, action: str, *, times: int = 1, method: str = "POST", **extra: Any) -> None:
        """``action``: rate_limit, error_before, error_after (a 500 Stripe saves for the key),
        drop_after (the request ran; its answer never comes)."""
        self._control("POST", "/_config/rebill/faults", {"path": path, "action": action, "times": times, "method": method,
                                                 **extra})

    def clear_faults(self) -> None:
        self._control("DELETE", "/_config/rebill/faults")

    def log(self) -> list[dict[str, Any]]:
        return list(self._control("GET", "/_config/rebill/log"))

    def intents(self, account: str) -> list[dict[str, Any]]:
        """The PaymentIntents made with the API key ``account`` (a store's, in these tests)."""
        return list(self._control("GET", f"/_config/rebill/intents?account={account}"))


@pytest.fixture(scope="session")
def fake_stripe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeStripe]:
    port = _free_port()
    logs = tmp_path_factory.mktemp("stripe") / "fake.log"
    with open(logs, "w") as sink:
        process = subprocess.Popen([sys.executable, "-m", "tests.stripe_processor.fake", "--port", str(port)],
                                   cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    fake = FakeStripe(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                fake.log()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.skip(f"localstripe could not start: {logs.read_text()[-2000:]}")
                time.sleep(0.1)
        yield fake
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class StripeStore:
    """A store paid through the fake Stripe: its API, its own Stripe client (to make customers
    and cards as a merchant's checkout would), the fake."""

    api: Api
    client: stripe.StripeClient
    fake: FakeStripe
    secret_key: str

    def customer_with_card(self, number: str = "4242424242424242") -> tuple[str, str]:
        customer = self.client.v1.customers.create({"email": f"{uuid.uuid4().hex[:8]}@example.com"})
        method = self.client.v1.payment_methods.create({"type": "card", "card": {"number": number, **EXP}})
        self.client.v1.payment_methods.attach(method.id, {"customer": customer.id})
        return customer.id, method.id

    def intents(self) -> list[dict[str, Any]]:
        return self.fake.intents(self.secret_key)

    def subscriber(self, number: str = "4242424242424242", *, price: str = "12.50",
                   on: date | None = None) -> tuple[int, dict[str, Any], str]:
        """A customer whose Stripe card (``number``) is its payment method, made through the API,
        with a monthly subscription dated ``on`` (default: 10 days on): the charge's id, the
        method as the API answered it, the Stripe customer."""
        cus, pm = self.customer_with_card(number)
        customer = make_customer(self.api)
        created = self.api.post("/payment_methods", json={
            "customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_customer_token": cus,
            "processor_payment_method_token": pm})
        assert created.status_code == 201, created.text
        address = make_address(self.api, customer)
        make_subscription(self.api, address, price=Decimal(price),
                          **({"next_charge_scheduled_at": on} if on else {}))
        [charge] = charges_of(self.api, address.id)
        return charge.id, created.json()["payment_method"], cus


def stripe_settings(**changes: Any) -> Settings:
    return Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                    regenerate_every=0, bill_every=0, purge_every=0, deliver_webhooks=False, batch_every=0,
                    secret_key=SECRET_KEY, stripe_timeout_seconds=5.0, **changes)


@pytest.fixture(scope="session")
def stripe_client(database: Database, clock: Any) -> Iterator[TestClient]:
    """The app as `rebill serve` builds it with REBILL_SECRET_KEY set."""
    with TestClient(create_app(stripe_settings(), db=database, clock=clock), base_url="http://rebill.test") as client:
        yield client


def use_stripe(api: Api, fake: FakeStripe, *, authorize_only: bool = False) -> str:
    key = f"sk_test_{uuid.uuid4().hex}"
    with api.db.write() as conn:
        processors.choose_stripe(conn, api.store, api.clock.now(), Vault(SECRET_KEY), secret_key=key,
                                 webhook_secret=f"whsec_{uuid.uuid4().hex}", authorize_only=authorize_only,
                                 api_base=fake.url)
    return key


def stripe_store(client: TestClient, db: Database, clock: Any, fake: FakeStripe, *, authorize_only: bool = False,
                 **store: Any) -> StripeStore:
    api = make_api(client, db, clock, **store)
    key = use_stripe(api, fake, authorize_only=authorize_only)
    merchant = stripe.StripeClient(key, base_addresses={"api": fake.url}, max_network_retries=0)
    return StripeStore(api, merchant, fake, key)


@pytest.fixture
def shop(stripe_client: TestClient, database: Database, clock: Any, fake_stripe: FakeStripe) -> Iterator[StripeStore]:
    """A premium_a store on Stripe (processing and capture need tier A)."""
    yield stripe_store(stripe_client, database, clock, fake_stripe, plan_tier="premium_a")
    fake_stripe.clear_faults()


def env_with_secret() -> dict[str, str]:
    return {**os.environ, "REBILL_SECRET_KEY": SECRET_KEY, "REBILL_STRIPE_TIMEOUT_SECONDS": "5"}
