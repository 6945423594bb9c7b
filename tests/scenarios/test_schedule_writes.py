"""What a create no longer reads back (issue 18, docs/performance.md "SQLite writes against the
floor"), each checked against what the stored rows say, on both databases:

- a created subscription or one-time item answers with the values it wrote, not a re-read of
  its row (domain/subscription/repository.inserted);
- the events of a create and of its replan name their customer without a look-up;
- the replan of a create takes the address the create locked, and reads the open charges with
  the columns a plan decides (charge/model.OpenCharge)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from rebill.domain.charge.model import OpenCharge
from rebill.domain.schedule import audit
from rebill.domain.schedule.reconcile import PLANNED
from rebill.domain.unit import Unit
from rebill.models import charges, events, purchase_items
from tests.api.test_subscriptions import MONTHLY, created_status, day, make_catalog, sub_body
from tests.builders import make_address, make_discount

# Bodies that take each way through a create: explicit fields, the catalog, a plan, a prepaid
# cadence, a day of the month, a limit of charges, properties and analytics data.
SHAPES: dict[str, dict[str, Any]] = {
    "explicit": {},
    "properties and analytics": {"properties": [{"value": "fine", "name": "grind"}, {"name": "roast", "value": "dark"}],
                                 "analytics_data": {"utm_params": [{"utm_source": "mail", "utm_medium": "email"}]},
                                 "sku": "COF-1", "sku_override": True, "is_swappable": False},
    "prepaid": {"charge_interval_frequency": 3, "order_interval_frequency": 1},
    "day of month": {"order_day_of_month": 31, "next_charge_scheduled_at": None},
    "limited": {"expire_after_specific_number_of_charges": 2, "quantity": 3, "price": "0.10"},
}


def _same_as_get(api: Any, created: Any, resource: str, version: str) -> None:
    """The create's answer is what a GET of the stored row answers, byte for byte on both
    databases (PostgreSQL's JSON columns are `json`, which keeps an object's keys as written:
    with `jsonb` a GET listed analytics_data's `utm_medium` before `utm_source`)."""
    made = created.json()[resource]
    got = api.get(f"/{resource}s/{made['id']}", version=version)
    assert got.status_code == 200, got.text
    assert created.content == got.content


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_created_subscription_answers_what_a_get_of_it_reads(vapi: Any, shape: str) -> None:
    address = make_address(vapi)
    response = vapi.post("/subscriptions", json=sub_body(vapi, address.id, **SHAPES[shape]))
    assert response.status_code == created_status(vapi.version), response.text
    assert response.json()["subscription"]["has_queued_charges"] is True
    _same_as_get(vapi, response, "subscription", vapi.version)


def test_a_subscription_from_the_catalog_and_from_a_plan_answers_what_a_get_reads(vapi: Any) -> None:
    product_id, _ = make_catalog(vapi)
    _, plan_id = make_catalog(vapi, discount_amount="10", discount_type="percentage")
    address = make_address(vapi)
    ids = ({"external_product_id": {"ecommerce": product_id}, "external_variant_id": {"ecommerce": f"{product_id}-2"}}
           if vapi.version == "2021-11" else {"platform_product_id": product_id,
                                               "platform_variant_id": f"{product_id}-2"})
    for body in ({"address_id": address.id, **MONTHLY, **ids}, {"address_id": address.id, "plan_id": plan_id}):
        response = vapi.post("/subscriptions", json=body)
        assert response.status_code == created_status(vapi.version), response.text
        _same_as_get(vapi, response, "subscription", vapi.version)


def test_a_created_onetime_answers_what_a_get_of_it_reads(api: Any) -> None:  # 2021-11 only
    address = make_address(api)
    response = api.post("/onetimes", json={"address_id": address.id, "product_title": "Mug", "price": "8.00",
                                           "quantity": 2, "next_charge_scheduled_at": day(api, 10),
                                           "properties": [{"name": "colour", "value": "blue"}]})
    assert response.status_code == 201, response.text
    _same_as_get(api, response, "onetime", api.version)


def _events(api: Any, since: int) -> list[tuple[str, int, int | None]]:
    with api.db.read() as conn:
        return [(r.topic, r.resource_id, r.customer_id) for r in conn.execute(
            select(events.c.topic, events.c.resource_id, events.c.customer_id)
            .where(events.c.store_id == api.store.id, events.c.id > since).order_by(events.c.id))]


def _last_event(api: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(events.c.id).order_by(events.c.id.desc()).limit(1)).scalar() or 0


def _owner(api: Any, table: Any, row_id: int) -> int:
    with api.db.read() as conn:
        return conn.execute(select(table.c.customer_id).where(table.c.id == row_id)).scalar_one()


def test_the_events_of_a_create_and_its_replan_name_the_customer_the_rows_name(api: Any) -> None:
    address = make_address(api)
    first = _last_event(api)
    made = api.post("/subscriptions", json=sub_body(api, address.id)).json()["subscription"]
    created = _events(api, first)
    assert [topic for topic, _, _ in created] == ["subscription/created", "customer/activated", "charge/created"]
    # A second item on the same date rewrites that charge: charge/updated.
    second = _last_event(api)
    api.post("/subscriptions", json=sub_body(api, address.id, product_title="Tea"))
    updated = _events(api, second)
    assert [topic for topic, _, _ in updated] == ["subscription/created", "charge/updated"]
    for topic, resource_id, customer_id in created + updated:
        table = {"subscription": purchase_items, "charge": charges}.get(topic.split("/")[0])
        expected = address.customer_id if table is None else _owner(api, table, resource_id)
        assert customer_id == expected == address.customer_id, (topic, resource_id)
    assert created[0][1] == made["id"]


def test_a_create_on_an_address_with_a_code_and_a_skip_plans_what_a_fresh_plan_says(api: Any) -> None:
    """The replan of a create (the address as the create read it, open charges read narrow)
    leaves the charges a from-scratch plan would make (schedule/audit.py)."""
    address = make_address(api)
    code = make_discount(api)
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": code}).status_code == 200
    weekly = {"order_interval_unit": "week", "next_charge_scheduled_at": day(api, 7)}
    first = api.post("/subscriptions", json=sub_body(api, address.id, **weekly)).json()["subscription"]
    queued = _charge_on(api, address.id, day(api, 7))
    skipped = api.post(f"/charges/{queued}/skip", json={"purchase_item_ids": [first["id"]]})
    assert skipped.status_code == 200, skipped.text
    api.post("/subscriptions", json=sub_body(api, address.id, product_title="Tea", **weekly))
    api.post("/subscriptions", json=sub_body(api, address.id, next_charge_scheduled_at=day(api, 20)))
    with api.db.read() as conn:
        assert audit.differences(Unit(conn, api.store, api.clock.now()), [address.id]) == []
        stored = conn.execute(select(charges.c.scheduled_at, charges.c.status, charges.c.discount_id)
                              .where(charges.c.address_id == address.id).order_by(charges.c.scheduled_at,
                                                                                   charges.c.status)).all()
    # The skipped line has a charge of its own without the code; the queued ones carry it.
    assert [(when.isoformat(), status, discount) for when, status, discount in stored] == [
        (day(api, 7), "queued", code), (day(api, 7), "skipped", None), (day(api, 14), "queued", code),
        (day(api, 20), "queued", code)]


def _charge_on(api: Any, address_id: int, when: str) -> int:
    with api.db.read() as conn:
        return conn.execute(select(charges.c.id).where(charges.c.address_id == address_id,
                                                       charges.c.status == "queued")
                            .order_by(charges.c.scheduled_at).limit(1)).scalar_one()


def test_open_charges_read_the_planned_columns_first_in_the_plans_order() -> None:
    # reconcile compares a stored charge with its plan column by column (PLANNED).
    assert OpenCharge.__struct_fields__[:len(PLANNED)] == PLANNED
