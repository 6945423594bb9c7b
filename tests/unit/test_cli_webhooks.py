"""The webhook side of the command line (issue 14): a store's client secret and its rotation
(with the 24 hours in which both secrets sign), its upcoming-notice days, the clock's hours,
`events tail`, and the delivery log (`webhooks list | deliveries | replay | enable`), against
a temporary SQLite database in which each test makes its own stores."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any, NamedTuple

import pytest
from sqlalchemy import insert, select, update
from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.domain.store import repository
from rebill.domain.store.service import new_client_secret
from rebill.domain.webhook import signing
from rebill.models import events, stores, tokens, webhook_deliveries, webhooks

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


def test_rotate_on_a_store_whose_clock_is_ahead_counts_the_24_hours_in_real_time(store_db):
    """Found by an audit: the rotation was stamped with the store's clock, 112 days ahead, so the
    old (perhaps leaked) secret went on signing for months of real time."""
    _created(store_db, "rotating-ahead")
    db = Database.from_url(store_db)
    with db.write() as conn:
        conn.execute(update(stores).where(stores.c.name == "rotating-ahead")
                     .values(clock_offset_seconds=112 * 86400))
    db.dispose()
    before = SystemClock().now()
    assert run("stores", "secret", "rotating-ahead", "--rotate", "--database", store_db).exit_code == 0
    store = _store(store_db, "rotating-ahead")
    assert before <= store.client_secret_rotated_at <= SystemClock().now()
    assert signing.secrets_signing(store, before + timedelta(hours=25)) == [store.client_secret]


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


# A store with a webhook, customers and their deliveries ------------------------------------------

HOOK = "http://127.0.0.1:9/hooks"


class Seeded(NamedTuple):
    db: Database
    store: Any
    webhook_id: int
    token_name: str
    customer_ids: list[int]


def _seeded(url: str, name: str, customers: int = 2) -> Seeded:
    """A sandbox store with a `customer/created` webhook and ``customers`` customers, made
    through the services by a token (origin api), so each customer has a pending delivery."""
    from rebill.domain.customer import service as customer_service
    from rebill.domain.customer.model import CustomerCreate
    from rebill.domain.store import service as store_service
    from rebill.domain.unit import Unit
    from rebill.domain.webhook import service as webhook_service
    from rebill.domain.webhook.model import WebhookCreate
    _created(url, name)
    db = Database.from_url(url)
    token_name = f"{name}-token"
    with db.write() as conn:
        store = repository.by_name(conn, name)
        store_service.create_token(conn, SystemClock().now(), store=store, name=token_name)
        token_id = conn.execute(select(tokens.c.id).where(tokens.c.name == token_name)).scalar()
        with Unit(conn, store, SystemClock().now(), origin="api", token_id=token_id) as unit:
            hook = webhook_service.create(unit, WebhookCreate(address=HOOK, topic="customer/created"), "2021-11")
            made = [customer_service.create(unit, CustomerCreate(email=f"{name}{n}@example.com", first_name="T",
                                                                 last_name="L")).id for n in range(customers)]
    return Seeded(db, store, hook.id, token_name, made)


def _deliveries(seeded: Seeded) -> list[Any]:
    with seeded.db.read() as conn:
        return conn.execute(select(webhook_deliveries).where(webhook_deliveries.c.webhook_id == seeded.webhook_id)
                            .order_by(webhook_deliveries.c.id)).all()


def _attempt(seeded: Seeded, delivery_id: int, status: int | None, response: str | None = None,
             error: str | None = None, latency_ms: int = 12) -> None:
    """One attempt of the delivery, recorded as the delivery job records it."""
    from rebill.domain.webhook import delivery
    now = SystemClock().now()
    with seeded.db.write() as conn:
        [claimed] = delivery.claim(conn, [delivery_id], "test", now, timedelta(seconds=30))
        delivery.record(conn, [(claimed, delivery.Outcome(now, status, latency_ms, response, error))], "test", now,
                        SystemClock().now)


def _give_up(seeded: Seeded, delivery_id: int) -> None:
    """The delivery failed for good (as after its 20th attempt, without the 20 attempts)."""
    with seeded.db.write() as conn:
        conn.execute(update(webhook_deliveries).where(webhook_deliveries.c.id == delivery_id)
                     .values(status="failed", next_attempt_at=None))


def _disable(seeded: Seeded) -> None:
    with seeded.db.write() as conn:
        conn.execute(update(webhooks).where(webhooks.c.id == seeded.webhook_id)
                     .values(disabled_at=SystemClock().now()))


# events tail -------------------------------------------------------------------------------------------


def test_events_tail_from_the_start_prints_each_event_on_a_line(store_db):
    seeded = _seeded(store_db, "tailing")
    result = run("events", "tail", "--store", "tailing", "--from-start", "--once", "--database", store_db)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[3] for line in lines] == ["webhook/created", "customer/created", "customer/created"]
    first = seeded.customer_ids[0]
    [created] = [line for line in lines if f"id={first} " in line and "customer/created" in line]
    assert re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}  tailing  customer/created  ", created)
    assert f"customer={first}" in created and "origin=api" in created and f"token={seeded.token_name}" in created
    seeded.db.dispose()


def test_events_tail_filters_by_topic_glob_and_store(store_db):
    mine = _seeded(store_db, "globbing")
    other = _seeded(store_db, "elsewhere")
    result = run("events", "tail", "--store", "globbing", "--topic", "customer/*", "--from-start", "--once",
                 "--database", store_db)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all("globbing  customer/created" in line for line in lines)
    webhooks_only = run("events", "tail", "--topic", "webhook/*", "--from-start", "--once", "--database", store_db)
    stores = {line.split()[2] for line in webhooks_only.stdout.splitlines()}
    assert {"globbing", "elsewhere"} <= stores, "every store without --store"
    assert all(line.split()[3] == "webhook/created" for line in webhooks_only.stdout.splitlines())
    limited = run("events", "tail", "--from-start", "--limit", "1", "--database", store_db)
    assert limited.exit_code == 0 and len(limited.stdout.splitlines()) == 1
    assert run("events", "tail", "--store", "nobody", "--once", "--database", store_db).exit_code == 2
    mine.db.dispose()
    other.db.dispose()


def test_events_tail_starts_after_the_newest_event(store_db):
    seeded = _seeded(store_db, "latecomer")
    result = run("events", "tail", "--store", "latecomer", "--once", "--database", store_db)
    assert (result.exit_code, result.stdout) == (0, "")
    seeded.db.dispose()


def test_events_tail_ends_on_ctrl_c_with_exit_0(store_db, monkeypatch):
    from functools import partial

    from rebill.domain.event import tail

    def ctrl_c(seconds: float) -> None:  # pressed during the first pause between looks
        raise KeyboardInterrupt

    seeded = _seeded(store_db, "interrupted", customers=0)
    monkeypatch.setattr(tail, "follow", partial(tail.follow, sleep=ctrl_c))
    result = run("events", "tail", "--store", "interrupted", "--from-start", "--database", store_db)
    assert result.exit_code == 0, result.output
    assert "webhook/created" in result.stdout
    seeded.db.dispose()


def test_a_follower_comes_back_for_an_id_committed_after_a_higher_one(store_db):
    """On PostgreSQL id 41 may commit after 42: the tail reads 42, then 41 when it comes."""
    from rebill.domain.event import tail
    seeded = _seeded(store_db, "holes", customers=0)
    moments = iter([0.0, 1.0, 2.0, 100.0])
    with seeded.db.read() as conn:
        start = tail.newest_id(conn)
    follower = tail.Follower(start, store_id=seeded.store.id, monotonic=lambda: next(moments))

    def event(event_id: int) -> None:
        with seeded.db.write() as conn:
            conn.execute(insert(events).values(id=event_id, store_id=seeded.store.id, topic="customer/updated",
                                               resource="customer", resource_id=event_id,
                                               created_at=SystemClock().now()))

    def look() -> list[int]:
        with seeded.db.read() as conn:
            return [e.id for e in follower.poll(conn)]

    event(start + 2)
    assert look() == [start + 2]
    event(start + 1)
    assert look() == [start + 1], "the hole is asked again"
    event(start + 4)
    assert look() == [start + 4]
    assert look() == [], "after GRACE seconds the hole at start + 3 is given up"
    event(start + 3)
    assert follower._gaps == {}
    seeded.db.dispose()


# webhooks list | deliveries ------------------------------------------------------------------------------


def test_webhooks_list_shows_each_webhook_and_whether_it_is_enabled(store_db):
    seeded = _seeded(store_db, "listing", customers=0)
    result = run("webhooks", "list", "--store", "listing", "--database", store_db)
    assert result.exit_code == 0, result.output
    assert "customer/created" in result.stdout and "2021-11" in result.stdout and "enabled" in result.stdout
    assert str(seeded.webhook_id) in result.stdout and "127.0.0.1" in result.stdout
    _disable(seeded)
    disabled = run("webhooks", "list", "--database", store_db)
    [row] = [line for line in disabled.stdout.splitlines() if "listing" in line]
    assert "disabled" in row, "every store's webhooks, with the store"
    assert run("webhooks", "list", "--store", "nobody", "--database", store_db).exit_code == 2
    seeded.db.dispose()


def _rows(table: str) -> dict[int, str]:
    """The rows of a printed table by the id in their first column (one line each off a terminal)."""
    cells = [line.split("│") for line in table.splitlines() if line.startswith("│")]
    return {int(cell[1]): "│".join(cell) for cell in cells if cell[1].strip().isdigit()}


def test_webhooks_deliveries_shows_the_log_with_the_last_attempt(store_db):
    seeded = _seeded(store_db, "logging", customers=3)
    tried, failing, waiting = (row.id for row in _deliveries(seeded))
    _attempt(seeded, tried, 200, "ok")
    _attempt(seeded, failing, None, error="connection refused", latency_ms=3)
    _attempt(seeded, waiting, 500, "<html>\n oops \n</html>", latency_ms=250)
    result = run("webhooks", "deliveries", "--store", "logging", "--database", store_db)
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert set(rows) == {tried, failing, waiting}
    assert "succeeded" in rows[tried] and "200" in rows[tried]
    assert "pending" in rows[waiting] and "500" in rows[waiting] and "250 ms" in rows[waiting]
    assert "<html> oops </html>" in rows[waiting], "the answer's first bytes, on one line"
    assert "connection" in rows[failing] and "3 ms" in rows[failing]
    assert list(rows) == sorted(rows, reverse=True), "newest first"

    only_failing = run("webhooks", "deliveries", "--store", "logging", "--failed", "--database", store_db)
    assert set(_rows(only_failing.stdout)) == {failing, waiting}
    limited = run("webhooks", "deliveries", "--store", "logging", "--limit", "1", "--database", store_db)
    assert set(_rows(limited.stdout)) == {waiting}
    none = run("webhooks", "deliveries", "--webhook", "987654", "--database", store_db)
    assert none.exit_code == 0 and _rows(none.stdout) == {}
    assert run("webhooks", "deliveries", "--store", "nobody", "--database", store_db).exit_code == 2
    seeded.db.dispose()


# webhooks replay | enable -------------------------------------------------------------------------------


def test_webhooks_replay_sends_a_failed_delivery_again_with_the_same_id(store_db):
    seeded = _seeded(store_db, "replaying", customers=1)
    [delivery] = _deliveries(seeded)
    pending = run("webhooks", "replay", str(delivery.id), "--database", store_db)
    assert pending.exit_code == 2 and "pending" in pending.output
    _attempt(seeded, delivery.id, 500)
    _give_up(seeded, delivery.id)
    result = run("webhooks", "replay", str(delivery.id), "--database", store_db)
    assert result.exit_code == 0, result.output
    assert f"msg_{delivery.id}" in result.stdout
    [again] = _deliveries(seeded)
    assert (again.status, again.attempts, again.payload_id) == ("pending", 0, delivery.payload_id)
    assert run("webhooks", "replay", "987654", "--database", store_db).exit_code == 2
    both = run("webhooks", "replay", str(delivery.id), "--failed-since", "2020-01-01", "--database", store_db)
    assert both.exit_code == 2
    assert run("webhooks", "replay", "--database", store_db).exit_code == 2
    seeded.db.dispose()


def test_webhooks_replay_failed_since_a_time(store_db):
    seeded = _seeded(store_db, "refailing", customers=2)
    first, second = (row.id for row in _deliveries(seeded))
    for delivery_id in (first, second):
        _attempt(seeded, delivery_id, 500)
        _give_up(seeded, delivery_id)
    future = run("webhooks", "replay", "--failed-since", "2999-01-01", "--store", "refailing",
                 "--database", store_db)
    assert future.exit_code == 0 and future.stdout.startswith("0 failed deliveries")
    assert {row.status for row in _deliveries(seeded)} == {"failed"}
    since = (SystemClock().now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    result = run("webhooks", "replay", "--failed-since", since, "--webhook", str(seeded.webhook_id),
                 "--database", store_db)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("2 failed deliveries")
    assert {(row.status, row.attempts) for row in _deliveries(seeded)} == {("pending", 0)}
    assert run("webhooks", "replay", "--failed-since", "yesterday", "--database", store_db).exit_code == 2
    _created(store_db, "refailing-other")
    elsewhere = run("webhooks", "replay", "--failed-since", since, "--webhook", str(seeded.webhook_id), "--store",
                    "refailing-other", "--database", store_db)
    assert elsewhere.exit_code == 2 and "webhook" in elsewhere.output
    seeded.db.dispose()


def test_webhooks_enable_lets_a_disabled_webhook_receive_and_replay_again(store_db):
    seeded = _seeded(store_db, "enabling", customers=1)
    [delivery] = _deliveries(seeded)
    _attempt(seeded, delivery.id, 500)
    _give_up(seeded, delivery.id)
    _disable(seeded)
    refused = run("webhooks", "replay", str(delivery.id), "--database", store_db)
    assert refused.exit_code == 2 and "disabled" in refused.output
    result = run("webhooks", "enable", str(seeded.webhook_id), "--database", store_db)
    assert result.exit_code == 0, result.output
    with seeded.db.read() as conn:
        assert conn.execute(select(webhooks.c.disabled_at).where(webhooks.c.id == seeded.webhook_id)).scalar() is None
        origins = conn.execute(select(events.c.origin).where(events.c.topic == "webhook/enabled",
                                                             events.c.resource_id == seeded.webhook_id)).scalars()
        assert list(origins) == ["cli"], "a change the command line makes is the command line's"
    again = run("webhooks", "enable", str(seeded.webhook_id), "--database", store_db)
    assert again.exit_code == 0 and "already" in again.output
    assert run("webhooks", "replay", str(delivery.id), "--database", store_db).exit_code == 0
    assert run("webhooks", "enable", "987654", "--database", store_db).exit_code == 2
    seeded.db.dispose()


def test_clock_advance_sends_the_deliveries_that_fall_due_on_the_way(store_db):
    """As the API's advance does: a retry schedule can be watched hour by hour."""
    seeded = _seeded(store_db, "watching", customers=1)  # its receiver refuses connections
    moved = run("clock", "advance", "--store", "watching", "--hours", "1", "--database", store_db)
    assert moved.exit_code == 0, moved.output
    [first] = _deliveries(seeded)
    assert (first.status, first.attempts) == ("pending", 1) and first.next_attempt_at is not None
    until_retry = first.next_attempt_at - first.last_attempt_at
    hours = -(-until_retry // timedelta(hours=1))
    assert run("clock", "advance", "--store", "watching", "--hours", str(hours), "--database", store_db).exit_code == 0
    [second] = _deliveries(seeded)
    assert second.attempts == 2, "the retry went out when the clock reached it"
    seeded.db.dispose()


def test_webhooks_replay_with_nothing_to_replay_says_what_to_give(store_db):
    """Found by an audit: it said "not both" when neither was given."""
    result = run("webhooks", "replay", "--database", store_db)
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "give a DELIVERY_ID or --failed-since" in said and "not both" not in said
