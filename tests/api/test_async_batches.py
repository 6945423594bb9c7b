"""Contract tests of async batches (decisions §7.7 items 9-12, spec 01 Sorting and scopes, spec 02
cursor paging, issue 15): every endpoint in both versions on both databases, bad input, the limits,
unknown and other stores' ids, scopes, exact error bodies; every batch type of each version runs a
good and a bad task, and each result is what its endpoint answers for the same body.

Batches run by calling the batch job (``BatchRunner.run_due``), as `rebill serve`'s runner does."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from starlette.testclient import TestClient

from rebill.api import tasks
from rebill.api.tasks import TYPES, BatchType
from rebill.app import create_app
from rebill.jobs import batches as job
from rebill.jobs.batches import BatchRunner
from rebill.jobs.scheduler import Jobs
from rebill.json_limits import MAX_NESTING
from rebill.models import async_batch_tasks, events, stores
from rebill.settings import RateLimit, Settings
from tests.api.test_products import legacy_create, make_plan, make_product
from tests.builders import charges_of, make_address, make_discount, make_onetime, make_subscription
from tests.conftest import Api

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
OFFSET_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
SUBMITTED = "cannot be added once the batch was submitted for processing"
FIELDS = {"id", "batch_type", "status", "version", "total_task_count", "success_task_count", "fail_task_count",
          "created_at", "updated_at", "submitted_at", "closed_at"}
TASK_FIELDS = {"id", "batch_id", "body", "status", "result", "created_at", "updated_at"}


def created(version: str) -> int:
    return 201 if version == V11 else 200


def status(version: str, name: str) -> str:
    return name if version == V11 else name.upper()


def new_batch(api: Any, batch_type: str = "discount_create", **kw: Any) -> dict[str, Any]:
    reply = api.post("/async_batches", json={"batch_type": batch_type}, **kw)
    assert reply.status_code == created(kw.get("version") or api.version), reply.text
    return reply.json()["async_batch"]


def add(api: Any, batch_id: int, bodies: list[Any], **kw: Any) -> Any:
    return api.post(f"/async_batches/{batch_id}/tasks", json={"tasks": [{"body": b} for b in bodies]}, **kw)


def submit(api: Any, batch_id: int, **kw: Any) -> Any:
    reply = api.post(f"/async_batches/{batch_id}/process", **kw)
    assert reply.status_code == 202, reply.text
    return reply.json()["async_batch"]


def run(api: Any) -> int:
    return BatchRunner(api.client.app.services).run_due()


def errors_of(reply: Any, code: int = 422) -> Any:
    assert reply.status_code == code, reply.text
    return reply.json()["errors"]


def batch_of(api: Any, batch_id: int, **kw: Any) -> dict[str, Any]:
    reply = api.get(f"/async_batches/{batch_id}", **kw)
    assert reply.status_code == 200, reply.text
    return reply.json()["async_batch"]


def tasks_of(api: Any, batch_id: int, **kw: Any) -> list[dict[str, Any]]:
    reply = api.get(f"/async_batches/{batch_id}/tasks", params={"limit": 250}, **kw)
    assert reply.status_code == 200, reply.text
    return reply.json()["async_batch_tasks"]


def run_one(api: Any, batch_type: str, bodies: list[Any]) -> list[dict[str, Any]]:
    batch = new_batch(api, batch_type)
    assert add(api, batch["id"], bodies).status_code == created(api.version)
    submit(api, batch["id"])
    run(api)
    return tasks_of(api, batch["id"])


def endpoint(api: Any, batch_type: str, body: dict[str, Any]) -> dict[str, Any]:
    """What the batch type's endpoint answers for ``body`` (its path ids taken out of it)."""
    kind = TYPES[api.version][batch_type]
    path, rest = kind.operation.path, dict(body)
    for name, param in kind.ids:
        path = re.sub(r"\{%s(:id)?\}" % param, str(rest.pop(name)), path)
    reply = api.request(kind.operation.method, path, json=rest)
    return {"status_code": reply.status_code, "output": reply.json() if reply.content else None}


def shown(api: Any, output: dict[str, Any]) -> None:
    """A task's reply shows each resource as its GET does."""
    [(key, value)] = output.items()
    for item in value if isinstance(value, list) else [value]:
        plural = key if isinstance(value, list) else f"{key}es" if key.endswith("s") else f"{key}s"
        reply = api.get(f"/{plural}/{item['id']}")
        assert reply.status_code == 200, reply.text
        assert reply.json()[key if not isinstance(value, list) else key[:-1]] == item


# Create, read, list ------------------------------------------------------------------------------

def test_create_answers_the_batch_with_the_fields_of_decisions_7_7_in_the_versions_conventions(vapi):
    made = new_batch(vapi, "onetime_create")
    assert set(made) == FIELDS
    assert (made["batch_type"], made["status"], made["version"]) == ("onetime_create",
                                                                     status(vapi.version, "not_started"), vapi.version)
    assert (made["total_task_count"], made["success_task_count"], made["fail_task_count"]) == (0, 0, 0)
    assert made["submitted_at"] is None and made["closed_at"] is None
    stamp = OFFSET_TS if vapi.version == V11 else NAIVE_TS
    assert stamp.match(made["created_at"]) and stamp.match(made["updated_at"])
    assert batch_of(vapi, made["id"]) == made


def test_batch_type_is_required_and_must_be_one_of_the_versions_types(vapi):
    assert errors_of(vapi.post("/async_batches", json={})) == {"batch_type": ["is required"]}
    assert errors_of(vapi.post("/async_batches", json={"batch_type": 5})) == {"batch_type": ["must be a string"]}
    assert errors_of(vapi.post("/async_batches", json={"batch_type": ""})) == {"batch_type": ["cannot be blank"]}
    names = ", ".join(sorted(TYPES[vapi.version]))
    assert errors_of(vapi.post("/async_batches", json={"batch_type": "customer_create"})) == {
        "batch_type": [f"must be one of: {names}"]}


@pytest.mark.parametrize("version,batch_type", [(V11, "product_create"), (V11, "subscription_cancel"),
                                                (V11, "address_discount_apply"), (V01, "bulk_plans_create")])
def test_a_type_of_the_other_version_is_refused(api, version, batch_type):
    names = ", ".join(sorted(TYPES[version]))
    reply = api.post("/async_batches", json={"batch_type": batch_type}, version=version)
    assert errors_of(reply) == {"batch_type": [f"must be one of: {names}"]}


def test_the_batch_type_is_read_in_any_case(api):
    assert new_batch(api, " Discount_CREATE ")["batch_type"] == "discount_create"


def test_unknown_and_other_stores_batches_answer_404_everywhere(vapi):
    theirs = new_batch(vapi.other_store(), "discount_create")
    for batch_id in (theirs["id"], 999_999_999):
        assert vapi.get(f"/async_batches/{batch_id}").json() == NOT_FOUND
        assert vapi.get(f"/async_batches/{batch_id}/tasks").json() == NOT_FOUND
        assert errors_of(add(vapi, batch_id, [{}]), 404) == NOT_FOUND["errors"]
        assert errors_of(vapi.post(f"/async_batches/{batch_id}/process"), 404) == NOT_FOUND["errors"]
    assert vapi.get("/async_batches/12345678901234567890").status_code == 404


def test_list_is_newest_first_sorts_by_id_or_created_at_and_filters(api):
    first = new_batch(api, "discount_create")
    api.clock.advance(timedelta(seconds=5))
    second = new_batch(api, "onetime_create")
    listed = api.get("/async_batches").json()
    assert [b["id"] for b in listed["async_batches"]] == [second["id"], first["id"]]
    assert (listed["next_cursor"], listed["previous_cursor"]) == (None, None)
    ordered = api.get("/async_batches", params={"sort_by": "created_at-asc"}).json()["async_batches"]
    assert [b["id"] for b in ordered] == [first["id"], second["id"]]
    only = api.get("/async_batches", params={"batch_type": "onetime_create"}).json()["async_batches"]
    assert [b["id"] for b in only] == [second["id"]]
    # Read in any case and without its spaces, as a create reads it (found by an audit).
    loose = api.get("/async_batches", params={"batch_type": " ONETIME_Create "}).json()["async_batches"]
    assert [b["id"] for b in loose] == [second["id"]]
    assert api.get("/async_batches", params={"status": "completed"}).json()["async_batches"] == []
    assert errors_of(api.get("/async_batches", params={"sort_by": "updated_at-asc"}))
    assert errors_of(api.get("/async_batches", params={"status": "done"})) == {
        "status": ["Invalid value: done. Must be one of not_started, processing, completed, failed"]}


def test_2021_11_pages_with_cursors_in_the_body(api):
    made = [new_batch(api)["id"] for _ in range(3)]
    first = api.get("/async_batches", params={"limit": 2}).json()
    assert [b["id"] for b in first["async_batches"]] == made[:0:-1]
    second = api.get("/async_batches", params={"cursor": first["next_cursor"]}).json()
    assert [b["id"] for b in second["async_batches"]] == [made[0]]
    assert second["next_cursor"] is None and second["previous_cursor"]


def test_2021_01_pages_with_a_link_header(api):
    api.version = V01
    made = [new_batch(api)["id"] for _ in range(3)]
    reply = api.get("/async_batches", params={"limit": 2})
    assert [b["id"] for b in reply.json()["async_batches"]] == made[:0:-1]
    assert set(reply.json()) == {"async_batches"}
    link = reply.headers["link"]
    assert 'rel="next"' in link and "/async_batches?" in link
    cursor = re.search(r"page_info=([^&>]+)", link)[1]
    rest = api.get("/async_batches", params={"page_info": cursor, "limit": 2})
    assert [b["id"] for b in rest.json()["async_batches"]] == [made[0]]
    assert api.get("/async_batches", params={"status": "NOT_STARTED"}).status_code == 200


# Tasks -------------------------------------------------------------------------------------------

def test_tasks_are_added_1_to_1000_a_call_and_answer_their_count(vapi):
    batch = new_batch(vapi)
    reply = add(vapi, batch["id"], [{"code": "A"}, {"code": "B"}])
    assert reply.status_code == created(vapi.version) and reply.json() == {"count": 2}
    assert add(vapi, batch["id"], [{"code": str(n)} for n in range(1000)]).json() == {"count": 1000}
    assert batch_of(vapi, batch["id"])["total_task_count"] == 1002
    listed = tasks_of(vapi, batch["id"])
    assert [t["body"] for t in listed[:2]] == [{"code": "A"}, {"code": "B"}]
    assert set(listed[0]) == TASK_FIELDS
    assert (listed[0]["batch_id"], listed[0]["status"], listed[0]["result"]) == (
        batch["id"], status(vapi.version, "pending"), None)
    assert [t["id"] for t in listed] == sorted(t["id"] for t in listed)  # the order they run in


def test_bad_task_lists_answer_422_naming_the_problem(vapi):
    batch_id = new_batch(vapi)["id"]
    path = f"/async_batches/{batch_id}/tasks"
    assert errors_of(vapi.post(path, json={})) == {"tasks": ["is required"]}
    assert errors_of(vapi.post(path, json={"tasks": {"body": {}}})) == {"tasks": ["must be an array"]}
    assert errors_of(vapi.post(path, json={"tasks": []})) == {"tasks": ["must hold 1 to 1,000 tasks"]}
    assert errors_of(add(vapi, batch_id, [{}] * 1001)) == {"tasks": ["must hold 1 to 1,000 tasks"]}
    assert errors_of(vapi.post(path, json={"tasks": [{"body": {}}, "x", {}, {"body": [1]}, {"body": None},
                                                     {"body": {"code": ["a\u0000"]}}]})) == {
        "tasks": {"1": ["must be an object"], "2": {"body": ["is required"]}, "3": {"body": ["must be an object"]},
                  "4": {"body": ["is required"]}, "5": {"body": ["must not contain NUL characters"]}}}
    assert batch_of(vapi, batch_id)["total_task_count"] == 0


def test_a_task_takes_every_body_depth_its_endpoint_takes(api):
    """Found by an audit: the nesting limit counted the `{"tasks": [{"body": ...}]}` wrapper,
    so a body of depth 29 to 32, which the endpoint takes, was refused as a task."""
    def nested(depth: int) -> Any:
        value: Any = "x"
        for _ in range(depth):
            value = {"k": value}
        return value

    deepest = {"code": "DEEP32", "value_type": "percentage", "value": "10", "note": nested(MAX_NESTING - 1)}
    assert api.post("/discounts", json={**deepest, "code": "DIRECT32"}).status_code == 201
    (task,) = run_one(api, "discount_create", [deepest])
    assert task["result"]["status_code"] == 201, task
    too_deep = {**deepest, "note": nested(MAX_NESTING)}
    assert errors_of(api.post("/discounts", json=too_deep)) == {"body": ["is nested too deeply (at most 32 levels)"]}
    batch_id = new_batch(api)["id"]
    assert errors_of(add(api, batch_id, [too_deep])) == {"body": ["is nested too deeply (at most 35 levels)"]}
    assert batch_of(api, batch_id)["total_task_count"] == 0


def test_a_batch_holds_at_most_10000_tasks(api):
    batch_id = new_batch(api)["id"]
    for _ in range(10):
        assert add(api, batch_id, [{"code": "x"}] * 1000).status_code == 201
    assert errors_of(add(api, batch_id, [{"code": "x"}])) == {
        "tasks": ["would take the batch past 10,000 tasks (it has 10,000)"]}
    assert batch_of(api, batch_id)["total_task_count"] == 10_000


def test_tasks_list_filters_by_ids_and_status_and_pages(vapi):
    batch_id = new_batch(vapi)["id"]
    add(vapi, batch_id, [{"code": str(n)} for n in range(3)])
    ids = [t["id"] for t in tasks_of(vapi, batch_id)]
    picked = vapi.get(f"/async_batches/{batch_id}/tasks", params={"ids": f"{ids[2]},{ids[0]}"}).json()
    assert [t["id"] for t in picked["async_batch_tasks"]] == [ids[0], ids[2]]
    assert vapi.get(f"/async_batches/{batch_id}/tasks", params={"status": status(vapi.version, "success")}).json()[
        "async_batch_tasks"] == []
    assert errors_of(vapi.get(f"/async_batches/{batch_id}/tasks", params={"ids": "x"}))
    page = vapi.get(f"/async_batches/{batch_id}/tasks", params={"limit": 2})
    assert [t["id"] for t in page.json()["async_batch_tasks"]] == ids[:2]
    if vapi.version == V11:
        rest = vapi.get(f"/async_batches/{batch_id}/tasks", params={"cursor": page.json()["next_cursor"]})
    else:
        cursor = re.search(r"page_info=([^&>]+)", page.headers["link"])[1]
        rest = vapi.get(f"/async_batches/{batch_id}/tasks", params={"page_info": cursor})
    assert [t["id"] for t in rest.json()["async_batch_tasks"]] == ids[2:]


# Process -----------------------------------------------------------------------------------------

def test_process_is_accepted_once_and_closes_the_batch_to_new_tasks(vapi):
    batch_id = new_batch(vapi)["id"]
    assert errors_of(vapi.post(f"/async_batches/{batch_id}/process")) == {
        "tasks": ["the batch has no tasks to process"]}
    add(vapi, batch_id, [{"code": "A"}])
    accepted = submit(vapi, batch_id)
    # NOTE: decisions §7.7 item 12, it waits for its turn: accepted, not yet processing.
    assert accepted["status"] == status(vapi.version, "not_started") and accepted["submitted_at"]
    assert errors_of(add(vapi, batch_id, [{"code": "B"}])) == {"tasks": [SUBMITTED]}
    assert errors_of(vapi.post(f"/async_batches/{batch_id}/process")) == {
        "status": ["the batch was already submitted for processing"]}
    run(vapi)
    done = batch_of(vapi, batch_id)
    assert errors_of(add(vapi, batch_id, [{"code": "C"}])) == {"tasks": [SUBMITTED]}
    assert errors_of(vapi.post(f"/async_batches/{batch_id}/process")) == {
        "status": ["the batch was already submitted for processing"]}
    assert done["total_task_count"] == 1


def test_a_run_batch_is_completed_with_its_counts_even_when_tasks_failed(vapi):
    batch_id = new_batch(vapi)["id"]
    good = {"code": "GOOD", "value": "10", **({"value_type": "percentage"} if vapi.version == V11 else
                                              {"discount_type": "percentage", "duration": "forever"})}
    add(vapi, batch_id, [good, {"code": "BAD"}, {"code": "BAD2"}])
    submit(vapi, batch_id)
    assert run(vapi) >= 3
    done = batch_of(vapi, batch_id)
    assert (done["status"], done["success_task_count"], done["fail_task_count"]) == (
        status(vapi.version, "completed"), 1, 2)
    assert done["closed_at"] and done["closed_at"] >= done["submitted_at"]
    ran = tasks_of(vapi, batch_id)
    assert [t["status"] for t in ran] == [status(vapi.version, s) for s in ("success", "failed", "failed")]
    assert ran[0]["result"]["status_code"] == created(vapi.version)
    assert ran[1]["result"] == endpoint(vapi, "discount_create", {"code": "BAD"})


def test_one_batch_per_store_runs_at_a_time_and_the_next_waits_its_turn(api):
    first, second = new_batch(api)["id"], new_batch(api)["id"]
    other = api.other_store()
    theirs = new_batch(other)["id"]
    for api_, batch_id in ((api, first), (api, second), (other, theirs)):
        add(api_, batch_id, [{"code": "x"}])
        submit(api_, batch_id)
    runner = BatchRunner(api.client.app.services)
    held = runner.claim()
    assert first in held and theirs in held and second not in held
    assert batch_of(api, first)["status"] == "processing"
    waiting = batch_of(api, second)
    assert waiting["status"] == "not_started" and waiting["submitted_at"]
    assert BatchRunner(api.client.app.services).claim() == []  # another worker: the lease holds them
    assert sorted(runner.claim()) == sorted(held)  # this worker holds them still
    runner.run_due()
    assert {batch_of(api, b)["status"] for b in (first, second)} == {"completed"}
    assert batch_of(other, theirs)["status"] == "completed"


def test_batches_sent_within_one_second_wait_in_the_order_they_were_sent(api):
    """Found by an audit: `submitted_at` keeps whole seconds, and two batches sent in one second
    ran in id order: the one sent first was applied last and won."""
    older, newer = new_batch(api)["id"], new_batch(api)["id"]
    for batch_id in (newer, older):  # the same second of the (test) clock
        add(api, batch_id, [{"code": f"x{batch_id}"}])
        submit(api, batch_id)
    assert batch_of(api, older)["submitted_at"] == batch_of(api, newer)["submitted_at"]
    runner = BatchRunner(api.client.app.services)
    assert newer in runner.claim() and older not in runner.claim()


def test_a_task_runs_the_numbers_of_its_body_as_they_were_sent(api):
    """Found by an audit on PostgreSQL: jsonb rewrote -0.0 to 0.0 (the task made a one-time item
    its endpoint refused) and 1e16 to an integer (another error than its endpoint's)."""
    address = make_address(api)
    when = (api.clock.now().date() + timedelta(days=5)).isoformat()
    bodies = [{"address_id": address.id, "product_title": "Zero", "price": -0.0, "quantity": 1,
               "next_charge_scheduled_at": when},
              {"address_id": address.id, "product_title": "Many", "price": "1.00", "quantity": 1e16,
               "next_charge_scheduled_at": when}]
    ran = run_one(api, "onetime_create", bodies)
    assert [task["body"] for task in ran] == bodies
    # A negative zero is a zero (as its endpoint takes it); the task's body keeps its sign.
    assert ran[0]["result"]["status_code"] == 201 and ran[0]["result"]["output"]["onetime"]["price"] == "0.00"
    assert ran[1]["result"] == endpoint(api, "onetime_create", bodies[1])
    assert ran[1]["result"]["status_code"] == 422


def test_processed_batches_are_in_the_event_log_and_tasks_events_come_from_the_batch(api):
    address = make_address(api)
    body = {"address_id": address.id, "product_title": "Tea", "price": "9.90", "quantity": 1,
            "next_charge_scheduled_at": (api.clock.now().date() + timedelta(days=5)).isoformat()}
    with api.db.read() as conn:
        before = conn.execute(select(func.max(events.c.id))).scalar() or 0
    batch = new_batch(api, "onetime_create")
    add(api, batch["id"], [body])
    submit(api, batch["id"])
    run(api)
    with api.db.read() as conn:
        rows = conn.execute(select(events.c.topic, events.c.resource_id, events.c.origin, events.c.token_id).where(
            events.c.store_id == api.store.id, events.c.id > before).order_by(events.c.id)).all()
    assert [r.topic for r in rows] == ["onetime/created", "charge/created", "async_batch/processed"]
    assert {(r.origin, r.token_id) for r in rows} == {("batch", rows[0].token_id)}
    assert rows[0].token_id is not None
    assert rows[-1].resource_id == batch["id"]
    [charge] = charges_of(api, address.id)
    assert (charge.status, len(charge.line_items)) == ("queued", 1)


def test_tasks_of_one_address_in_one_chunk_plan_its_charge_once(api):
    address = make_address(api)
    day = (api.clock.now().date() + timedelta(days=5)).isoformat()
    bodies = [{"address_id": address.id, "product_title": f"Tea {n}", "price": "9.90", "quantity": 1,
               "next_charge_scheduled_at": day} for n in range(3)]
    ran = run_one(api, "onetime_create", bodies)
    assert [t["status"] for t in ran] == ["success"] * 3
    [charge] = charges_of(api, address.id)
    assert sorted(line["title"] for line in charge.line_items) == ["Tea 0", "Tea 1", "Tea 2"]
    for task in ran:
        shown(api, task["result"]["output"])


def test_a_store_with_webhooks_gets_each_tasks_events_flushed_with_it_and_none_of_a_failed_one(api):
    reply = api.post("/webhooks", json={"address": "https://hooks.example.com/x", "topic": "charge/created"})
    assert reply.status_code == 201, reply.text
    addresses = [make_address(api) for _ in range(3)]
    day = (api.clock.now().date() + timedelta(days=5)).isoformat()
    bodies = [{"address_id": a.id, "product_title": "Tea", "price": "9.90", "quantity": 1,
               "next_charge_scheduled_at": day} for a in addresses]
    bodies[1]["quantity"] = -1
    with api.db.read() as conn:
        before = conn.execute(select(func.max(events.c.id))).scalar() or 0
    ran = run_one(api, "onetime_create", bodies)
    assert [t["status"] for t in ran] == ["success", "failed", "success"]
    deliveries = api.get("/webhook_deliveries").json()["webhook_deliveries"]
    made = [charges_of(api, a.id) for a in addresses]
    assert made[1] == []
    assert sorted(d["object_id"] for d in deliveries) == sorted(c[0].id for c in made if c)
    with api.db.read() as conn:
        topics = conn.execute(select(events.c.topic).where(events.c.store_id == api.store.id,
                                                           events.c.id > before).order_by(events.c.id)).scalars()
        # The chunk's addresses are planned at its end: their charges are told after the items.
        assert list(topics) == ["onetime/created"] * 2 + ["charge/created"] * 2 + ["async_batch/processed"]


@pytest.mark.parametrize("webhooks", [False, True], ids=["events-per-chunk", "events-per-task"])
def test_a_task_that_breaks_answers_500_and_the_others_go_on(api, monkeypatch, webhooks):
    kind = TYPES[V11]["discount_create"]
    if webhooks:  # a store with webhooks flushes each task's events with it
        assert api.post("/webhooks", json={"address": "https://hooks.example.com/y",
                                           "topic": "customer/created"}).status_code == 201

    def broken(call: Any) -> Any:
        if call.body.get("code") == "BOOM":
            kind.operation.handler(call)  # made its discount and recorded its event
            with call.write() as unit:
                unit.conn.execute(update(stores).where(stores.c.id == api.store.id).values(name="halfway"))
                raise RuntimeError("a bug")
        return kind.operation.handler(call)
    monkeypatch.setitem(TYPES[V11], "discount_create",
                        BatchType(kind.name, tasks.Operation("POST", "/discounts", kind.operation.scope,
                                                             kind.operation.versions, broken)))
    good = {"value_type": "percentage", "value": "10"}
    with api.db.read() as conn:
        before = conn.execute(select(func.max(events.c.id))).scalar() or 0
    ran = run_one(api, "discount_create", [{**good, "code": "ONE"}, {**good, "code": "BOOM"},
                                           {**good, "code": "TWO"}])
    assert [t["status"] for t in ran] == ["success", "failed", "success"]
    assert ran[1]["result"] == {"status_code": 500, "output": {"errors": "Internal Server Error"}}
    with api.db.read() as conn:  # what it wrote before it broke was rolled back with it, its event too
        assert conn.execute(select(stores.c.name).where(stores.c.id == api.store.id)).scalar() == api.store.name
        topics = conn.execute(select(events.c.topic).where(events.c.store_id == api.store.id,
                                                           events.c.id > before).order_by(events.c.id)).scalars()
        assert list(topics) == ["discount/created", "discount/created", "async_batch/processed"]
    codes = [d["code"] for d in api.get("/discounts").json()["discounts"]]
    assert "BOOM" not in codes and {"ONE", "TWO"} <= set(codes)


def test_a_chunk_that_fails_as_a_whole_runs_again_carefully_and_no_task_runs_twice(api, monkeypatch):
    calls = []

    def failing_once(unit: Any, address_ids: Any, **given: Any) -> Any:
        calls.append(sorted(address_ids))
        assert sorted(given["locked"]) == sorted(address_ids)  # the addresses its tasks read
        raise RuntimeError("the chunk's replan failed")
    monkeypatch.setattr(job, "replan", failing_once)
    addresses = [make_address(api) for _ in range(3)]
    day = (api.clock.now().date() + timedelta(days=5)).isoformat()
    ran = run_one(api, "onetime_create", [{"address_id": a.id, "product_title": "Tea", "price": "9.90",
                                           "quantity": 1, "next_charge_scheduled_at": day} for a in addresses])
    assert calls == [sorted(a.id for a in addresses)]  # once; then each task replanned at once
    assert [t["status"] for t in ran] == ["success"] * 3
    listed = api.get("/onetimes", params={"limit": 250}).json()["onetimes"]
    assert sorted(o["id"] for o in listed) == sorted(t["result"]["output"]["onetime"]["id"] for t in ran)
    assert all(len(charges_of(api, a.id)) == 1 for a in addresses)


def test_a_batch_of_an_uninstalled_store_fails_and_its_tasks_answer_403(api):
    batch_id = new_batch(api)["id"]
    add(api, batch_id, [{"code": "A"}, {"code": "B"}])
    submit(api, batch_id)
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(installed=False))
    run(api)
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(installed=True))
    done = batch_of(api, batch_id)
    assert (done["status"], done["fail_task_count"]) == ("failed", 2)
    assert {t["status"] for t in tasks_of(api, batch_id)} == {"failed"}
    assert tasks_of(api, batch_id)[0]["result"] == {"status_code": 403,
                                                     "output": {"errors": "The store is not installed"}}


def test_a_batch_whose_token_was_revoked_before_it_ran_fails_and_its_tasks_answer_401(api):
    """Found by an audit: a batch submitted, then its token revoked (`rebill tokens revoke`)
    while the batch waited for its turn, still ran every task, a leaked token's writes among
    them. The runner looks at the token before each chunk: what is left answers as the edge
    now would (401), and the batch is `failed`; nothing was created."""
    from rebill.domain.store import repository as store_repo
    from rebill.models import tokens
    reader = api.token_with("read_batches", "read_discounts")
    batch_id = new_batch(api)["id"]
    add(api, batch_id, [{"code": "A", "value": "5", "value_type": "percentage"},
                        {"code": "B", "value": "5", "value_type": "percentage"}])
    submit(api, batch_id)
    with api.db.write() as conn:
        token_id = conn.execute(select(tokens.c.id).where(tokens.c.store_id == api.store.id)
                                .order_by(tokens.c.id)).scalars().first()
        store_repo.revoke_token(conn, token_id, api.clock.now())
    run(api)
    done = batch_of(api, batch_id, token=reader)
    assert (done["status"], done["fail_task_count"], done["success_task_count"]) == ("failed", 2, 0)
    assert [t["result"] for t in tasks_of(api, batch_id, token=reader)] == [
        {"status_code": 401, "output": {"errors": "Invalid or missing API token"}}] * 2
    assert api.get("/discounts", token=reader).json()["discounts"] == []


def test_results_are_stored_once_per_task(api):
    batch_id = new_batch(api)["id"]
    add(api, batch_id, [{"code": "A"}])
    submit(api, batch_id)
    run(api)
    run(api)
    with api.db.read() as conn:
        [row] = conn.execute(select(async_batch_tasks.c.status).where(async_batch_tasks.c.batch_id == batch_id))
    assert row.status == "failed"


# Scopes ------------------------------------------------------------------------------------------

def test_reads_need_read_batches_and_writes_write_batches(vapi):
    batch_id = new_batch(vapi)["id"]
    nothing = vapi.token_with("read_customers")
    reader = vapi.token_with("read_batches")
    assert errors_of(vapi.get("/async_batches", token=nothing), 403) == (
        "This token lacks the scope this endpoint needs: read_batches")
    assert errors_of(vapi.get(f"/async_batches/{batch_id}/tasks", token=nothing), 403)
    assert vapi.get(f"/async_batches/{batch_id}", token=reader).status_code == 200
    for path in ("/async_batches", f"/async_batches/{batch_id}/tasks", f"/async_batches/{batch_id}/process"):
        assert errors_of(vapi.post(path, json={}, token=reader), 403) == (
            "This token lacks the scope this endpoint needs: write_batches")


def test_a_batch_needs_the_scope_of_the_endpoint_its_tasks_call(vapi):
    batches_only = vapi.token_with("write_batches")
    assert errors_of(vapi.post("/async_batches", json={"batch_type": "onetime_create"}, token=batches_only),
                     403) == "This token lacks the scope this batch type needs: write_subscriptions"
    batch_id = new_batch(vapi, "onetime_create")["id"]
    assert errors_of(add(vapi, batch_id, [{}], token=batches_only), 403)
    assert errors_of(vapi.post(f"/async_batches/{batch_id}/process", token=batches_only), 403)
    both = vapi.token_with("write_batches", "write_discounts")
    assert vapi.post("/async_batches", json={"batch_type": "discount_create"}, token=both).status_code == created(
        vapi.version)


def test_reading_the_tasks_needs_the_read_half_of_the_scope_of_their_endpoint(vapi):
    """A task shows its body and the record answered: a new discount's code here. Found by an
    audit: a `read_batches` token read them without `read_discounts`."""
    batch_id = new_batch(vapi, "discount_create")["id"]
    assert add(vapi, batch_id, [_discount(vapi)]).status_code == created(vapi.version)
    batches_only = vapi.token_with("read_batches")
    assert errors_of(vapi.get(f"/async_batches/{batch_id}/tasks", token=batches_only), 403) == (
        "This token lacks the scope this batch type needs: read_discounts")
    assert vapi.get(f"/async_batches/{batch_id}", token=batches_only).status_code == 200  # counts only
    for token in (vapi.token_with("read_batches", "read_discounts"), vapi.token_with("read_batches", "write_discounts")):
        listed = vapi.get(f"/async_batches/{batch_id}/tasks", token=token)
        assert listed.status_code == 200 and listed.json()["async_batch_tasks"][0]["body"]["code"] == "BATCHED"
    # The batch's own 404 comes first: another store's batch is unknown whatever the scopes.
    other = vapi.other_store()
    assert vapi.get(f"/async_batches/{batch_id}/tasks", token=other.token_with("read_batches")).status_code == 404
    # An onetime batch: its results are one-time items, read with `read_subscriptions`.
    onetimes = new_batch(vapi, "onetime_create")["id"]
    assert errors_of(vapi.get(f"/async_batches/{onetimes}/tasks", token=vapi.token_with("read_batches",
                                                                                      "read_discounts")), 403) == (
        "This token lacks the scope this batch type needs: read_subscriptions")


# Every batch type: a good task and a bad one -----------------------------------------------------

def _day(api: Any, days: int) -> str:
    return (api.clock.now().date() + timedelta(days=days)).isoformat()


def _discount(api: Any) -> dict[str, Any]:
    if api.version == V11:
        return {"code": "BATCHED", "value_type": "percentage", "value": "10"}
    return {"code": "BATCHED", "discount_type": "percentage", "value": "10", "duration": "forever"}


def _cases(api: Any, batch_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(good body, bad body) of a task of ``batch_type``."""
    if batch_type == "discount_create":
        return _discount(api), {"code": "NO VALUE"}
    if batch_type == "discount_update":
        return {"discount_id": make_discount(api), "status": "disabled"}, {"discount_id": make_discount(api),
                                                                           "status": "bogus"}
    if batch_type == "discount_delete":
        return {"discount_id": make_discount(api, status="fully_disabled")}, {"discount_id": make_discount(api)}
    if batch_type == "onetime_create":
        address = make_address(api)
        good = {"address_id": address.id, "product_title": "Tea", "price": "9.90", "quantity": 1,
                "next_charge_scheduled_at": _day(api, 5)}
        return good, {**good, "address_id": make_address(api.other_store()).id}
    if batch_type == "onetime_delete":
        return {"onetime_id": make_onetime(api).id}, {"onetime_id": 999_999_999}
    if batch_type == "bulk_plans_create":
        product = make_product(api, "p-bulk")
        plan = {"external_product_id": product.external_product_id, "title": "Monthly", "type": "subscription",
                "subscription_preferences": {"interval_unit": "month", "order_interval_frequency": 1,
                                             "charge_interval_frequency": 1}}
        return {"plans": [plan]}, {"plans": [{**plan, "type": "weekly"}]}
    if batch_type == "bulk_plans_update":
        plan = make_plan(api, make_product(api, "p-upd"))
        return {"plans": [{"id": plan.id, "title": "Renamed"}]}, {"plans": [{"id": 999_999_999, "title": "x"}]}
    if batch_type == "bulk_plans_delete":
        product = make_product(api, "p-del")
        plan, kept = make_plan(api, product), make_plan(api, product, title="Kept")
        return {"plans": [{"id": plan.id}]}, {"plans": [{"id": kept.id}, {"id": 999_999_999}]}
    if batch_type in ("address_discount_apply", "address_discount_remove"):
        address = make_address(api)
        code = make_discount(api, code="TENOFF")
        if batch_type == "address_discount_apply":
            return {"address_id": address.id, "discount_id": code}, {"address_id": address.id,
                                                                     "discount_code": "NOPE"}
        assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": code}).status_code == 200
        return {"address_id": address.id}, {"address_id": 999_999_999}
    if batch_type == "change_next_charge_date":
        charges = []
        for _ in range(2):
            address = make_address(api)
            make_subscription(api, address)
            charges.append(charges_of(api, address.id)[0].id)
        return ({"charge_id": charges[0], "next_charge_date": _day(api, 20)},
                {"charge_id": charges[1], "next_charge_date": "2000-01-01"})
    if batch_type == "product_create":
        return {"platform_product_id": 8101, "title": "Tea", "subscription_defaults": {
            "storefront_purchase_options": "subscription_only", "order_interval_unit": "month",
            "order_interval_frequency_options": ["1"]}}, {"title": "no id"}
    if batch_type in ("product_update", "product_delete"):
        product = legacy_create(api, platform_product_id=8201)
        good = {"product_id": product["id"], **({"title": "Green tea"} if batch_type == "product_update" else {})}
        return good, {**good, "product_id": 999_999_999}
    if batch_type == "bulk_subscriptions_create":
        address = make_address(api)
        entry = {"product_title": "Coffee", "price": "12.50", "quantity": 1, "next_charge_scheduled_at": _day(api, 10),
                 "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}
        return {"address_id": address.id, "subscriptions": [entry]}, {"address_id": address.id, "subscriptions": []}
    if batch_type in ("bulk_subscriptions_update", "bulk_subscriptions_delete"):
        address = make_address(api)
        kept = make_subscription(api, address)
        change = {"quantity": 3} if batch_type == "bulk_subscriptions_update" else {}
        return ({"address_id": address.id, "subscriptions": [{"id": kept.id, **change}]},
                {"address_id": address.id, "subscriptions": [{"id": 999_999_999, **change}]})
    if batch_type == "subscription_cancel":
        return ({"subscription_id": make_subscription(api).id, "cancellation_reason": "too much"},
                {"subscription_id": make_subscription(api).id})
    raise AssertionError(batch_type)


ALL_TYPES = [(version, name) for version, kinds in TYPES.items() for name in kinds]
DELETES = {"discount_delete", "onetime_delete", "bulk_plans_delete", "product_delete", "bulk_subscriptions_delete"}


@pytest.mark.parametrize("version,batch_type", ALL_TYPES, ids=[f"{v}-{t}" for v, t in ALL_TYPES])
def test_every_type_runs_a_good_and_a_bad_task_as_its_endpoint_answers(api, version, batch_type):
    api.version = version
    good, bad = _cases(api, batch_type)
    ran = run_one(api, batch_type, [good, bad])
    assert [t["status"] for t in ran] == [status(version, "success"), status(version, "failed")], ran
    assert [t["body"] for t in ran] == [good, bad]
    result = ran[0]["result"]
    if batch_type in DELETES:
        assert result == {"status_code": 204, "output": None} if version == V11 else {"status_code": 200,
                                                                                      "output": {}}
    else:
        assert result["status_code"] in (200, 201)
        assert result["status_code"] == (created(version) if batch_type.endswith("create") and
                                         not batch_type.startswith("bulk_subscriptions") else 200)
        shown(api, result["output"])
    if batch_type == "bulk_plans_delete":  # no endpoint: the bulk rules of the plan endpoints
        assert ran[1]["result"] == {"status_code": 422, "output": {"errors": {"plans": {
            "1": {"id": ["plan not found"]}}}}}
        assert api.get(f"/plans/{good['plans'][0]['id']}").status_code == 404
        assert api.get(f"/plans/{bad['plans'][0]['id']}").status_code == 200  # all or nothing
    else:
        # The bad task changed nothing, so its endpoint answers the same body the same way.
        assert ran[1]["result"] == endpoint(api, batch_type, bad)
        assert ran[1]["result"]["status_code"] >= 400


def test_a_path_id_in_a_task_body_is_required_and_an_integer(api):
    api.version = V01
    ran = run_one(api, "address_discount_remove", [{}, {"address_id": "abc"}, {"address_id": "12345678901234567890"},
                                                   {"address_id": None}])
    assert [t["result"] for t in ran] == [
        {"status_code": 422, "output": {"errors": {"address_id": ["is required"]}}},
        {"status_code": 422, "output": {"errors": {"address_id": ["must be an integer"]}}},
        {"status_code": 422, "output": {"errors": {"address_id": ["is out of range"]}}},
        {"status_code": 422, "output": {"errors": {"address_id": ["is required"]}}},
    ]


def test_a_path_id_may_be_sent_as_a_numeric_string(api):
    api.version = V01
    address = make_address(api)
    [task] = run_one(api, "address_discount_remove", [{"address_id": str(address.id)}])
    assert task["result"]["status_code"] == 200
    assert task["result"]["output"]["address"]["id"] == address.id


def test_the_server_runs_a_submitted_batch_by_itself_at_once(api):
    """`rebill serve`'s job runner: a submit wakes the batch job (its tick is an hour here)."""
    settings = Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                        regenerate_every=0, bill_every=0, purge_every=0, deliver_webhooks=False, batch_every=3600)
    app = create_app(settings, db=api.db, clock=api.clock)
    assert isinstance(app, Jobs)
    with TestClient(app, base_url="http://rebill.test") as client:
        served = Api(client, api.db, api.clock, api.store, api.token)
        batch_id = new_batch(served)["id"]
        add(served, batch_id, [_discount(served)])
        submit(served, batch_id)
        deadline = time.monotonic() + 20
        while batch_of(served, batch_id)["status"] != "completed":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert app.scheduler is None
