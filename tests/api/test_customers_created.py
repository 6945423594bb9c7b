"""A created customer answers with the values it wrote, not a re-read (issue 18: the write
path of `POST /customers`): what it answers must be what a GET of the stored row answers, for
every kind of field a create takes, in both versions and on both databases."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_customers import V01, V11, create_body, created_status
from tests.scenarios.test_schedule_writes import _same_as_get

SHAPES: dict[str, dict[str, Any]] = {
    "minimal": {},
    "every optional field": {
        "phone": "+14155550100", "accepts_marketing": True, "tax_exempt": True,
        "analytics_data": {"utm_params": [{"utm_source": "mail", "utm_medium": "email"}], "own": {"k": [1, "x"]}},
    },
    "email with spaces and capitals": {"email": "  Mixed.Case@Example.com "},
}
EXTERNAL = {V01: {"platform_customer_id": "5501"}, V11: {"external_customer_id": {"ecommerce": "5501"}}}
BILLING_01 = {"billing_address2": "Suite 5", "billing_company": "ACME", "billing_phone": "+14155550199"}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_created_customer_answers_what_a_get_of_it_reads(vapi: Any, shape: str) -> None:
    extra = {**SHAPES[shape]}
    if shape == "every optional field":
        extra.update(EXTERNAL[vapi.version], **(BILLING_01 if vapi.version == V01 else {}))
    if "email" in extra:
        extra["email"] = extra["email"].replace("Mixed", f"Mixed{vapi.version.replace('-', '')}")
    response = vapi.post("/customers", json=create_body(vapi.version, **extra))
    assert response.status_code == created_status(vapi.version), response.text
    _same_as_get(vapi, response, "customer", vapi.version)
    if "email" in extra:
        assert response.json()["customer"]["email"] == extra["email"].strip()


def test_a_customer_created_after_another_version_read_it_answers_the_same(api: Any) -> None:
    """The answer of one version is what the other version's GET renders of the same row:
    the created struct carries every stored field, not only those its own version shows."""
    response = api.post("/customers", json=create_body(V01, **BILLING_01), version=V01)
    assert response.status_code == 200, response.text
    customer_id = response.json()["customer"]["id"]
    head = api.get(f"/customers/{customer_id}", version=V11)
    assert head.status_code == 200
    assert head.json()["customer"]["email"] == response.json()["customer"]["email"]
    _same_as_get(api, response, "customer", V01)
