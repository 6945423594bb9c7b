"""Skipping and unskipping charges, whole and partial, in both versions (spec 02 Charges skip and
unskip, decisions §5.11, §5.16), and skipping a future date of an address (2021-11, spec 01
Addresses skip, decisions §5.12)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_charges import (
    NOT_FOUND,
    V01,
    V11,
    charge,
    days,
    errors_of,
    lines,
    only,
    set_charge,
    stored,
    weekly,
)
from tests.builders import events_of, make_address, make_customer, make_onetime

SCOPE_403 = {"errors": "This token lacks the scope this endpoint needs: write_subscriptions"}


def skip(api: Any, charge_id: int, body: Any = None, version: str | None = None, action: str = "skip") -> Any:
    return api.post(f"/charges/{charge_id}/{action}", json={} if body is None else body, version=version)


def unskip(api: Any, charge_id: int, body: Any = None, version: str | None = None) -> Any:
    return skip(api, charge_id, body, version, action="unskip")


def items_body(version: str, ids: list[int]) -> dict[str, Any]:
    return {"purchase_item_ids": ids} if version == V11 else {"subscription_ids": [str(i) for i in ids]}


def next_date(api: Any, sub_id: int) -> str:
    return api.get(f"/subscriptions/{sub_id}", version=V11).json()["subscription"]["next_charge_scheduled_at"]


def schedule(api: Any, address_id: int) -> list[tuple[str, str, list[int]]]:
    return [(c.scheduled_at.isoformat(), c.status, sorted(line["purchase_item_id"] for line in c.line_items))
            for c in stored(api, address_id)]


# Whole skip ----------------------------------------------------------------------------------

def test_skipping_a_whole_charge_keeps_its_id_and_queues_the_next_date(vapi):
    address = make_address(vapi)
    sub = weekly(vapi, address)
    row = only(vapi, address.id)
    response = skip(vapi, row.id)
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert body["id"] == row.id
    assert body["status"] == ("skipped" if vapi.version == V11 else "SKIPPED")
    assert body["total_price"] == "12.50"  # a skip changes no price
    assert next_date(vapi, sub.id) == days(vapi, 14).isoformat()
    assert schedule(vapi, address.id) == [(days(vapi, 7).isoformat(), "skipped", [sub.id]),
                                          (days(vapi, 14).isoformat(), "queued", [sub.id])]
    new = only(vapi, address.id, "queued")
    assert ("subscription/skipped", sub.id) in events_of(vapi, sub.id, "subscription")
    # By kind: the charge may share its id with the subscription (a flake before).
    assert events_of(vapi, row.id, "charge")[-1] == ("charge/updated", row.id)
    assert events_of(vapi, new.id, "charge") == [("charge/created", new.id)]


def test_naming_every_item_skips_the_whole_charge_and_keeps_its_id(vapi):
    address = make_address(vapi)
    first, second = weekly(vapi, address), weekly(vapi, address)
    row = only(vapi, address.id)
    body = skip(vapi, row.id, items_body(vapi.version, [first.id, second.id])).json()["charge"]
    assert body["id"] == row.id and len(body["line_items"]) == 2


def test_2021_01_takes_a_single_subscription_id(api):
    address = make_address(api)
    first, second = weekly(api, address), weekly(api, address)
    row = only(api, address.id)
    response = skip(api, row.id, {"subscription_id": second.id}, V01)
    assert response.status_code == 200, response.text
    assert lines(response.json()["charge"], "subscription_id") == [second.id]
    assert lines(charge(api, row.id)) == [first.id]


def test_an_empty_body_skips_the_whole_charge(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    response = api.post(f"/charges/{row.id}/skip")
    assert response.status_code == 200, response.text
    assert response.json()["charge"]["id"] == row.id


@pytest.mark.parametrize("action", ["skip", "unskip"])
def test_an_empty_list_names_nothing_and_changes_nothing(vapi, action):
    """decisions §5.16: only an absent list means the whole charge (found by an audit: `[]`
    skipped or unskipped every item)."""
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    if action == "unskip":
        assert skip(vapi, row.id).status_code == 200
    before = schedule(vapi, address.id)
    response = skip(vapi, row.id, items_body(vapi.version, []), action=action)
    name = "purchase_item_ids" if vapi.version == V11 else "subscription_ids"
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {name: ["must name at least one purchase item"]}
    assert schedule(vapi, address.id) == before


def test_a_skipped_onetime_stays_skipped_without_a_next_date(api):
    address = make_address(api)
    onetime = make_onetime(api, address, next_charge_scheduled_at=days(api, 7))
    row = only(api, address.id)
    assert skip(api, row.id).json()["charge"]["status"] == "skipped"
    assert stored(api, address.id, "queued") == []
    assert ("onetime/skipped", onetime.id) in events_of(api, onetime.id)
    assert unskip(api, row.id).json()["charge"]["status"] == "queued"
    assert ("onetime/unskipped", onetime.id) in events_of(api, onetime.id)


# Partial skip --------------------------------------------------------------------------------

def test_a_partial_skip_leaves_the_rest_queued_under_the_same_id(vapi):
    address = make_address(vapi)
    kept, skipped = weekly(vapi, address, price="10.00"), weekly(vapi, address, price="3.00")
    row = only(vapi, address.id)
    response = skip(vapi, row.id, items_body(vapi.version, [skipped.id]))
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert body["id"] != row.id and body["total_price"] == "3.00"
    assert body["status"] == ("skipped" if vapi.version == V11 else "SKIPPED")
    remaining = charge(vapi, row.id, V11)
    assert (remaining["status"], lines(remaining), remaining["total_price"]) == ("queued", [kept.id], "10.00")
    assert next_date(vapi, kept.id) == days(vapi, 7).isoformat()
    assert next_date(vapi, skipped.id) == days(vapi, 14).isoformat()
    assert schedule(vapi, address.id) == [(days(vapi, 7).isoformat(), "queued", [kept.id]),
                                          (days(vapi, 7).isoformat(), "skipped", [skipped.id]),
                                          (days(vapi, 14).isoformat(), "queued", [skipped.id])]
    # Ids are per table: another resource's events may share the number.
    assert [e for e in events_of(vapi, body["id"]) if e[0].startswith("charge/")] == [("charge/created", body["id"])]
    assert ("subscription/skipped", skipped.id) in events_of(vapi, skipped.id)
    assert ("subscription/skipped", kept.id) not in events_of(vapi, kept.id)


def test_2021_11_takes_the_address_skips_subscription_ids_on_a_charge_too(api):
    """Found by an audit: `subscription_ids` (the 2021-11 address skip's name) sent to a charge
    was ignored as unknown and the whole charge was skipped: every delivery lost."""
    address = make_address(api)
    kept, skipped = weekly(api, address, price="10.00"), weekly(api, address, price="3.00")
    row = only(api, address.id)
    response = skip(api, row.id, {"subscription_ids": [skipped.id]})
    assert response.status_code == 200, response.text
    assert response.json()["charge"]["total_price"] == "3.00"
    assert lines(charge(api, row.id, V11)) == [kept.id]
    # Errors name it as sent; both names must agree.
    assert skip(api, row.id, {"subscription_ids": []}).json()["errors"] == {
        "subscription_ids": ["must name at least one purchase item"]}
    conflict = skip(api, row.id, {"subscription_ids": [kept.id], "purchase_item_ids": [skipped.id]})
    assert conflict.status_code == 422 and "conflicts with" in str(conflict.json()["errors"])
    assert lines(charge(api, row.id, V11)) == [kept.id]


def test_unskipping_a_partial_skip_puts_the_items_back_into_the_queued_charge(vapi):
    address = make_address(vapi)
    kept, skipped = weekly(vapi, address), weekly(vapi, address)
    row = only(vapi, address.id)
    skipped_id = skip(vapi, row.id, items_body(vapi.version, [skipped.id])).json()["charge"]["id"]
    later = next(c for c in stored(vapi, address.id, "queued") if c.id != row.id)
    response = unskip(vapi, skipped_id, {})
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert body["id"] == row.id
    assert body["status"] == ("queued" if vapi.version == V11 else "QUEUED")
    assert sorted(lines(charge(vapi, row.id, V11))) == [kept.id, skipped.id]
    assert vapi.get(f"/charges/{skipped_id}").status_code == 404
    assert vapi.get(f"/charges/{later.id}").status_code == 404
    assert next_date(vapi, skipped.id) == days(vapi, 7).isoformat()
    assert ("charge/deleted", skipped_id) in events_of(vapi, skipped_id)
    assert ("charge/deleted", later.id) in events_of(vapi, later.id, "charge")
    assert ("subscription/unskipped", skipped.id) in events_of(vapi, skipped.id)


def test_unskipping_a_whole_skip_keeps_the_id_and_brings_the_date_back(vapi):
    address = make_address(vapi)
    sub = weekly(vapi, address)
    row = only(vapi, address.id)
    skip(vapi, row.id)
    later = only(vapi, address.id, "queued")
    body = unskip(vapi, row.id).json()["charge"]
    assert body["id"] == row.id
    assert next_date(vapi, sub.id) == days(vapi, 7).isoformat()
    assert schedule(vapi, address.id) == [(days(vapi, 7).isoformat(), "queued", [sub.id])]
    assert events_of(vapi, later.id, "charge")[-1] == ("charge/deleted", later.id)


def test_unskipping_some_items_of_a_skipped_charge_leaves_the_others_skipped(vapi):
    address = make_address(vapi)
    first, second = weekly(vapi, address), weekly(vapi, address)
    row = only(vapi, address.id)
    skip(vapi, row.id)
    body = unskip(vapi, row.id, items_body(vapi.version, [first.id])).json()["charge"]
    # The skipped charge keeps its id with the item still skipped; the unskipped one is queued anew.
    assert body["id"] != row.id and lines(charge(vapi, row.id, V11)) == [second.id]
    assert schedule(vapi, address.id) == [(days(vapi, 7).isoformat(), "skipped", [second.id]),
                                          (days(vapi, 7).isoformat(), "queued", [first.id]),
                                          (days(vapi, 14).isoformat(), "queued", [second.id])]


def test_a_subscription_skipped_twice_in_a_row_moves_two_dates(api):
    address = make_address(api)
    sub = weekly(api, address)
    skip(api, only(api, address.id).id)
    skip(api, only(api, address.id).id)
    assert next_date(api, sub.id) == days(api, 21).isoformat()
    assert [(d, s) for d, s, _ in schedule(api, address.id)] == [
        (days(api, 7).isoformat(), "skipped"), (days(api, 14).isoformat(), "skipped"),
        (days(api, 21).isoformat(), "queued")]


# Refusals ------------------------------------------------------------------------------------

def test_prepaid_items_cannot_be_skipped(vapi):
    address = make_address(vapi)
    sub = weekly(vapi, address, charge_interval_frequency=21, order_interval_frequency=7)
    row = only(vapi, address.id)
    name = "purchase_item_ids" if vapi.version == V11 else "subscription_ids"
    assert errors_of(skip(vapi, row.id, items_body(vapi.version, [sub.id]))) == {
        name: [f"purchase item {sub.id} is prepaid and cannot be skipped"]}
    assert errors_of(skip(vapi, row.id)) == {name: [f"purchase item {sub.id} is prepaid and cannot be skipped"]}
    assert only(vapi, address.id).status == "queued"


def test_an_item_that_is_not_skippable_cannot_be_skipped(api):
    address = make_address(api)
    sub = weekly(api, address, is_skippable=False)
    row = only(api, address.id)
    assert errors_of(skip(api, row.id)) == {"purchase_item_ids": [f"purchase item {sub.id} is not skippable"]}


def test_a_skipped_charge_cannot_be_skipped_again_and_a_queued_one_cannot_be_unskipped(vapi):
    # 2021-01 names a status in upper case, in messages too (decisions §2.9).
    w = str.upper if vapi.version == "2021-01" else str
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    assert errors_of(unskip(vapi, row.id)) == {
        "status": [f"only a skipped charge can be unskipped; this one is {w('queued')}"]}
    skip(vapi, row.id)
    assert errors_of(skip(vapi, row.id)) == {"status": [f"only a queued charge can be skipped; this one is {w('skipped')}"]}


def test_a_processed_charge_cannot_be_skipped(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    set_charge(api, row.id, status="success", processed_at=api.clock.now())
    assert errors_of(skip(api, row.id)) == {"status": ["only a queued charge can be skipped; this one is success"]}


def test_a_skipped_charge_in_the_past_cannot_be_unskipped(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    skip(api, row.id)
    set_charge(api, row.id, scheduled_at=days(api, -1))
    assert errors_of(unskip(api, row.id)) == {"scheduled_at": ["a skipped charge in the past cannot be unskipped"]}


def test_items_that_are_not_on_the_charge_are_refused(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    elsewhere = weekly(vapi, make_address(vapi))
    foreign = weekly(vapi.other_store(), None)
    row = only(vapi, address.id)
    name = "purchase_item_ids" if vapi.version == V11 else "subscription_ids"
    response = skip(vapi, row.id, items_body(vapi.version, [elsewhere.id, foreign.id]))
    assert errors_of(response) == {name: [f"not on this charge: {elsewhere.id}, {foreign.id}"]}


@pytest.mark.parametrize("body, errors", [
    ({"purchase_item_ids": "1"}, {"purchase_item_ids": ["must be an array"]}),
    ({"purchase_item_ids": None}, {"purchase_item_ids": ["cannot be null"]}),  # absent: the whole charge
    ({"purchase_item_ids": ["x", 1, True]}, {"purchase_item_ids": {"0": ["must be an integer"],
                                                                    "2": ["must be an integer"]}}),
])
@pytest.mark.parametrize("action", ["skip", "unskip"])
def test_2021_11_skip_bodies_are_checked(api, action, body, errors):
    address = make_address(api)
    weekly(api, address)
    assert errors_of(skip(api, only(api, address.id).id, body, V11, action)) == errors


@pytest.mark.parametrize("body, errors", [
    ({"subscription_id": "abc"}, {"subscription_id": ["must be an integer"]}),
    ({"subscription_id": [1]}, {"subscription_id": ["must be an integer"]}),
    ({"subscription_ids": "1,2"}, {"subscription_ids": ["must be an array"]}),
    ({"subscription_ids": [{}]}, {"subscription_ids": {"0": ["must be an integer"]}}),
    # Found by an audit: `subscription_id: null` skipped (or unskipped) the whole charge.
    ({"subscription_id": None}, {"subscription_id": ["cannot be null"]}),
    ({"subscription_ids": None}, {"subscription_ids": ["cannot be null"]}),
])
@pytest.mark.parametrize("action", ["skip", "unskip"])
def test_2021_01_skip_bodies_are_checked(api, action, body, errors):
    address = make_address(api)
    weekly(api, address)
    before = only(api, address.id)
    assert errors_of(skip(api, before.id, body, V01, action)) == errors
    assert only(api, address.id) == before


@pytest.mark.parametrize("action", ["skip", "unskip"])
def test_skip_and_unskip_of_unknown_or_foreign_charges_answer_404(vapi, action):
    other = vapi.other_store()
    address = make_address(other)
    weekly(other, address)
    foreign = only(other, address.id)
    for charge_id in (foreign.id, 999999999):
        response = skip(vapi, charge_id, {}, action=action)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert only(other, address.id).status == "queued"


@pytest.mark.parametrize("action", ["skip", "unskip"])
def test_skip_and_unskip_need_write_subscriptions(vapi, action):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    token = vapi.token_with("read_orders", "write_orders", "read_subscriptions")
    response = vapi.post(f"/charges/{row.id}/{action}", json={}, token=token)
    assert (response.status_code, response.json()) == (403, SCOPE_403)
    assert only(vapi, address.id).status == "queued"


def test_skip_refuses_a_body_that_is_not_an_object(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    response = vapi.post(f"/charges/{only(vapi, address.id).id}/skip", json=[1])
    assert (response.status_code, response.json()) == (415, {"errors": "The request body must be a JSON object"})


# POST /addresses/{id}/charges/skip (2021-11) ---------------------------------------------------

def skip_date(api: Any, address_id: int, body: Any) -> Any:
    return api.post(f"/addresses/{address_id}/charges/skip", json=body, version=V11)


def test_skipping_a_future_date_on_the_cadence_creates_a_skipped_charge(api):
    address = make_address(api)
    sub = weekly(api, address)
    queued = only(api, address.id)
    response = skip_date(api, address.id, {"date": days(api, 21).isoformat(), "subscription_ids": [sub.id]})
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert (body["status"], body["scheduled_at"], lines(body)) == ("skipped", days(api, 21).isoformat(), [sub.id])
    assert body["total_price"] == "12.50"
    assert next_date(api, sub.id) == days(api, 7).isoformat()  # the next charge is untouched
    assert schedule(api, address.id) == [(days(api, 7).isoformat(), "queued", [sub.id]),
                                         (days(api, 21).isoformat(), "skipped", [sub.id])]
    assert only(api, address.id, "queued").id == queued.id
    # Another resource may share the number: only the charge's own events count.
    assert [e for e in events_of(api, body["id"]) if e[0].startswith("charge/")] == [("charge/created", body["id"])]
    assert ("subscription/skipped", sub.id) in events_of(api, sub.id)


def test_a_skipped_future_date_is_passed_over_when_the_schedule_gets_there(api):
    address = make_address(api)
    sub = weekly(api, address)
    skip_date(api, address.id, {"date": days(api, 14).isoformat(), "subscription_ids": [sub.id]})
    skip(api, only(api, address.id, "queued").id)
    assert next_date(api, sub.id) == days(api, 21).isoformat()


def test_skipping_the_date_of_the_queued_charge_skips_that_charge(api):
    address = make_address(api)
    sub = weekly(api, address)
    row = only(api, address.id)
    response = skip_date(api, address.id, {"date": days(api, 7).isoformat(), "purchase_item_ids": [sub.id]})
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert (body["id"], body["status"]) == (row.id, "skipped")
    assert next_date(api, sub.id) == days(api, 14).isoformat()


def test_skipping_one_subscription_of_a_shared_date_is_a_partial_skip(api):
    address = make_address(api)
    kept, skipped = weekly(api, address), weekly(api, address)
    row = only(api, address.id)
    body = skip_date(api, address.id, {"date": days(api, 7).isoformat(), "subscription_ids": [skipped.id]}).json()
    assert body["charge"]["id"] != row.id and lines(body["charge"]) == [skipped.id]
    assert lines(charge(api, row.id)) == [kept.id]


def test_skipping_the_rest_of_a_partly_skipped_date_keeps_the_queued_charges_id(api):
    # decisions §5.16 (found by an audit): by date as through the charge, the queued charge of
    # the date is the one skipped, and the earlier partial skip merges into it.
    address = make_address(api)
    first, second = weekly(api, address), weekly(api, address)
    row = only(api, address.id)
    when = days(api, 7).isoformat()
    partial = skip_date(api, address.id, {"date": when, "subscription_ids": [second.id]}).json()["charge"]
    assert partial["id"] != row.id
    response = skip_date(api, address.id, {"date": when, "subscription_ids": [first.id]})
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert (body["id"], body["status"], sorted(lines(body))) == (row.id, "skipped", sorted([first.id, second.id]))
    assert api.get(f"/charges/{partial['id']}", version=V11).status_code == 404


def test_the_skipped_future_date_can_be_unskipped(api):
    address = make_address(api)
    sub = weekly(api, address)
    body = skip_date(api, address.id, {"date": days(api, 21).isoformat(), "subscription_ids": [sub.id]}).json()
    response = unskip(api, body["charge"]["id"])
    assert response.status_code == 200, response.text
    assert schedule(api, address.id) == [(days(api, 7).isoformat(), "queued", [sub.id])]
    assert next_date(api, sub.id) == days(api, 7).isoformat()
    assert response.json()["charge"]["id"] == only(api, address.id).id


@pytest.mark.parametrize("offset", [0, -7])
def test_a_date_that_is_not_in_the_future_is_refused(api, offset):
    address = make_address(api)
    sub = weekly(api, address, on=7)
    response = skip_date(api, address.id, {"date": days(api, offset).isoformat(), "subscription_ids": [sub.id]})
    assert errors_of(response) == {"date": ["must be in the future"]}


def test_a_date_off_the_cadence_is_refused(api):
    address = make_address(api)
    sub = weekly(api, address)
    when = days(api, 10).isoformat()
    response = skip_date(api, address.id, {"date": when, "subscription_ids": [sub.id]})
    assert errors_of(response) == {"date": [f"purchase item {sub.id} is not charged on {when}"]}
    assert errors_of(skip_date(api, address.id, {"date": days(api, 3).isoformat(), "subscription_ids": [sub.id]}))


def test_a_date_already_skipped_is_refused(api):
    address = make_address(api)
    sub = weekly(api, address)
    when = days(api, 14).isoformat()
    assert skip_date(api, address.id, {"date": when, "subscription_ids": [sub.id]}).status_code == 200
    assert errors_of(skip_date(api, address.id, {"date": when, "subscription_ids": [sub.id]})) == {
        "date": [f"purchase item {sub.id} is already skipped on {when}"]}


def test_subscriptions_of_another_address_or_store_are_refused(api):
    customer = make_customer(api)
    address, other = make_address(api, customer), make_address(api, customer, address1="9 Elm St")
    weekly(api, address)
    theirs = weekly(api, other)
    foreign = weekly(api.other_store())
    response = skip_date(api, address.id, {"date": days(api, 14).isoformat(),
                                           "purchase_item_ids": [theirs.id, foreign.id]})
    assert errors_of(response) == {"purchase_item_ids": [f"not on this address: {theirs.id}, {foreign.id}"]}


def test_skipping_a_future_date_of_a_prepaid_subscription_is_refused(api):
    address = make_address(api)
    sub = weekly(api, address, charge_interval_frequency=21, order_interval_frequency=7)
    response = skip_date(api, address.id, {"date": days(api, 28).isoformat(), "subscription_ids": [sub.id]})
    assert errors_of(response) == {"subscription_ids": [f"purchase item {sub.id} is prepaid and cannot be skipped"]}


@pytest.mark.parametrize("body, errors", [
    ({}, {"date": ["is required"], "subscription_ids": ["is required"]}),
    ({"date": "soon", "subscription_ids": "1"}, {"date": ["must be a date (YYYY-MM-DD)"],
                                                 "subscription_ids": ["must be an array"]}),
    ({"date": 20300101, "purchase_item_ids": ["x"]}, {"date": ["must be a date (YYYY-MM-DD)"],
                                                      "purchase_item_ids": {"0": ["must be an integer"]}}),
    ({"date": None, "subscription_ids": None}, {"date": ["is required"], "subscription_ids": ["is required"]}),
])
def test_address_skip_bodies_are_checked(api, body, errors):
    address = make_address(api)
    weekly(api, address)
    assert errors_of(skip_date(api, address.id, body)) == errors


def test_address_skip_of_an_unknown_or_foreign_address_answers_404(api):
    other = api.other_store()
    address = make_address(other)
    sub = weekly(other, address)
    for address_id in (address.id, 999999999):
        response = skip_date(api, address_id, {"date": days(api, 14).isoformat(), "subscription_ids": [sub.id]})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert len(stored(other, address.id)) == 1


def test_address_skip_needs_write_subscriptions(api):
    address = make_address(api)
    sub = weekly(api, address)
    response = api.post(f"/addresses/{address.id}/charges/skip", version=V11,
                        json={"date": days(api, 14).isoformat(), "subscription_ids": [sub.id]},
                        token=api.token_with("write_orders", "read_subscriptions", "write_customers"))
    assert (response.status_code, response.json()) == (403, SCOPE_403)


def test_skipping_a_date_names_at_least_one_item(api):
    address = make_address(api)
    weekly(api, address)
    response = skip_date(api, address.id, {"date": days(api, 14).isoformat(), "purchase_item_ids": []})
    assert response.status_code == 422
    assert response.json() == {"errors": {"purchase_item_ids": ["must name at least one purchase item"]}}


def test_an_item_waiting_for_a_retry_cannot_have_a_date_skipped_meanwhile(api):
    """Its charge in error holds it out of the plan (decisions §6.3): a skip of its later date
    would make nothing (it was a 500). 422 naming the charge it waits for."""
    from tests.builders import make_customer, make_payment_method
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token="pm_declined")
    address = make_address(api, customer)
    sub = weekly(api, address, on=0)
    charge = only(api, address.id)
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge.id], api.clock.now())
    assert only(api, address.id, "error").id == charge.id
    response = skip_date(api, address.id, {"date": days(api, 7).isoformat(), "purchase_item_ids": [sub.id]})
    assert response.status_code == 422, response.text
    assert response.json() == {"errors": {"purchase_item_ids": [
        f"purchase item {sub.id} waits for the retry of charge {charge.id}"]}}


def _skipped_dates(api: Any, address_id: int) -> list[str]:
    return [when for when, status, _ in schedule(api, address_id) if status == "skipped"]


def _set_by_hand(api: Any, way: str, sub: Any, address_id: int, when: Any) -> None:
    if way == "set_next_charge_date":
        reply = api.post(f"/subscriptions/{sub.id}/set_next_charge_date", json={"date": when.isoformat()}, version=V11)
    elif way == "put":
        reply = api.put(f"/subscriptions/{sub.id}", json={"next_charge_scheduled_at": when.isoformat()}, version=V11)
    elif way == "change_address":
        reply = api.post(f"/subscriptions/{sub.id}/change_address", version=V11,
                         json={"address_id": address_id, "next_charge_scheduled_at": when.isoformat()})
    else:
        queued = only(api, address_id, "queued")
        reply = api.post(f"/charges/{queued.id}/change_next_charge_date", json={"next_charge_date": when.isoformat()},
                         version=V01)
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("way", ["set_next_charge_date", "put", "change_address", "charge_change_date"])
def test_a_date_set_by_hand_keeps_the_skips_on_its_cadence_and_drops_the_others(api, way):
    """Found by an audit: a subscription moved from the 10th to the 12th kept its skip of the
    10th of the next month, a date it was no longer charged on, and was billed on the 12th.
    The skips the new cadence does not reach go, as a new interval's do (decisions §5.3)."""
    address = make_address(api)
    sub = weekly(api, address)  # on days 7, 14, 21...
    for day in (21, 35):
        assert skip_date(api, address.id, {"date": days(api, day).isoformat(), "subscription_ids": [sub.id]}).is_success
    _set_by_hand(api, way, sub, address.id, days(api, 14))  # 14, 21, 28, 35: both still on it
    assert _skipped_dates(api, address.id) == [days(api, 21).isoformat(), days(api, 35).isoformat()]
    _set_by_hand(api, way, sub, address.id, days(api, 10))  # 10, 17, 24...: neither
    assert _skipped_dates(api, address.id) == []
    assert next_date(api, sub.id) == days(api, 10).isoformat()
    schedule_days = [d["date"] for d in api.get(f"/customers/{address.customer_id}/delivery_schedule",
                                                params={"future_interval": 40}, version=V11).json()["deliveries"]]
    assert schedule_days == [days(api, n).isoformat() for n in (10, 17, 24, 31, 38)]


def test_a_put_of_a_new_date_with_the_cadence_sent_back_drops_the_skips_off_it(api):
    """Found by a review: a GET body with a new date (its interval fields as they are) went the
    way of a new cadence, which set the anchor but kept the skips the new cadence no longer
    reaches."""
    address = make_address(api)
    sub = weekly(api, address)  # on days 7, 14, 21...
    for day in (21, 35):
        assert skip_date(api, address.id, {"date": days(api, day).isoformat(), "subscription_ids": [sub.id]}).is_success
    body = api.get(f"/subscriptions/{sub.id}", version=V11).json()["subscription"]
    cadence = {name: body[name] for name in ("order_interval_unit", "order_interval_frequency",
                                             "charge_interval_frequency", "order_day_of_week")}
    assert cadence["order_day_of_week"] is None  # sent back as shown: no order day
    reply = api.put(f"/subscriptions/{sub.id}", json={**cadence, "next_charge_scheduled_at": days(api, 10).isoformat()},
                    version=V11)
    assert reply.status_code == 200, reply.text
    assert _skipped_dates(api, address.id) == []
    assert next_date(api, sub.id) == days(api, 10).isoformat()


def test_unskipping_a_date_skipped_ahead_answers_the_charge_that_holds_the_item(vapi):
    """Found by an audit: with another subscription charged on the date skipped ahead, the
    unskip answered that date's queued charge, which does not hold the unskipped item; the
    answer is the earliest queued charge that holds it (its next charge)."""
    address = make_address(vapi)
    first = weekly(vapi, address)  # days 7, 14, 21, ...
    other = weekly(vapi, address, on=21)
    skipped = skip_date(vapi, address.id, {"date": days(vapi, 21).isoformat(), "subscription_ids": [first.id]})
    assert skipped.status_code == 200, skipped.text
    body = items_body(vapi.version, [first.id]) if vapi.version == V01 else {}
    response = unskip(vapi, skipped.json()["charge"]["id"], body)
    assert response.status_code == 200, response.text
    answered = response.json()["charge"]
    held = [line.get("purchase_item_id", line.get("subscription_id")) for line in answered["line_items"]]
    assert first.id in held and other.id not in held
    assert answered["scheduled_at"].startswith(days(vapi, 7).isoformat())


def test_a_queued_charge_whose_date_has_passed_cannot_be_skipped(api):
    """Found by an audit: a charge left queued past its date (between midnight and the next
    billing run) answered 409 "try again" to a skip, every time. It is due: a 422 that says so,
    and nothing changes."""
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    set_charge(api, row.id, scheduled_at=days(api, -1))
    assert errors_of(skip(api, row.id)) == {"scheduled_at": ["a charge whose date has passed is due and cannot be skipped"]}
    assert only(api, address.id).id == row.id


def test_a_date_after_a_subscriptions_last_charge_cannot_be_skipped(api):
    """Spec 01: a date within the delivery schedule. Found by an audit: a subscription with one
    charge left took skips of dates after it, and a skip of its one date then moved that
    charge past them. A skipped date takes no charge of the limit: the date after it is in."""
    address = make_address(api)
    sub = weekly(api, address, expire_after_specific_number_of_charges=1)
    refused = skip_date(api, address.id, {"date": days(api, 14).isoformat(), "subscription_ids": [sub.id]})
    assert errors_of(refused) == {"date": [f"purchase item {sub.id} is not charged on {days(api, 14).isoformat()}"]}
    assert skip_date(api, address.id, {"date": days(api, 7).isoformat(), "subscription_ids": [sub.id]}).status_code == 200
    assert next_date(api, sub.id) == days(api, 14).isoformat()
    later = skip_date(api, address.id, {"date": days(api, 14).isoformat(), "subscription_ids": [sub.id]})
    assert later.status_code == 200, later.text
    assert errors_of(skip_date(api, address.id, {"date": days(api, 28).isoformat(), "subscription_ids": [sub.id]}))


@pytest.mark.parametrize("body", [{"subscription_id": "kept"}, {"subscription_ids": ["kept"]},
                                  {"purchase_item_ids": ["kept"]}])
def test_each_versions_names_of_the_items_skip_them_alone_in_both_versions(vapi, body):
    """Found by an audit: 2021-11 took 2021-01's `subscription_id` as unknown (and 2021-01 took
    `purchase_item_ids` so), and the whole charge was skipped: every name of the items is read
    in both versions."""
    address = make_address(vapi)
    kept, skipped = weekly(vapi, address, price="10.00"), weekly(vapi, address, price="3.00")
    row = only(vapi, address.id)
    named = {key: (skipped.id if value == "kept" else [skipped.id]) for key, value in body.items()}
    response = skip(vapi, row.id, named)
    assert response.status_code == 200, response.text
    assert lines(charge(vapi, row.id, V11)) == [kept.id]


def test_the_skip_and_unskip_events_name_the_next_date_they_moved(api):
    """Found by an audit: `subscription/skipped` and `/unskipped` named no field, though the
    subscription's `next_charge_scheduled_at` moved (a cancel names every field it changes)."""
    address = make_address(api)
    sub = weekly(api, address)
    row = only(api, address.id)
    assert skip(api, row.id).status_code == 200
    assert unskip(api, row.id).status_code == 200
    shown = api.get("/events", params={"object_type": "subscription", "object_id": sub.id, "sort_by": "id-asc"})
    said = {e["verb"]: e["updated_attributes"] for e in shown.json()["events"] if e["verb"] in ("skipped", "unskipped")}
    assert said == {"skipped": ["next_charge_scheduled_at"], "unskipped": ["next_charge_scheduled_at"]}
