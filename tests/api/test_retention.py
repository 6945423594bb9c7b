"""Retention of webhook deliveries and events (docs/webhooks.md, "Retention";
domain/webhook/retention.py, domain/event/retention.py), on both databases.

Deliveries are made the real way (a webhook, then customers whose `customer/created` fans
out), then aged with SQL. The purge is a whole database's: so that only a test's own rows are
old enough to count, each test's times (``at``) are a year before the previous test's and long
before the frozen clock's 2026, where the other tests' rows are."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import uvicorn
from sqlalchemy import func, insert, select, text, update
from starlette.testclient import TestClient
from typer.testing import CliRunner

from rebill.app import create_app
from rebill.cli import app as cli
from rebill.domain.event import retention as event_retention
from rebill.domain.unit import Unit
from rebill.domain.webhook import log, retention
from rebill.jobs import worker as jobs_worker
from rebill.models import events, webhook_attempts, webhook_deliveries, webhook_payloads
from rebill.settings import RateLimit, Settings
from tests.api.test_webhooks import ADDRESS, create
from tests.builders import make_customer, wait_for

d = webhook_deliveries
_years_back = itertools.count()


@dataclass(frozen=True)
class Times:
    now: datetime  # when the purge runs
    old: datetime  # past 30 days
    recent: datetime  # within 30 days


@pytest.fixture
def at() -> Times:
    now = datetime(2000, 3, 1, tzinfo=timezone.utc) - timedelta(days=365 * next(_years_back))
    return Times(now, now - timedelta(days=40), now - timedelta(days=10))


def deliveries(api: Any, count: int = 1, webhooks: int = 1) -> list[list[int]]:
    """``count`` events' deliveries, each a list of one delivery per webhook (sharing a payload)."""
    for n in range(webhooks):
        create(api, address=f"{ADDRESS}/{n}")
    made = []
    for _ in range(count):
        customer = make_customer(api)
        with api.db.read() as conn:
            made.append(list(conn.execute(select(d.c.id).where(d.c.store_id == api.store.id,
                                                               d.c.resource_id == customer.id)
                                          .order_by(d.c.id)).scalars()))
        assert len(made[-1]) == webhooks
    return made


def age(api: Any, ids: list[int], status: str, when: datetime, attempts: int = 0) -> None:
    """Gives deliveries a status and a last change at ``when``, with ``attempts`` logged attempts each."""
    with api.db.write() as conn:
        conn.execute(update(d).where(d.c.id.in_(ids)).values(status=status, updated_at=when))
        rows = [{"delivery_id": delivery_id, "store_id": api.store.id, "number": n, "replay": 0, "started_at": when,
                 "status_code": 500, "latency_ms": 3, "response": None, "error": None}
                for delivery_id in ids for n in range(1, attempts + 1)]
        if rows:
            conn.execute(insert(webhook_attempts), rows)


def kept(api: Any) -> dict[int, str]:
    """The store's deliveries: {id: status}."""
    with api.db.read() as conn:
        return dict(conn.execute(select(d.c.id, d.c.status).where(d.c.store_id == api.store.id)).all())


def payloads(api: Any) -> set[int]:
    with api.db.read() as conn:
        return set(conn.execute(select(webhook_payloads.c.id)
                                .where(webhook_payloads.c.store_id == api.store.id)).scalars())


def payload_of(api: Any, delivery_id: int) -> int:
    with api.db.read() as conn:
        return conn.execute(select(d.c.payload_id).where(d.c.id == delivery_id)).scalar_one()


def attempts_of(api: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(webhook_attempts)
                            .where(webhook_attempts.c.store_id == api.store.id)).scalar_one()


# Deliveries ----------------------------------------------------------------------------------

def test_finished_deliveries_past_their_days_go_with_their_attempts_and_payloads(api, at):
    [succeeded], [failed], [recent] = deliveries(api, 3)
    age(api, [succeeded], "succeeded", at.old, attempts=1)
    age(api, [failed], "failed", at.old, attempts=20)
    age(api, [recent], "failed", at.recent, attempts=2)
    gone_payloads = {payload_of(api, succeeded), payload_of(api, failed)}
    assert attempts_of(api) == 23

    assert retention.purge(api.db, at.now, 30) == 2

    assert kept(api) == {recent: "failed"}
    assert attempts_of(api) == 2  # the kept delivery's; the others' went with them (the cascade)
    assert payloads(api) == {payload_of(api, recent)}
    assert not gone_payloads & payloads(api)


def test_a_pending_delivery_is_never_deleted_however_old(api, at):
    [[pending]] = deliveries(api)
    age(api, [pending], "pending", at.now - timedelta(days=3650), attempts=3)
    assert retention.purge(api.db, at.now, 30) == 0
    assert kept(api) == {pending: "pending"}
    assert payloads(api) == {payload_of(api, pending)} and attempts_of(api) == 3


def test_a_payload_stays_while_a_kept_delivery_of_its_fan_out_names_it(api, at):
    [[gone, pending], [both, too]] = deliveries(api, 2, webhooks=2)
    shared = payload_of(api, gone)
    assert payload_of(api, pending) == shared  # one body per event for webhooks of one version
    age(api, [gone, both, too], "succeeded", at.old)

    assert retention.purge(api.db, at.now, 30) == 3

    assert kept(api) == {pending: "pending"}
    assert payloads(api) == {shared}  # the other event's payload went with its last delivery


def test_zero_days_keeps_every_delivery(api, at):
    [[delivery]] = deliveries(api)
    age(api, [delivery], "failed", at.old, attempts=1)
    assert retention.purge(api.db, at.now, 0) == 0
    assert kept(api) == {delivery: "failed"} and attempts_of(api) == 1
    assert retention.purge(api.db, at.now, 30) == 1  # it was old enough for a retention


def test_more_days_than_the_calendar_holds_keeps_everything_without_failing(api, at):
    old, _ = aged_events(api, at.old)  # before the webhook: no deliveries of their own
    [[delivery]] = deliveries(api)
    age(api, [delivery], "failed", at.old)
    assert retention.purge(api.db, at.now, 1e9) == 0 and retention.purge(api.db, at.now, 1e6) == 0
    assert event_retention.purge(api.db, at.now, 1e9) == 0 and event_retention.purge(api.db, at.now, 1e6) == 0
    assert kept(api) == {delivery: "failed"} and old <= events_of_store(api)
    assert retention.purge(api.db, at.now, 30) == 1


def test_a_purge_larger_than_a_batch_goes_on_to_the_end(api, at, monkeypatch):
    monkeypatch.setattr(retention, "PURGE_BATCH", 2)
    made = [ids[0] for ids in deliveries(api, 5)]
    age(api, made, "succeeded", at.old, attempts=1)
    assert retention.purge(api.db, at.now, 30) == 5
    assert kept(api) == {} and payloads(api) == set() and attempts_of(api) == 0


def test_a_replayed_delivery_is_pending_again_and_stays(api, at):
    [[replayed], [purged]] = deliveries(api, 2)
    age(api, [replayed, purged], "failed", at.old)
    assert api.post(f"/webhook_deliveries/{replayed}/replay").status_code == 202
    assert retention.purge(api.db, at.now, 30) == 1
    assert kept(api) == {replayed: "pending"}
    # A purged delivery is no more: its replay and its read answer 404.
    assert api.post(f"/webhook_deliveries/{purged}/replay").status_code == 404
    assert api.get(f"/webhook_deliveries/{purged}").status_code == 404


def test_a_replay_committed_while_the_purge_waits_for_its_row_keeps_the_delivery(api, at):
    """PostgreSQL (READ COMMITTED): the purge's look still sees the delivery failed, its DELETE
    waits for the replay's lock, then checks its own conditions again on the replayed row and
    leaves it, with its payload. (SQLite has one writer: the two cannot overlap.)"""
    if api.db.dialect != "postgresql":
        pytest.skip("SQLite writes one at a time")
    [[replayed, sibling], [other, waiting]] = deliveries(api, 2, webhooks=2)
    age(api, [replayed, sibling, other], "failed", at.old, attempts=1)
    done: list[int] = []
    with api.db.write() as conn:
        log.replay(Unit(conn, api.store, api.clock.now()), replayed)
        purge = threading.Thread(target=lambda: done.append(retention.purge(api.db, at.now, 30)))
        purge.start()
        assert _waiting_on_a_lock(api), "the purge never waited for the replay's row"
    purge.join(10)
    assert done == [2]  # the sibling and the other event's first delivery
    assert kept(api) == {replayed: "pending", waiting: "pending"}
    assert payloads(api) == {payload_of(api, replayed), payload_of(api, waiting)}


def _waiting_on_a_lock(api: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with api.db.read() as conn:
            if conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                 "AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM webhook_deliveries%'")
                            ).scalar():
                return True
        time.sleep(0.05)
    return False


# Events ----------------------------------------------------------------------------------------

def events_of_store(api: Any) -> set[int]:
    with api.db.read() as conn:
        return set(conn.execute(select(events.c.id).where(events.c.store_id == api.store.id)).scalars())


def aged_events(api: Any, old_at: datetime, recent_at: datetime | None = None) -> tuple[set[int], set[int]]:
    """Two customers' events, one made at ``old_at`` and one at ``recent_at`` (by default now):
    (old ids, recent ids)."""
    old, recent = make_customer(api), make_customer(api)
    with api.db.write() as conn:
        for customer, when in ((old, old_at), (recent, recent_at)):
            if when is not None:
                conn.execute(update(events).where(*of_customer(api, customer)).values(created_at=when))
    with api.db.read() as conn:
        def ids(customer: Any) -> set[int]:
            return set(conn.execute(select(events.c.id).where(*of_customer(api, customer))).scalars())
        return ids(old), ids(recent)


def of_customer(api: Any, customer: Any) -> tuple[Any, ...]:
    return events.c.store_id == api.store.id, events.c.resource == "customer", events.c.resource_id == customer.id


def test_events_past_their_days_go_when_a_retention_is_set(api, at):
    create(api)
    old, recent = aged_events(api, at.old, at.recent)  # each customer/created with its pending delivery
    assert len(old) == len(recent) == 1
    before, bodies = kept(api), payloads(api)
    assert len(before) == 2 and set(before.values()) == {"pending"}

    assert event_retention.purge(api.db, at.now, 30) == len(old)

    assert not old & events_of_store(api) and recent <= events_of_store(api)
    # Deliveries name their event without a foreign key: the old event's still goes out.
    assert kept(api) == before and payloads(api) == bodies


def test_zero_days_keeps_every_event(api, at):
    old, recent = aged_events(api, at.old, at.recent)
    assert event_retention.purge(api.db, at.now, 0) == 0
    assert old | recent <= events_of_store(api)
    assert event_retention.purge(api.db, at.now, 30) == len(old)  # they were old enough for a retention


def test_an_event_purge_larger_than_a_batch_goes_on_to_the_end(api, at, monkeypatch):
    monkeypatch.setattr(event_retention, "PURGE_BATCH", 2)
    made = [make_customer(api) for _ in range(5)]
    with api.db.write() as conn:
        for customer in made:
            conn.execute(update(events).where(*of_customer(api, customer)).values(created_at=at.old))
    assert event_retention.purge(api.db, at.now, 30) == 5
    assert events_of_store(api) == set()


# The job ---------------------------------------------------------------------------------------

def test_the_server_purges_old_deliveries_and_events_by_itself(api, at):
    old, recent = aged_events(api, at.old)  # before the webhook: no deliveries of their own
    [[finished], [pending]] = deliveries(api, 2)
    age(api, [finished], "succeeded", at.old)
    age(api, [pending], "pending", at.old)
    # The frozen clock is the server's real time here (2026): ten years reach back to 2016 only.
    settings = Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                        regenerate_every=0, bill_every=0, deliver_webhooks=False, batch_every=0, purge_every=0.1,
                        delivery_retention_days=3650, event_retention_days=3650)
    with TestClient(create_app(settings, db=api.db, clock=api.clock)):
        assert wait_for(lambda: kept(api) == {pending: "pending"} and not old & events_of_store(api))
    assert recent <= events_of_store(api)
    assert payloads(api) == {payload_of(api, pending)}


def test_the_server_keeps_events_by_default_and_deliveries_30_days(api, at):
    old, _ = aged_events(api, at.old)  # before the webhook: no deliveries of their own
    [[finished], [recent]] = deliveries(api, 2)
    real_now = api.clock.now()
    age(api, [finished], "failed", real_now - timedelta(days=31))
    age(api, [recent], "failed", real_now - timedelta(days=29))
    settings = Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                        regenerate_every=0, bill_every=0, deliver_webhooks=False, batch_every=0, purge_every=0.1)
    with TestClient(create_app(settings, db=api.db, clock=api.clock)):
        assert wait_for(lambda: kept(api) == {recent: "failed"})
    # The runs that purged the delivery (stopping waits for them) left the year 2000's events.
    assert old <= events_of_store(api)


# Settings ----------------------------------------------------------------------------------------

def test_the_retention_settings_are_read_from_the_environment():
    assert (Settings.from_env({}).delivery_retention_days, Settings.from_env({}).event_retention_days) == (30.0, 0.0)
    read = Settings.from_env({"REBILL_DELIVERY_RETENTION_DAYS": "7.5", "REBILL_EVENT_RETENTION_DAYS": " 365 "})
    assert (read.delivery_retention_days, read.event_retention_days) == (7.5, 365.0)
    assert Settings.from_env({"REBILL_DELIVERY_RETENTION_DAYS": "0"}).delivery_retention_days == 0.0


@pytest.mark.parametrize("name", ["REBILL_DELIVERY_RETENTION_DAYS", "REBILL_EVENT_RETENTION_DAYS"])
@pytest.mark.parametrize("value", ["-1", "thirty", "nan", "inf", "30d"])
def test_a_negative_or_non_number_retention_is_refused(name, value):
    with pytest.raises(ValueError, match=name):
        Settings.from_env({name: value})


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_rebill_serve_and_worker_refuse_a_bad_retention_before_starting(command, tmp_path, monkeypatch):
    async def ran(*args: Any, **kw: Any) -> int:
        return 0
    # Should the value pass, the command ends at once instead of serving.
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kw: None)
    monkeypatch.setattr(jobs_worker, "run", ran)
    monkeypatch.setenv("REBILL_EVENT_RETENTION_DAYS", "-7")
    result = CliRunner().invoke(cli, [command, "--database", f"sqlite:///{tmp_path / 'never.db'}"])
    assert result.exit_code == 2 and "REBILL_EVENT_RETENTION_DAYS" in result.output
    assert not (tmp_path / "never.db").exists()
