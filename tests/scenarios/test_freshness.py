"""Issue 14, "the test clock, seen at once": a store or token changed by another process (the
real command line, `python -m rebill.cli`, while the app serves) is seen by the app's very
next request, on SQLite and on PostgreSQL.

The app under test caches tokens (and their stores) for an hour, so only the revision that
triggers bump on `stores` and `tokens` (http/freshness.py) can explain what it sees;
`test_without_the_revision_check_the_hour_long_cache_would_answer_stale` shows the same
steps answering stale with the check switched off.

The command line runs on the real clock and the app on the frozen test clock (months apart):
an advance stores an offset (`clock_offset_seconds`), which means the same on both, and the
billing runs the command line makes on its way only ever meet what the tests leave due.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import delete, select, text, update
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.db.engine import Database
from rebill.domain.store import repository as store_repo
from rebill.domain.store import service as store_service
from rebill.http.auth import TokenResolver
from rebill.http.freshness import Freshness
from rebill.models import revisions, stores, tokens
from rebill.settings import RateLimit, Settings
from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription

MONTHLY = {"charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}


def _app(api: Any) -> Any:
    settings = Settings(database_url="unused", token_cache_seconds=3600, regenerate_every=0, bill_every=0,
                        purge_every=0, deliver_webhooks=False, batch_every=0, rate_limit=RateLimit(enabled=False))
    return create_app(settings, db=api.db, clock=api.clock)


@pytest.fixture
def served(api: Any) -> Iterator[Any]:
    """``api`` speaking to an app of its own whose token cache lasts an hour."""
    app = _app(api)
    with TestClient(app, base_url="http://rebill.test") as client:
        yield dataclasses.replace(api, client=client)
    asyncio.run(app.tokens.freshness.close())


def _url(api: Any) -> str:
    return api.db.engine.url.render_as_string(hide_password=False)


def cli(api: Any, *args: str) -> str:
    """The real command line in a process of its own on the test database; its stdout."""
    env = {key: value for key, value in os.environ.items() if key != "REBILL_FAILPOINT"}
    done = subprocess.run([sys.executable, "-m", "rebill.cli", *args, "--database", _url(api)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _token_id(api: Any, raw: str) -> int:
    with api.db.read() as conn:
        found = store_repo.token_by_raw(conn, raw)
    assert found is not None
    return found[0].id


def _subscription(api: Any, address_id: int, days_ahead: int) -> Any:
    """POST /subscriptions whose first charge falls ``days_ahead`` days after the frozen today."""
    return api.post("/subscriptions", json={
        "address_id": address_id, "product_title": "Coffee", "variant_title": "1 lb", "price": "12.50",
        "quantity": 1, "next_charge_scheduled_at": (api.clock.now().date() + timedelta(days=days_ahead)).isoformat(),
        **MONTHLY})


def _processed(api: Any, token: str) -> dict[str, Any]:
    """A charge paid (or, with ``authorize_only``, authorized) now through the API."""
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    address = make_address(api, customer)
    make_subscription(api, address, price=Decimal("12.50"), expire_after_specific_number_of_charges=1)
    [charge] = charges_of(api, address.id)
    reply = api.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["charge"])


# 1. The test clock


def test_a_clock_advance_on_the_command_line_dates_the_next_subscription_in_the_stores_past(served):
    address = make_address(served)
    assert served.get("/store").status_code == 200  # the token and the store are cached
    moved = cli(served, "clock", "advance", "--store", served.store.name, "--days", "8")
    assert f"{served.store.name}: now " in moved
    refused = _subscription(served, address.id, 3)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == {"next_charge_scheduled_at": ["must not be in the past"]}
    assert _subscription(served, address.id, 9).status_code == 201


def test_a_capture_past_seven_days_and_a_charge_past_ninety_are_refused_right_after_advances(served):
    tier_a = served.other_store(plan_tier="premium_a")
    paid = _processed(tier_a, "pm_ok")
    pending = _processed(tier_a, "authorize_only")
    assert pending["status"].lower() == "pending"
    cli(tier_a, "clock", "advance", "--store", tier_a.store.name, "--days", "8")
    refused = tier_a.post(f"/charges/{pending['id']}/capture_payment", json={})
    assert refused.status_code == 422, refused.text
    assert "7 days" in refused.json()["errors"]["status"][0]
    assert tier_a.get(f"/charges/{pending['id']}").json()["charge"]["status"].lower() == "pending"
    assert tier_a.get(f"/charges/{paid['id']}").status_code == 200
    cli(tier_a, "clock", "advance", "--store", tier_a.store.name, "--days", "83")  # 91 days after it was paid
    assert tier_a.get(f"/charges/{paid['id']}").status_code == 404


# 2. Tokens


def test_a_token_revoked_on_the_command_line_answers_401_at_the_next_request(served):
    raw = served.token_with("read_store")
    assert served.get("/", token=raw).status_code == 200
    listed = cli(served, "tokens", "list", "--store", served.store.name)
    token_id = _token_id(served, raw)
    assert str(token_id) in listed
    cli(served, "tokens", "revoke", str(token_id))
    assert served.get("/", token=raw).status_code == 401  # no sleep
    assert served.get("/").status_code == 200  # the store's other token still works


# 3. The store


def test_a_store_changed_on_the_command_line_is_seen_at_the_next_request(served):
    before = served.get("/store").json()["store"]["updated_at"]
    cli(served, "stores", "rates", served.store.name, "--tax-rate", "US:0.1")
    after = served.get("/store").json()["store"]["updated_at"]
    assert after != before
    with served.db.read() as conn:
        stored = store_repo.get(conn, served.store.id)
    assert stored is not None and stored.tax_rates[0]["rate"] == "0.1"
    # The notice days (which the API does not show): the store the next request holds has them.
    resolver = served.client.app.tokens
    assert resolver.cached(served.token)[1][1].upcoming_notice_days == 3
    cli(served, "stores", "notices", served.store.name, "--days", "5")
    assert served.get("/").status_code == 200
    assert resolver.cached(served.token)[1][1].upcoming_notice_days == 5


def test_without_the_revision_check_the_hour_long_cache_would_answer_stale(served, monkeypatch):
    """The control: the same steps, with the edge's check switched off."""
    async def never() -> None:
        return None
    monkeypatch.setattr(served.client.app.tokens, "check", never)
    monkeypatch.setattr(served.client.app.tokens, "check_sqlite", lambda: None)
    address = make_address(served)
    raw = served.token_with("read_store")
    assert served.get("/", token=raw).status_code == 200
    assert served.get("/store").status_code == 200
    cli(served, "tokens", "revoke", str(_token_id(served, raw)))
    cli(served, "clock", "advance", "--store", served.store.name, "--days", "8")
    assert served.get("/", token=raw).status_code == 200
    assert _subscription(served, address.id, 3).status_code == 201


# 4. The cost on SQLite: a read-only load never reads the revision


def test_on_sqlite_a_read_only_load_asks_data_version_and_never_the_revision(served):
    if not served.db.inline_reads:
        pytest.skip("SQLite's data_version")
    assert served.get("/store").status_code == 200
    # The look asks on the loop writer's connection once there is one, else the read one.
    writer = served.db.loop_writer.driver_connection if served.db.loop_writer else None
    raws = [r for r in (served.db.read_on_loop().conn.connection.dbapi_connection, writer) if r is not None]
    statements: list[str] = []
    for raw in raws:
        raw.set_trace_callback(statements.append)
    try:
        for _ in range(10):
            assert served.get("/store").status_code == 200
            assert served.get("/customers").status_code == 200
        asked = [s for s in statements if "data_version" in s]
        read = [s for s in statements if "revisions" in s]
        assert (len(asked), read) == (20, [])
        make_customer(served)  # a commit by another connection: the revision is read once
        statements.clear()
        assert served.get("/store").status_code == 200
        assert served.get("/store").status_code == 200
        assert len([s for s in statements if "revisions" in s]) == 1
    finally:
        for raw in raws:
            raw.set_trace_callback(None)


def test_on_sqlite_this_processs_own_request_writes_cost_no_read_of_the_revision(served):
    """The look asks on the loop writer's connection, whose own commits leave its data_version."""
    if not served.db.inline_reads:
        pytest.skip("SQLite's data_version")
    body = {"email": "own-1@example.com", "first_name": "Own", "last_name": "Write"}
    assert served.post("/customers", json=body).status_code == 201
    assert served.get("/store").status_code == 200  # the writer's connection is the one asked now
    raws = [served.db.loop_writer.driver_connection, served.db.read_on_loop().conn.connection.dbapi_connection]
    statements: list[str] = []
    for raw in raws:
        raw.set_trace_callback(statements.append)
    try:
        for n in range(2, 7):
            body = {"email": f"own-{n}@example.com", "first_name": "Own", "last_name": "Write"}
            assert served.post("/customers", json=body).status_code == 201
            assert served.get("/store").status_code == 200
        assert [s for s in statements if "revisions" in s] == []
    finally:
        for raw in raws:
            raw.set_trace_callback(None)


def test_on_sqlite_a_new_read_connection_is_never_taken_for_an_unchanged_one(api):
    """``PRAGMA data_version`` is a connection's own count and starts afresh (at 2 here) on a
    new one: a change made while the read connection was replaced is still seen."""
    if not api.db.inline_reads:
        pytest.skip("SQLite's data_version")
    db = Database.from_url(_url(api))
    try:
        freshness = Freshness(db)
        assert freshness.moved_sqlite() is False
        held = db.read_on_loop().conn
        held.invalidate()  # its SQLite connection is closed, not given back to the pool
        held.close()
        with api.db.write() as conn:
            conn.execute(update(stores).where(stores.c.id == api.store.id).values(email="new@example.com"))
        assert freshness.moved_sqlite() is True
    finally:
        db.dispose()


def test_on_sqlite_the_requests_one_pass_of_the_loop_starts_share_its_look(api):
    """Every request started in a pass arrived before that pass's look (its task was made when
    its bytes were read, earlier): one ``PRAGMA data_version`` tells them all, and a request of
    a later pass looks again, so a commit made meanwhile is seen by it."""
    if not api.db.inline_reads:
        pytest.skip("SQLite's data_version")
    db = Database.from_url(_url(api))
    try:
        freshness = Freshness(db)
        raw = db.read_on_loop().conn.connection.dbapi_connection
        statements: list[str] = []
        raw.set_trace_callback(statements.append)

        def change_the_store(email: str) -> None:  # another connection's commit
            with api.db.write() as conn:
                conn.execute(update(stores).where(stores.c.id == api.store.id).values(email=email))

        async def passes() -> list[bool]:
            told = [freshness.moved_sqlite()]  # the first look learns the revision
            await asyncio.sleep(0)  # the next pass
            told.append(freshness.moved_sqlite())
            change_the_store("pass@example.com")
            told.append(freshness.moved_sqlite())  # started in the pass of the look before it
            await asyncio.sleep(0)
            told += [freshness.moved_sqlite(), freshness.moved_sqlite()]
            return told

        assert asyncio.run(passes()) == [False, False, False, True, False]
        assert len([s for s in statements if "data_version" in s]) == 3
        # Off any event loop (a direct call), every call looks.
        change_the_store("direct@example.com")
        assert [freshness.moved_sqlite(), freshness.moved_sqlite()] == [True, False]
        assert len([s for s in statements if "data_version" in s]) == 5

        # A loop that closed before its next pass leaves a hold no other loop takes for its own.
        closed, told = asyncio.new_event_loop(), []

        def last_callback() -> None:
            told.append(freshness.moved_sqlite())
            closed.stop()  # the callbacks it queued never run
        closed.call_soon(last_callback)
        closed.run_forever()
        closed.close()
        assert told == [False] and freshness._pass_of is closed
        change_the_store("another-loop@example.com")

        async def look() -> bool:
            return freshness.moved_sqlite()
        assert asyncio.run(look()) is True
        raw.set_trace_callback(None)
    finally:
        db.dispose()


# 5. The cost on PostgreSQL: one look per wave of requests


def test_concurrent_requests_share_one_look_and_none_takes_an_older_look(database):
    looks: list[int] = []
    value = 0
    freshness = Freshness(database)

    async def read() -> int:
        seen = value
        looks.append(seen)
        await asyncio.sleep(0.05)
        return seen

    freshness._read_postgres = read  # type: ignore[method-assign]

    async def story() -> tuple[list[bool], list[bool]]:
        nonlocal value
        assert await freshness.moved_postgres() is False  # the first look sets the baseline
        wave = await asyncio.gather(*[freshness.moved_postgres() for _ in range(20)])
        # A change committed while a look runs: a request that arrived after the look began
        # waits for a look of its own, which sees it.
        first = asyncio.create_task(freshness.moved_postgres())
        await asyncio.sleep(0.01)
        value = 1
        second = asyncio.create_task(freshness.moved_postgres())
        return list(wave), [await first, await second]

    wave, pair = asyncio.run(story())
    # The first of the wave looks; every other one arrived during it and shares the next look.
    assert len(looks) == 1 + 2 + 2
    assert wave == [False] * 20
    assert pair == [False, True]


def test_a_move_is_told_to_one_request_of_a_look_and_a_cancelled_one_leaves_the_look_to_the_others(database):
    value = 0
    reads = 0
    freshness = Freshness(database)

    async def read() -> int:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.03)
        return value

    freshness._read_postgres = read  # type: ignore[method-assign]

    async def story() -> tuple[list[Any], int]:
        nonlocal value
        assert await freshness.moved_postgres() is False  # the baseline
        value = 1
        running = asyncio.create_task(freshness.moved_postgres())  # starts a look that sees 1
        await asyncio.sleep(0.005)
        waiting = [asyncio.create_task(freshness.moved_postgres()) for _ in range(4)]  # the next look
        await asyncio.sleep(0.005)
        waiting[0].cancel()  # a client that hung up: the look goes on for the others
        answers = await asyncio.gather(running, *waiting, return_exceptions=True)
        return answers, reads

    answers, reads_made = asyncio.run(story())
    assert answers[0] is True  # the look that saw the move tells its one request
    assert isinstance(answers[1], asyncio.CancelledError)
    assert answers[2:] == [False, False, False]  # the next look saw no further move
    assert reads_made == 3


def test_a_failed_look_fails_its_requests_and_the_next_request_looks_again(database, caplog):
    failing = True
    freshness = Freshness(database)

    async def read() -> int:
        await asyncio.sleep(0.01)
        if failing:
            raise ConnectionRefusedError("gone")
        return 7

    freshness._read_postgres = read  # type: ignore[method-assign]

    async def story() -> tuple[list[Any], bool]:
        nonlocal failing
        answers = await asyncio.gather(*[freshness.moved_postgres() for _ in range(3)], return_exceptions=True)
        failing = False
        return answers, await freshness.moved_postgres()

    answers, after = asyncio.run(story())
    assert all(isinstance(a, ConnectionRefusedError) for a in answers)  # TokenResolver: unsure, caches dropped
    assert after is False  # a look of its own, which answers
    assert "never retrieved" not in caplog.text


def test_a_look_that_hangs_fails_its_requests_as_an_outage_and_lets_a_cancelled_one_end(database, monkeypatch):
    from rebill.db.engine import unavailable
    from rebill.http import freshness as module
    monkeypatch.setattr(module, "LOOK_SECONDS", 0.2)
    freshness = Freshness(database)

    async def hang() -> int:
        await asyncio.sleep(60)  # a PostgreSQL that accepts and never answers
        return 0

    freshness._read_postgres = hang  # type: ignore[method-assign]

    async def story() -> tuple[list[Any], float]:
        began = asyncio.get_running_loop().time()
        waiting = [asyncio.create_task(freshness.moved_postgres()) for _ in range(3)]
        await asyncio.sleep(0.05)
        waiting[0].cancel()
        answers = await asyncio.gather(*waiting, return_exceptions=True)
        return answers, asyncio.get_running_loop().time() - began

    answers, took = asyncio.run(story())
    assert took < 1.0  # bounded by the look's time, not by the database
    assert isinstance(answers[0], asyncio.CancelledError)
    assert all(unavailable(a) for a in answers[1:]), answers  # TokenResolver: quiet, caches dropped


async def _get(app: Any, path: str, token: str) -> int:
    """One GET straight through the ASGI app, on the running loop; its status."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"rebill.test"), (b"x-service-access-token", token.encode()),
                         (b"x-service-version", b"2021-11")],
             "client": ("127.0.0.1", 1), "server": ("rebill.test", 80)}
    started: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.append(message["status"])

    await app(scope, receive, send)
    return started[0]


def test_on_postgresql_concurrent_requests_to_the_app_share_revision_looks(api, monkeypatch):
    if api.db.inline_reads:
        pytest.skip("PostgreSQL's shared look")
    looks = []
    real = Freshness._read_postgres

    async def slow(self: Freshness) -> int:
        looks.append(1)
        await asyncio.sleep(0.05)
        return await real(self)

    monkeypatch.setattr(Freshness, "_read_postgres", slow)
    app = _app(api)
    n = 12

    async def story() -> list[int]:
        try:
            assert await _get(app, "/store", api.token) == 200  # the baseline look, the cache warm
            looks.clear()
            return list(await asyncio.gather(*[_get(app, "/store", api.token) for _ in range(n)]))
        finally:
            await app.tokens.freshness.close()
            await api.db.close_loop_reads()  # the read connections, on their loop (as a shutdown does)

    assert asyncio.run(story()) == [200] * n
    # The first request looks; the others arrive during that look and share the next one.
    assert 1 <= len(looks) <= 2 < n


# 6. The triggers


def _revision(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(select(revisions.c.value).where(revisions.c.id == 1)).scalar_one())


def test_the_migrations_leave_triggers_that_bump_the_revision(api):
    if api.db.inline_reads:
        found = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'trg_%_revision%'"
    else:
        found = "SELECT DISTINCT tgname FROM pg_trigger WHERE tgname LIKE 'trg_%_revision'"
    with api.db.read() as conn:
        names = set(conn.execute(text(found)).scalars())
    assert {name.split("_")[1] for name in names} == {"stores", "tokens"}
    start = _revision(api.db)
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(phone="+14155550100"))
    after_store = _revision(api.db)
    assert after_store > start
    raw = api.token_with("read_store")
    token_id = _token_id(api, raw)
    after_insert = _revision(api.db)
    with api.db.write() as conn:
        store_service.revoke_token(conn, api.clock.now(), token_id)
    after_revoke = _revision(api.db)
    assert after_revoke > after_insert
    with api.db.write() as conn:
        conn.execute(delete(tokens).where(tokens.c.id == token_id))
    assert _revision(api.db) > after_revoke


# The race the drop of the cache must not lose


def test_a_look_up_under_way_when_the_cache_drops_is_not_kept(api):
    """A request's token look-up reads the token, a revocation commits, another request drops
    the cache, then the first look-up finishes: its answer (from before the revocation) serves
    its own request only, so the next request with the token answers 401."""
    raw = api.token_with("read_store")
    token_id = _token_id(api, raw)
    db = Database.from_url(_url(api))
    resolver = TokenResolver(db, ttl=3600)
    real = resolver._lookup
    looked, go = threading.Event(), threading.Event()

    def held(value: str) -> Any:
        found = real(value)
        looked.set()
        assert go.wait(10)
        return found

    async def story() -> tuple[Any, Any]:
        await resolver.check()
        resolver._lookup = held  # type: ignore[method-assign]
        first = asyncio.create_task(resolver.resolve(raw))
        assert await asyncio.to_thread(looked.wait, 10)
        with api.db.write() as conn:
            store_service.revoke_token(conn, api.clock.now(), token_id)
        await resolver.check()  # another request: the revision moved, the cache is dropped
        go.set()
        answered = await first
        resolver._lookup = real  # type: ignore[method-assign]
        await resolver.check()  # the next request
        later = resolver.cached(raw)[1] or await resolver.resolve(raw)
        await resolver.freshness.close()
        return answered, later

    try:
        answered, later = asyncio.run(story())
    finally:
        go.set()
        db.dispose()
    assert answered is not None  # its own request arrived before the revocation
    assert later is None


def test_postgresql_looks_from_another_event_loop_do_not_fail(api):
    """A test client without its ``with`` block runs each request on a new event loop: the
    lock of the shared look is the loop's own."""
    if api.db.inline_reads:
        pytest.skip("PostgreSQL's shared look")
    freshness = Freshness(api.db)

    async def wave() -> list[bool]:
        return list(await asyncio.gather(*[freshness.moved_postgres() for _ in range(4)]))

    try:
        assert asyncio.run(wave()) == [False] * 4
        assert asyncio.run(wave()) == [False] * 4
    finally:
        asyncio.run(freshness.close())
