"""Contract tests of the event log (`GET /events`, `GET /events/{id}`: 2021-11 only, 03-real-fields
"event (2021-11)", issue 14): the fields, newest first, cursors, filters, who made each change
and what it changed; 501 in 2021-01. Both databases (the `api` fixture)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from rebill.models import tokens
from tests.api.test_webhooks import ADDRESS, HUGE, NOT_FOUND, V01, create, errors_of, ids_of
from tests.builders import make_address, make_customer

FIELDS = {"created_at", "custom_attributes", "customer_id", "description", "id", "object_id", "object_type", "source",
          "updated_attributes", "verb"}
SOURCE = {"account_email", "account_id", "api_token_id", "api_token_name", "origin", "user_type"}


def listed(api: Any, **params: Any) -> list[dict[str, Any]]:
    reply = api.get("/events", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()["events"]


def token_id(api: Any, name: str = "tests") -> int:
    with api.db.read() as conn:
        return conn.execute(select(tokens.c.id).where(tokens.c.store_id == api.store.id, tokens.c.name == name)).scalar()


def test_an_api_change_renders_every_field_with_its_token_as_source(api):
    reply = api.post("/customers", json={"email": "ada@example.com", "first_name": "Ada", "last_name": "L"})
    customer_id = reply.json()["customer"]["id"]
    [event] = listed(api)
    assert set(event) == FIELDS and set(event["source"]) == SOURCE
    assert event == {
        "id": event["id"],
        # decisions §2.4, 2021-11: with the offset (an audit found the one naive 2021-11 datetime here).
        "created_at": api.clock.now().strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        "custom_attributes": [],
        "customer_id": customer_id,
        "description": f"customer {customer_id} created",
        "object_id": customer_id,
        "object_type": "customer",
        "source": {"account_email": None, "account_id": None, "api_token_id": token_id(api),
                   "api_token_name": "tests", "origin": "api", "user_type": "api_token"},
        "updated_attributes": [],
        "verb": "created",
    }
    assert api.get(f"/events/{event['id']}").json() == {"event": event}


def test_a_change_made_without_a_token_has_no_token_in_its_source(api):
    make_customer(api)  # through the service, as the command line and jobs change things
    [event] = listed(api)
    assert event["source"] == {"account_email": None, "account_id": None, "api_token_id": None,
                               "api_token_name": None, "origin": "system", "user_type": None}


def test_the_source_names_the_token_that_made_the_change(api):
    other = api.token_with("write_notifications")
    made = create(api)
    api.put(f"/webhooks/{made['id']}", json={"address": ADDRESS + "/2"}, token=other)
    updated, created = listed(api)
    assert created["source"]["api_token_id"] == token_id(api, "tests")
    assert updated["source"]["api_token_id"] == token_id(api, "api") != created["source"]["api_token_id"]
    assert updated["source"]["api_token_name"] == "api"


def test_events_are_newest_first_and_sort_by_id_both_ways(api):
    make_customer(api)
    create(api)
    make_customer(api.other_store())
    newest_first = ids_of(api.get("/events"), "events")
    assert len(newest_first) == 2 and newest_first == sorted(newest_first, reverse=True)
    assert ids_of(api.get("/events", params={"sort_by": "id-asc"}), "events") == sorted(newest_first)


def test_events_page_with_cursors_in_the_body(api):
    for _ in range(3):
        make_customer(api)
    every = ids_of(api.get("/events"), "events")
    first = api.get("/events", params={"limit": 2}).json()
    assert [e["id"] for e in first["events"]] == every[:2] and first["previous_cursor"] is None
    second = api.get("/events", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [e["id"] for e in second["events"]] == every[2:] and second["next_cursor"] is None
    back = api.get("/events", params={"limit": 2, "cursor": second["previous_cursor"]}).json()
    assert [e["id"] for e in back["events"]] == every[:2]


def test_events_filter_by_object_verb_customer_and_time(api):
    customer = make_customer(api)
    other = make_customer(api)
    later = api.clock.advance(timedelta(hours=2))
    address = make_address(api, customer)
    api.put(f"/customers/{customer.id}", json={"first_name": "Later"})
    create(api)

    def found(**params: Any) -> list[tuple[str, int]]:
        return [(f"{e['object_type']}/{e['verb']}", e["object_id"]) for e in listed(api, **params)]

    assert found(object_type="address") == [("address/created", address.id)]
    assert found(object_type="customer", object_id=str(customer.id)) == [
        ("customer/updated", customer.id), ("customer/created", customer.id)]
    assert found(verb="created", object_type="customer") == [("customer/created", other.id),
                                                            ("customer/created", customer.id)]
    # An address's events carry its customer's id.
    assert found(customer_id=str(customer.id)) == [("customer/updated", customer.id),
                                                  ("address/created", address.id), ("customer/created", customer.id)]
    assert [e["customer_id"] for e in listed(api, object_type="address")] == [customer.id]
    hour_ago = (later - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert found(created_at_max=hour_ago) == [("customer/created", other.id), ("customer/created", customer.id)]
    assert len(found(created_at_min=hour_ago)) == 3
    assert found(verb="max_retries_reached") == [] and found(verb="%") == [] and found(object_type="nothing") == []


@pytest.mark.parametrize("params, errors", [
    ({"object_id": "first"}, {"object_id": ["Invalid integer: first"]}),
    ({"customer_id": "1,2"}, {"customer_id": ["Invalid integer: 1,2"]}),
    ({"customer_id": HUGE}, {"customer_id": [f"Invalid integer: {HUGE}"]}),
    ({"created_at_min": "soon"}, {"created_at_min": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"]}),
    ({"created_at_max": "2026-01-01T25:00"},
     {"created_at_max": ["Invalid date: 2026-01-01T25:00. Must be a valid ISO-8601 datetime string"]}),
    ({"object_id": "x", "created_at_min": "y"}, {"object_id": ["Invalid integer: x"],
                                                 "created_at_min": ["Invalid date: y. Must be a valid ISO-8601 "
                                                                    "datetime string"]}),
    ({"limit": "251"}, None),
    ({"sort_by": "created_at-desc"}, None),
    ({"cursor": "garbage"}, {"cursor": ["Invalid value"]}),
])
def test_bad_event_filters_answer_422(api, params, errors):
    found = errors_of(api.get("/events", params=params))
    assert found == errors if errors is not None else set(found) == set(params)


def test_one_event_and_404s_for_unknown_huge_and_another_stores_ids(api):
    make_customer(api)
    [event] = listed(api)
    assert api.get(f"/events/{event['id']}").json() == {"event": event}
    other = api.other_store()
    make_customer(other)
    [foreign] = listed(other)
    for event_id in (foreign["id"], 987654321, HUGE, 0):
        reply = api.get(f"/events/{event_id}")
        assert reply.status_code == 404 and reply.json() == NOT_FOUND, event_id
    assert foreign["id"] not in ids_of(api.get("/events"), "events")


def test_the_event_log_is_2021_11_only(api):
    make_customer(api)
    [event] = listed(api)
    for path in ("/events", f"/events/{event['id']}"):
        reply = api.get(path, version=V01)
        assert reply.status_code == 501, path
        assert reply.json() == {"errors": "This resource is not implemented in the requested API version"}


def test_reading_events_needs_read_events(api):
    make_customer(api)
    [event] = listed(api)
    message = {"errors": "This token lacks the scope this endpoint needs: read_events"}
    for token in (api.token_with("read_customers"), api.token_with("write_notifications")):
        for path in ("/events", f"/events/{event['id']}"):
            reply = api.get(path, token=token)
            assert reply.status_code == 403 and reply.json() == message, path
    reader = api.token_with("read_events")
    assert api.get(f"/events/{event['id']}", token=reader).json() == {"event": event}
