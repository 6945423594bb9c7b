"""A store's processor (issue 16): `rebill stores processor`, the keys kept encrypted and never
printed, logged or answered, the router that sees a changed setting at the next payment, a
store whose keys cannot be read, and the sandbox as every store's default."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from pathlib import Path

import pytest
import stripe
from cryptography.fernet import Fernet
from sqlalchemy import select
from typer.testing import CliRunner

from rebill.cli import app as cli
from rebill.db.engine import Database
from rebill.domain.billing import run as billing
from rebill.domain.payment import processors
from rebill.domain.payment.gateway import Payment
from rebill.domain.payment.router import ProcessorRouter
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.domain.payment.vault import Vault
from rebill.models import sandbox_payments, store_processors
from tests.stripe_processor.conftest import SECRET_KEY, use_stripe

runner = CliRunner()
KEY = "sk_test_51Secret" + "x" * 24
LIVE = "sk_live_51Secret" + "y" * 24
WEBHOOK = "whsec_" + "z" * 32


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, text in (("test", KEY), ("live", LIVE), ("webhook", WEBHOOK), ("bad_webhook", "not-a-secret")):
        path = tmp_path / name
        path.write_text(text + "\n")
        paths[name] = str(path)
    return paths


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert _run("stores", "create", "shop", "--database", url).exit_code == 0
    assert _run("stores", "create", "prod", "--no-sandbox", "--database", url).exit_code == 0
    return url


def _run(*args: str, secret: str | None = SECRET_KEY):
    env = {"REBILL_SECRET_KEY": secret or ""}
    return runner.invoke(cli, list(args), env=env, catch_exceptions=False)


def _row(url: str, name: str):
    db = Database.from_url(url)
    try:
        with db.read() as conn:
            from rebill.domain.store import repository
            store = repository.by_name(conn, name)
            return conn.execute(select(store_processors).where(store_processors.c.store_id == store.id)).first()
    finally:
        db.dispose()


def test_the_command_line_chooses_stripe_keeps_the_keys_encrypted_and_never_prints_them(url, files):
    result = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["test"],
                  "--webhook-secret-file", files["webhook"], "--authorize-only", "--api-base", "http://127.0.0.1:9/",
                  "--database", url)
    assert result.exit_code == 0, result.output
    first, endpoint = result.output.strip().splitlines()
    assert first == "shop: stripe (test key, webhook secret set, authorize only, API at http://127.0.0.1:9)"
    # Where Stripe sends the store's events: a random key, not the store's name (the URL is public).
    assert re.fullmatch(r"webhook endpoint: /processors/stripe/events/[A-Za-z0-9_-]{32}", endpoint), endpoint
    row = _row(url, "shop")
    assert KEY not in row.secret_key and WEBHOOK not in row.webhook_secret
    vault = Vault(SECRET_KEY)
    assert (vault.decrypt(row.secret_key), vault.decrypt(row.webhook_secret)) == (KEY, WEBHOOK)
    for args in (("stores", "processor", "shop"), ("stores", "list")):
        shown = _run(*args, "--database", url).output
        assert KEY not in shown and WEBHOOK not in shown and "sk_test_51" not in shown
    assert _run("stores", "processor", "shop", "--database", url).output.strip().startswith("shop: stripe (test key")
    assert _run("stores", "processor", "shop", "--sandbox", "--database", url).output.strip() == "shop: sandbox"
    assert _row(url, "shop") is None  # the keys are forgotten
    # The endpoint's address is kept: Stripe's Dashboard still names it when the store comes back,
    # and the other store has an address of its own.
    again = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["test"], "--database", url)
    assert again.output.strip().splitlines()[1] == endpoint
    other = _run("stores", "processor", "prod", "--stripe", "--secret-key-file", files["test"], "--database", url)
    assert other.output.strip().splitlines()[1] != endpoint


def test_without_rebill_secret_key_a_live_key_is_refused_and_a_test_key_too(url, files):
    live = _run("stores", "processor", "prod", "--stripe", "--secret-key-file", files["live"], "--database", url,
                secret=None)
    assert live.exit_code == 2
    assert "a live key is stored only encrypted: set REBILL_SECRET_KEY" in " ".join(live.output.split())
    test = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["test"], "--database", url,
                secret=None)
    assert test.exit_code == 2 and "REBILL_SECRET_KEY is not set" in " ".join(test.output.split())
    assert LIVE not in live.output and KEY not in test.output
    assert _row(url, "prod") is None and _row(url, "shop") is None


def test_a_live_key_goes_to_a_production_store_only(url, files):
    refused = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["live"], "--database", url)
    assert refused.exit_code == 2 and "a sandbox store takes a test key" in " ".join(refused.output.split())
    taken = _run("stores", "processor", "prod", "--stripe", "--secret-key-file", files["live"], "--database", url)
    assert taken.exit_code == 0 and taken.output.strip().startswith("prod: stripe (live key")


@pytest.mark.parametrize("args, message", [
    (("--stripe",), "--secret-key-file: is required with --stripe"),
    (("--stripe", "--sandbox"), "give one of them"),
    (("--authorize-only",), "go with --stripe"),
    (("--stripe", "--secret-key-file", "/nonexistent/key"), "cannot read /nonexistent/key"),
])
def test_the_command_refuses_what_does_not_fit(url, args, message):
    result = _run("stores", "processor", "shop", *args, "--database", url)
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_a_key_or_webhook_secret_that_is_not_stripes_is_refused(url, files, tmp_path):
    bad_webhook = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["test"],
                       "--webhook-secret-file", files["bad_webhook"], "--database", url)
    assert bad_webhook.exit_code == 2 and "not a Stripe webhook signing secret" in bad_webhook.output
    (tmp_path / "pk").write_text("pk_test_abc")
    public = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", str(tmp_path / "pk"),
                  "--database", url)
    assert public.exit_code == 2 and "is not a Stripe secret key" in public.output
    # Found by an audit: a key with a line break or a space inside was taken, and every call
    # then failed as "Stripe could not be reached".
    for name, text in (("two_lines", f"{KEY}\nsecond line"), ("spaced", KEY[:12] + " " + KEY[12:])):
        (tmp_path / name).write_text(text)
        split = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", str(tmp_path / name),
                     "--database", url)
        assert split.exit_code == 2 and "has a space or a line break inside" in " ".join(split.output.split())
        assert KEY[12:20] not in split.output
    assert _row(url, "shop") is None  # nothing was saved


def test_showing_a_stores_keys_says_when_this_secret_key_cannot_read_them(url, files):
    """Found by an audit: with another REBILL_SECRET_KEY the keys were shown as set, while the
    server could not read them and the store's payments waited."""
    assert _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["test"],
                "--database", url).exit_code == 0
    assert _run("stores", "processor", "shop", "--database", url).exit_code == 0
    other = _run("stores", "processor", "shop", "--database", url, secret=Fernet.generate_key().decode())
    assert other.exit_code == 1 and "the keys cannot be read" in " ".join(other.output.split())
    assert "shop: stripe (test key" in other.output  # what is set is still shown


def test_a_bad_rebill_secret_key_is_named(url, files):
    result = _run("stores", "processor", "shop", "--stripe", "--secret-key-file", files["test"], "--database", url,
                  secret="not-a-fernet-key")
    assert result.exit_code == 2 and "must be Fernet keys" in " ".join(result.output.split())


# The API and the logs never show a key --------------------------------------------------------

def test_no_answer_and_no_log_line_carries_the_keys(shop, caplog):
    caplog.set_level(logging.DEBUG)
    with shop.api.db.read() as conn:
        account = processors.stripe_account(conn, shop.api.store.id, Vault(SECRET_KEY))
    assert account is not None and account.secret_key == shop.secret_key
    assert shop.secret_key not in repr(account) and account.webhook_secret not in repr(account)
    charge_id, method, _ = shop.subscriber("4000000000000002", on=shop.api.clock.now().date())
    processed = shop.api.post(f"/charges/{charge_id}/process", json={})
    bodies = [json.dumps(method), processed.text]
    for version in ("2021-01", "2021-11"):
        bodies.append(shop.api.get("/shop" if version == "2021-01" else "/store", version=version).text)
    for text in bodies + [record.getMessage() for record in caplog.records]:
        assert shop.secret_key not in text and account.webhook_secret not in text
        assert SECRET_KEY not in text


# The router -----------------------------------------------------------------------------------

def _payment(api, key="k-1", amount=1000, cus=None, pm=None):
    return Payment(api.store.id, key, "charge 1", amount, "USD", cus, pm)


def test_every_store_is_on_the_sandbox_until_it_chooses(api, fake_stripe):
    router = ProcessorRouter(api.db, api.clock.now, Vault(SECRET_KEY))
    assert router.for_store(api.store.id) is router.sandbox and router.name_for(api.store.id) == "sandbox"
    use_stripe(api, fake_stripe)
    assert router.name_for(api.store.id) == "stripe" and router.stripe_for(api.store.id) is not None
    with api.db.write() as conn:
        processors.choose_sandbox(conn, api.store, api.clock.now())
    assert router.charge(_payment(api)).outcome == "captured"  # the sandbox's ledger, at once
    with api.db.read() as conn:
        assert conn.execute(select(sandbox_payments.c.idempotency_key).where(
            sandbox_payments.c.store_id == api.store.id)).scalars().all() == ["k-1"]


def test_a_changed_setting_is_used_from_the_next_payment_on(shop):
    router = shop.api.client.app.services.gateway
    cus, pm = shop.customer_with_card()
    first = router.for_store(shop.api.store.id)
    assert router.for_store(shop.api.store.id) is first  # kept while the settings stay
    assert router.charge(_payment(shop.api, "k-a", cus=cus, pm=pm)).outcome == "captured"
    use_stripe(shop.api, shop.fake, authorize_only=True)  # another key too: another account
    assert router.for_store(shop.api.store.id) is not first
    shop.client = stripe.StripeClient(router.stripe_account(shop.api.store.id).secret_key,
                                      base_addresses={"api": shop.fake.url})
    cus, pm = shop.customer_with_card()
    assert router.charge(_payment(shop.api, "k-b", cus=cus, pm=pm)).outcome == "authorized"


def test_a_store_whose_keys_cannot_be_read_waits_claimed_and_says_why(shop, database, clock, caplog):
    other = ProcessorRouter(database, clock.now, Vault(Fernet.generate_key().decode()))
    charge_id, _, _ = shop.subscriber(on=clock.now().date())
    assert billing.run_store(database, other, shop.api.store, clock.now).processed == 0
    assert "its Stripe keys cannot be read: the store's keys were encrypted with another REBILL_SECRET_KEY" in (
        caplog.text)
    clock.advance(timedelta(seconds=61))
    summary = billing.run_store(database, shop.api.client.app.services.gateway, shop.api.store, clock.now)
    assert summary.paid == 1  # the right key again: the same attempt is paid
    assert shop.api.get(f"/charges/{charge_id}").json()["charge"]["status"] == "success"


def test_the_sandbox_gateway_is_still_what_a_plain_app_uses(api):
    router = api.client.app.services.gateway
    assert isinstance(router, ProcessorRouter) and isinstance(router.sandbox, SandboxGateway)
    assert router.for_store(api.store.id) is router.sandbox
