"""bench/floor.py replays a create's statements on the driver: it must write what a create
writes (else its floor would be too low), on both databases."""

from __future__ import annotations

from typing import Any

from bench import floor
from sqlalchemy import func, select

from rebill.models import charge_items, charges, customers, events, purchase_items
from tests.builders import make_address


def _count(api: Any, table: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(table).where(table.c.store_id == api.store.id)).scalar()


def test_the_floor_writes_the_rows_of_a_create(api: Any) -> None:
    url = api.db.engine.url.render_as_string(hide_password=False)
    address = make_address(api)
    made = api.post("/subscriptions", {"address_id": address.id, "product_title": "Tea", "price": "9.90",
                                       "quantity": 1, "charge_interval_frequency": 1, "order_interval_frequency": 1,
                                       "order_interval_unit": "month", "next_charge_scheduled_at": "2031-01-15"})
    assert made.status_code == 201, made.text
    before = {t.name: _count(api, t) for t in (customers, events, purchase_items, charges, charge_items)}

    assert floor.customer_floor(url, api.store.id, count=10) > 0
    assert _count(api, customers) == before["customers"] + 10
    assert _count(api, events) == before["events"] + 10

    assert floor.subscription_floor(url, api.store.id, (address.id, address.id), "2031-02-15", count=10) > 0
    # One address and one date: the first create plans a charge, the nine others join it.
    assert _count(api, purchase_items) == before["purchase_items"] + 10
    assert _count(api, charges) == before["charges"] + 1
    assert _count(api, charge_items) == before["charge_items"] + 10
    assert _count(api, events) == before["events"] + 10 + 20


def test_the_ceiling_adds_the_floor_to_the_bare_time() -> None:
    # 25,000 req/s is 40 µs per request; 60 µs of statements make 100 µs: 0.4 of the bare rate.
    assert floor.ceiling(25_000, 60) == 0.4


def test_the_outbox_floor_writes_what_the_outbox_writes(api: Any) -> None:
    """With ``outbox`` a create also writes one payload and one delivery per enabled webhook."""
    from rebill.models import webhook_deliveries, webhook_payloads
    url = api.db.engine.url.render_as_string(hide_password=False)
    for n in range(3):
        made = api.post("/webhooks", {"address": f"http://localhost:9/hooks/{n}", "topic": "customer/created"})
        assert made.status_code == 201, made.text
    made = api.post("/customers", {"email": "template@example.com", "first_name": "T", "last_name": "P"})
    assert made.status_code == 201, made.text
    before = {t.name: _count(api, t) for t in (customers, events, webhook_payloads, webhook_deliveries)}
    assert floor.customer_floor(url, api.store.id, count=10, outbox=True) > 0
    assert _count(api, customers) == before["customers"] + 10
    assert _count(api, events) == before["events"] + 10
    assert _count(api, webhook_payloads) == before["webhook_payloads"] + 10
    assert _count(api, webhook_deliveries) == before["webhook_deliveries"] + 30
