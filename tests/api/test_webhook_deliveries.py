"""Contract tests of the delivery log (Rebill's extension, issue 14): listing and reading
deliveries with their attempts and payload, replaying one or every failed one since a time,
the retry schedule that disables a webhook, and the payloads themselves (decisions §8.2: the
resource's GET in the webhook's version with its `included_objects`; `*/deleted`: the id).
Both versions where the endpoint exists, both databases (the `api` fixture)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from rebill.domain.webhook import retries
from tests.api.test_webhooks import (
    HUGE,
    NOT_FOUND,
    V01,
    V11,
    create,
    disable,
    drain,
    errors_of,
    ids_of,
    receiving,
    stamp,
)
from tests.builders import make_address, make_customer, make_metafield, make_payment_method, make_subscription

PLURAL = "webhook_deliveries"


def deliveries(api: Any, **params: Any) -> list[dict[str, Any]]:
    reply = api.get("/webhook_deliveries", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()[PLURAL]


def one(api: Any, delivery_id: int) -> dict[str, Any]:
    reply = api.get(f"/webhook_deliveries/{delivery_id}")
    assert reply.status_code == 200, reply.text
    return reply.json()["webhook_delivery"]


def rename(api: Any, customer_id: int, name: str) -> None:
    assert api.put(f"/customers/{customer_id}", json={"first_name": name}, version=V11).status_code == 200


# The log -----------------------------------------------------------------------------------------

def test_an_event_makes_one_pending_delivery_per_subscribed_webhook(vapi):
    now = stamp(vapi.clock.now(), vapi.version)
    first = create(vapi)
    second = create(vapi, address="https://hooks.example.com/second")
    create(vapi, address="https://hooks.example.com/other", topic="customer/updated")
    customer = make_customer(vapi)
    found = deliveries(vapi)
    assert [d["webhook_id"] for d in found] == [second["id"], first["id"]]  # newest first
    [event] = vapi.get("/events", params={"object_type": "customer"}, version=V11).json()["events"]
    assert found[1] == {
        "id": found[1]["id"], "webhook_id": first["id"], "event_id": event["id"],
        "message_id": f"msg_{found[1]['id']}", "topic": "customer/created", "object_type": "customer",
        "object_id": customer.id, "test": False, "status": "pending", "attempt_count": 0, "next_attempt_at": now,
        "last_attempt_at": None, "last_status_code": None, "last_error": None, "succeeded_at": None,
        "created_at": now, "updated_at": now, "attempts": []}


def test_a_delivery_shows_every_attempt_and_its_payload(vapi):
    customer = make_customer(vapi)
    with receiving(status=503) as receiver:
        made = create(vapi, address=receiver.url, topic="customer/updated")
        rename(vapi, customer.id, "Grace")
        assert drain(vapi) == 1
        first_try = vapi.clock.now()
        second_try = vapi.clock.advance(retries.DELAYS[0])
        receiver.status = 200
        assert drain(vapi) == 1
    [listed] = deliveries(vapi, webhook_id=made["id"])
    shown = one(vapi, listed["id"])
    assert shown["payload"] == vapi.get(f"/customers/{customer.id}").json()
    assert {k: v for k, v in shown.items() if k != "payload"} == listed
    assert shown["status"] == "succeeded" and shown["attempt_count"] == 2 and shown["next_attempt_at"] is None
    assert shown["last_status_code"] == 200 and shown["succeeded_at"] == stamp(second_try, vapi.version)
    assert shown["last_attempt_at"] == stamp(second_try, vapi.version)
    assert [(a["number"], a["replay"], a["status_code"], a["response"], a["error"]) for a in shown["attempts"]] == [
        (1, False, 503, "ok", None), (2, False, 200, "ok", None)]
    assert [a["started_at"] for a in shown["attempts"]] == [stamp(first_try, vapi.version),
                                                           stamp(second_try, vapi.version)]
    assert all(isinstance(a["latency_ms"], int) and a["latency_ms"] >= 0 for a in shown["attempts"])


def test_an_unreachable_receiver_is_logged_as_an_error_and_retried(api):
    with receiving() as receiver:
        address = receiver.url
    made = create(api, address=address)  # nobody listens there any more
    make_customer(api)
    assert drain(api) == 1
    [failed] = deliveries(api)
    assert failed["status"] == "pending" and failed["attempt_count"] == 1 and failed["last_status_code"] is None
    assert failed["last_error"] and failed["attempts"][0]["error"] == failed["last_error"]
    assert failed["next_attempt_at"] == stamp(api.clock.now() + retries.DELAYS[0], V11)
    assert failed["webhook_id"] == made["id"]


def test_the_log_filters_by_webhook_status_topic_and_creation_time(vapi):
    customer = make_customer(vapi)
    with receiving() as receiver:
        created = create(vapi, address=receiver.url)
        updated = create(vapi, address=receiver.url, topic="customer/updated")
        make_customer(vapi)
        drain(vapi)
        later = vapi.clock.advance(timedelta(hours=2))
        rename(vapi, customer.id, "Later")
    done = deliveries(vapi, webhook_id=created["id"])
    waiting = deliveries(vapi, webhook_id=updated["id"])
    assert [d["status"] for d in done] == ["succeeded"] and [d["status"] for d in waiting] == ["pending"]
    assert ids_of(vapi.get("/webhook_deliveries", params={"status": "succeeded"}), PLURAL) == [done[0]["id"]]
    assert ids_of(vapi.get("/webhook_deliveries", params={"status": "pending"}), PLURAL) == [waiting[0]["id"]]
    assert deliveries(vapi, status="failed") == []
    assert ids_of(vapi.get("/webhook_deliveries", params={"topic": "customer/updated"}), PLURAL) == [
        waiting[0]["id"]]
    assert deliveries(vapi, topic="charge/created") == []
    hour_ago = (later - timedelta(hours=1)).isoformat()
    assert ids_of(vapi.get("/webhook_deliveries", params={"created_at_min": hour_ago}), PLURAL) == [
        waiting[0]["id"]]
    assert ids_of(vapi.get("/webhook_deliveries", params={"created_at_max": hour_ago}), PLURAL) == [done[0]["id"]]
    assert ids_of(vapi.get("/webhook_deliveries", params={"sort_by": "id-asc"}), PLURAL) == [
        done[0]["id"], waiting[0]["id"]]
    assert deliveries(vapi, webhook_id=987654321) == []


def test_the_log_pages_in_each_versions_way(vapi):
    create(vapi)
    for _ in range(3):
        make_customer(vapi)
    every = ids_of(vapi.get("/webhook_deliveries"), PLURAL)
    first = vapi.get("/webhook_deliveries", params={"limit": 2})
    assert ids_of(first, PLURAL) == every[:2]
    if vapi.version == V11:
        cursor = first.json()["next_cursor"]
        assert "link" not in first.headers
    else:
        assert set(first.json()) == {PLURAL}
        cursor = first.headers["link"].split("page_info=")[1].split(">")[0]
    assert ids_of(vapi.get("/webhook_deliveries", params={"limit": 2, "cursor": cursor}), PLURAL) == every[2:]


@pytest.mark.parametrize("params, errors", [
    ({"webhook_id": "first"}, {"webhook_id": ["Invalid integer: first"]}),
    ({"webhook_id": HUGE}, {"webhook_id": [f"Invalid integer: {HUGE}"]}),
    ({"status": "done"}, {"status": ["Invalid value: done. Must be one of pending, succeeded, failed"]}),
    ({"status": "FAILED"}, {"status": ["Invalid value: FAILED. Must be one of pending, succeeded, failed"]}),
    ({"created_at_min": "yesterday"},
     {"created_at_min": ["Invalid date: yesterday. Must be a valid ISO-8601 datetime string"]}),
    ({"created_at_max": "2026-02-30"},
     {"created_at_max": ["Invalid date: 2026-02-30. Must be a valid ISO-8601 datetime string"]}),
    ({"limit": "0"}, {"limit": None}),
    ({"sort_by": "created_at-asc"}, {"sort_by": None}),
])
def test_bad_log_filters_answer_422(vapi, params, errors):
    found = errors_of(vapi.get("/webhook_deliveries", params=params))
    assert set(found) == set(errors)
    assert all(found[k] == v for k, v in errors.items() if v is not None)


# Replaying one delivery --------------------------------------------------------------------------

def test_a_replay_resends_the_same_body_with_the_same_webhook_id(vapi):
    customer = make_customer(vapi)
    with receiving() as receiver:
        made = create(vapi, address=receiver.url, topic="customer/updated")
        rename(vapi, customer.id, "Before")
        drain(vapi)
        rename(vapi, customer.id, "After")  # a later change must not alter the replayed body
        [second, first] = deliveries(vapi, webhook_id=made["id"])
        drain(vapi)
        later = vapi.clock.advance(timedelta(hours=1))
        reply = vapi.post(f"/webhook_deliveries/{first['id']}/replay")
        assert reply.status_code == 202, reply.text
        queued = reply.json()["webhook_delivery"]
        assert queued["status"] == "pending" and queued["attempt_count"] == 0 and queued["succeeded_at"] is None
        assert queued["next_attempt_at"] == stamp(later, vapi.version) and len(queued["attempts"]) == 1
        assert drain(vapi) == 1
        original, _, again = receiver.received
    assert again.body == original.body and again.json["customer"]["first_name"] == "Before"
    assert again.headers["webhook-id"] == original.headers["webhook-id"] == first["message_id"]
    assert again.headers["x-service-hmac-sha256"] == original.headers["x-service-hmac-sha256"]
    replayed = one(vapi, first["id"])
    assert replayed["status"] == "succeeded"
    assert [(a["number"], a["replay"]) for a in replayed["attempts"]] == [(1, False), (1, True)]
    assert one(vapi, second["id"])["attempts"][0]["replay"] is False


def test_a_failed_delivery_can_be_replayed(api):
    with receiving(status=500) as receiver:
        made = create(api, address=receiver.url)
        make_customer(api)
        api.post(f"/webhooks/{made['id']}/test")
        test_delivery = deliveries(api, webhook_id=made["id"])[0]
        drain(api)
        assert one(api, test_delivery["id"])["status"] == "failed"
        receiver.status = 200
        assert api.post(f"/webhook_deliveries/{test_delivery['id']}/replay").status_code == 202
        drain(api)
    assert one(api, test_delivery["id"])["status"] == "succeeded"


def test_every_attempt_of_a_replay_is_marked_its_retries_too(vapi):
    # The mark was once derived from "first attempt of a series after an earlier one", which
    # left a replay's retries unmarked (migration 0023 keeps it on the delivery).
    customer = make_customer(vapi)
    with receiving() as receiver:
        made = create(vapi, address=receiver.url, topic="customer/updated")
        rename(vapi, customer.id, "Hedy")
        assert drain(vapi) == 1
        [delivered] = deliveries(vapi, webhook_id=made["id"])
        receiver.status = 503
        assert vapi.post(f"/webhook_deliveries/{delivered['id']}/replay").status_code == 202
        assert drain(vapi) == 1
        assert one(vapi, delivered["id"])["status"] == "pending"
        vapi.clock.advance(retries.DELAYS[0])
        receiver.status = 200
        assert drain(vapi) == 1
        rename(vapi, customer.id, "Grace")  # a later delivery of the same webhook is no replay
        assert drain(vapi) == 1
    replayed = one(vapi, delivered["id"])
    assert replayed["status"] == "succeeded"
    assert [(a["number"], a["replay"], a["status_code"]) for a in replayed["attempts"]] == [
        (1, False, 200), (1, True, 503), (2, True, 200)]
    [later] = [d for d in deliveries(vapi, webhook_id=made["id"]) if d["id"] != delivered["id"]]
    assert [a["replay"] for a in one(vapi, later["id"])["attempts"]] == [False]


def test_a_pending_delivery_cannot_be_replayed(vapi):
    create(vapi)
    make_customer(vapi)
    [pending] = deliveries(vapi)
    assert errors_of(vapi.post(f"/webhook_deliveries/{pending['id']}/replay")) == {
        "status": ["the delivery is still pending: it goes out on its own"]}


def test_a_delivery_of_a_disabled_webhook_cannot_be_replayed(vapi):
    with receiving() as receiver:
        made = create(vapi, address=receiver.url)
        make_customer(vapi)
        drain(vapi)
    [done] = deliveries(vapi)
    disable(vapi, made["id"])
    assert errors_of(vapi.post(f"/webhook_deliveries/{done['id']}/replay")) == {
        "webhook_id": ["the webhook is disabled: enable it before replaying"]}
    assert one(vapi, done["id"])["status"] == "succeeded"


# Replaying every failed delivery since a time ----------------------------------------------------

def _failing(api: Any, receiver: Any, **webhook: Any) -> dict[str, Any]:
    """A webhook whose test deliveries fail (one attempt each, no retries)."""
    receiver.status = 500
    return create(api, address=receiver.url, **webhook)


def test_replay_since_resends_only_the_failed_deliveries_created_since(vapi):
    make_customer(vapi)
    with receiving() as receiver:
        made = _failing(vapi, receiver)
        old = vapi.post(f"/webhooks/{made['id']}/test").json()["webhook_delivery"]
        since = vapi.clock.advance(timedelta(hours=1))
        failed = vapi.post(f"/webhooks/{made['id']}/test").json()["webhook_delivery"]
        other = _failing(vapi, receiver, topic="customer/updated")
        also = vapi.post(f"/webhooks/{other['id']}/test").json()["webhook_delivery"]
        drain(vapi)
        receiver.status = 200
        succeeded = vapi.post(f"/webhooks/{made['id']}/test").json()["webhook_delivery"]
        drain(vapi)
        assert one(vapi, succeeded["id"])["status"] == "succeeded"
        reply = vapi.post("/webhook_deliveries/replay", json={"since": since.isoformat()})
        assert reply.status_code == 202, reply.text
        assert reply.json() == {"webhook_delivery_ids": [failed["id"], also["id"]]}
        assert one(vapi, old["id"])["status"] == "failed"
        assert drain(vapi) == 2
    assert one(vapi, failed["id"])["status"] == "succeeded" and one(vapi, also["id"])["status"] == "succeeded"
    assert vapi.post("/webhook_deliveries/replay", json={"since": since.isoformat()}).json() == {
        "webhook_delivery_ids": []}


def test_replay_since_of_one_webhook_leaves_the_others(api):
    make_customer(api)
    with receiving() as receiver:
        mine, theirs = _failing(api, receiver), _failing(api, receiver, topic="customer/updated")
        queued = [api.post(f"/webhooks/{w['id']}/test").json()["webhook_delivery"]["id"] for w in (mine, theirs)]
        drain(api)
    reply = api.post("/webhook_deliveries/replay", json={"since": "2000-01-01", "webhook_id": mine["id"]})
    assert reply.status_code == 202 and reply.json() == {"webhook_delivery_ids": [queued[0]]}
    assert one(api, queued[1])["status"] == "failed"


def test_replay_since_skips_disabled_webhooks_or_refuses_the_one_named(vapi):
    make_customer(vapi)
    with receiving() as receiver:
        made = _failing(vapi, receiver)
        vapi.post(f"/webhooks/{made['id']}/test")
        drain(vapi)
    disable(vapi, made["id"])
    assert vapi.post("/webhook_deliveries/replay", json={"since": "2000-01-01"}).json() == {
        "webhook_delivery_ids": []}
    named = vapi.post("/webhook_deliveries/replay", json={"since": "2000-01-01", "webhook_id": made["id"]})
    assert errors_of(named) == {"webhook_id": ["the webhook is disabled: enable it before replaying"]}


@pytest.mark.parametrize("body, errors", [
    ({}, {"since": ["is required"]}),
    ({"since": None}, {"since": ["is required"]}),
    ({"since": 1700000000}, {"since": ["must be a string"]}),
    ({"since": "last week"}, {"since": ["Invalid date: last week. Must be a valid ISO-8601 datetime string"]}),
    ({"since": "2026-01-01", "webhook_id": "first"}, {"webhook_id": ["must be an integer"]}),
    ({"since": "2026-01-01", "webhook_id": True}, {"webhook_id": ["must be an integer"]}),
    ({"since": ["2026-01-01"], "webhook_id": 1.5}, {"since": ["must be a string"], "webhook_id": ["must be an integer"]}),
    ({"since": "2026-01-01", "webhook_id": 987654321}, {"webhook_id": ["webhook not found"]}),
])
def test_replay_since_refuses_bad_bodies(vapi, body, errors):
    assert errors_of(vapi.post("/webhook_deliveries/replay", json=body)) == errors


def test_replay_since_refuses_another_stores_webhook_as_unknown(vapi):
    foreign = create(vapi.other_store())
    reply = vapi.post("/webhook_deliveries/replay", json={"since": "2026-01-01", "webhook_id": foreign["id"]})
    assert errors_of(reply) == {"webhook_id": ["webhook not found"]}


# Ids, stores and scopes --------------------------------------------------------------------------

def test_unknown_huge_and_another_stores_deliveries_answer_404(vapi):
    other = vapi.other_store()
    create(other)
    make_customer(other)
    [foreign] = deliveries(other)
    for delivery_id in (foreign["id"], 987654321, HUGE):
        for method, path in (("GET", "/webhook_deliveries/{id}"), ("POST", "/webhook_deliveries/{id}/replay")):
            reply = vapi.request(method, path.format(id=delivery_id))
            assert reply.status_code == 404 and reply.json() == NOT_FOUND, (method, delivery_id)
    assert deliveries(vapi) == []


def test_a_token_without_write_notifications_gets_403_on_the_log(vapi):
    create(vapi)
    make_customer(vapi)
    [found] = deliveries(vapi)
    token = vapi.token_with("read_customers", "read_events")
    message = {"errors": "This token lacks the scope this endpoint needs: write_notifications"}
    for method, path, body in (("GET", "/webhook_deliveries", None), ("GET", f"/webhook_deliveries/{found['id']}", None),
                               ("POST", f"/webhook_deliveries/{found['id']}/replay", None),
                               ("POST", "/webhook_deliveries/replay", {"since": "2026-01-01"})):
        reply = vapi.request(method, path, token=token, json=body)
        assert reply.status_code == 403 and reply.json() == message, path


# Retries and disabling ---------------------------------------------------------------------------

def test_twenty_failures_over_the_schedule_disable_the_webhook_and_enable_sends_what_waited(api):
    customer = make_customer(api)
    started = api.clock.now()
    with receiving(status=500) as receiver:
        made = create(api, address=receiver.url, topic="customer/updated")
        rename(api, customer.id, "First")
        rename(api, customer.id, "Second")  # waits behind the first: one at a time per resource
        for wait in (timedelta(0), *retries.DELAYS):
            api.clock.advance(wait)
            assert drain(api) == 1
        assert [r.json["customer"]["first_name"] for r in receiver.received] == ["First"] * retries.MAX_ATTEMPTS
        assert len({r.headers["webhook-id"] for r in receiver.received}) == 1
        api.clock.advance(timedelta(days=3))
        assert drain(api) == 0
        [second, first] = deliveries(api, webhook_id=made["id"])
        assert first["status"] == "failed" and first["attempt_count"] == retries.MAX_ATTEMPTS
        assert first["last_attempt_at"] == stamp(started + retries.total(), V11)
        assert second["status"] == "pending" and second["attempt_count"] == 0
        disabled = api.get(f"/webhooks/{made['id']}").json()["webhook"]
        assert disabled["status"] == "disabled" and disabled["disabled_at"] == stamp(started + retries.total(), V11)
        [event] = api.get("/events", params={"verb": "disabled"}).json()["events"]
        assert event["object_type"] == "webhook" and event["object_id"] == made["id"]
        assert event["source"]["origin"] == "webhook"
        assert event["description"] == (f"webhook {made['id']} disabled after delivery {first['id']} "
                                        "(customer/updated) failed every attempt")
        make_customer(api)
        rename(api, customer.id, "Third")  # no delivery while disabled
        assert len(deliveries(api, webhook_id=made["id"])) == 2
        receiver.status = 200
        assert api.post(f"/webhooks/{made['id']}/enable").json()["webhook"]["status"] == "enabled"
        assert drain(api) == 1
        assert receiver.received[-1].json["customer"]["first_name"] == "Second"
        replayed = api.post("/webhook_deliveries/replay", json={"since": started.isoformat()}).json()
        assert replayed == {"webhook_delivery_ids": [first["id"]]}
        assert drain(api) == 1
    assert receiver.received[-1].body == receiver.received[0].body
    assert receiver.received[-1].headers["webhook-id"] == first["message_id"]


# Payloads ----------------------------------------------------------------------------------------

def _delivered(api: Any, receiver: Any) -> Any:
    assert drain(api) == 1
    return receiver.received[-1].json


@pytest.mark.parametrize("version, included", [
    (V11, ""), (V11, "addresses"), (V11, "metafields"), (V11, "payment_methods"),
    (V11, "addresses,metafields,payment_methods"),
    (V01, ""), (V01, "addresses"), (V01, "metafields"), (V01, "addresses,metafields"),
])
def test_a_customer_payload_is_its_get_with_the_included_objects(api, version, included):
    names = included.split(",") if included else []
    params = {"include": included} if included else None
    with receiving() as receiver:
        created = create(api, version, address=receiver.url, included_objects=names)
        updated = create(api, version, address=receiver.url, topic="customer/updated", included_objects=names)
        customer = make_customer(api)
        body = _delivered(api, receiver)
        assert body == {"customer": api.get(f"/customers/{customer.id}", params=params, version=version).json()[
            "customer"]}
        make_address(api, customer)
        make_metafield(api, customer)
        make_payment_method(api, customer)
        rename(api, customer.id, "Included")
        body = _delivered(api, receiver)
    assert body == api.get(f"/customers/{customer.id}", params=params, version=version).json()
    assert receiver.received[-1].headers["x-service-topic"] == "customer/updated"
    assert [created["api_version"], updated["api_version"]] == [version, version]
    if version == V11:
        assert set(body["customer"].get("include", {})) == set(names)


def test_a_2021_01_webhook_keeps_2021_01_payloads_after_a_2021_11_update(api):
    with receiving() as receiver:
        made = create(api, V01, address=receiver.url)
        assert api.put(f"/webhooks/{made['id']}", json={"included_objects": ["addresses"]}, version=V11).json()[
            "webhook"]["api_version"] == V01
        customer = make_customer(api)
        body = _delivered(api, receiver)
    assert body == api.get(f"/customers/{customer.id}", params={"include": "addresses"}, version=V01).json()
    assert body != api.get(f"/customers/{customer.id}", params={"include": "addresses"}, version=V11).json()


def test_a_deleted_payload_carries_the_id_alone(api):
    with receiving() as receiver:
        create(api, address=receiver.url, topic="customer/deleted", included_objects=["addresses"])
        customer = make_customer(api)
        assert api.delete(f"/customers/{customer.id}").status_code == 204
        assert _delivered(api, receiver) == {"customer": {"id": customer.id}}
    assert receiver.received[-1].headers["x-service-topic"] == "customer/deleted"


def test_a_deleted_subscription_payload_carries_the_id_alone_in_each_version(vapi):
    with receiving() as receiver:
        create(vapi, address=receiver.url, topic="subscription/deleted", included_objects=["metafields"])
        subscription = make_subscription(vapi)
        assert vapi.delete(f"/subscriptions/{subscription.id}").status_code in (200, 204)
        assert _delivered(vapi, receiver) == {"subscription": {"id": subscription.id}}
