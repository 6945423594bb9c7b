"""Order actions: delay (both versions), change_date (2021-01), clone (2021-11) and delete
(decisions §6.10, §6.12; docs/api-choices.md, Orders)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from rebill.domain.order import repository as order_repo
from tests.api.test_orders import (
    NEEDS_WRITE,
    NOT_FOUND,
    V01,
    V11,
    errors_of,
    order,
    order_events,
    paid,
    prepaid,
    queued,
    set_order,
    today,
)
from tests.builders import events_of, make_orders


def scheduled(api: Any, order_id: int) -> str:
    return order(api, order_id, V11)["scheduled_at"][:10]


def day(api: Any, n: int) -> str:
    return (today(api) + timedelta(days=n)).isoformat()


# Delay -----------------------------------------------------------------------------------------

def test_delay_moves_a_queued_prepaid_order_and_the_later_ones_of_its_charge_one_order_interval(vapi):
    first, second, third = prepaid(vapi)
    response = vapi.post(f"/orders/{second.id}/delay", json={})
    assert response.status_code == 200, response.text
    body = response.json()["order"]
    assert body["id"] == second.id and body["status"].lower() == "queued"
    assert [scheduled(vapi, o.id) for o in (first, second, third)] == [day(vapi, 0), day(vapi, 14), day(vapi, 21)]
    assert order_events(vapi, second.id) == ["order/created", "order/updated"]
    assert order_events(vapi, third.id) == ["order/created", "order/updated"]
    assert order_events(vapi, first.id) == ["order/created", "order/processed", "order/success"]


def test_delaying_the_last_order_moves_only_that_one(vapi):
    _, second, third = prepaid(vapi)
    assert vapi.post(f"/orders/{third.id}/delay").status_code == 200
    assert [scheduled(vapi, o.id) for o in (second, third)] == [day(vapi, 7), day(vapi, 21)]


def test_later_means_later_by_date_once_a_date_was_moved(vapi):
    """Decisions §6.12, "every later queued order" (found by an audit: later was taken by the
    orders' sequence, so once the second order was moved past the third, delaying the second
    pushed back the third, dated before it, and delaying the third left the second, after it)."""
    _, second, third = prepaid(vapi)
    moved = vapi.put(f"/orders/{second.id}", json={"scheduled_at": day(vapi, 17)}, version=V11)
    assert moved.status_code == 200, moved.text
    assert vapi.post(f"/orders/{second.id}/delay").status_code == 200
    assert [scheduled(vapi, o.id) for o in (second, third)] == [day(vapi, 24), day(vapi, 14)]
    assert vapi.post(f"/orders/{third.id}/delay").status_code == 200
    assert [scheduled(vapi, o.id) for o in (second, third)] == [day(vapi, 31), day(vapi, 21)]


def test_delay_does_not_move_the_subscriptions_next_charge(vapi):
    _, second, _ = prepaid(vapi)
    item_id = second.line_items[0]["purchase_item_id"]
    before = vapi.get(f"/subscriptions/{item_id}").json()["subscription"]["next_charge_scheduled_at"]
    assert vapi.post(f"/orders/{second.id}/delay").status_code == 200
    assert vapi.get(f"/subscriptions/{item_id}").json()["subscription"]["next_charge_scheduled_at"] == before


def test_delay_of_a_monthly_order_keeps_the_subscriptions_day_through_short_months(api):
    api.clock.set(datetime(2027, 1, 31, 12, tzinfo=timezone.utc))
    first, second, third = make_orders(api, charge_interval_frequency=3, order_interval_frequency=1)
    assert [o.scheduled_at for o in (first, second, third)] == [date(2027, 1, 31), date(2027, 2, 28),
                                                                 date(2027, 3, 31)]
    assert api.post(f"/orders/{second.id}/delay").status_code == 200
    assert [scheduled(api, o.id) for o in (second, third)] == ["2027-03-31", "2027-04-30"]


def test_delay_of_an_order_moved_by_hand_keeps_its_own_day(api):
    api.clock.set(datetime(2027, 1, 31, 12, tzinfo=timezone.utc))
    _, second, _ = make_orders(api, charge_interval_frequency=3, order_interval_frequency=1)
    moved = api.post(f"/orders/{second.id}/change_date", json={"scheduled_at": "2027-02-15"}, version=V01)
    assert moved.status_code == 200, moved.text
    assert api.post(f"/orders/{second.id}/delay").status_code == 200
    assert scheduled(api, second.id) == "2027-03-15"


def test_only_a_queued_order_can_be_delayed(vapi):
    # 2021-01 names a status in upper case, in messages too (decisions §2.9).
    w = str.upper if vapi.version == "2021-01" else str
    first = prepaid(vapi)[0]
    assert errors_of(vapi.post(f"/orders/{first.id}/delay")) == {
        "status": [f"only a queued order can be delayed; this one is {w('success')}"]}
    second = prepaid(vapi)[1]
    set_order(vapi, second.id, status="cancelled")
    assert errors_of(vapi.post(f"/orders/{second.id}/delay")) == {
        "status": [f"only a queued order can be delayed; this one is {w('cancelled')}"]}
    assert scheduled(vapi, second.id) == day(vapi, 7)


def test_only_a_prepaid_order_can_be_delayed(vapi):
    lone = paid(vapi)
    set_order(vapi, lone.id, status="queued")
    assert errors_of(vapi.post(f"/orders/{lone.id}/delay")) == {"is_prepaid": ["only a prepaid order can be delayed"]}
    assert order_events(vapi, lone.id) == ["order/created", "order/processed", "order/success"]


def test_an_order_whose_prepaid_subscription_is_gone_cannot_be_delayed(api):
    _, second, _ = prepaid(api)
    item_id = second.line_items[0]["purchase_item_id"]
    assert api.post(f"/subscriptions/{item_id}/cancel", json={"cancellation_reason": "x"}).status_code == 200
    assert api.delete(f"/subscriptions/{item_id}").status_code in (200, 204)
    assert errors_of(api.post(f"/orders/{second.id}/delay")) == {
        "is_prepaid": ["the order's prepaid subscription no longer exists"]}


def test_an_order_cannot_be_delayed_past_the_end_of_the_calendar(vapi):
    _, second, third = prepaid(vapi)
    assert vapi.put(f"/orders/{second.id}", json={"scheduled_at": "9999-12-28"}).status_code == 200
    assert errors_of(vapi.post(f"/orders/{second.id}/delay")) == {
        "scheduled_at": ["cannot be delayed past the year 9999"]}
    assert scheduled(vapi, third.id) == day(vapi, 14)  # all or nothing


def test_delay_of_an_unknown_or_another_stores_order_answers_404(vapi):
    theirs = queued(vapi.other_store())
    for order_id in (theirs.id, 999999999):
        response = vapi.post(f"/orders/{order_id}/delay")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    with vapi.db.read() as conn:
        assert order_repo.get(conn, theirs.store_id, theirs.id).scheduled_at == theirs.scheduled_at


def test_delay_needs_write_orders(vapi):
    second = queued(vapi)
    response = vapi.post(f"/orders/{second.id}/delay", token=vapi.token_with("read_orders", "write_subscriptions"))
    assert (response.status_code, response.json()) == (403, NEEDS_WRITE)
    assert scheduled(vapi, second.id) == day(vapi, 7)


# change_date (2021-01) -------------------------------------------------------------------------

def change(api: Any, order_id: int, body: Any) -> Any:
    return api.post(f"/orders/{order_id}/change_date", json=body, version=V01)


def test_change_date_moves_that_one_queued_order(api):
    _, second, third = prepaid(api)
    response = change(api, second.id, {"scheduled_at": day(api, 10)})
    assert response.status_code == 200, response.text
    body = response.json()["order"]
    assert body["scheduled_at"] == body["shipping_date"] == f"{day(api, 10)}T00:00:00"
    assert scheduled(api, third.id) == day(api, 14)
    assert order_events(api, second.id) == ["order/created", "order/updated"]


def test_change_date_accepts_a_datetime_and_today_but_not_the_past(api):
    second = queued(api)
    assert change(api, second.id, {"scheduled_at": f"{day(api, 3)}T08:30:00"}).status_code == 200
    assert scheduled(api, second.id) == day(api, 3)
    assert errors_of(change(api, second.id, {"scheduled_at": day(api, -1)})) == {
        "scheduled_at": ["must not be in the past"]}
    assert change(api, second.id, {"scheduled_at": day(api, 0)}).status_code == 200


def test_change_date_to_the_same_date_records_no_event(api):
    second = queued(api)
    assert change(api, second.id, {"scheduled_at": day(api, 7)}).status_code == 200
    assert order_events(api, second.id) == ["order/created"]


def test_change_date_refuses_an_order_that_is_not_queued(api):
    first = paid(api)
    assert errors_of(change(api, first.id, {"scheduled_at": day(api, 0)})) == {
        "status": ["only a queued order can be rescheduled; this one is SUCCESS"]}  # 2021-01: upper case


@pytest.mark.parametrize("body, errors", [
    ({}, {"scheduled_at": ["is required"]}),
    ({"scheduled_at": None}, {"scheduled_at": ["is required"]}),
    ({"scheduled_at": "next week"}, {"scheduled_at": ["must be a date (YYYY-MM-DD)"]}),
    ({"scheduled_at": 20300101}, {"scheduled_at": ["must be a date (YYYY-MM-DD)"]}),
    ({"scheduled_at": "2030-02-30"}, {"scheduled_at": ["must be a date (YYYY-MM-DD)"]}),
])
def test_change_date_refuses_bad_bodies(api, body, errors):
    second = queued(api)
    assert errors_of(change(api, second.id, body)) == errors
    assert order_events(api, second.id) == ["order/created"]


def test_change_date_of_an_unknown_or_another_stores_order_answers_404(api):
    theirs = queued(api.other_store())
    for order_id in (theirs.id, 999999999):
        response = change(api, order_id, {"scheduled_at": day(api, 3)})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_change_date_needs_write_orders(api):
    second = queued(api)
    response = api.post(f"/orders/{second.id}/change_date", json={"scheduled_at": day(api, 3)}, version=V01,
                        token=api.token_with("read_orders"))
    assert (response.status_code, response.json()) == (403, NEEDS_WRITE)
    assert scheduled(api, second.id) == day(api, 7)


def test_change_date_refuses_a_body_that_is_not_an_object(api):
    second = queued(api)
    response = api.post(f"/orders/{second.id}/change_date", json="2030-01-01", version=V01)
    assert (response.status_code, response.json()) == (415, {"errors": "The request body must be a JSON object"})


# Clone (2021-11) -------------------------------------------------------------------------------

def clone(api: Any, order_id: int, body: Any) -> Any:
    return api.post(f"/orders/{order_id}/clone", json=body, version=V11)


def test_clone_makes_a_queued_copy_on_the_date_with_no_charge(api):
    first = paid(api)
    api.put(f"/orders/{first.id}", json={"note": "fragile", "tags": "vip", "external_order_id": "5001"})
    api.clock.advance(minutes=3)
    response = clone(api, first.id, {"scheduled_at": day(api, 5)})
    assert response.status_code == 201, response.text
    copy = response.json()["order"]
    source = order(api, first.id, V11)
    assert copy["id"] != first.id
    assert (copy["status"], copy["charge"], copy["processed_at"]) == ("queued", None, None)
    assert copy["scheduled_at"] == f"{day(api, 5)}T00:00:00+00:00"
    assert copy["created_at"] == copy["updated_at"] == api.clock.now().isoformat()
    assert copy["external_order_id"] == {"ecommerce": None}
    same = ("address_id", "customer", "line_items", "shipping_address", "billing_address", "note", "tags",
            "total_price", "subtotal_price", "total_tax", "shipping_lines", "tax_lines", "is_prepaid", "type")
    assert {k: copy[k] for k in same} == {k: source[k] for k in same}
    assert order_events(api, copy["id"]) == ["order/created"]
    assert order(api, copy["id"], V11) == copy
    # The copy holds the source's items: it lists under its subscription.
    item_id = first.line_items[0]["purchase_item_id"]
    listed = api.get("/orders", params={"purchase_item_id": item_id}).json()["orders"]
    assert sorted(o["id"] for o in listed) == sorted([first.id, copy["id"]])


def test_a_clone_can_be_cloned_and_shows_as_2021_01_with_no_charge(api):
    copy = clone(api, paid(api).id, {"scheduled_at": day(api, 1)}).json()["order"]
    again = clone(api, copy["id"], {"scheduled_at": day(api, 2)})
    assert again.status_code == 201, again.text
    old = order(api, again.json()["order"]["id"], V01)
    assert (old["status"], old["charge_id"], old["charge_status"], old["transaction_id"]) == (
        "QUEUED", None, None, None)


def test_a_clone_is_sent_on_its_date_by_the_billing_run(api):
    """docs/api-choices.md, Orders: a clone is a queued order like a prepaid charge's later ones:
    told `order/upcoming` ahead, processed on its date, shown in the delivery schedule until then
    (found by an audit: it stayed queued for good)."""
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    first = paid(api)
    copy = clone(api, first.id, {"scheduled_at": day(api, 5)}).json()["order"]
    schedule = api.get(f"/customers/{first.customer_id}/delivery_schedule").json()["deliveries"]
    assert [(d["date"], [o["id"] for o in d["orders"] if o["id"]]) for d in schedule
            if d["date"] == day(api, 5)] == [(day(api, 5), [copy["id"]])]
    api.clock.advance(days=4)
    billing.run_store(api.db, SandboxGateway(api.db, api.clock.now), api.store, api.clock.now)
    assert (order(api, copy["id"], V11)["status"], order_events(api, copy["id"])) == (
        "queued", ["order/created", "order/upcoming"])
    api.clock.advance(days=1)
    billing.run_store(api.db, SandboxGateway(api.db, api.clock.now), api.store, api.clock.now)
    sent = order(api, copy["id"], V11)
    assert (sent["status"], sent["processed_at"]) == ("success", api.clock.now().isoformat())
    assert order_events(api, copy["id"])[-2:] == ["order/processed", "order/success"]
    assert order(api, first.id, V11)["status"] == "success"  # the source is not touched


def test_a_clone_of_a_mixed_first_order_delays_by_its_prepaid_line_only(api):
    """Found by an audit: once the prepaid subscription was deleted, a delay of a clone of the
    charge's first order moved it by the pay-as-you-go line's week instead of refusing."""
    from tests.builders import make_address, make_customer, make_payment_method, make_subscription
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = make_address(api, customer)
    weekly = make_subscription(api, address, next_charge_scheduled_at=today(api), order_interval_unit="week",
                               order_interval_frequency=1, charge_interval_frequency=1)
    first = make_orders(api, address, order_interval_unit="day", order_interval_frequency=10,
                        charge_interval_frequency=30)[0]
    assert weekly.id in first.purchase_item_ids and len(first.purchase_item_ids) == 2
    copy = clone(api, first.id, {"scheduled_at": day(api, 3)}).json()["order"]
    assert api.post(f"/orders/{copy['id']}/delay").status_code == 200
    assert scheduled(api, copy["id"]) == day(api, 13)  # the prepaid line's 10 days
    [prepaid_id] = [i for i in first.purchase_item_ids if i != weekly.id]
    assert api.post(f"/subscriptions/{prepaid_id}/cancel", json={"cancellation_reason": "x"}).status_code == 200
    assert api.delete(f"/subscriptions/{prepaid_id}").status_code in (200, 204)
    assert errors_of(api.post(f"/orders/{copy['id']}/delay")) == {
        "is_prepaid": ["the order's prepaid subscription no longer exists"]}
    assert scheduled(api, copy["id"]) == day(api, 13)


def test_clone_refuses_a_date_in_the_past(api):
    first = paid(api)
    assert errors_of(clone(api, first.id, {"scheduled_at": day(api, -1)})) == {
        "scheduled_at": ["must not be in the past"]}
    assert clone(api, first.id, {"scheduled_at": day(api, 0)}).status_code == 201


@pytest.mark.parametrize("body, errors", [
    ({}, {"scheduled_at": ["is required"]}),
    ({"scheduled_at": None}, {"scheduled_at": ["is required"]}),
    ({"scheduled_at": True}, {"scheduled_at": ["must be a date (YYYY-MM-DD)"]}),
    ({"scheduled_at": "31/12/2030"}, {"scheduled_at": ["must be a date (YYYY-MM-DD)"]}),
])
def test_clone_refuses_bad_bodies(api, body, errors):
    first = paid(api)
    assert errors_of(clone(api, first.id, body)) == errors
    assert len(api.get("/orders").json()["orders"]) == 1


def test_clone_of_an_unknown_or_another_stores_order_answers_404(api):
    theirs = paid(api.other_store())
    for order_id in (theirs.id, 999999999):
        response = clone(api, order_id, {"scheduled_at": day(api, 3)})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert api.get("/orders").json()["orders"] == []


def test_clone_needs_write_orders(api):
    first = paid(api)
    response = api.post(f"/orders/{first.id}/clone", json={"scheduled_at": day(api, 3)},
                        token=api.token_with("read_orders"))
    assert (response.status_code, response.json()) == (403, NEEDS_WRITE)


# Delete ----------------------------------------------------------------------------------------

def test_a_queued_order_can_be_deleted(vapi):
    _, second, third = prepaid(vapi)
    response = vapi.delete(f"/orders/{second.id}")
    if vapi.version == V11:
        assert (response.status_code, response.content) == (204, b"")
    else:
        assert (response.status_code, response.json()) == (200, {})
    assert vapi.get(f"/orders/{second.id}").status_code == 404
    assert ("order/deleted", second.id) in events_of(vapi, second.id)
    assert order(vapi, third.id)["id"] == third.id
    with vapi.db.read() as conn:
        assert order_repo.item_ids_of(conn, [second.id]) == {second.id: []}


def test_a_cancelled_order_can_be_deleted(vapi):
    second = queued(vapi)
    set_order(vapi, second.id, status="cancelled")
    assert vapi.delete(f"/orders/{second.id}").status_code in (200, 204)


@pytest.mark.parametrize("status", ["success", "error"])
def test_an_order_a_payment_went_into_cannot_be_deleted(vapi, status):
    first = paid(vapi)
    set_order(vapi, first.id, status=status)
    assert errors_of(vapi.delete(f"/orders/{first.id}")) == {
        "status": [f"only a queued or cancelled order can be deleted; this one is "
                   f"{status.upper() if vapi.version == '2021-01' else status}"]}
    assert order(vapi, first.id)["id"] == first.id


def test_delete_of_an_unknown_or_another_stores_order_answers_404(vapi):
    theirs = queued(vapi.other_store())
    for order_id in (theirs.id, 999999999):
        response = vapi.delete(f"/orders/{order_id}")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    with vapi.db.read() as conn:
        assert order_repo.get(conn, theirs.store_id, theirs.id) is not None


def test_delete_needs_write_orders(vapi):
    second = queued(vapi)
    response = vapi.delete(f"/orders/{second.id}", token=vapi.token_with("read_orders", "write_customers"))
    assert (response.status_code, response.json()) == (403, NEEDS_WRITE)
    assert order(vapi, second.id)["id"] == second.id


def test_a_clone_of_a_told_order_on_its_date_is_told_too(api):
    """Found by a review: the clone copied `upcoming_told_for` and was never told."""
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    _, second, _ = prepaid(api)  # a week ahead
    api.clock.advance(days=5)  # two days ahead: within the 3 notice days
    billing.run_store(api.db, SandboxGateway(api.db, api.clock.now), api.store, api.clock.now)
    assert "order/upcoming" in order_events(api, second.id)
    copy = clone(api, second.id, {"scheduled_at": second.scheduled_at.isoformat()}).json()["order"]
    billing.run_store(api.db, SandboxGateway(api.db, api.clock.now), api.store, api.clock.now)
    assert order_events(api, copy["id"]) == ["order/created", "order/upcoming"]
