"""Review of issue 15 (checkouts, collections, bundles, async batches): each test failed before
the fix it names. Both databases (the `api` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_bundle_variants import make_collection
from tests.api.test_products import make_product

V01, V11 = "2021-01", "2021-11"


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


# Collections --------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_bulk_products_with_a_null_nested_external_id_answer_422_not_500(api, method):
    """`{"external_product_id": {"ecommerce": null}}` reached the id check as None (500)."""
    make_product(api, "p-1")
    collection = make_collection(api)
    body = {"collection_products": [{"external_product_id": "p-1"},
                                    {"external_product_id": {"ecommerce": None}}]}
    reply = api.request(method, f"/collections/{collection}/collection_products-bulk", json=body, version=V11)
    assert errors_of(reply) == {"collection_products": {"1": {"external_product_id": ["is required"]}}}
    listed = api.get("/collection_products", params={"collection_id": collection}, version=V11)
    assert listed.json()["collection_products"] == []
