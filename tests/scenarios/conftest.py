"""Scenarios: stories told through HTTP while a frozen clock moves (design guide)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timezone
from typing import Any

import pytest

from rebill.domain.schedule.audit import differences
from rebill.domain.unit import Unit
from tests.api.test_webhooks import receiving
from tests.builders import make_address, make_customer, make_payment_method, make_subscription
from tests.receiver import Receiver


@pytest.fixture
def at(api: Any) -> Iterator[Callable[[date], None]]:
    """``at(date(2026, 1, 15))`` sets the clock to noon UTC of that day; the clock the other
    tests share is put back afterwards."""
    before = api.clock.now()

    def move(day: date) -> None:
        api.clock.set(datetime.combine(day, time(12), tzinfo=timezone.utc))
    yield move
    api.clock.set(before)


@pytest.fixture(scope="module")
def _module_receiver() -> Iterator[Receiver]:
    """One receiver on localhost per test module: stopping one waits for its poll (0.5 s)."""
    with receiving() as running:
        yield running


@pytest.fixture
def webhook_receiver(_module_receiver: Receiver) -> Receiver:
    """A receiver on localhost with nothing received yet. Each test has its own store, and its
    deliveries are sent by the test (`drain`, a clock advance), so none arrives late."""
    _module_receiver.received.clear()
    return _module_receiver


def assert_schedule_consistent(api: Any, *address_ids: int) -> None:
    """The stored queued and skipped charges equal a plan made from scratch."""
    with api.db.read() as conn:
        assert differences(Unit(conn, api.store, api.clock.now()), list(address_ids)) == []


def subscriber(api: Any, token: str = "pm_ok", customer: Any = None, **kw: Any) -> tuple[Any, Any]:
    """An address whose customer pays with ``token`` (decisions §6.12, sandbox tokens), and a
    subscription on it (``kw``: its fields)."""
    customer = customer or make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    address = make_address(api, customer)
    return address, make_subscription(api, address, **kw)


def pay_with(api: Any, token: str) -> None:
    """Every payment method of the store now pays with sandbox ``token`` (a customer who put a
    new card in, or whose card starts failing), valid again."""
    from sqlalchemy import update

    from rebill.models import payment_methods
    with api.db.write() as conn:
        conn.execute(update(payment_methods).where(payment_methods.c.store_id == api.store.id)
                     .values(processor_payment_method_token=token, status="valid"))


def advance(api: Any, **body: Any) -> dict[str, Any]:
    """Moves the store's test clock (``days``, ``to`` or ``hours``); the `store_clock` answer."""
    reply = api.post("/store/clock/advance", json=body)
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["store_clock"])
