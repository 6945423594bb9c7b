"""Writes of one customer (or product) at the same moment, on PostgreSQL (SQLite runs one
writer at a time). Found by an audit:

- a customer's status was counted without its lock: two cancels on two of its addresses each
  counted the other's subscription still active and left the customer `active` with none;
- an update merged its billing fields into the billing address as it was before another
  update, and one of the two was lost;
- two identical updates of a customer or a product each recorded an event.

The test holds the row's lock in another transaction until the requests wait for it, in their
order, then lets them go (tests/builders.py, ``while_row_locked``)."""

from __future__ import annotations

from typing import Any

import pytest

from rebill.models import customers, products
from tests.api.test_products import make_product
from tests.builders import events_of, make_address, make_customer, make_subscription, while_row_locked

V01, V11 = "2021-01", "2021-11"


@pytest.fixture
def pg(api: Any) -> Any:
    if api.db.dialect != "postgresql":
        pytest.skip("SQLite runs one writer at a time: no write reads what another has not committed")
    return api


def _topics(api: Any, resource_id: int, prefix: str) -> list[str]:
    return [topic for topic, rid in events_of(api) if rid == resource_id and topic.startswith(prefix)]


def test_cancels_on_two_addresses_at_once_leave_the_customer_inactive(pg):
    customer = make_customer(pg)
    items = [make_subscription(pg, make_address(pg, customer)) for _ in range(2)]
    cancel = {"cancellation_reason": "moving"}
    replies = while_row_locked(pg, customers, customer.id,
                               [("POST", f"/subscriptions/{item.id}/cancel", cancel) for item in items])
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    assert pg.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "INACTIVE"
    assert _topics(pg, customer.id, "customer/deactivated") == ["customer/deactivated"]


def test_two_billing_updates_at_once_keep_both(pg):
    customer = make_customer(pg)
    billing = {"billing_address1": "1 Bill St", "billing_city": "Town", "billing_zip": "94105",
               "billing_province": "California", "billing_country": "United States", "billing_first_name": "Ada",
               "billing_last_name": "Lovelace"}
    assert pg.put(f"/customers/{customer.id}", json=billing, version=V01).status_code == 200
    replies = while_row_locked(pg, customers, customer.id, [
        ("PUT", f"/customers/{customer.id}", {"billing_address1": "99 New St"}),
        ("PUT", f"/customers/{customer.id}", {"billing_city": "Newtown"})], version=V01)
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    shown = pg.get(f"/customers/{customer.id}", version=V01).json()["customer"]
    assert (shown["billing_address1"], shown["billing_city"]) == ("99 New St", "Newtown")


def test_identical_updates_at_once_record_one_event(pg):
    customer = make_customer(pg)
    product = make_product(pg, "same-1")
    replies = while_row_locked(pg, customers, customer.id,
                               [("PUT", f"/customers/{customer.id}", {"first_name": "Grace"})] * 2)
    assert [r.status_code for r in replies] == [200, 200]
    assert _topics(pg, customer.id, "customer/updated") == ["customer/updated"]
    replies = while_row_locked(pg, products, product.id,
                               [("PUT", "/products/same-1", {"title": "Renamed"})] * 2, version=V11)
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    assert _topics(pg, product.id, "product/updated") == ["product/updated"]
