"""Two writes of one plan, or of one 2021-01 product's plans, at the same moment (PostgreSQL;
SQLite runs one writer at a time). Found by an audit: each write read the plans before it took
its product's update lock, so the second was checked against, and merged with, the plans as
they were before the first (a prepaid plan of frequencies 2 and 2 that no later write could
pass; one product PUT sent twice made its missing plan twice). Every plan writer now locks the
product first and reads the plans after it.

The test holds the product's lock in another transaction until both requests wait for it, in
their order, then lets them go: the interleaving that lost the first write, every time."""

from __future__ import annotations

from typing import Any

import pytest

from rebill.models import products
from tests.api.test_products import make_plan, make_product
from tests.builders import while_row_locked

V01 = "2021-01"


def _postgresql_only(api: Any) -> None:
    if api.db.dialect != "postgresql":
        pytest.skip("SQLite runs one writer at a time: no write reads what another has not committed")


def _while_the_product_is_locked(api: Any, product_id: int, requests: list[tuple[str, str, Any]],
                                 version: str | None = None) -> list[Any]:
    return while_row_locked(api, products, product_id, requests, version)


def test_two_updates_of_one_plan_are_each_checked_against_the_other(api):
    _postgresql_only(api)
    product = make_product(api, "race-1")
    plan = make_plan(api, product)
    prepaid = {"type": "prepaid", "subscription_preferences": {"order_interval_frequency": 1,
                                                               "charge_interval_frequency": 3}}
    every_two = {"subscription_preferences": {"order_interval_frequency": 2, "charge_interval_frequency": 2}}
    replies = _while_the_product_is_locked(api, product.id, [("PUT", f"/plans/{plan.id}", prepaid),
                                                             ("PUT", f"/plans/{plan.id}", every_two)])
    _as_one_after_the_other(api, plan.id, replies)


def _as_one_after_the_other(api: Any, plan_id: int, replies: list[Any]) -> None:
    """Prepaid first: every-two is refused against it (a prepaid plan's charge frequency must
    exceed its order one), and the plan is one the rules pass: the next write is taken."""
    assert [r.status_code for r in replies] == [200, 422], [r.text for r in replies]
    after = api.get(f"/plans/{plan_id}").json()["plan"]
    assert (after["type"], after["subscription_preferences"]["order_interval_frequency"],
            after["subscription_preferences"]["charge_interval_frequency"]) == ("prepaid", 1, 3)
    assert api.put(f"/plans/{plan_id}", json={"title": "Renamed"}).status_code == 200


def test_bulk_updates_of_one_plan_read_it_after_its_products_lock(api):
    _postgresql_only(api)
    product = make_product(api, "race-2")
    plan = make_plan(api, product)
    prepaid = {"plans": [{"id": plan.id, "type": "prepaid", "subscription_preferences": {
        "order_interval_frequency": 1, "charge_interval_frequency": 3}}]}
    every_two = {"plans": [{"id": plan.id, "subscription_preferences": {"order_interval_frequency": 2,
                                                                          "charge_interval_frequency": 2}}]}
    replies = _while_the_product_is_locked(api, product.id, [("PUT", "/plans/bulk_update", prepaid),
                                                             ("PUT", "/plans/bulk_update", every_two)])
    _as_one_after_the_other(api, plan.id, replies)


def test_one_2021_01_product_put_sent_twice_at_once_makes_its_plan_once(api):
    _postgresql_only(api)
    made = api.post("/products", version=V01, json={
        "platform_product_id": "race-3", "title": "Tea", "subscription_defaults": {
            "storefront_purchase_options": "subscription_and_onetime", "order_interval_unit": "month",
            "order_interval_frequency_options": ["1"]}})
    assert made.status_code == 200, made.text
    product_id = made.json()["product"]["id"]
    change = {"subscription_defaults": {"order_interval_frequency_options": ["3"], "charge_interval_frequency": 3}}
    replies = _while_the_product_is_locked(api, product_id, [("PUT", f"/products/{product_id}", change)] * 2,
                                           version=V01)
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    plans = api.get("/plans", params={"external_product_id": "race-3"}).json()["plans"]
    recurring = [p for p in plans if p["type"] != "onetime"]
    assert [p["subscription_preferences"]["order_interval_frequency"] for p in recurring] == [3]
    assert len(plans) == 2  # and the one-time plan


def test_a_plan_moved_to_another_product_while_its_lock_was_awaited_answers_409(api, monkeypatch):
    """The plan is read again once its product is locked; one a concurrent write moved to
    another product meanwhile (so the lock taken is not its product's) is a lost race: 409,
    nothing written. Simulated on both databases: the move commits while the lock is taken."""
    from sqlalchemy import update

    from rebill.domain.catalog import plans as plan_service
    from rebill.models import plans
    source, target = make_product(api, "moved-from"), make_product(api, "moved-to")
    plan = make_plan(api, source)
    real_hold = plan_service._Products.hold

    def moved_meanwhile(self, external_product_id):
        found = real_hold(self, external_product_id)
        self.unit.conn.execute(update(plans).where(plans.c.id == plan.id).values(
            product_id=target.id, external_product_id="moved-to"))
        return found

    monkeypatch.setattr(plan_service._Products, "hold", moved_meanwhile)
    reply = api.put(f"/plans/{plan.id}", json={"title": "Renamed"})
    assert (reply.status_code, reply.json()) == (409, {"errors": "A plan moved to another product meanwhile; "
                                                                 "try again"})
    monkeypatch.undo()
    assert api.get(f"/plans/{plan.id}").json()["plan"]["title"] == "Monthly"
