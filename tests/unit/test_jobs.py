"""The background jobs of `rebill serve` (jobs/scheduler.py): they start with the server's
lifespan, bill what is due and run deferred regenerations by themselves, and stop with it."""

from __future__ import annotations

from datetime import timedelta

from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.jobs.scheduler import Jobs, bill_every_store
from rebill.settings import RateLimit, Settings
from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription, wait_for


def _settings(**kw):
    return Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0, **kw)


def _due_charge(api):
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token="pm_ok")
    address = make_address(api, customer)
    make_subscription(api, address, next_charge_scheduled_at=api.clock.now().date() + timedelta(days=1))
    api.clock.advance(timedelta(days=1))
    [charge] = charges_of(api, address.id)
    return address, charge



def test_the_server_bills_due_charges_by_itself_while_it_runs(api):
    address, charge = _due_charge(api)
    app = create_app(_settings(regenerate_every=0, bill_every=0.1), db=api.db, clock=api.clock)
    assert isinstance(app, Jobs)
    with TestClient(app):
        assert app.scheduler is not None and app.scheduler.running
        paid = wait_for(lambda: [c.status for c in charges_of(api, address.id) if c.id == charge.id] == ["success"])
    assert paid
    assert app.scheduler is None  # stopped with the lifespan


def test_no_jobs_when_all_are_switched_off(api):
    app = create_app(_settings(regenerate_every=0, bill_every=0, purge_every=0, deliver_webhooks=False, batch_every=0),
                     db=api.db, clock=api.clock)
    assert not isinstance(app, Jobs)


def test_one_billing_pass_covers_every_store_each_on_its_own_clock(api):
    other = api.other_store()
    mine, first = _due_charge(api)
    theirs, second = _due_charge(other)
    from rebill.domain.payment.sandbox import SandboxGateway
    processed = bill_every_store(api.db, SandboxGateway(api.db, api.clock.now), api.clock, timedelta(seconds=60))
    assert processed >= 2
    assert {c.status for c in charges_of(api, mine.id) if c.id == first.id} == {"success"}
    assert {c.status for c in charges_of(other, theirs.id) if c.id == second.id} == {"success"}


def test_a_store_whose_billing_fails_does_not_keep_the_others_from_being_billed(api, monkeypatch):
    """Found by an audit: one store's error (a row PostgreSQL refused) left every store after
    it unbilled, run after run. Now the others are billed, and the run still ends failed,
    naming the store, so that the failure is counted and logged."""
    import pytest

    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.jobs import scheduler

    other = api.other_store()
    mine, first = _due_charge(api)
    theirs, second = _due_charge(other)
    real = billing.run_store

    def broken_for_mine(db, gateway, store, *args, **kw):
        if store.id == api.store.id:
            raise RuntimeError("this store's run fails")
        return real(db, gateway, store, *args, **kw)
    monkeypatch.setattr(billing, "run_store", broken_for_mine)
    with pytest.raises(scheduler.StoresFailed) as failed:
        bill_every_store(api.db, SandboxGateway(api.db, api.clock.now), api.clock, timedelta(seconds=60))
    assert failed.value.store_ids == [api.store.id] and failed.value.processed >= 1
    assert {c.status for c in charges_of(other, theirs.id) if c.id == second.id} == {"success"}
    assert {c.status for c in charges_of(api, mine.id) if c.id == first.id} == {"queued"}


def test_the_server_purges_expired_idempotency_keys_by_itself(api):
    from sqlalchemy import insert, select

    from rebill.models import idempotency_keys
    now = api.clock.now()
    with api.db.write() as conn:
        conn.execute(insert(idempotency_keys), [
            {"store_id": api.store.id, "token_id": 0, "key": key, "fingerprint": "x", "state": "done",
             "created_at": when, "updated_at": when}
            for key, when in (("expired", now - timedelta(hours=25)), ("kept", now - timedelta(hours=23)))])

    def keys():
        with api.db.read() as conn:
            return set(conn.execute(select(idempotency_keys.c.key)
                                    .where(idempotency_keys.c.store_id == api.store.id)).scalars())
    app = create_app(_settings(regenerate_every=0, bill_every=0, purge_every=0.1), db=api.db, clock=api.clock)
    with TestClient(app):
        assert wait_for(lambda: keys() == {"kept"})


def test_a_batch_submitted_through_the_api_lends_its_request_to_no_background_job(api):
    """Found by an audit: the wake-up a batch submission sends the job runner ran in the
    submitting request's context, and every job it set off after that (any store's billing run,
    the batch's own tasks) recorded its changes as that request's token's. Here store A submits
    a batch through the API while the server's jobs run; store B's due charge is then paid by
    the billing run, as the billing run's, and A's batch tasks record the source `batch`."""
    import dataclasses

    from sqlalchemy import select

    from rebill.models import events
    from tests.api.test_async_batches import add, new_batch, submit

    other = api.other_store()
    theirs, charge = _due_charge(other)
    app = create_app(_settings(regenerate_every=0, bill_every=1.0, batch_every=0.5, purge_every=0,
                               deliver_webhooks=False), db=api.db, clock=api.clock)
    with TestClient(app, base_url="http://rebill.test") as client:
        mine = dataclasses.replace(api, client=client)
        batch = new_batch(mine, "discount_create")
        add(mine, batch["id"], [{"code": "LEAK1", "value": "5", "value_type": "percentage"}])
        submit(mine, batch["id"])
        assert wait_for(lambda: [c.status for c in charges_of(other, theirs.id) if c.id == charge.id] == ["success"])
        assert wait_for(lambda: mine.get(f"/async_batches/{batch['id']}").json()["async_batch"]["status"]
                        == "completed")
    with api.db.read() as conn:
        paid = conn.execute(select(events.c.origin, events.c.token_id).where(
            events.c.store_id == other.store.id, events.c.topic == "charge/paid")).all()
        tasks = conn.execute(select(events.c.origin).where(
            events.c.store_id == api.store.id, events.c.topic == "discount/created")).scalars().all()
    assert [tuple(row) for row in paid] == [("billing_run", None)]
    assert tasks == ["batch"]


def test_a_job_that_meets_a_busy_database_logs_one_warning_line_not_an_error(api, monkeypatch, caplog):
    """Found by an audit: a job that met SQLite's busy timeout (another process holding the
    write lock) logged an ERROR with a traceback, and went through at its next tick. A database
    busy or away is a warning of one line (its store's, and the run's); any other failure stays
    an error with its traceback."""
    import logging
    import sqlite3

    import pytest
    from sqlalchemy.exc import OperationalError

    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.jobs import scheduler
    from rebill.jobs.failures import log_failure

    def locked(*args, **kw):
        raise OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))
    monkeypatch.setattr(billing, "run_store", locked)
    caplog.set_level(logging.WARNING, logger="rebill.jobs")
    with pytest.raises(scheduler.StoresFailed) as failed:
        bill_every_store(api.db, SandboxGateway(api.db, api.clock.now), api.clock, timedelta(seconds=60))
    log_failure(scheduler.logger, "billing", failed.value)
    # One line per store of the database (earlier tests' stores too), and none of the run's
    # beside them (found by an audit: a second warning, then an ERROR line of the job's run).
    assert len(caplog.records) == len(failed.value.store_ids)
    assert {(r.levelname, r.exc_info is None) for r in caplog.records} == {("WARNING", True)}
    assert "database is locked" in caplog.records[0].getMessage()
    caplog.clear()
    # The job's end: counted, no line (its failure was told).
    import asyncio

    from rebill.observability import record
    loop = asyncio.new_event_loop()
    done: asyncio.Future[None] = loop.create_future()
    done.set_exception(failed.value)
    scheduler.Jobs._finished("billing run", record.start_job("billing run"), done)
    loop.close()
    assert {r.levelname for r in caplog.records} == set(), caplog.text
    caplog.clear()
    monkeypatch.setattr(billing, "run_store", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(scheduler.StoresFailed) as failed:
        bill_every_store(api.db, SandboxGateway(api.db, api.clock.now), api.clock, timedelta(seconds=60))
    log_failure(scheduler.logger, "billing", failed.value)
    stores_told, run_told = caplog.records[:-1], caplog.records[-1]
    assert {(r.levelname, r.exc_info is None) for r in stores_told} == {("ERROR", False)}  # with the traceback
    assert (run_told.levelname, run_told.exc_info) == ("ERROR", None)


def test_an_uninstalled_store_is_not_billed_until_it_is_installed_again(api):
    """Found by an audit: the billing run paid the due charges of an uninstalled store. They
    wait; once installed again they are due and paid at the next run."""
    from sqlalchemy import update

    from rebill.domain.payment.sandbox import SandboxGateway
    from rebill.domain.store import repository as stores
    from rebill.models import stores as stores_table
    address, charge = _due_charge(api)
    gateway = SandboxGateway(api.db, api.clock.now)
    for installed, status in ((False, "queued"), (True, "success")):
        with api.db.write() as conn:
            conn.execute(update(stores_table).where(stores_table.c.id == api.store.id).values(installed=installed))
        bill_every_store(api.db, gateway, api.clock, timedelta(seconds=60))
        assert {c.status for c in charges_of(api, address.id) if c.id == charge.id} == {status}
    with api.db.read() as conn:
        assert stores.get(conn, api.store.id).installed


def test_the_webhook_deliverer_tells_a_busy_database_in_one_warning_line(api, monkeypatch, caplog):
    """Found by a review: the deliverer's look, every half second, logged a busy database as an
    ERROR with a traceback; a warning line now, as the scheduler's jobs (jobs/failures.py)."""
    import asyncio
    import logging
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from rebill.jobs import deliver

    runner = deliver.DeliveryRunner(api.db, api.clock.now, poll_seconds=0.01)

    async def locked(*args, **kw):
        raise OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))
    monkeypatch.setattr(runner, "look", locked)
    caplog.set_level(logging.WARNING, logger="rebill")

    async def main():
        task = asyncio.ensure_future(runner.run())
        await asyncio.sleep(0.1)
        runner._stopping = True
        runner.nudge()
        await asyncio.wait_for(task, 5)
    asyncio.run(main())
    told = [r for r in caplog.records if "webhook deliveries" in r.getMessage()]
    assert told and {(r.levelname, r.exc_info is None) for r in told} == {("WARNING", True)}
