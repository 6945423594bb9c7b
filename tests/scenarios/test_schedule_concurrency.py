"""Concurrent writes to one address never leave two charges for one date: the address lock
(domain/address/repository.lock) keeps two plans of an address from interleaving. Runs on
both databases with real threads and connections."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

from rebill.domain.subscription import service
from rebill.domain.subscription.model import SubscriptionCreate
from rebill.domain.unit import Unit
from tests.builders import charges_of, make_address, make_subscription
from tests.scenarios.conftest import assert_schedule_consistent


def test_subscriptions_created_at_once_on_one_address_share_one_charge(api):
    address = make_address(api)
    when = api.clock.now().date() + timedelta(days=20)
    # The customer is active already: the writers below share no row but the address's.
    make_subscription(api, address, next_charge_scheduled_at=when, price=Decimal("5.00"))
    start = threading.Barrier(6, timeout=10)
    errors: list[BaseException] = []

    def create(n: int) -> None:
        try:
            start.wait()
            with api.db.write() as conn:
                service.create(Unit(conn, api.store, api.clock.now()), SubscriptionCreate(
                    address_id=address.id, product_title=f"Item {n}", price=Decimal("5.00"),
                    charge_interval_frequency=1, order_interval_frequency=1, order_interval_unit="month",
                    next_charge_scheduled_at=when))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a writer hung"
    assert errors == []
    [charge] = charges_of(api, address.id)
    assert len(charge.line_items) == 7 and charge.total_price == Decimal("35.00")
    assert_schedule_consistent(api, address.id)
