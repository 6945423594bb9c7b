"""Which operation emits which topic (docs/webhooks.md, "Which operation emits which topic";
issue 14): one test per row of that table. Each subscribes a webhook to the row's topic in
every version whose Events table has it (spec 01, spec 02), all to one receiver on localhost;
performs the row's operations through the API (the billing run through the store's test clock,
`POST /store/clock/advance`, which also sends what falls due); sends what is due; and checks
after each operation that every webhook got exactly that topic for exactly those resources,
`X-Service-Topic` included, each body equal to the resource's GET in the webhook's version
(`*/deleted`: the id alone, and the GET answers 404)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

from rebill.domain.store import service as store_service
from rebill.domain.webhook.topics import TOPICS
from rebill.models import events, orders
from tests.api.test_addresses_support import us_fields
from tests.api.test_customers import create_body
from tests.api.test_webhooks import create, drain
from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_discount,
    make_onetime,
    make_payment_method,
    make_subscription,
)
from tests.receiver import Receiver
from tests.scenarios.conftest import advance, subscriber

V01, V11 = "2021-01", "2021-11"
START = date(2027, 1, 20)
PLURAL = {"address": "addresses", "charge": "charges", "customer": "customers", "order": "orders",
          "product": "products", "subscription": "subscriptions"}
MONTHLY = {"charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}
PREPAID = {"charge_interval_frequency": 3, "order_interval_frequency": 1}  # one charge, three monthly orders
ALL_TOPICS = set(TOPICS[V01]) | set(TOPICS[V11])
COVERED: set[str] = set()


def covers(*topics: str) -> Callable[[Any], Any]:
    """Marks the test of these rows of the table (``test_every_row_of_the_table_has_a_test``)."""
    COVERED.update(topics)
    return lambda test: test


class Hooks:
    """A webhook of ``topic`` in each version whose table has it, all to ``receiver``."""

    def __init__(self, api: Any, receiver: Receiver, topic: str) -> None:
        self.api, self.receiver, self.topic = api, receiver, topic
        self.resource = topic.split("/", 1)[0]
        self.versions = [v for v in (V01, V11) if topic in TOPICS[v]]
        for version in self.versions:
            create(api, version, address=f"{receiver.url}/{version}", topic=topic)

    def got(self, *ids: int) -> None:
        """Sends what is due; then each webhook has received ``topic`` exactly once for each
        of ``ids`` (nothing when none is given) since the last look, each body the GET of the
        resource in the webhook's version."""
        drain(self.api)
        received = list(self.receiver.received)
        self.receiver.received.clear()
        assert len(received) == len(ids) * len(self.versions), [(r.path, r.body) for r in received]
        for version in self.versions:
            mine = [r for r in received if r.path == f"/hooks/{version}"]
            assert [r.headers["x-service-topic"] for r in mine] == [self.topic] * len(mine)
            assert sorted(r.json[self.resource]["id"] for r in mine) == sorted(ids), (version, [r.json for r in mine])
            for r in mine:
                path = f"/{PLURAL[self.resource]}/{r.json[self.resource]['id']}"
                if self.topic.endswith("/deleted"):
                    assert r.json == {self.resource: {"id": r.json[self.resource]["id"]}}
                    assert self.api.get(path, version=version).status_code == 404
                else:
                    assert r.json == self.api.get(path, version=version).json(), (version, path)


def ok(reply: Any) -> Any:
    assert reply.status_code in (200, 201, 202, 204), reply.text
    return reply.json() if reply.content else None


def sub_body(address_id: int, when: date, **overrides: Any) -> dict[str, Any]:
    return {"address_id": address_id, "product_title": "Coffee", "variant_title": "1 lb", "price": "12.50",
            "quantity": 1, "next_charge_scheduled_at": when.isoformat(), **MONTHLY, **overrides}


def pm_body(customer_id: int, **overrides: Any) -> dict[str, Any]:
    return {"customer_id": customer_id, "payment_type": "CREDIT_CARD", "processor_name": "sandbox",
            "processor_customer_token": "cus_1", "processor_payment_method_token": "pm_ok",
            "payment_details": {"brand": "visa", "exp_month": 12, "exp_year": 2030, "last4": "4242"}, **overrides}


def only_charge(api: Any, address_id: int, status: str = "queued") -> int:
    [found] = [c.id for c in charges_of(api, address_id) if c.status == status]
    return found


def orders_of(api: Any, charge_id: int) -> list[int]:
    with api.db.read() as conn:
        return list(conn.execute(select(orders.c.id).where(
            orders.c.store_id == api.store.id, orders.c.charge_id == charge_id).order_by(orders.c.id)).scalars())


def paid_ahead(api: Any) -> list[int]:
    """The orders of a prepaid charge paid by the billing run on START + 1 (the first
    processed, the second and third queued on Feb 21 and Mar 21)."""
    prepaid, _ = subscriber(api, next_charge_scheduled_at=START + timedelta(days=1), **PREPAID)
    paid = only_charge(api, prepaid.id)
    advance(api, days=1)
    return orders_of(api, paid)


def on(day: date) -> str:
    return day.isoformat()


@pytest.fixture
def receiver(webhook_receiver: Receiver) -> Receiver:
    return webhook_receiver


@pytest.fixture
def shop(api: Any, at: Any) -> Any:
    """A store of plan tier A (manual process, capture) whose clock starts at noon of START."""
    at(START)
    return api.other_store(plan_tier="premium_a")


# The table itself --------------------------------------------------------------------------------

def test_every_row_of_the_table_has_a_test():
    """docs/webhooks.md has one row per topic of both Events tables, and each row a test here."""
    text = (Path(__file__).parents[2] / "docs" / "webhooks.md").read_text()
    section = text.split("## Which operation emits which topic", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+/[a-z_]+)` \| ([^|]+) \|", section, flags=re.M)
    assert sorted(topic for topic, _ in rows) == sorted(ALL_TOPICS)  # each once
    for topic, versions in rows:
        assert [v for v in (V01, V11) if v in versions] == [v for v in (V01, V11) if topic in TOPICS[v]], topic
    assert COVERED == ALL_TOPICS


# Addresses ---------------------------------------------------------------------------------------

@covers("address/created")
def test_address_created(shop, receiver):
    hooks = Hooks(shop, receiver, "address/created")
    customer = make_customer(shop)
    made = ok(shop.post("/addresses", json={"customer_id": customer.id, **us_fields()}, version=V11))
    hooks.got(made["address"]["id"])
    old = ok(shop.post(f"/customers/{customer.id}/addresses", json=us_fields(address1="5 Elm St"), version=V01))
    hooks.got(old["address"]["id"])


@covers("address/updated")
def test_address_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "address/updated")
    address = make_address(shop)
    ok(shop.put(f"/addresses/{address.id}", json={"address2": "Suite 5"}))
    hooks.got(address.id)
    ok(shop.put(f"/addresses/{address.id}", json={"address2": "Suite 5"}, version=V01))  # the same: no change
    hooks.got()
    discount = make_discount(shop, code="TENOFF")
    ok(shop.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "TENOFF"}))
    hooks.got(address.id)
    ok(shop.post(f"/addresses/{address.id}/remove_discount", json={}, version=V01))
    hooks.got(address.id)
    ok(shop.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount}))
    hooks.got(address.id)
    ok(shop.put(f"/discounts/{discount}", json={"status": "fully_disabled"}))  # taken off its addresses
    hooks.got(address.id)


# Charges -----------------------------------------------------------------------------------------

@covers("charge/created")
def test_charge_created(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/created")
    customer = make_customer(shop)
    make_payment_method(shop, customer)
    address = make_address(shop, customer)
    ok(shop.post("/subscriptions", json=sub_body(address.id, START + timedelta(days=1))))
    first = only_charge(shop, address.id)
    hooks.got(first)
    ok(shop.post(f"/addresses/{address.id}/onetimes", version=V01, json={
        "product_title": "Mug", "price": "8.00", "quantity": 1, "next_charge_scheduled_at": on(START + timedelta(days=5))}))
    hooks.got(max(c.id for c in charges_of(shop, address.id)))  # a date of its own: a charge of its own
    advance(shop, days=1)  # the billing run pays the first: the subscription's next charge is planned
    hooks.got(max(c.id for c in charges_of(shop, address.id)))


@covers("charge/updated")
def test_charge_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/updated")
    address, sub = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=10))
    queued = only_charge(shop, address.id)
    ok(shop.put(f"/subscriptions/{sub.id}", json={"price": "15.00"}))
    hooks.got(queued)
    ok(shop.put(f"/addresses/{address.id}", json={"address2": "Suite 5"}))  # the charge shows the address
    hooks.got(queued)
    ok(shop.post(f"/charges/{queued}/change_next_charge_date", json={"next_charge_date": on(START + timedelta(days=12))},
                 version=V01))
    hooks.got(queued)
    ok(shop.post(f"/charges/{queued}/skip", json={}))  # skipped whole: the same charge, now skipped
    hooks.got(queued)
    held, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=1))
    authorized = only_charge(shop, held.id)
    advance(shop, days=1)  # authorized, not captured: pending
    hooks.got(authorized)


@covers("charge/deleted")
def test_charge_deleted(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/deleted")
    address, sub = subscriber(shop)
    queued = only_charge(shop, address.id)
    ok(shop.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "moving"}))  # left empty
    hooks.got(queued)
    other = make_subscription(shop, address)
    queued = only_charge(shop, address.id)
    ok(shop.delete(f"/subscriptions/{other.id}"))
    hooks.got(queued)
    make_onetime(shop, address)
    queued = only_charge(shop, address.id)
    ok(shop.delete(f"/addresses/{address.id}"))  # its cancelled subscription, its one-time item, its charge
    hooks.got(queued)


@covers("charge/paid")
def test_charge_paid(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/paid")
    renewing, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1))
    due = only_charge(shop, renewing.id)
    advance(shop, days=1)  # the billing run
    hooks.got(due)
    early, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=20))
    asked = only_charge(shop, early.id)
    ok(shop.post(f"/charges/{asked}/process", json={}))
    hooks.got(asked)
    held, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=2))
    authorized = only_charge(shop, held.id)
    advance(shop, days=1)  # authorized only: not paid yet
    hooks.got()
    ok(shop.post(f"/charges/{authorized}/capture_payment", json={}))
    hooks.got(authorized)
    # Two paid by one billing run, their bodies rendered together (found by an audit: the 2021-01
    # bodies showed `shipments_count` 0 where the GET showed 1).
    together = [subscriber(shop, next_charge_scheduled_at=START + timedelta(days=3))[0] for _ in range(2)]
    due_together = [only_charge(shop, address.id) for address in together]
    advance(shop, days=1)
    hooks.got(*due_together)


@covers("charge/failed")
def test_charge_failed(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/failed")
    address, _ = subscriber(shop, token="declined", next_charge_scheduled_at=START + timedelta(days=1))
    due = only_charge(shop, address.id)
    advance(shop, days=1)
    hooks.got(due)
    ok(shop.post(f"/charges/{due}/process", json={}))  # a failed payment answers 200, the charge in error
    hooks.got(due)
    advance(shop, days=5)
    hooks.got()
    advance(shop, days=1)  # the retry, six days after the second failure
    hooks.got(due)


@covers("charge/max_retries_reached")
def test_charge_max_retries_reached(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/max_retries_reached")
    address, _ = subscriber(shop, token="insufficient_funds", next_charge_scheduled_at=START + timedelta(days=1))
    due = only_charge(shop, address.id, "queued")
    advance(shop, days=32)  # attempts on D, D+1, D+7, ..., D+31: seven
    hooks.got()
    advance(shop, days=6)  # the eighth and last, on D+37
    hooks.got(due)


@covers("charge/refunded")
def test_charge_refunded(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/refunded")
    address, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1))
    paid = only_charge(shop, address.id)
    advance(shop, days=1)
    hooks.got()
    ok(shop.post(f"/charges/{paid}/refund", json={"amount": "1.00"}))  # partially_refunded
    hooks.got(paid)
    ok(shop.post(f"/charges/{paid}/refund", json={"full_refund": True}, version=V01))  # refunded
    hooks.got(paid)


@covers("charge/uncaptured")
def test_charge_uncaptured(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/uncaptured")
    held, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=1))
    captured, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=1))
    waiting, taken = only_charge(shop, held.id), only_charge(shop, captured.id)
    advance(shop, days=1)  # both authorized at noon
    ok(shop.post(f"/charges/{taken}/capture_payment", json={}))
    advance(shop, days=5)  # five days after the authorization
    hooks.got()
    advance(shop, days=1)  # six
    hooks.got(waiting)
    advance(shop, days=3)  # once
    hooks.got()


@covers("charge/upcoming")
def test_charge_upcoming(shop, receiver):
    hooks = Hooks(shop, receiver, "charge/upcoming")
    address, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=10))
    coming = only_charge(shop, address.id)
    advance(shop, days=6)  # four days ahead
    hooks.got()
    advance(shop, days=1)  # three days ahead (the default)
    hooks.got(coming)
    advance(shop, days=2)  # once per date
    hooks.got()
    with shop.db.write() as conn:  # `rebill stores notices NAME --days 5`
        store_service.set_upcoming_notice_days(conn, shop.clock.now(), shop.store, 5)
    later, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=20))
    advance(shop, days=5)  # START + 14: six days ahead (the first charge paid on the way)
    hooks.got()
    advance(shop, days=1)  # five
    hooks.got(only_charge(shop, later.id))


# Customers ---------------------------------------------------------------------------------------

@covers("customer/created")
def test_customer_created(shop, receiver):
    hooks = Hooks(shop, receiver, "customer/created")
    for version in (V11, V01):
        made = ok(shop.post("/customers", json=create_body(version), version=version))
        hooks.got(made["customer"]["id"])


@covers("customer/updated")
def test_customer_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "customer/updated")
    customer = make_customer(shop)
    ok(shop.put(f"/customers/{customer.id}", json={"first_name": "Grace"}))
    hooks.got(customer.id)
    ok(shop.put(f"/customers/{customer.id}", json={"last_name": "Hopper", "first_name": "Grace"}, version=V01))
    hooks.got(customer.id)
    ok(shop.put(f"/customers/{customer.id}", json={"last_name": "Hopper"}))  # the same: no change
    hooks.got()


@covers("customer/deleted")
def test_customer_deleted(shop, receiver):
    hooks = Hooks(shop, receiver, "customer/deleted")
    customer = make_customer(shop)
    ok(shop.delete(f"/customers/{customer.id}"))
    hooks.got(customer.id)


@covers("customer/activated")
def test_customer_activated(shop, receiver):
    hooks = Hooks(shop, receiver, "customer/activated")
    customer = make_customer(shop)
    address = make_address(shop, customer)
    first = ok(shop.post("/subscriptions", json=sub_body(address.id, START + timedelta(days=5))))["subscription"]
    hooks.got(customer.id)  # its first active subscription
    second = ok(shop.post("/subscriptions", json=sub_body(address.id, START + timedelta(days=6)),
                          version=V01))["subscription"]
    hooks.got()
    for sub in (first, second):
        ok(shop.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "pause"}))
    hooks.got()
    ok(shop.post(f"/subscriptions/{second['id']}/activate", json={}))
    hooks.got(customer.id)


@covers("customer/deactivated")
def test_customer_deactivated(shop, receiver):
    hooks = Hooks(shop, receiver, "customer/deactivated")
    address, first = subscriber(shop)
    second = make_subscription(shop, address)
    ok(shop.post(f"/subscriptions/{first.id}/cancel", json={"cancellation_reason": "pause"}))
    hooks.got()  # one still active
    ok(shop.post(f"/subscriptions/{second.id}/cancel", json={"cancellation_reason": "pause"}))
    hooks.got(address.customer_id)
    ok(shop.post(f"/subscriptions/{second.id}/activate", json={}))
    ok(shop.delete(f"/subscriptions/{second.id}"))
    hooks.got(address.customer_id)
    ending, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1),
                           expire_after_specific_number_of_charges=1)
    advance(shop, days=1)  # its one charge paid: expired
    hooks.got(ending.customer_id)
    failing, _ = subscriber(shop, token="declined", next_charge_scheduled_at=START + timedelta(days=2))
    advance(shop, days=38)  # the last retry fails (D+37): the store's action cancels the subscriptions
    hooks.got(failing.customer_id)


@covers("customer/payment_method_updated")
def test_customer_payment_method_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "customer/payment_method_updated")
    customer = make_customer(shop)
    first = ok(shop.post("/payment_methods", json=pm_body(customer.id)))["payment_method"]
    hooks.got(customer.id)
    second = ok(shop.post("/payment_methods", json=pm_body(customer.id, processor_payment_method_token="pm_2")))
    hooks.got(customer.id)
    ok(shop.put(f"/payment_methods/{second['payment_method']['id']}", json={"default": True}))
    hooks.got(customer.id)
    ok(shop.delete(f"/payment_methods/{second['payment_method']['id']}"))
    hooks.got(customer.id)
    make_subscription(shop, make_address(shop, customer), next_charge_scheduled_at=START + timedelta(days=1))
    advance(shop, days=1)  # paid with it: the method becomes valid
    hooks.got(customer.id)
    assert shop.get(f"/payment_methods/{first['id']}").json()["payment_method"]["status"] == "valid"
    expired = make_customer(shop)
    make_payment_method(shop, expired, processor_payment_method_token="pm_expired")
    hooks.got(expired.id)  # the method added (the builder goes through the same service)
    make_subscription(shop, make_address(shop, expired), next_charge_scheduled_at=START + timedelta(days=2))
    advance(shop, days=1)  # refused as expired: the method becomes invalid
    hooks.got(expired.id)


# Orders ------------------------------------------------------------------------------------------

@covers("order/created")
def test_order_created(shop, receiver):
    hooks = Hooks(shop, receiver, "order/created")
    address, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1))
    prepaid, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1), **PREPAID)
    paid, paid_ahead = only_charge(shop, address.id), only_charge(shop, prepaid.id)
    advance(shop, days=1)  # one order, and three for the prepaid charge (two queued)
    [order] = orders_of(shop, paid)
    hooks.got(order, *orders_of(shop, paid_ahead))
    held, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=2))
    authorized = only_charge(shop, held.id)
    advance(shop, days=1)
    hooks.got()  # authorized: no order until captured
    ok(shop.post(f"/charges/{authorized}/capture_payment", json={}))
    hooks.got(*orders_of(shop, authorized))
    clone = ok(shop.post(f"/orders/{order}/clone", json={"scheduled_at": on(START + timedelta(days=9))}))
    hooks.got(clone["order"]["id"])


@pytest.mark.parametrize("topic", ["order/processed", "order/success"])
@covers("order/processed", "order/success")
def test_order_processed_and_success(shop, receiver, topic):
    """`order/success` is 2021-11's name for it: both are told together."""
    hooks = Hooks(shop, receiver, topic)
    first, second, _ = paid_ahead(shop)
    hooks.got(first)  # the later ones wait, queued, for their dates
    held, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=2))
    authorized = only_charge(shop, held.id)
    advance(shop, days=1)
    hooks.got()
    ok(shop.post(f"/charges/{authorized}/capture_payment", json={}))
    hooks.got(*orders_of(shop, authorized))
    advance(shop, to="2027-02-20")
    hooks.got()
    advance(shop, days=1)  # Feb 21: the prepaid charge's second order
    hooks.got(second)


@covers("order/payment_captured")
def test_order_payment_captured(shop, receiver):
    hooks = Hooks(shop, receiver, "order/payment_captured")
    held, _ = subscriber(shop, token="authorize_only", next_charge_scheduled_at=START + timedelta(days=1))
    paid, _ = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1))
    authorized = only_charge(shop, held.id)
    advance(shop, days=1)
    hooks.got()  # a payment taken at once is no capture
    ok(shop.post(f"/charges/{authorized}/capture_payment", json={}))
    hooks.got(*orders_of(shop, authorized))


@covers("order/upcoming")
def test_order_upcoming(shop, receiver):
    hooks = Hooks(shop, receiver, "order/upcoming")
    _, second, third = paid_ahead(shop)
    advance(shop, to="2027-02-17")  # four days before the second order (Feb 21)
    hooks.got()
    advance(shop, days=1)
    hooks.got(second)
    advance(shop, to="2027-03-18")
    hooks.got(third)


@covers("order/updated")
def test_order_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "order/updated")
    first, second, third = paid_ahead(shop)
    hooks.got()
    ok(shop.put(f"/orders/{first}", json={"note": "leave it at the door"}))
    hooks.got(first)
    ok(shop.put(f"/orders/{first}", json={"tags": "gift"}, version=V01))
    hooks.got(first)
    ok(shop.post(f"/orders/{second}/delay", json={}))  # the later queued orders of the charge move too
    hooks.got(second, third)
    ok(shop.post(f"/orders/{third}/change_date", json={"scheduled_at": "2027-05-02"}, version=V01))
    hooks.got(third)


@covers("order/deleted")
def test_order_deleted(shop, receiver):
    hooks = Hooks(shop, receiver, "order/deleted")
    first, _, third = paid_ahead(shop)
    ok(shop.delete(f"/orders/{third}", version=V01))
    hooks.got(third)
    clone = ok(shop.post(f"/orders/{first}/clone", json={"scheduled_at": "2027-03-01"}))["order"]["id"]
    ok(shop.delete(f"/orders/{clone}"))
    hooks.got(clone)


# Products (2021-01 topics; the 2021-11 endpoints change the same products) ----------------------

LEGACY_OPTIONS = {"storefront_purchase_options": "subscription_only", "order_interval_unit": "month",
                  "order_interval_frequency_options": ["1"]}


@covers("product/created")
def test_product_created(shop, receiver):
    hooks = Hooks(shop, receiver, "product/created")
    old = ok(shop.post("/products", json={"platform_product_id": 8001, "title": "Tea",
                                          "subscription_defaults": LEGACY_OPTIONS}, version=V01))
    hooks.got(old["product"]["id"])
    head = ok(shop.post("/products", json={"external_product_id": "8002", "title": "Coffee"}, version=V11))
    hooks.got(head["product"]["id"])
    ok(shop.post("/plans", json={"external_product_id": "8002", "title": "Monthly", "type": "subscription",
                                 "subscription_preferences": {"charge_interval_frequency": 1, "interval_unit": "month",
                                                              "order_interval_frequency": 1}}))
    hooks.got()  # a plan of it is no new product


@covers("product/updated")
def test_product_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "product/updated")
    old = ok(shop.post("/products", json={"platform_product_id": 8001, "title": "Tea",
                                          "subscription_defaults": LEGACY_OPTIONS}, version=V01))["product"]
    hooks.got()
    ok(shop.put(f"/products/{old['id']}", json={"title": "Green tea"}, version=V01))
    hooks.got(old["id"])
    ok(shop.put(f"/products/{old['id']}", json={"discount_amount": 5, "discount_type": "percentage"}, version=V01))
    hooks.got(old["id"])  # its plans changed
    head = ok(shop.post("/products", json={"external_product_id": "8002", "title": "Coffee"}))["product"]
    hooks.got()
    ok(shop.put("/products/8002", json={"title": "Dark coffee"}))
    hooks.got(head["id"])
    ok(shop.post("/products", json={"platform_product_id": 8002, "subscription_defaults": LEGACY_OPTIONS},
                 version=V01))  # plans for a product that had none
    hooks.got(head["id"])
    # The 2021-11 plan endpoints change what the 2021-01 product shows (`subscription_defaults`).
    plan = ok(shop.post("/plans", json={
        "external_product_id": "8001", "title": "Every two months", "type": "subscription",
        "subscription_preferences": {"charge_interval_frequency": 2, "interval_unit": "month",
                                     "order_interval_frequency": 2}}))["plan"]
    hooks.got(old["id"])
    ok(shop.put(f"/plans/{plan['id']}", json={"external_product_id": "8002"}))  # moved: both products change
    hooks.got(old["id"], head["id"])
    # Not its first recurring plan, whose discount the 2021-01 product shows: nothing it shows changes.
    ok(shop.put("/plans/bulk_update", json={"plans": [{"id": plan["id"], "discount_amount": "3"}]}))
    hooks.got()
    ok(shop.delete(f"/plans/{plan['id']}"))  # its frequency leaves the product's options
    hooks.got(head["id"])


@covers("product/deleted")
def test_product_deleted(shop, receiver):
    hooks = Hooks(shop, receiver, "product/deleted")
    old = ok(shop.post("/products", json={"platform_product_id": 8001, "title": "Tea",
                                          "subscription_defaults": LEGACY_OPTIONS}, version=V01))["product"]
    head = ok(shop.post("/products", json={"external_product_id": "8002", "title": "Coffee"}))["product"]
    ok(shop.delete(f"/products/{old['id']}", version=V01))
    hooks.got(old["id"])
    ok(shop.delete("/products/8002"))
    hooks.got(head["id"])


# Subscriptions -----------------------------------------------------------------------------------

@covers("subscription/created")
def test_subscription_created(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/created")
    address = make_address(shop)
    for version in (V11, V01):
        made = ok(shop.post("/subscriptions", json=sub_body(address.id, START + timedelta(days=3)), version=version))
        hooks.got(made["subscription"]["id"])
    bulk = ok(shop.post(f"/addresses/{address.id}/subscriptions-bulk", version=V01, json={"subscriptions": [
        {k: v for k, v in sub_body(address.id, START + timedelta(days=4)).items() if k != "address_id"}] * 2}))
    hooks.got(*(s["id"] for s in bulk["subscriptions"]))


@covers("subscription/updated")
def test_subscription_updated(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/updated")
    address, sub = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=3))
    ok(shop.put(f"/subscriptions/{sub.id}", json={"quantity": 2}))
    hooks.got(sub.id)
    ok(shop.post(f"/subscriptions/{sub.id}/set_next_charge_date", json={"date": on(START + timedelta(days=4))}))
    hooks.got(sub.id)
    other = make_address(shop, SimpleNamespace(id=address.customer_id))
    ok(shop.post(f"/subscriptions/{sub.id}/change_address", json={"address_id": other.id}))
    hooks.got(sub.id)
    ok(shop.post(f"/charges/{only_charge(shop, other.id)}/change_next_charge_date", version=V01,
                 json={"next_charge_date": on(START + timedelta(days=2))}))
    hooks.got(sub.id)
    ok(shop.post("/addresses/merge", json={"target_address": {"id": address.id},
                                           "source_addresses": [{"id": other.id}]}))
    hooks.got(sub.id)
    ok(shop.put(f"/addresses/{address.id}/subscriptions-bulk", version=V01,
                json={"subscriptions": [{"id": sub.id, "quantity": 3}]}))
    hooks.got(sub.id)
    advance(shop, days=2)  # paid: the next charge date moves one interval on
    hooks.got(sub.id)
    ending, last = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=3),
                              expire_after_specific_number_of_charges=1)
    advance(shop, days=1)  # its one charge paid: expired
    hooks.got(last.id)


@covers("subscription/cancelled")
def test_subscription_cancelled(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/cancelled")
    _, sub = subscriber(shop)
    ok(shop.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "too much coffee"}))
    hooks.got(sub.id)
    _, failing = subscriber(shop, token="declined", next_charge_scheduled_at=START + timedelta(days=1))
    advance(shop, days=32)
    hooks.got()
    advance(shop, days=6)  # the last retry fails: the store's default action cancels it
    hooks.got(failing.id)


@covers("subscription/activated")
def test_subscription_activated(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/activated")
    _, sub = subscriber(shop)
    ok(shop.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "too much coffee"}))
    hooks.got()
    ok(shop.post(f"/subscriptions/{sub.id}/activate", json={}, version=V01))
    hooks.got(sub.id)


@covers("subscription/deleted")
def test_subscription_deleted(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/deleted")
    address, sub = subscriber(shop)
    ok(shop.delete(f"/subscriptions/{sub.id}"))
    hooks.got(sub.id)
    bulk = [make_subscription(shop, address).id for _ in range(2)]
    ok(shop.request("DELETE", f"/addresses/{address.id}/subscriptions-bulk", version=V01,
                    json={"subscriptions": [{"id": i} for i in bulk]}))
    hooks.got(*bulk)
    for owner in ("address", "customer"):
        home, cancelled = subscriber(shop)
        ok(shop.post(f"/subscriptions/{cancelled.id}/cancel", json={"cancellation_reason": "moving"}))
        path = f"/addresses/{home.id}" if owner == "address" else f"/customers/{home.customer_id}"
        ok(shop.delete(path))  # a cancelled subscription goes with its address, or its customer
        hooks.got(cancelled.id)


@covers("subscription/skipped")
def test_subscription_skipped(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/skipped")
    address, sub = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=3))
    partner = make_subscription(shop, address, next_charge_scheduled_at=START + timedelta(days=3))
    queued = only_charge(shop, address.id)
    ok(shop.post(f"/charges/{queued}/skip", json={"purchase_item_ids": [sub.id]}))  # part of the charge
    hooks.got(sub.id)
    ok(shop.post(f"/charges/{queued}/skip", json={"subscription_id": partner.id}, version=V01))
    hooks.got(partner.id)
    ok(shop.post(f"/addresses/{address.id}/charges/skip", json={"date": "2027-03-23", "subscription_ids": [sub.id]}))
    hooks.got(sub.id)  # a date ahead, skipped before its charge exists


@covers("subscription/unskipped")
def test_subscription_unskipped(shop, receiver):
    hooks = Hooks(shop, receiver, "subscription/unskipped")
    address, sub = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=3))
    queued = only_charge(shop, address.id)
    ok(shop.post(f"/charges/{queued}/skip", json={}))
    hooks.got()
    ok(shop.post(f"/charges/{queued}/unskip", json={}))
    hooks.got(sub.id)
    ok(shop.post(f"/charges/{queued}/skip", json={"subscription_ids": [sub.id]}, version=V01))
    ok(shop.post(f"/charges/{queued}/unskip", json={"subscription_ids": [sub.id]}, version=V01))
    hooks.got(sub.id)


# Topics no operation emits -----------------------------------------------------------------------

@covers("order/cancelled", "subscription/paused")
def test_order_cancelled_and_subscription_paused_are_subscribable_but_nothing_emits_them(shop, receiver):
    """Subscriptions cannot be paused in these versions (cancel and activate instead), and no
    operation cancels an order (a refund leaves orders as they are, decisions §6.12): a story of
    every kind of change delivers neither."""
    quiet = [Hooks(shop, receiver, "order/cancelled"), Hooks(shop, receiver, "subscription/paused")]
    address, sub = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1), **PREPAID)
    home, other = subscriber(shop, next_charge_scheduled_at=START + timedelta(days=1))
    paid = only_charge(shop, address.id)
    advance(shop, days=1)
    first, second, third = orders_of(shop, paid)
    ok(shop.post(f"/charges/{paid}/refund", json={"full_refund": True}))
    ok(shop.post(f"/orders/{second}/delay", json={}))
    ok(shop.delete(f"/orders/{third}"))
    ok(shop.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "pause"}))
    ok(shop.post(f"/subscriptions/{sub.id}/activate", json={}))
    ok(shop.post(f"/charges/{only_charge(shop, home.id)}/skip", json={}))
    ok(shop.put(f"/subscriptions/{other.id}", json={"quantity": 2}, version=V01))
    advance(shop, days=60)  # renewals, the prepaid orders' dates
    for hooks in quiet:
        hooks.got()
    with shop.db.read() as conn:
        assert not conn.execute(select(events.c.id).where(
            events.c.store_id == shop.store.id, events.c.topic.in_(["order/cancelled", "subscription/paused"]))).all()
