"""A request whose transaction PostgreSQL gives up on for a concurrent one's sake (deadlock,
serialization failure) runs again instead of answering 500 (api/routing.py `Api._in_thread`).
Handlers run in worker threads on PostgreSQL only (SQLite writes run on the event loop, one
writer at a time, and never deadlock)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from rebill.domain.billing import money_back
from rebill.domain.customer import service as customer_service
from rebill.domain.payment_method import service as payment_method_service
from rebill.models import customers
from tests.api.test_payment_methods import body
from tests.builders import make_customer


class _Orig(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def _given_up(sqlstate: str) -> OperationalError:
    return OperationalError("UPDATE ...", {}, _Orig(sqlstate))


@pytest.fixture
def pg_api(api: Any) -> Any:
    if api.db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite runs handlers on the event loop, one writer at a time: nothing to retry")
    return api


def _count(api: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(customers)
                            .where(customers.c.store_id == api.store.id)).scalar()


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_transaction_given_up_for_another_runs_again_and_succeeds(pg_api, monkeypatch, sqlstate):
    real, calls = customer_service.create, []

    def flaky(unit, command, **kw):
        calls.append(1)
        made = real(unit, command, **kw)  # written, then given up on: rolled back with the unit
        if len(calls) < 3:
            raise _given_up(sqlstate)
        return made
    monkeypatch.setattr(customer_service, "create", flaky)
    reply = pg_api.post("/customers", json={"email": "retry@example.com", "first_name": "R", "last_name": "T"})
    assert reply.status_code == 201, reply.text
    assert len(calls) == 3 and _count(pg_api) == 1  # the given-up attempts left nothing


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_it_gives_up_after_four_runs_with_a_409_that_leaves_nothing(pg_api, monkeypatch, sqlstate):
    """decisions §4.6: the loser of overlapping writes answers 409, nothing half written; the
    key of an Idempotency-Key request stays free (409 is never stored), so a repeat runs."""
    real, calls = customer_service.create, []

    def always(unit, command, **kw):
        calls.append(1)
        real(unit, command, **kw)  # written, then given up on: rolled back with the unit
        raise _given_up(sqlstate)
    monkeypatch.setattr(customer_service, "create", always)
    body = {"email": "never@example.com", "first_name": "R", "last_name": "T"}
    reply = pg_api.post("/customers", json=body, headers={"Idempotency-Key": "lost-races"})
    assert reply.status_code == 409, reply.text
    assert "retry" in reply.json()["errors"] and len(calls) == 4 and _count(pg_api) == 0
    monkeypatch.setattr(customer_service, "create", real)
    again = pg_api.post("/customers", json=body, headers={"Idempotency-Key": "lost-races"})
    assert again.status_code == 201, again.text
    assert _count(pg_api) == 1


def test_other_database_errors_and_handlers_that_call_out_run_once(pg_api, monkeypatch):
    calls = []

    def broken(unit, command, **kw):
        calls.append(1)
        raise _given_up("23505")  # a unique violation is no lost race to retry
    monkeypatch.setattr(customer_service, "create", broken)
    assert pg_api.post("/customers", json={"email": "x@example.com", "first_name": "R",
                                           "last_name": "T"}).status_code == 500
    assert len(calls) == 1
    refunds = []

    def refund(*args, **kw):
        refunds.append(1)
        raise _given_up("40P01")
    monkeypatch.setattr(money_back, "refund", refund)
    # It talks to the processor: never run twice, and its lost race is the loser's 409 (found by
    # an audit: a deadlock of POST /payment_methods answered 500).
    reply = pg_api.post("/charges/1/refund", json={"amount": "1.00"})
    assert reply.status_code == 409 and len(refunds) == 1, reply.text


def test_a_payment_method_whose_check_only_reads_runs_again_after_a_lost_race(pg_api, monkeypatch):
    """Found by an audit: POST and PUT /payment_methods call out (a Stripe store's method is
    checked there first), so a deadlock answered 409 at once, on sandbox stores too. The check
    only reads at the processor: the whole request may run again, as any other."""
    customer = make_customer(pg_api)
    real, calls = payment_method_service.create, []

    def flaky(unit, command, **kw):
        calls.append(1)
        made = real(unit, command, **kw)
        if len(calls) < 3:
            raise _given_up("40P01")
        return made
    monkeypatch.setattr(payment_method_service, "create", flaky)
    reply = pg_api.post("/payment_methods", json=body(customer))
    assert reply.status_code == 201, reply.text
    listed = pg_api.get("/payment_methods", params={"customer_id": customer.id}).json()["payment_methods"]
    assert len(calls) == 3 and [m["id"] for m in listed] == [reply.json()["payment_method"]["id"]]
