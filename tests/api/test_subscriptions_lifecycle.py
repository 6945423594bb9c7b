"""Moving a subscription along, in both versions (decisions §5.2, §5.3, §5.16): set the next
charge date, change its address, cancel, activate; the charges and the customer's status follow,
and every change records its events in the same transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.api.test_subscriptions import (
    NOT_FOUND,
    V01,
    V11,
    create_sub,
    day,
    errors_of,
    line_ids,
    next_date,
    stamp,
    today,
    topics,
)
from tests.builders import charges_of, events_of, make_address, make_customer, make_onetime, make_subscription

CANCEL = {"cancellation_reason": "too much coffee"}


# set_next_charge_date --------------------------------------------------------------------------

def test_set_next_charge_date_moves_the_subscription_and_its_charge(vapi):
    address = make_address(vapi)
    sub = create_sub(vapi, address)
    response = vapi.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json={"date": day(vapi, 3)})
    assert response.status_code == 200, response.text
    assert response.json()["subscription"]["next_charge_scheduled_at"] == next_date(vapi.version, day(vapi, 3))
    assert line_ids(vapi, address.id) == [(day(vapi, 3), [sub["id"]])]
    assert topics(vapi, sub["id"])[-1] == "subscription/updated"


def test_set_next_charge_date_takes_today_and_refuses_the_past(vapi):
    sub = create_sub(vapi)
    past = vapi.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json={"date": day(vapi, -1)})
    assert errors_of(past) == {"date": ["must not be in the past"]}
    ok = vapi.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json={"date": day(vapi, 0)})
    assert ok.json()["subscription"]["next_charge_scheduled_at"] == next_date(vapi.version, day(vapi, 0))


@pytest.mark.parametrize("body,errors", [({}, {"date": ["is required"]}),
                                         ({"date": None}, {"date": ["is required"]}),
                                         ({"date": "soon"}, {"date": ["must be a date (YYYY-MM-DD)"]}),
                                         ({"date": 20300101}, {"date": ["must be a date (YYYY-MM-DD)"]})])
def test_set_next_charge_date_needs_a_date(vapi, body, errors):
    sub = create_sub(vapi)
    assert errors_of(vapi.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json=body)) == errors


def test_a_cancelled_subscription_has_no_next_date_to_set(api):
    sub = create_sub(api)
    api.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    response = api.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json={"date": day(api, 3)})
    assert errors_of(response) == {"date": ["the subscription is cancelled: it has no next charge"]}


def test_setting_the_same_date_records_no_event(api):
    sub = create_sub(api)
    before = events_of(api)
    api.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json={"date": day(api, 10)})
    assert events_of(api) == before


# change_address --------------------------------------------------------------------------------

def test_change_address_moves_the_subscription_and_its_charge(vapi):
    customer = make_customer(vapi)
    old, new = make_address(vapi, customer), make_address(vapi, customer, address1="1 Other St")
    sub = create_sub(vapi, old)
    response = vapi.post(f"/subscriptions/{sub['id']}/change_address", json={"address_id": new.id})
    assert response.status_code == 200, response.text
    moved = response.json()["subscription"]
    assert moved["address_id"] == new.id
    assert moved["next_charge_scheduled_at"] == sub["next_charge_scheduled_at"]
    assert line_ids(vapi, old.id) == []
    assert line_ids(vapi, new.id) == [(day(vapi, 10), [sub["id"]])]
    assert "subscription/updated" in topics(vapi, sub["id"])


def test_change_address_with_a_next_date_sets_it_too(api):
    customer = make_customer(api)
    old, new = make_address(api, customer), make_address(api, customer)
    sub = create_sub(api, old)
    response = api.post(f"/subscriptions/{sub['id']}/change_address",
                        json={"address_id": new.id, "next_charge_scheduled_at": day(api, 5)})
    assert response.json()["subscription"]["next_charge_scheduled_at"] == day(api, 5)
    assert line_ids(api, new.id) == [(day(api, 5), [sub["id"]])]
    past = api.post(f"/subscriptions/{sub['id']}/change_address",
                    json={"address_id": old.id, "next_charge_scheduled_at": day(api, -1)})
    assert errors_of(past) == {"next_charge_scheduled_at": ["must not be in the past"]}
    assert api.get(f"/subscriptions/{sub['id']}").json()["subscription"]["address_id"] == new.id


def test_change_address_to_another_customers_address_answers_422(vapi):
    sub = create_sub(vapi)
    response = vapi.post(f"/subscriptions/{sub['id']}/change_address",
                         json={"address_id": make_address(vapi).id})
    assert errors_of(response) == {"address_id": ["address belongs to another customer"]}


def test_change_address_to_an_address_in_another_currency_answers_422(api):
    api = api.other_store(presentment_currencies=["EUR"])
    customer = make_customer(api)
    sub = create_sub(api, make_address(api, customer))
    euros = make_address(api, customer, presentment_currency="EUR")
    response = api.post(f"/subscriptions/{sub['id']}/change_address", json={"address_id": euros.id})
    assert errors_of(response) == {"address_id": ["address has another presentment currency"]}


def test_change_address_to_an_unknown_or_another_stores_address_answers_422(vapi):
    sub = create_sub(vapi)
    for address_id in (make_address(vapi.other_store()).id, 999_999_999):
        response = vapi.post(f"/subscriptions/{sub['id']}/change_address", json={"address_id": address_id})
        assert errors_of(response) == {"address_id": ["address not found"]}


@pytest.mark.parametrize("body,errors", [({}, {"address_id": ["is required"]}),
                                         ({"address_id": "x"}, {"address_id": ["must be an integer"]}),
                                         ({"address_id": 1, "next_charge_scheduled_at": "x"},
                                          {"next_charge_scheduled_at": ["must be a date (YYYY-MM-DD)"]})])
def test_change_address_bad_bodies_answer_422(vapi, body, errors):
    sub = create_sub(vapi)
    assert errors_of(vapi.post(f"/subscriptions/{sub['id']}/change_address", json=body)) == errors


# cancel ------------------------------------------------------------------------------------------

def test_cancel_clears_the_next_date_and_takes_the_subscription_off_its_charge(vapi):
    address = make_address(vapi)
    kept = create_sub(vapi, address)
    sub = create_sub(vapi, address)
    vapi.clock.advance(seconds=1)
    response = vapi.post(f"/subscriptions/{sub['id']}/cancel",
                         json={**CANCEL, "cancellation_reason_comments": "switching", "send_email": False})
    assert response.status_code == 200, response.text
    cancelled = response.json()["subscription"]
    assert cancelled["status"] == ("cancelled" if vapi.version == V11 else "CANCELLED")
    assert cancelled["next_charge_scheduled_at"] is None
    assert cancelled["cancelled_at"] == stamp(vapi.version, vapi) == cancelled["updated_at"]
    assert (cancelled["cancellation_reason"], cancelled["cancellation_reason_comments"]) == ("too much coffee",
                                                                                             "switching")
    assert cancelled["has_queued_charges"] is False
    assert line_ids(vapi, address.id) == [(day(vapi, 10), [kept["id"]])]
    assert topics(vapi)[-2:] == ["subscription/cancelled", "charge/updated"]


def test_cancelling_the_last_active_subscription_deactivates_the_customer(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    sub = create_sub(api, address)
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "ACTIVE"
    api.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL, version=V01)
    assert api.get(f"/customers/{customer.id}", version=V01).json()["customer"]["status"] == "INACTIVE"
    assert charges_of(api, address.id) == []
    assert topics(api)[-3:] == ["subscription/cancelled", "customer/deactivated", "charge/deleted"]


@pytest.mark.parametrize("body,errors", [
    ({}, {"cancellation_reason": ["is required"]}),
    ({"cancellation_reason": None}, {"cancellation_reason": ["is required"]}),
    ({"cancellation_reason": ""}, {"cancellation_reason": ["cannot be blank"]}),
    ({"cancellation_reason": 5, "send_email": "yes"},
     {"cancellation_reason": ["must be a string"], "send_email": ["must be a boolean"]}),
])
def test_cancel_needs_a_reason(vapi, body, errors):
    sub = create_sub(vapi)
    assert errors_of(vapi.post(f"/subscriptions/{sub['id']}/cancel", json=body)) == errors
    assert vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]["cancelled_at"] is None


def test_cancelling_a_cancelled_subscription_answers_422(vapi):
    sub = create_sub(vapi)
    vapi.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    response = vapi.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    assert errors_of(response) == {"status": ["the subscription is cancelled, not active"]}


def test_cancel_keeps_the_one_time_items_of_the_charge(api):
    address = make_address(api)
    sub = create_sub(api, address)
    onetime = make_onetime(api, address)
    api.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    assert line_ids(api, address.id) == [(day(api, 10), [onetime.id])]


# activate ----------------------------------------------------------------------------------------

def test_activate_restores_the_date_it_had_when_cancelled(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    sub = create_sub(vapi, address)
    vapi.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    response = vapi.post(f"/subscriptions/{sub['id']}/activate", json={})
    assert response.status_code == 200, response.text
    active = response.json()["subscription"]
    assert active["status"] == ("active" if vapi.version == V11 else "ACTIVE")
    assert active["next_charge_scheduled_at"] == next_date(vapi.version, day(vapi, 10))
    assert (active["cancelled_at"], active["cancellation_reason"], active["cancellation_reason_comments"]) == (
        None, None, None)
    assert line_ids(vapi, address.id) == [(day(vapi, 10), [sub["id"]])]
    assert events_of(vapi)[-3:] == [("subscription/activated", sub["id"]), ("customer/activated", customer.id),
                                    ("charge/created", charges_of(vapi, address.id)[0].id)]


def test_activate_after_the_old_date_has_passed_charges_tomorrow(api):
    address = make_address(api)
    sub = create_sub(api, address, next_charge_scheduled_at=day(api, 1))
    api.post(f"/subscriptions/{sub['id']}/cancel", json=CANCEL)
    api.clock.advance(days=2)
    response = api.post(f"/subscriptions/{sub['id']}/activate")
    tomorrow = (today(api) + timedelta(days=1)).isoformat()
    assert response.json()["subscription"]["next_charge_scheduled_at"] == tomorrow
    assert line_ids(api, address.id) == [(tomorrow, [sub["id"]])]


def test_activating_an_active_subscription_answers_422(vapi):
    sub = create_sub(vapi)
    response = vapi.post(f"/subscriptions/{sub['id']}/activate")
    assert errors_of(response) == {"status": ["the subscription is already active"]}


# Unknown ids, tenancy --------------------------------------------------------------------------

@pytest.mark.parametrize("action,body", [("cancel", CANCEL), ("activate", {}),
                                         ("set_next_charge_date", {"date": "2099-01-01"}),
                                         ("change_address", {"address_id": 1})])
def test_moves_of_an_unknown_or_another_stores_subscription_answer_404(vapi, action, body):
    foreign = make_subscription(vapi.other_store())
    for ident in (foreign.id, 999_999_999):
        response = vapi.post(f"/subscriptions/{ident}/{action}", json=body)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_an_interval_change_drops_the_skips_still_ahead(api):
    address = make_address(api)
    sub = create_sub(api, address, next_charge_scheduled_at=day(api, 3), order_interval_unit="week")
    (charge,) = charges_of(api, address.id)
    assert api.post(f"/charges/{charge.id}/skip", json={}).status_code == 200
    assert line_ids(api, address.id, "skipped") == [(day(api, 3), [sub["id"]])]
    response = api.put(f"/subscriptions/{sub['id']}", json={"order_interval_unit": "day", "order_interval_frequency": 5,
                                                            "charge_interval_frequency": 5})
    assert response.status_code == 200, response.text
    # NOTE: decisions §5.3, a new interval drops skipped charges; created today + 5 days.
    assert line_ids(api, address.id, "skipped") == []
    assert line_ids(api, address.id) == [(day(api, 5), [sub["id"]])]
