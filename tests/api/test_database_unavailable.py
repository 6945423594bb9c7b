"""A database that cannot be reached answers 503 with Retry-After, in the error shape, and
applies nothing (issue 18, "Faults"). The real restart of PostgreSQL under load is in
tests/scenarios/test_faults.py; here the outage is raised where a request meets it, on both
databases, so that every path of the dispatcher is covered."""

from __future__ import annotations

import sqlite3
import threading
import time

import asyncpg
import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from rebill.api import idempotency
from rebill.db.engine import unavailable
from rebill.domain.customer import service as customer_service
from rebill.models import customers, idempotency_keys
from tests.builders import make_customer


class _Gone(psycopg.OperationalError):
    """What psycopg raises when the server went away mid-statement: no SQLSTATE."""


def _outage() -> OperationalError:
    return OperationalError("SELECT 1", {}, _Gone("server closed the connection unexpectedly"))


def _sqlstate_error(state: str) -> DBAPIError:
    orig = psycopg.errors.lookup(state)("boom")
    return DBAPIError("SELECT 1", {}, orig)


def _asyncpg_error(cause: BaseException) -> DBAPIError:
    """As SQLAlchemy's asyncpg adapter raises it: its own error class, asyncpg's as the cause."""
    adapted = Exception(str(cause))
    adapted.__cause__ = cause
    return DBAPIError("SELECT 1", {}, adapted)


@pytest.mark.parametrize("exc, expected", [
    (_outage(), True),
    (_sqlstate_error("08006"), True),  # connection_failure
    (_sqlstate_error("57P01"), True),  # admin_shutdown: a fast restart
    (_sqlstate_error("57P03"), True),  # cannot_connect_now: the server is starting
    (_sqlstate_error("25P03"), True),  # a session idle in its transaction too long: ended
    (_sqlstate_error("23505"), False),  # unique_violation: a refused statement, not an outage
    (_sqlstate_error("40P01"), False),  # deadlock: retried by the dispatcher, not a 503
    (PoolTimeout("QueuePool limit reached"), True),
    # asyncpg (the API's reads on PostgreSQL): its error is the cause of SQLAlchemy's adapter's.
    (_asyncpg_error(asyncpg.exceptions.InterfaceError("the underlying connection is closed")), True),
    (_asyncpg_error(asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed")), True),
    # A connection whose server said FATAL, taken before its socket's end was read.
    (_asyncpg_error(asyncpg.exceptions.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress")), True),
    (_asyncpg_error(asyncpg.exceptions.UniqueViolationError("duplicate key")), False),
    (_asyncpg_error(ConnectionRefusedError(111, "Connect call failed")), True),
    (OperationalError("BEGIN", {}, sqlite3.OperationalError("database is locked")), True),
    (OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x")), False),
    (IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed")), False),
    (ValueError("not a database error"), False),
])
def test_unavailable_tells_an_outage_from_a_refused_statement(exc, expected):
    assert unavailable(exc) is expected


def test_a_connection_the_pool_invalidated_is_an_outage():
    exc = DBAPIError("SELECT 1", {}, Exception("gone"), connection_invalidated=True)
    assert unavailable(exc)


def _assert_503(response):
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json() == {"errors": "The database could not be reached; try again in a moment"}
    assert response.headers["x-request-id"]


def test_a_read_that_meets_an_outage_answers_503_with_retry_after(api, monkeypatch):
    customer = make_customer(api)

    def gone(*args, **kwargs):
        raise _outage()
    monkeypatch.setattr(customer_service, "get", gone)
    _assert_503(api.get(f"/customers/{customer.id}"))
    _assert_503(api.get(f"/customers/{customer.id}", version="2021-01"))


def _count(api) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(customers)
                            .where(customers.c.store_id == api.store.id)).scalar()


def test_a_write_that_meets_an_outage_answers_503_and_applies_nothing(api, monkeypatch):
    before = _count(api)
    real = customer_service.create

    def create_then_lose_the_connection(unit, command, **kw):
        real(unit, command, **kw)  # the row is written in the request's transaction...
        raise _outage()  # ...which goes with the connection
    monkeypatch.setattr(customer_service, "create", create_then_lose_the_connection)
    _assert_503(api.post("/customers", json={"email": "gone@example.com", "first_name": "G", "last_name": "O"}))
    assert _count(api) == before


def test_an_idempotent_write_that_meets_an_outage_frees_its_key_for_the_retry(api, monkeypatch):
    real = customer_service.create
    body = {"email": "retry@example.com", "first_name": "R", "last_name": "E"}
    headers = {"Idempotency-Key": "outage-1"}
    with monkeypatch.context() as patched:
        patched.setattr(customer_service, "create", lambda unit, command, **kw: (_ for _ in ()).throw(_outage()))
        _assert_503(api.post("/customers", json=body, headers=headers))
    # The 503 is no answer to keep: the same request again runs, once.
    again = api.post("/customers", json=body, headers=headers)
    assert again.status_code in (200, 201), again.text
    assert api.post("/customers", json=body, headers=headers).content == again.content
    assert real is customer_service.create


def test_an_outage_while_taking_the_key_answers_503(api, monkeypatch):
    def gone(*args, **kwargs):
        raise _outage()
    monkeypatch.setattr(idempotency, "begin", gone)
    before = _count(api)
    _assert_503(api.post("/customers", json={"email": "k@example.com", "first_name": "K", "last_name": "E"},
                         headers={"Idempotency-Key": "outage-2"}))
    assert _count(api) == before


def test_an_answer_whose_storing_meets_an_outage_is_stored_once_the_database_is_back(api, monkeypatch):
    """The request committed, then the database went before its answer was kept: the key
    stays running (a repeat gets 409, never a second run) and the answer is stored when the
    database answers again."""
    real_finish = idempotency.finish
    failures = {"left": 3}
    lock = threading.Lock()

    def flaky_finish(*args, **kwargs):
        with lock:
            if failures["left"]:
                failures["left"] -= 1
                raise _outage()
        return real_finish(*args, **kwargs)
    monkeypatch.setattr(idempotency, "finish", flaky_finish)
    body = {"email": "kept@example.com", "first_name": "K", "last_name": "E"}
    headers = {"Idempotency-Key": "outage-3"}
    first = api.post("/customers", json=body, headers=headers)
    assert first.status_code in (200, 201), first.text
    assert api.post("/customers", json=body, headers=headers).status_code == 409  # still running, not run again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with api.db.read() as conn:
            state = conn.execute(select(idempotency_keys.c.state).where(
                idempotency_keys.c.store_id == api.store.id, idempotency_keys.c.key == "outage-3")).scalar()
        if state == "done":
            break
        time.sleep(0.1)
    assert state == "done"
    assert failures["left"] == 0
    replay = api.post("/customers", json=body, headers=headers)
    assert replay.status_code == first.status_code and replay.content == first.content
    with api.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(customers).where(
            customers.c.store_id == api.store.id, customers.c.email == "kept@example.com")).scalar() == 1


def test_a_token_look_up_that_meets_an_outage_answers_503(api, monkeypatch):
    from rebill.http.auth import TokenResolver

    def gone(self, raw):
        raise _outage()
    monkeypatch.setattr(TokenResolver, "_lookup", gone)
    _assert_503(api.get("/customers"))


def test_a_request_whose_answer_was_lost_after_its_commit_is_never_run_twice(api, monkeypatch):
    """The process died (or the database went for good) between the request's COMMIT and the
    storing of its answer: the key says "applied", so a repeat answers 409 instead of
    creating the customer a second time (api/idempotency.py, domain/unit.py)."""
    async def lost(*args, **kwargs):
        return None
    body = {"email": "lost@example.com", "first_name": "L", "last_name": "O"}
    headers = {"Idempotency-Key": "outage-4"}
    with monkeypatch.context() as patched:
        patched.setattr(idempotency, "finish_soon", lost)
        first = api.post("/customers", json=body, headers=headers)
    assert first.status_code in (200, 201), first.text
    with api.db.read() as conn:
        state = conn.execute(select(idempotency_keys.c.state).where(
            idempotency_keys.c.store_id == api.store.id, idempotency_keys.c.key == "outage-4")).scalar()
    assert state == "applied"
    # Within a minute its answer may still be on its way: "still running", as for any key.
    soon = api.post("/customers", json=body, headers=headers)
    assert soon.status_code == 409 and "still running" in soon.json()["errors"]
    api.clock.advance(seconds=61)  # no answer came: it is lost, and the request is not run again
    again = api.post("/customers", json=body, headers=headers)
    assert again.status_code == 409
    assert "answer was lost" in again.json()["errors"]
    with api.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(customers).where(
            customers.c.store_id == api.store.id, customers.c.email == "lost@example.com")).scalar() == 1


def test_a_key_is_marked_applied_only_when_the_request_committed_a_change(api, monkeypatch):
    """A request refused (422) commits nothing: with its answer lost, its key is still only
    "running" (free again after 60 s), never "applied"."""
    async def lost(*args, **kwargs):
        return None
    monkeypatch.setattr(idempotency, "finish_soon", lost)
    refused = api.post("/customers", json={"first_name": "No email"}, headers={"Idempotency-Key": "outage-5"})
    assert refused.status_code == 422
    with api.db.read() as conn:
        state = conn.execute(select(idempotency_keys.c.state).where(
            idempotency_keys.c.store_id == api.store.id, idempotency_keys.c.key == "outage-5")).scalar()
    assert state == "running"


def test_a_connection_dropped_while_the_commit_writes_events_answers_503(api, monkeypatch):
    """Units opened without a context (the billing run's record, here a manual process) write
    their events as their transaction commits. Found by a review: when the connection dropped
    there, the driver's rollback added after a failed flush raised an error of its own, which
    hid the outage (500 instead of 503 and `Retry-After`). PostgreSQL, whose server can drop a
    connection."""
    from decimal import Decimal

    from rebill.domain.billing import run as billing_run
    from tests.builders import charges_of, make_address, make_payment_method, make_subscription
    from tests.conftest import PG_ADMIN
    if api.db.dialect != "postgresql":
        pytest.skip("PostgreSQL: a server-side connection drop")
    shop = api.other_store(plan_tier="premium_a")
    customer = make_customer(shop)
    make_payment_method(shop, customer, processor_payment_method_token="pm_ok")
    address = make_address(shop, customer)
    make_subscription(shop, address, price=Decimal("12.50"))
    [charge] = charges_of(shop, address.id)
    real = billing_run.record

    def record_then_drop(unit, *args, **kwargs):
        out = real(unit, *args, **kwargs)
        pid = unit.conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return out
    monkeypatch.setattr(billing_run, "record", record_then_drop)
    _assert_503(shop.post(f"/charges/{charge.id}/process", json={}))
    monkeypatch.undo()
    with shop.db.read() as conn:  # nothing of it committed; the pool serves on
        assert conn.execute(select(func.count()).select_from(customers).where(
            customers.c.store_id == shop.store.id)).scalar() == 1
    assert shop.get(f"/charges/{charge.id}").json()["charge"]["status"] != "success"
