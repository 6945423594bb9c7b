"""Review of issue 14 (webhooks, the event log, the hostile client's external ids): each test
failed before the fix it names. Both databases (the `api` fixture)."""

from __future__ import annotations

from typing import Any

from tests.api.test_async_batches import run_one

V01, V11 = "2021-01", "2021-11"


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


# External ids (issue 14, found by a hostile client) --------------------------------------------

NULL_ID = {"code": "NULLID", "value": "10", "value_type": "percentage",
           "applies_to": {"ids": ["p-1", {"ecommerce": None}], "resource": "product"}}


def test_a_discount_id_sent_as_a_null_nested_id_answers_422_not_500(api):
    """A list item `{"ecommerce": null}` came out of the field check as None (500 on create)."""
    reply = api.post("/discounts", json=NULL_ID, version=V11)
    assert errors_of(reply) == {"applies_to": {"ids": {"1": ["cannot be null"]}}}
    for version in (V01, V11):
        assert api.get("/discounts", version=version).json()["discounts"] == []


def test_a_discount_create_task_with_a_null_nested_id_is_the_endpoints_422(api):
    [task] = run_one(api, "discount_create", [NULL_ID])
    assert task["result"] == {"status_code": 422,
                              "output": {"errors": {"applies_to": {"ids": {"1": ["cannot be null"]}}}}}
