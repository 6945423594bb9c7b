"""`Idempotency-Key` on every POST (decisions §9.2, §6.12), both versions, both databases."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from rebill.api.idempotency import fingerprint
from rebill.models import customers, idempotency_keys

# 2021-01 needs the billing address on create; 2021-11 takes it too.
BILLING = {"billing_address1": "1 Main St", "billing_city": "Boston", "billing_first_name": "I",
           "billing_last_name": "K", "billing_province": "Massachusetts", "billing_zip": "02110",
           "billing_country": "United States"}


def _body(n="a", **extra):
    return {"email": f"idem-{n}@example.com", "first_name": "I", "last_name": "K", **extra}


def _count(api):
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(customers)
                            .where(customers.c.store_id == api.store.id)).scalar()


def _post(api, body, key="k-1", **kw):
    return api.post("/customers", json=body, headers={"Idempotency-Key": key}, **kw)


def test_the_same_key_and_body_replays_the_first_answer_with_a_fresh_request_id(vapi):
    body = {**_body(), **BILLING} if vapi.version == "2021-01" else _body()
    first = _post(vapi, body)
    again = _post(vapi, dict(reversed(list(body.items()))))  # the same body, its keys in another order
    assert first.status_code == again.status_code == vapi.post("/customers", json={**body, **_body("b")}).status_code
    assert first.status_code in (200, 201), first.text
    assert again.content == first.content
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    assert _count(vapi) == 2  # the replay created nothing; the last, keyless, post did


def test_whitespace_around_a_key_is_not_part_of_it(api):
    """RFC 9110 §5.5: a field value has no whitespace at its ends (found by an audit: a retry
    sent with `k-1 ` made a second customer)."""
    first = _post(api, _body())
    assert first.status_code == 201, first.text
    for key in (b"k-1 ", b"\tk-1", b" k-1\t "):
        again = _post(api, _body(), key=key)
        assert (again.status_code, again.content) == (201, first.content)
    assert _count(api) == 1
    assert _post(api, _body(), key=b"  ").json()["errors"] == {
        "Idempotency-Key": ["must be 1 to 255 printable ASCII characters"]}


def test_the_same_key_with_another_body_is_refused_and_changes_nothing(vapi):
    extra = BILLING if vapi.version == "2021-01" else {}
    assert _post(vapi, _body(**extra)).status_code in (200, 201)
    other = _post(vapi, _body("other", **extra))
    assert other.status_code == 422
    assert "Idempotency-Key" in other.json()["errors"]
    assert _count(vapi) == 1


def test_an_error_answer_is_replayed_too(api):
    first = _post(api, {"email": "nobody@example.com"})
    assert first.status_code == 422
    again = _post(api, {"email": "nobody@example.com"})
    assert (again.status_code, again.content) == (422, first.content)


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_key_must_be_1_to_255_printable_ascii_characters(api, key):
    reply = api.post("/customers", json=_body(), headers={"Idempotency-Key": key.encode("utf-8")})
    assert reply.status_code == 422
    assert reply.json()["errors"] == {"Idempotency-Key": ["must be 1 to 255 printable ASCII characters"]}
    assert _count(api) == 0


def test_a_key_still_running_answers_409_and_is_free_again_after_60_seconds(api):
    with api.db.write() as conn:
        conn.execute(insert(idempotency_keys).values(
            store_id=api.store.id, token_id=_token_id(api), key="k-1",
            fingerprint=fingerprint("POST", "/customers", _body(), version=api.version), state="running",
            created_at=api.clock.now(), updated_at=api.clock.now()))
    busy = _post(api, _body())
    assert busy.status_code == 409 and _count(api) == 0
    api.clock.advance(timedelta(seconds=61))  # its request died: the key starts over
    assert _post(api, _body()).status_code == 201 and _count(api) == 1


def test_a_server_error_is_not_stored_and_frees_the_key(api, monkeypatch):
    from rebill.domain.customer import service

    def broken(*args, **kw):
        raise RuntimeError("boom")
    monkeypatch.setattr(service, "create", broken)
    assert _post(api, _body()).status_code == 500
    monkeypatch.undo()
    assert _post(api, _body()).status_code == 201


def test_keys_expire_after_24_hours(api):
    _post(api, _body())
    api.clock.advance(timedelta(hours=24, seconds=1))
    fresh = _post(api, _body("new"))
    assert fresh.status_code == 201 and fresh.json()["customer"]["email"] == "idem-new@example.com"


def test_a_key_belongs_to_its_token_and_store(api):
    _post(api, _body())
    other_token = api.token_with("write_customers")
    assert _post(api, _body("t"), token=other_token).status_code == 201
    other_store = api.other_store()
    assert _post(other_store, _body("s")).status_code == 201
    assert _count(api) == 2


def test_requests_without_a_key_and_other_methods_are_not_kept(api):
    created = api.post("/customers", json=_body()).json()["customer"]
    reply = api.put(f"/customers/{created['id']}", json={"first_name": "J"}, headers={"Idempotency-Key": "k-1"})
    assert reply.status_code == 200
    with api.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(idempotency_keys)
                            .where(idempotency_keys.c.store_id == api.store.id)).scalar() == 0


def test_two_requests_with_one_key_at_once_run_once(api):
    replies = _concurrently_with_key(api)
    codes = sorted(r.status_code for r in replies)
    assert codes in ([201, 201], [201, 409])
    assert _count(api) == 1


def _concurrently_with_key(api):
    import asyncio

    import httpx2 as httpx

    async def main():
        transport = httpx.ASGITransport(app=api.client.app)
        headers = {"X-Service-Access-Token": api.token, "X-Service-Version": api.version, "Idempotency-Key": "k-c"}
        async with httpx.AsyncClient(transport=transport, base_url="http://rebill.test", headers=headers) as http:
            return await asyncio.gather(*(http.post("/customers", json=_body("c")) for _ in range(2)))
    return asyncio.run(main())


def _token_id(api):
    from rebill.models import tokens
    with api.db.read() as conn:
        return conn.execute(select(tokens.c.id).where(tokens.c.store_id == api.store.id)).scalar()


def _keys(api):
    with api.db.read() as conn:
        return {row.key: row.state for row in conn.execute(
            select(idempotency_keys.c.key, idempotency_keys.c.state).where(idempotency_keys.c.store_id == api.store.id))}


def test_the_purge_removes_keys_past_24_hours_and_leaves_the_others(api):
    from rebill.api.idempotency import purge_expired
    _post(api, _body("old"), key="old")
    now = api.clock.now()
    with api.db.write() as conn:  # two running keys as old as "old": one alive, one whose request died
        conn.execute(insert(idempotency_keys), [
            {"store_id": api.store.id, "token_id": _token_id(api), "key": key, "fingerprint": "x",
             "state": "running", "created_at": now, "updated_at": now} for key in ("alive", "dead")])
    api.clock.advance(timedelta(hours=23, minutes=59))
    _post(api, _body("recent"), key="recent")
    purge_expired(api.db, api.clock.now())  # the purge is global: other tests' keys may go
    assert _keys(api) == {"old": "done", "alive": "running", "dead": "running", "recent": "done"}
    api.clock.advance(timedelta(minutes=2))
    # "old" and "dead" are a day and a minute old ("dead" abandoned); "alive" is as old but its
    # request still reports (updated now), so it stays; "recent" is two minutes old.
    with api.db.write() as conn:
        conn.execute(idempotency_keys.update().where(idempotency_keys.c.store_id == api.store.id,
                                                     idempotency_keys.c.key == "alive")
                     .values(updated_at=api.clock.now()))
    assert purge_expired(api.db, api.clock.now()) >= 2
    assert _keys(api) == {"alive": "running", "recent": "done"}
    # The purged key starts over; the recent one still replays.
    assert _post(api, _body("old-again"), key="old").json()["customer"]["email"] == "idem-old-again@example.com"
    assert _post(api, _body("recent"), key="recent").headers.get("x-request-id")
    assert _count(api) == 3


def test_the_purge_goes_in_batches(api, monkeypatch):
    from rebill.api import idempotency
    monkeypatch.setattr(idempotency, "PURGE_BATCH", 2)
    now = api.clock.now()
    with api.db.write() as conn:
        conn.execute(insert(idempotency_keys), [
            {"store_id": api.store.id, "token_id": _token_id(api), "key": f"b{n}", "fingerprint": "x", "state": "done",
             "created_at": now - timedelta(days=2), "updated_at": now - timedelta(days=2)} for n in range(5)])
    assert idempotency.purge_expired(api.db, now) >= 5  # global: other tests' old keys go too
    assert _keys(api) == {}


def test_an_expired_key_purged_under_a_request_is_taken_anew(api, monkeypatch):
    """begin() read the expired row; the purge deleted it before begin's update: the request
    takes the key anew instead of answering 409."""
    from rebill.api import idempotency
    _post(api, _body("first"), key="k")
    api.clock.advance(timedelta(days=2))
    real_update = idempotency.update
    purged = []

    def update_after_purge(table):
        if not purged:  # only begin's update: the purge lands between its look and its update
            purged.append(idempotency.purge_expired(api.db, api.clock.now()))
        return real_update(table)
    if api.db.engine.dialect.name == "sqlite":
        pytest.skip("on SQLite the look and the update share one write transaction: no purge can come between")
    monkeypatch.setattr(idempotency, "update", update_after_purge)
    answer = _post(api, _body("second"), key="k")
    assert answer.status_code == 201, answer.text
    assert purged[0] >= 1 and _keys(api) == {"k": "done"}


def test_the_answer_is_stored_before_the_client_gets_it(api):
    """A client that has its answer and repeats the request at once gets the answer replayed
    (found by an audit: the answer was stored after it was sent, so a quick repeat could meet
    409 "still running"). Checked at the moment the answer's first message reaches the client."""
    import asyncio
    import json as json_module

    body = json_module.dumps(_body("stored-first")).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/customers", "raw_path": b"/customers", "query_string": b"", "root_path": "",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"x-service-access-token", api.token.encode()), (b"x-service-version", b"2021-11"),
                         (b"content-type", b"application/json"), (b"idempotency-key", b"stored-first"),
                         (b"host", b"rebill.test")]}
    seen = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            with api.db.read() as conn:
                seen.append((message["status"], conn.execute(select(idempotency_keys.c.state).where(
                    idempotency_keys.c.store_id == api.store.id, idempotency_keys.c.key == "stored-first")).scalar()))

    asyncio.run(api.client.app(scope, receive, send))
    assert seen == [(201, "done")]
    again = _post(api, _body("stored-first"), key="stored-first")
    assert again.status_code == 201 and _count(api) == 1


def test_a_403_for_the_stores_plan_tier_is_not_kept(vapi):
    """Found by an audit: `process` and `capture_payment` asked for plan tier A inside the
    endpoint, after the key was taken, so their 403 was kept and replayed for 24 hours to a
    store moved to tier A meanwhile. The router asks first, as for a missing scope (not kept)."""
    from rebill.domain.store import repository as stores
    from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription
    customer = make_customer(vapi)
    make_payment_method(vapi, customer, processor_payment_method_token="pm_ok")
    [charge] = charges_of(vapi, make_subscription(vapi, make_address(vapi, customer)).address_id)
    keyed = {"Idempotency-Key": "tier-1"}
    for path in (f"/charges/{charge.id}/process", f"/charges/{charge.id}/capture_payment"):
        refused = vapi.post(path, json={}, headers=keyed if path.endswith("process") else {"Idempotency-Key": "tier-2"})
        assert refused.status_code == 403 and "tier A" in str(refused.json()["errors"]), refused.text
    with vapi.db.write() as conn:
        stores.update_store(conn, vapi.store.id, {"plan_tier": "premium_a"})
    paid = vapi.post(f"/charges/{charge.id}/process", json={}, headers=keyed)
    assert paid.status_code == 200 and paid.json()["charge"]["status"].lower() == "success", paid.text
    # Not pending: the capture's 422 now, not the 403 of before.
    assert vapi.post(f"/charges/{charge.id}/capture_payment", json={},
                     headers={"Idempotency-Key": "tier-2"}).status_code == 422


def test_a_running_requests_key_is_touched_so_a_repeat_past_a_minute_waits(api, monkeypatch):
    """Found by an audit: nothing touched a running request's key, so a request that ran over
    60 seconds (a row lock waited for) lost it: a repeat ran beside it, and the first one's end
    then deleted the repeat's key. A lease touches it while the request runs; once taken over
    (a process silent for a minute), the request that lost it writes nothing to it."""
    from rebill.api import idempotency
    from rebill.errors import Conflict
    monkeypatch.setattr(idempotency, "HEARTBEAT_SECONDS", 0.02)
    owner = (api.store.id, _token_id(api), "long-1")
    print_ = fingerprint("POST", "/customers", _body(), version=api.version)
    began = api.clock.now()
    assert idempotency.begin(api.db, *owner, print_, began) is None
    lease = idempotency.Lease(api.db, api.clock, owner, began)
    lease.hold()
    api.clock.advance(timedelta(seconds=61))
    deadline = time.monotonic() + 10
    while _touched_at(api, "long-1") == began and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _touched_at(api, "long-1") == api.clock.now()
    with pytest.raises(Conflict):  # still running: not taken over
        idempotency.begin(api.db, *owner, print_, api.clock.now())
    idempotency.finish(api.db, *owner, idempotency.Stored(201, [], b"{}"), api.clock.now(), lease.release())
    assert idempotency.begin(api.db, *owner, print_, api.clock.now()) == idempotency.Stored(201, [], b"{}")
    # A key taken over after a silent minute: the one that lost it neither stores nor frees it.
    second = (api.store.id, _token_id(api), "long-2")
    old = api.clock.now()
    assert idempotency.begin(api.db, *second, print_, old) is None
    lost = idempotency.Lease(api.db, api.clock, second, old)  # never held: its process was silent
    api.clock.advance(timedelta(seconds=61))
    assert idempotency.begin(api.db, *second, print_, api.clock.now()) is None  # the repeat takes it
    idempotency.finish(api.db, *second, None, api.clock.now(), lost.release())
    assert _keys(api)["long-2"] == "running"  # the repeat's, still
    lost.touch()
    assert lost.ended and _touched_at(api, "long-2") != old  # the repeat's take, untouched by the lost lease


def test_a_request_whose_key_was_taken_over_commits_nothing(api):
    """Found by an audit: a process stopped (not dead) for over a minute while its keyed
    request ran; a repeat took the key over and made the customer, then the first went on
    and committed a second one. Its unit now finds the key no longer its take: 409, nothing
    written (both databases)."""
    from rebill.api import idempotency
    from rebill.domain.unit import REQUEST_KEY, KeyTakenOver
    from tests.builders import make_customer
    owner = (api.store.id, _token_id(api), "stopped-1")
    print_ = fingerprint("POST", "/customers", _body(), version=api.version)
    first = api.clock.now()
    assert idempotency.begin(api.db, *owner, print_, first) is None
    api.clock.advance(timedelta(seconds=61))  # no touch: the process was stopped
    assert idempotency.begin(api.db, *owner, print_, api.clock.now()) is None  # the repeat takes it
    marked = REQUEST_KEY.set((*owner, first))
    try:
        with pytest.raises(KeyTakenOver):  # its events are written as it commits
            make_customer(api)
    finally:
        REQUEST_KEY.reset(marked)
    assert _count(api) == 0
    assert _keys(api)["stopped-1"] == "running"  # the repeat's take, not marked by the refused one


def _address_create(api):
    from rebill.domain.address import service
    from rebill.models import addresses
    from tests.api.test_addresses_support import us_fields
    from tests.builders import make_customer
    customer = make_customer(api)
    return service, "/addresses", {"customer_id": customer.id, **us_fields()}, addresses


def _batch_create(api):
    from rebill.domain.batch import service
    from rebill.models import async_batches
    return service, "/async_batches", {"batch_type": "discount_create"}, async_batches


@pytest.mark.parametrize("request_of", [_address_create, _batch_create], ids=["events", "no-events"])
def test_a_stopped_request_whose_key_was_taken_over_answers_409_over_http(api, monkeypatch, request_of):
    """The same through the API (PostgreSQL, whose handlers run in threads: on SQLite the
    stopped handler would hold the event loop), on creates with no unique field that would
    refuse the second one anyway: an address (its write records events, whose flush marks the
    key) and an async batch (its write records none: found by a review, it committed beside
    the repeat). The first request's process says nothing for a minute (no heartbeat), the
    repeat takes the key and creates; the first then goes on and is refused, and the key keeps
    the repeat's answer."""
    import threading

    from rebill.api import idempotency
    if api.db.dialect == "sqlite":
        pytest.skip("on SQLite a handler on the event loop holds the loop while it is stopped")
    service, path, body, table = request_of(api)
    monkeypatch.setattr(idempotency.Lease, "hold", lambda self: None)  # a stopped process touches nothing
    real, started, go_on = service.create, threading.Event(), threading.Event()

    def stopped(*args, **kw):
        started.set()
        go_on.wait(15)
        return real(*args, **kw)
    monkeypatch.setattr(service, "create", stopped)

    def send():
        return api.post(path, json=body, headers={"Idempotency-Key": "stopped-2"})
    replies: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: replies.setdefault("first", send()))
    runner.start()
    assert started.wait(10)
    monkeypatch.setattr(service, "create", real)
    api.clock.advance(timedelta(seconds=61))
    repeat = send()
    assert repeat.status_code == 201, repeat.text
    go_on.set()
    runner.join(15)
    assert replies["first"].status_code == 409, replies["first"].text
    assert "taken over" in str(replies["first"].json()["errors"])
    with api.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(table).where(
            table.c.store_id == api.store.id)).scalar() == 1
    assert send().content == repeat.content


def test_a_request_longer_than_a_minute_keeps_its_key_over_http(api, monkeypatch):
    """The same through the API (PostgreSQL, whose handlers run in threads): a customer create
    that takes over a minute of the clock; once the heartbeat has touched its key, a repeat
    answers 409; the first one's answer is kept, one customer."""
    import threading

    from rebill.api import idempotency
    from rebill.domain.customer import service
    if api.db.dialect == "sqlite":
        pytest.skip("on SQLite a handler on the event loop holds the write lock while it runs: the heartbeat "
                    "and any repeat wait for it (the lease itself is tested on both databases above)")
    monkeypatch.setattr(idempotency, "HEARTBEAT_SECONDS", 0.02)
    real, started, go_on = service.create, threading.Event(), threading.Event()

    def slow(*args, **kw):
        api.clock.advance(timedelta(seconds=61))
        started.set()
        go_on.wait(15)
        return real(*args, **kw)
    monkeypatch.setattr(service, "create", slow)
    replies: dict[str, Any] = {}

    def send(name):
        replies[name] = _post(api, _body(), key="long-3")
    runner = threading.Thread(target=send, args=("first",))
    runner.start()
    assert started.wait(10)
    deadline = time.monotonic() + 10  # the heartbeat looks every second
    while time.monotonic() < deadline and _touched_at(api, "long-3") != api.clock.now():
        time.sleep(0.02)
    assert _touched_at(api, "long-3") == api.clock.now()  # said alive past the minute
    monkeypatch.setattr(service, "create", real)
    repeater = threading.Thread(target=send, args=("repeat",))
    repeater.start()
    time.sleep(0.3)
    go_on.set()
    runner.join(15)
    repeater.join(15)
    first, repeat = replies["first"], replies["repeat"]
    assert first.status_code == 201, first.text
    assert repeat.status_code == 409, repeat.text
    assert _post(api, _body(), key="long-3").content == first.content
    assert _count(api) == 1


def _touched_at(api, key):
    with api.db.read() as conn:
        return conn.execute(select(idempotency_keys.c.updated_at).where(
            idempotency_keys.c.store_id == api.store.id, idempotency_keys.c.key == key)).scalar()


def test_a_keyed_refund_whose_answer_was_lost_is_not_run_again(api, monkeypatch):
    """Found by an audit: a handler that calls the payment processor never marked its key
    applied, so a refund whose process died after recording it left a key that freed itself
    after 60 seconds, and the repeat refunded again. The unit recording the processor's answer
    marks it: the repeat answers 409, one refund."""
    from decimal import Decimal

    from rebill.api import idempotency
    from tests.api.test_charges_money_back import _ledger, _processed
    shop = api.other_store(plan_tier="premium_a")
    charge = _processed(shop)
    monkeypatch.setattr(idempotency, "finish", lambda *args, **kw: None)  # died before storing the answer
    keyed = {"Idempotency-Key": "refund-lost"}
    first = shop.post(f"/charges/{charge['id']}/refund", json={"amount": "1.00"}, headers=keyed)
    assert first.status_code == 200, first.text
    monkeypatch.undo()
    shop.clock.advance(timedelta(seconds=61))
    again = shop.post(f"/charges/{charge['id']}/refund", json={"amount": "1.00"}, headers=keyed)
    assert again.status_code == 409, again.text
    assert _ledger(shop, "refund") == [Decimal(100)]


def test_a_requests_read_marks_nothing_and_its_write_marks_its_key_even_without_events(api):
    """A request's units (api/call.py): its reads never touch its key (a read that marked it
    would leave a request refused after its read "applied", 409 "answer lost" for its repeat);
    its write unit marks the key as it commits, events or not (an async batch's records none)."""
    from rebill.api import idempotency
    from rebill.domain.unit import REQUEST_KEY, Unit
    owner = (api.store.id, _token_id(api), "units-1")
    began = api.clock.now()
    assert idempotency.begin(api.db, *owner, "print", began) is None
    marked = REQUEST_KEY.set((*owner, began))
    try:
        opened = api.db.read()
        with Unit(opened.__enter__(), api.store, began, opened.__exit__):
            pass
        assert _keys(api)["units-1"] == "running"
        opened = api.db.write()
        with Unit(opened.__enter__(), api.store, began, opened.__exit__, writes=True):
            pass
        assert _keys(api)["units-1"] == "applied"
    finally:
        REQUEST_KEY.reset(marked)
