"""The webhook side of the command line (issue 14): a store's client secret and its rotation
(with the 24 hours in which both secrets sign), its upcoming-notice days, the clock's hours,
`events tail`, and the delivery log (`webhooks list | deliveries | replay | enable`), against
a temporary SQLite database in which each test makes its own stores."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from rebill.clock import SystemClock
from rebill.domain.store.service import new_client_secret
from rebill.domain.webhook import signing

from .test_cli import _store, run


@pytest.fixture(scope="module")
def store_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli_webhooks') / 'cli.db'}"
    assert run("migrate", "--database", url).exit_code == 0
    return url


def _created(url: str, name: str, *options: str) -> None:
    result = run("stores", "create", name, "--ships-to", "US", *options, "--database", url)
    assert result.exit_code == 0, result.output


# The client secret ---------------------------------------------------------------------------


def test_stores_secret_prints_the_secret_alone(store_db):
    _created(store_db, "secretive")
    result = run("stores", "secret", "secretive", "--database", store_db)
    assert result.exit_code == 0, result.output
    assert result.stdout == _store(store_db, "secretive").client_secret + "\n"
    assert result.stdout.startswith("whsec_")


def test_stores_secret_refuses_an_unknown_store(store_db):
    assert run("stores", "secret", "nobody", "--database", store_db).exit_code == 2
    assert run("stores", "secret", "nobody", "--rotate", "--database", store_db).exit_code == 2


def _verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        StandardWebhook(secret).verify(body, headers)
    except WebhookVerificationError:
        return False
    return True


def test_rotate_keeps_the_old_secret_signing_for_24_hours(store_db):
    _created(store_db, "rotating")
    old = _store(store_db, "rotating").client_secret
    before = SystemClock().now()
    result = run("stores", "secret", "rotating", "--rotate", "--database", store_db)
    assert result.exit_code == 0, result.output
    store = _store(store_db, "rotating")
    new = result.stdout.strip()
    assert result.stdout == new + "\n" and new.startswith("whsec_")
    assert (store.client_secret, store.previous_client_secret) == (new, old) and new != old
    assert before <= store.client_secret_rotated_at <= SystemClock().now()
    rotated = store.client_secret_rotated_at
    assert signing.secrets_signing(store, rotated + timedelta(hours=23, minutes=59)) == [new, old]
    assert signing.secrets_signing(store, rotated + timedelta(hours=24)) == [new]

    # A receiver verifies a delivery signed within the 24 hours with either secret, and one
    # signed after them with the new secret only. Signed now: a receiver checks the timestamp.
    body = json.dumps({"customer": {"id": 1}}).encode()
    within = signing.headers(signing.secrets_signing(store, rotated + timedelta(hours=1)), "msg_1", body,
                             "customer/created", SystemClock().now())
    assert _verifies(new, body, within) and _verifies(old, body, within)
    assert not _verifies(new_client_secret(), body, within)
    after = signing.headers(signing.secrets_signing(store, rotated + timedelta(hours=25)), "msg_1", body,
                            "customer/created", SystemClock().now())
    assert _verifies(new, body, after) and not _verifies(old, body, after)
    assert after["X-Service-Hmac-Sha256"] == within["X-Service-Hmac-Sha256"] == signing.sha256_header(new, body)


# Upcoming notices ------------------------------------------------------------------------------


def test_stores_notices_prints_and_sets_the_days(store_db):
    _created(store_db, "notices")
    shown = run("stores", "notices", "notices", "--database", store_db)
    assert (shown.exit_code, shown.stdout) == (0, "3\n"), "the default"
    changed = run("stores", "notices", "notices", "--days", "7", "--database", store_db)
    assert (changed.exit_code, changed.stdout) == (0, "7\n")
    assert _store(store_db, "notices").upcoming_notice_days == 7
    assert run("stores", "notices", "notices", "--days", "0", "--database", store_db).stdout == "0\n"


@pytest.mark.parametrize("days", ["-1", "61", "two"])
def test_stores_notices_refuses_days_out_of_range(store_db, days):
    _created(store_db, f"notices{days}")
    result = run("stores", "notices", f"notices{days}", "--days", days, "--database", store_db)
    assert result.exit_code == 2
    if days != "two":  # typer refuses a non-number itself
        assert "upcoming_notice_days" in result.output and "0 to 60" in result.output
    assert _store(store_db, f"notices{days}").upcoming_notice_days == 3
    assert run("stores", "notices", "nobody", "--database", store_db).exit_code == 2


# The test clock by the hour ------------------------------------------------------------------------


def test_clock_advance_moves_a_sandbox_store_by_hours(store_db):
    _created(store_db, "hourly")
    moved = run("clock", "advance", "--store", "hourly", "--hours", "5", "--database", store_db)
    assert moved.exit_code == 0, moved.output
    assert 5 * 3_600 - 60 <= _store(store_db, "hourly").clock_offset_seconds <= 5 * 3_600 + 60
    both = run("clock", "advance", "--store", "hourly", "--hours", "1", "--days", "1", "--database", store_db)
    assert both.exit_code == 2 and "hours" in both.output and "days" in both.output
    assert run("clock", "advance", "--store", "hourly", "--hours", "0", "--database", store_db).exit_code == 2
    assert 5 * 3_600 - 60 <= _store(store_db, "hourly").clock_offset_seconds <= 5 * 3_600 + 60, "refusals move nothing"
