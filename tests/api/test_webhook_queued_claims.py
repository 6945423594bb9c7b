"""Deliveries a runner claimed and queued behind a slow receiver are looked at again before
their attempt (jobs/deliver.py ``QUEUED_LOOK_SECONDS``, domain/webhook/delivery.still_to): found
by an audit, they went out after `DELETE /webhooks/{id}` had answered, and to the old address
after a `PUT` had changed it (the new address then never received those events)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from starlette.concurrency import run_in_threadpool

from rebill.domain.webhook.delivery import Outcome
from rebill.jobs import deliver
from rebill.jobs.deliver import DeliveryRunner
from rebill.models import webhooks as webhook_rows
from tests.builders import make_customer

V11 = "2021-11"
OLD, NEW = "https://old.example.com/hooks", "https://new.example.com/hooks"


class GatedSender:
    """Answers 200 to every attempt; the first waits until ``gate`` is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.gate: asyncio.Event | None = None

    async def send(self, address: str, body: bytes, headers: dict[str, str], started_at: datetime, *,
                   public_only: bool = False) -> Outcome:
        self.sent.append((address, headers["webhook-id"]))
        if len(self.sent) == 1:
            assert self.gate is not None
            await self.gate.wait()
        return Outcome(started_at, 200, 1, "", None)

    async def close(self) -> None:
        pass


def _run(api: Any, sender: GatedSender, change: Any) -> None:
    """Three deliveries due, one receiver slot: the first claimed in flight and the second
    claimed and queued behind it while ``change`` runs, the third claimed after it."""
    async def scenario() -> None:
        runner = DeliveryRunner(api.db, api.clock.now, sender=sender, per_receiver=1)
        runner._start()
        sender.gate = asyncio.Event()
        assert await runner.look(store_id=api.store.id) == 2  # a slot and a place in the queue
        while not sender.sent:
            await asyncio.sleep(0.01)
        await run_in_threadpool(change)
        sender.gate.set()
        await runner.drain(store_id=api.store.id)
    asyncio.run(scenario())


@pytest.fixture
def looked_at_once(monkeypatch: Any) -> None:
    monkeypatch.setattr(deliver, "QUEUED_LOOK_SECONDS", 0.0, raising=False)  # every queued one looked at


def _hooked(api: Any) -> int:
    made = api.post("/webhooks", json={"address": OLD, "topic": "customer/created"}, version=V11)
    assert made.status_code == 201, made.text
    for _ in range(3):
        make_customer(api)
    return int(made.json()["webhook"]["id"])


def test_queued_deliveries_of_a_deleted_webhook_are_not_sent(api, looked_at_once):
    webhook_id = _hooked(api)
    sender = GatedSender()
    _run(api, sender, lambda: api.delete(f"/webhooks/{webhook_id}", version=V11))
    assert [address for address, _ in sender.sent] == [OLD]  # the one on the wire when it was deleted


def test_queued_deliveries_go_to_the_new_address_of_their_webhook(api, looked_at_once):
    webhook_id = _hooked(api)
    sender = GatedSender()
    _run(api, sender, lambda: api.put(f"/webhooks/{webhook_id}", json={"address": NEW}, version=V11))
    assert [address for address, _ in sender.sent] == [OLD, NEW, NEW]
    assert len({message for _, message in sender.sent}) == 3  # each event once
    shown = api.get("/webhook_deliveries", params={"webhook_id": webhook_id}, version=V11).json()
    assert sorted(d["status"] for d in shown["webhook_deliveries"]) == ["succeeded"] * 3


def test_queued_deliveries_of_a_disabled_webhook_wait_for_it(api, looked_at_once):
    webhook_id = _hooked(api)
    sender = GatedSender()

    def disable() -> None:
        with api.db.write() as conn:
            conn.execute(webhook_rows.update().where(webhook_rows.c.id == webhook_id)
                         .values(disabled_at=api.clock.now()))
    _run(api, sender, disable)
    assert [address for address, _ in sender.sent] == [OLD]
    shown = api.get("/webhook_deliveries", params={"webhook_id": webhook_id}, version=V11).json()
    assert sorted(d["status"] for d in shown["webhook_deliveries"]) == ["pending", "pending", "succeeded"]


def test_an_attempt_is_logged_at_the_store_time_it_started_at(api):
    """Found by an audit: a test clock advance made while an attempt ran moved the attempt's
    `started_at` in the log by as much (it took the store's offset when it was recorded)."""
    from datetime import timedelta

    from sqlalchemy import update

    from rebill.models import stores
    _hooked(api)
    sender = GatedSender()
    before = api.clock.now()

    def advance() -> None:
        with api.db.write() as conn:
            conn.execute(update(stores).where(stores.c.id == api.store.id)
                         .values(clock_offset_seconds=stores.c.clock_offset_seconds + 8 * 3600))
    _run(api, sender, advance)
    shown = api.get("/webhook_deliveries", params={"sort_by": "id-asc"}, version=V11).json()["webhook_deliveries"]
    first = datetime.fromisoformat(shown[0]["attempts"][0]["started_at"])
    assert abs(first - before) < timedelta(minutes=1), (first, before)
    third = datetime.fromisoformat(shown[2]["attempts"][0]["started_at"])  # claimed after the advance
    assert abs(third - before - timedelta(hours=8)) < timedelta(minutes=1), (third, before)


def _installed(api: Any, installed: bool) -> None:
    from sqlalchemy import update

    from rebill.models import stores
    with api.db.write() as conn:  # as `rebill stores update NAME --uninstalled` / `--installed`
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(installed=installed))


def test_an_uninstalled_stores_deliveries_wait_until_it_is_installed_again(api):
    """As its billing does (docs/webhooks.md). Found by an audit: an uninstalled store's
    receivers kept getting its new customers, and the attempts went on."""
    webhook_id = _hooked(api)
    _installed(api, False)
    sender = GatedSender()

    async def looks() -> int:
        """The store's own look and the look at every store (which may find other tests'
        deliveries on a shared database: only this store's are counted, by their state)."""
        runner = DeliveryRunner(api.db, api.clock.now, sender=sender, per_receiver=4)
        runner._start()
        sender.gate = asyncio.Event()
        sender.gate.set()
        claimed = await runner.look(store_id=api.store.id)
        await runner.look()
        await runner.drain()
        return claimed

    def shown() -> list[tuple[str, int]]:
        from sqlalchemy import select

        from rebill.models import webhook_deliveries as table
        with api.db.read() as conn:  # not through the API: it refuses an uninstalled store (403)
            return sorted((status, attempts) for status, attempts in conn.execute(
                select(table.c.status, table.c.attempts).where(table.c.webhook_id == webhook_id)))

    assert asyncio.run(looks()) == 0
    assert shown() == [("pending", 0)] * 3
    _installed(api, True)
    assert asyncio.run(looks()) == 3
    assert shown() == [("succeeded", 1)] * 3


def test_queued_deliveries_of_a_store_uninstalled_meanwhile_wait(api, looked_at_once):
    webhook_id = _hooked(api)
    sender = GatedSender()
    _run(api, sender, lambda: _installed(api, False))
    assert [address for address, _ in sender.sent] == [OLD]  # on the wire already
    _installed(api, True)  # to read them (an uninstalled store's tokens answer 403)
    shown = api.get("/webhook_deliveries", params={"webhook_id": webhook_id}, version=V11).json()
    assert sorted(d["status"] for d in shown["webhook_deliveries"]) == ["pending", "pending", "succeeded"]


def test_an_uninstalled_stores_deliveries_are_no_stop_of_its_test_clock(api):
    """Its deliveries wait for its installing (above): a clock walk must not stop for them."""
    from rebill.domain.webhook import delivery
    _hooked(api)
    with api.db.read() as conn:
        assert delivery.next_due(conn, api.store.id) is not None
    _installed(api, False)
    with api.db.read() as conn:
        assert delivery.next_due(conn, api.store.id) is None
    _installed(api, True)
