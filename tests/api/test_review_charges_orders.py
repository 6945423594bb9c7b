"""Review of charges, orders and billing against the spec (decisions §6.3-§6.12, spec 01/02
Charges, 03-real-fields): each test holds one discrepancy that was found and fixed."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from rebill.domain.billing import money_back
from rebill.domain.billing import run as billing
from rebill.domain.charge import repository as charge_repo
from rebill.domain.order import repository as order_repo
from rebill.domain.payment.gateway import FAILED, GatewayUnavailable, Result
from rebill.domain.payment.sandbox import SandboxGateway
from tests.api.test_charges import only, weekly
from tests.api.test_charges_totals import with_discount
from tests.builders import charges_of, events_of, make_address, make_customer, make_payment_method, make_subscription

V01, V11 = "2021-01", "2021-11"


@pytest.fixture
def tier_a(vapi: Any) -> Any:
    """A store of plan tier A (processing and capturing on request), in each version."""
    store = vapi.other_store(plan_tier="premium_a")
    store.version = vapi.version
    return store


@pytest.fixture
def tier_a11(api: Any) -> Any:
    """A store of plan tier A speaking 2021-11 (`orders_count` is a 2021-11 field)."""
    return api.other_store(plan_tier="premium_a")


def _address(api: Any, token: str = "pm_ok") -> Any:
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    return make_address(api, customer)


def _queued(api: Any, token: str = "pm_ok", **subscription: Any) -> Any:
    address = _address(api, token)
    make_subscription(api, address, **subscription)
    [charge] = charges_of(api, address.id)
    return charge


def _at(api: Any, day: date) -> None:
    api.clock.set(datetime.combine(day, time(12), tzinfo=timezone.utc))


def _bill(api: Any) -> Any:
    return billing.run_store(api.db, SandboxGateway(api.db, api.clock.now), api.store, api.clock.now)


def _orders(api: Any, charge_id: int) -> list[Any]:
    with api.db.read() as conn:
        return order_repo.of_charge(conn, api.store.id, charge_id)


# orders_count (spec 01 Charge: "more than 1 for prepaid") ----------------------------------

def test_a_paid_charge_counts_the_one_order_it_made(tier_a11):
    charge = _queued(tier_a11)
    body = tier_a11.post(f"/charges/{charge.id}/process", json={}).json()["charge"]
    assert body["status"] == "success"
    assert len(_orders(tier_a11, charge.id)) == 1
    assert body["orders_count"] == 1


def test_a_paid_prepaid_charge_counts_its_orders_once(tier_a11):
    charge = _queued(tier_a11, charge_interval_frequency=3, order_interval_frequency=1)
    assert tier_a11.get(f"/charges/{charge.id}").json()["charge"]["orders_count"] == 3
    body = tier_a11.post(f"/charges/{charge.id}/process", json={}).json()["charge"]
    assert len(_orders(tier_a11, charge.id)) == 3
    assert body["orders_count"] == 3


def test_a_captured_charge_counts_the_one_order_the_capture_made(tier_a11):
    charge = _queued(tier_a11, token="authorize_only")
    pending = tier_a11.post(f"/charges/{charge.id}/process", json={}).json()["charge"]
    assert (pending["status"], pending["orders_count"]) == ("pending", 1)
    body = tier_a11.post(f"/charges/{charge.id}/capture_payment", json={}).json()["charge"]
    assert body["status"] == "success"
    assert len(_orders(tier_a11, charge.id)) == 1
    assert body["orders_count"] == 1


# shipments_count (spec 02 Charge: "successfully processed child orders") ---------------------

def test_2021_01_shipments_count_counts_the_processed_orders_of_the_charge(api):
    _at(api, date(2027, 3, 10))
    address = _address(api)
    make_subscription(api, address, next_charge_scheduled_at=date(2027, 3, 10), charge_interval_frequency=3,
                      order_interval_frequency=1)
    [charge] = charges_of(api, address.id)
    assert api.get(f"/charges/{charge.id}", version=V01).json()["charge"]["shipments_count"] == 0
    _bill(api)
    body = api.get(f"/charges/{charge.id}", version=V01).json()["charge"]
    assert body["status"] == "SUCCESS" and body["shipments_count"] == 1
    _at(api, date(2027, 4, 10))
    _bill(api)  # the second order of the prepaid charge is processed on its date
    assert [o.status for o in _orders(api, charge.id)] == ["success", "success", "queued"]
    listed = api.get("/charges", params={"ids": str(charge.id)}, version=V01).json()["charges"]
    assert [c["shipments_count"] for c in listed] == [2]
    assert api.get(f"/charges/{charge.id}", version=V01).json()["charge"]["shipments_count"] == 2


# discount_code filter (decisions §7.5: codes match case-insensitively) -------------------------

def test_the_discount_code_filter_of_charges_ignores_case(api):
    address = make_address(api)
    weekly(api, address)
    with_discount(api, address, "percentage", "10")
    charge = only(api, address.id)
    code = api.get(f"/charges/{charge.id}").json()["charge"]["discounts"][0]["code"]
    for sent in (code, code.lower(), code.upper()):
        listed = api.get("/charges", params={"discount_code": sent, "address_id": address.id}).json()["charges"]
        assert [c["id"] for c in listed] == [charge.id], sent
        count = api.get("/charges/count", params={"discount_code": sent, "address_id": address.id}, version=V01)
        assert count.json() == {"count": 1}, sent


# A payment processor that cannot be reached (spec 01 Errors: 503) ---------------------------

def _unreachable(api: Any, monkeypatch: Any, *operations: str) -> None:
    gateway = api.client.app.services.gateway

    def down(*args: Any, **kwargs: Any) -> Any:
        raise GatewayUnavailable("connection timed out")
    for operation in operations:
        monkeypatch.setattr(gateway, operation, down)


def _processed(api: Any, token: str = "pm_ok", price: str = "10.10") -> dict[str, Any]:
    charge = _queued(api, token, price=Decimal(price))
    reply = api.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200, reply.text
    return reply.json()["charge"]


def test_processing_while_the_processor_is_unreachable_answers_503_and_takes_nothing(tier_a, monkeypatch):
    charge = _queued(tier_a)
    _unreachable(tier_a, monkeypatch, "charge_many", "charge")
    reply = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 503, reply.text
    assert "payment processor" in reply.json()["errors"]
    assert tier_a.get(f"/charges/{charge.id}").json()["charge"]["status"].lower() == "queued"
    assert not [t for t, _ in events_of(tier_a, charge.id) if t == "charge/paid"]
    monkeypatch.undo()
    # The charge stays claimed for its payment's answer; once the claim is stale a new call
    # asks again with the same idempotency key and pays it.
    tier_a.clock.advance(timedelta(seconds=61))
    again = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert again.status_code == 200, again.text
    assert again.json()["charge"]["status"].lower() == "success"


def test_capturing_or_refunding_while_the_processor_is_unreachable_answers_503(tier_a, monkeypatch):
    pending = _processed(tier_a, token="authorize_only")
    paid = _processed(tier_a)
    _unreachable(tier_a, monkeypatch, "capture", "refund")
    reply = tier_a.post(f"/charges/{pending['id']}/capture_payment", json={})
    assert reply.status_code == 503, reply.text
    reply = tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "1.00"})
    assert reply.status_code == 503, reply.text
    monkeypatch.undo()
    assert tier_a.get(f"/charges/{pending['id']}").json()["charge"]["status"].lower() == "pending"
    assert tier_a.get(f"/charges/{paid['id']}").json()["charge"]["total_refunds"] == "0.00"
    # Both keep their claims (the processor may have acted): 409 while they are fresh; then the
    # same request finishes each, once, with the same key.
    assert tier_a.post(f"/charges/{pending['id']}/capture_payment", json={}).status_code == 409
    assert tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "1.00"}).status_code == 409
    tier_a.clock.advance(timedelta(seconds=61))
    captured = tier_a.post(f"/charges/{pending['id']}/capture_payment", json={})
    assert captured.status_code == 200, captured.text
    again = tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "1.00"})
    assert again.status_code == 200, again.text
    assert again.json()["charge"]["total_refunds"] == "1.00"


def test_a_refund_abandoned_unanswered_that_the_processor_then_refuses_lets_the_next_refund_through(tier_a,
                                                                                                     monkeypatch):
    """The refund that takes over an abandoned refund's claim asks it again; refused, nothing
    was refunded, so that request's own refund is made (decisions §6.8, §6.12)."""
    paid = _processed(tier_a)
    _unreachable(tier_a, monkeypatch, "refund")
    assert tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "5.00"}).status_code == 503
    monkeypatch.undo()
    tier_a.clock.advance(timedelta(seconds=61))
    gateway = tier_a.client.app.services.gateway
    real_refund = gateway.refund

    def refuse_the_abandoned(store_id: int, key: str, *rest: Any) -> Result:
        if key.endswith("-refund-0-500"):
            return Result(FAILED, error_type="CARD_DECLINED", error="the refund was declined")
        return real_refund(store_id, key, *rest)
    monkeypatch.setattr(gateway, "refund", refuse_the_abandoned)
    reply = tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "3.00"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["charge"]["total_refunds"] == "3.00"
    assert [t for t, _ in events_of(tier_a, paid["id"])].count("charge/refunded") == 1


# Refunds: what is left is what the claimed charge has left (decisions §6.12) -----------------

def test_a_refund_checks_what_is_left_on_the_charge_it_holds_not_on_an_earlier_read(tier_a, monkeypatch):
    paid = _processed(tier_a, price="10.10")
    with tier_a.db.read() as conn:
        stale = charge_repo.get(conn, tier_a.store.id, paid["id"], tier_a.clock.now())
    assert tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "8.00"}).status_code == 200
    # Another refund read the charge before the first one was recorded.
    monkeypatch.setattr(money_back, "visible", lambda *args: stale)
    too_much = tier_a.post(f"/charges/{paid['id']}/refund", json={"amount": "5.00"})
    assert too_much.status_code == 422, too_much.text
    assert "more than what is left" in too_much.json()["errors"]["amount"][0]
    rest = tier_a.post(f"/charges/{paid['id']}/refund", json={"full_refund": True})
    assert rest.status_code == 200, rest.text
    monkeypatch.undo()
    body = tier_a.get(f"/charges/{paid['id']}").json()["charge"]
    assert (body["status"].lower(), body["total_refunds"]) == ("refunded", "10.10")


@pytest.mark.parametrize("amount", ["", "abc", None, "-1", "99999.00"])
def test_full_refund_ignores_the_amount_whatever_it_holds(tier_a, amount):
    paid = _processed(tier_a, price="10.10")
    reply = tier_a.post(f"/charges/{paid['id']}/refund", json={"full_refund": True, "amount": amount})
    assert reply.status_code == 200, reply.text
    body = reply.json()["charge"]
    assert (body["status"].lower(), body["total_refunds"]) == ("refunded", "10.10")


def test_releasing_due_prepaid_orders_tells_only_the_orders_it_changed(api, monkeypatch):
    """An order deleted (or processed) between the look for due orders and their release gets
    no `order/processed` (domain/billing/sweep.py)."""
    from rebill.domain.billing import sweep
    from rebill.domain.unit import Unit
    from tests.api.test_orders import prepaid
    from tests.builders import events_of as _events
    first, second, third = prepaid(api)
    assert api.delete(f"/orders/{third.id}").status_code in (200, 204)
    api.clock.advance(timedelta(days=7))  # the second's date has come
    monkeypatch.setattr(sweep, "_due_orders", lambda unit: [second.id, third.id])
    with api.db.write() as conn:
        released = sweep.release_queued_orders(Unit(conn, api.store, api.clock.now()))
    assert released == [second.id]
    assert ("order/processed", second.id) in _events(api, second.id)
    assert ("order/processed", third.id) not in _events(api, third.id)


@pytest.mark.parametrize("sent,named", [("country_code", "country_code"), ("country", "country")])
def test_a_2021_01_nested_error_names_the_field_as_the_caller_sent_it(api, sent, named):
    """docs/api-choices.md: a 2021-01 caller who sends a head name gets its error under that
    name, also inside an object (here an order's billing address)."""
    from tests.api.test_orders import queued
    order = queued(api)
    reply = api.put(f"/orders/{order.id}", json={"billing_address": {sent: "Zz"}}, version="2021-01")
    assert reply.status_code == 422, reply.text
    assert list(reply.json()["errors"]["billing_address"]) == [named]
