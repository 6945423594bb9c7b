"""Overlapping writes (decisions §4.6) and deletes racing creates, with real threads and
connections. PostgreSQL lets two writers overlap, so the loser must see 409; SQLite queues
writers (BEGIN IMMEDIATE), so the same two writes apply one after the other."""

import threading
import time

import pytest

from rebill.domain.address import service as address_service
from rebill.domain.address.model import AddressCreate, AddressUpdate
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.domain.customer import service as customer_service
from rebill.domain.unit import Unit
from rebill.errors import Conflict, ValidationFailed
from tests.builders import concurrently, events_of, make_address, make_customer

VERIFIER = OfflineZipVerifier()


def _run(threads):
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive(), "a writer hung"


def _update(api, address_id, results, **changes):
    def work():
        try:
            with api.db.write() as conn:
                address_service.update(Unit(conn, api.store, api.clock.now()), VERIFIER, address_id,
                                       AddressUpdate(**changes))
            results.append("ok")
        except Conflict:
            results.append("conflict")
    return threading.Thread(target=work)


def test_two_overlapping_address_updates_on_postgresql_one_wins_one_gets_409(api, database, monkeypatch):
    if database.dialect != "postgresql":
        pytest.skip("SQLite queues writers; see the SQLite test below")
    address = make_address(api)
    both_read = threading.Barrier(2, timeout=10)
    real_get = address_service.get
    waited = threading.local()

    def get_then_wait(unit, address_id):
        found = real_get(unit, address_id)
        if not getattr(waited, "done", False):  # the first read of each writer, not the reply's
            waited.done = True
            both_read.wait()  # both writers hold the same lock_version before either writes
        return found

    monkeypatch.setattr(address_service, "get", get_then_wait)
    results = []
    _run([_update(api, address.id, results, address2="Apt 1"), _update(api, address.id, results, address2="Apt 2")])
    monkeypatch.undo()
    assert sorted(results) == ["conflict", "ok"]
    assert [t for t, _ in events_of(api, address.id) if t.startswith("address/")] == ["address/created",
                                                                                  "address/updated"]
    with api.db.read() as conn:
        final = address_service.get(Unit(conn, api.store, api.clock.now()), address.id)
    assert final.address2 in {"Apt 1", "Apt 2"} and final.lock_version == 2


def test_two_concurrent_address_updates_on_sqlite_apply_in_turn(api, database):
    if database.dialect != "sqlite":
        pytest.skip("PostgreSQL lets writers overlap; see the test above")
    address = make_address(api)
    results = []
    _run([_update(api, address.id, results, address2="Apt 1"), _update(api, address.id, results, company="ACME")])
    assert results == ["ok", "ok"]
    with api.db.read() as conn:
        final = address_service.get(Unit(conn, api.store, api.clock.now()), address.id)
    assert final.address2 == "Apt 1" and final.company == "ACME" and final.lock_version == 3


def test_an_address_created_while_its_customer_is_deleted_is_refused_not_lost(api, database, monkeypatch):
    """The delete locks the customer first; the create waits, then finds no customer (422),
    so no address disappears without its address/deleted event."""
    customer = make_customer(api)
    existing = make_address(api, customer)
    locked = threading.Event()
    real_delete = customer_service.addresses.delete_of_customer

    def delete_slowly(conn, store_id, customer_id):
        locked.set()
        time.sleep(0.3)  # the create below arrives now
        return real_delete(conn, store_id, customer_id)

    monkeypatch.setattr(customer_service.addresses, "delete_of_customer", delete_slowly)
    outcome = {}

    def delete():
        with api.db.write() as conn:
            customer_service.delete(Unit(conn, api.store, api.clock.now()), customer.id)

    def create():
        locked.wait(timeout=10)
        command = AddressCreate(customer_id=customer.id, address1="1 Late St", city="San Francisco",
                                country_code="US", province="CA", zip="94105", first_name="A",
                                last_name="B", phone="")
        try:
            with api.db.write() as conn:
                outcome["address"] = address_service.create(Unit(conn, api.store, api.clock.now()), VERIFIER, command)
        except ValidationFailed as exc:
            outcome["errors"] = exc.errors

    _run([threading.Thread(target=delete), threading.Thread(target=create)])
    assert outcome == {"errors": {"customer_id": ["customer not found"]}}
    topics = [t for t, _ in events_of(api)]
    assert topics.count("address/created") == 1 and topics.count("address/deleted") == 1
    assert ("address/deleted", existing.id) in events_of(api)


def test_concurrent_creates_answer_each_on_its_own_and_a_refused_one_takes_nothing_with_it(api, database,
                                                                                            monkeypatch):
    commits = []
    if database.dialect == "sqlite":
        # SQLite: the writes of one loop turn share one COMMIT (db/loop_writer.py).
        original = database.loop_writer._commit
        monkeypatch.setattr(database.loop_writer, "_commit", lambda: (commits.append(1), original()))
    emails = [f"c{n}-{api.store.id}@example.com" for n in range(12)]
    bodies = [{"email": e, "first_name": "A", "last_name": "B"} for e in emails] + [
        {"email": emails[3], "first_name": "Twin", "last_name": "B"}]  # taken by a sibling
    replies = concurrently(api, [("POST", "/customers", b) for b in bodies])
    # Which of the two with the same email wins is a race; exactly one does.
    statuses = [r.status_code for r in replies]
    assert sorted(statuses) == [201] * 12 + [422]
    refused = replies[statuses.index(422)]
    assert statuses.index(422) in (3, 12)
    assert refused.json()["errors"] == {"email": ["has already been taken"]}
    created = [r.json()["customer"] for r in replies if r.status_code == 201]
    for customer in created:
        assert api.get(f"/customers/{customer['id']}").json()["customer"]["first_name"] == customer["first_name"]
    listed = api.get("/customers", params={"limit": 50}).json()["customers"]
    assert sorted(c["email"] for c in listed) == sorted(emails)
    assert sorted(c["id"] for c in listed) == sorted(c["id"] for c in created)
    if database.dialect == "sqlite":
        assert 1 <= len(commits) < 13


def test_a_write_that_finds_a_background_job_holding_the_lock_waits_for_it(api, database):
    if database.dialect != "sqlite":
        pytest.skip("SQLite only: PostgreSQL writes run in worker threads and take row locks")
    released = threading.Event()

    def job():
        with database.write():
            time.sleep(0.3)
        released.set()
    worker = threading.Thread(target=job)
    worker.start()
    time.sleep(0.05)
    started = time.monotonic()
    [reply] = concurrently(api, [("POST", "/customers", {"email": f"late-{api.store.id}@example.com",
                                                                  "first_name": "L", "last_name": "T"})])
    assert reply.status_code == 201, reply.text
    assert released.is_set() and time.monotonic() - started >= 0.2
    worker.join(5)
