"""What schemathesis found against a running server (tests/fuzz/, docs/openapi.md "Fuzzing and a
generated client"), each fixed at its root and kept here so that it stays fixed: the server where
it broke the specification, the OpenAPI document where it did not say what the server does, or
what a maintained generator could not read."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from rebill.api import openapi
from rebill.errors import NOT_READABLE_HTTP
from tests.builders import make_customer

V01, V11 = "2021-01", "2021-11"
LISTS = ("/customers", "/addresses", "/subscriptions", "/charges", "/orders", "/async_batches", "/webhooks")


def _operations(version: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, operation) for path, item in openapi.document(version)["paths"].items()
            for method, operation in item.items() if method in ("get", "put", "post", "delete")]


def _body_schema(version: str, method: str, path: str) -> Draft202012Validator:
    schema = openapi.document(version)["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    return Draft202012Validator(schema)


# The server: decisions §3.7 and §3.8 --------------------------------------------------------

@pytest.mark.parametrize("path", LISTS)
def test_an_empty_sort_by_answers_422_as_any_value_not_of_the_table(vapi, path):
    """It was read as no `sort_by` (the default order); decisions §3.7: anything else answers 422."""
    response = vapi.get(path, params={"sort_by": ""})
    assert response.status_code == 422, response.text
    assert list(response.json()["errors"]) == ["sort_by"]
    assert vapi.get(path, params={"sort_by": "id-desc"}).status_code == 200


@pytest.mark.parametrize("include", ["", ",", "addresses,", "addresses,,subscriptions"])
def test_an_empty_include_value_answers_422_as_an_unknown_value(vapi, include):
    """Empty names were skipped; decisions §3.8: a value not of the table answers 422, and the
    document's `include` is an array of the table's values."""
    response = vapi.get("/customers", params={"include": include})
    assert response.status_code == 422, response.text
    assert list(response.json()["errors"]) == ["include"]
    assert vapi.get(f"/customers/{make_customer(vapi).id}", params={"include": include}).status_code == 422
    assert vapi.get("/customers", params={"include": "addresses,subscriptions"}).status_code == 200


def test_the_document_says_include_takes_at_least_one_value():
    for version in (V01, V11):
        for _, _, operation in _operations(version):
            for param in operation.get("parameters", []):
                if param.get("name") == "include":
                    assert param["schema"]["minItems"] == 1


# The document: what the catalog's bodies take ------------------------------------------------

def test_a_product_variant_s_external_id_may_be_a_number_or_nested_and_the_document_says_so(api):
    """The catalog's bodies take an external id as a string, a number or `{"ecommerce": ...}`
    (api/v2021_11/catalog.py plain_ids); the document said string only, so a number was
    "invalid data accepted"."""
    sent = {"title": "Tea", "variants": [{"external_variant_id": 71, "title": "250 g", "price": "4.50"},
                                         {"external_variant_id": {"ecommerce": "72"}}]}
    response = api.post("/products", json={"external_product_id": {"ecommerce": 7000}, **sent}, version=V11)
    assert response.status_code == 201, response.text
    product = response.json()["product"]
    assert (product["external_product_id"], [v["external_variant_id"] for v in product["variants"]]) == (
        "7000", ["71", "72"])
    assert api.put("/products/7000", json=sent, version=V11).status_code == 200

    create = _body_schema(V11, "post", "/products")
    for valid in ({"external_product_id": 7000, **sent}, {"external_product_id": {"ecommerce": "7000"}, **sent}):
        assert not list(create.iter_errors(valid))
    # Still refused, by the document as by the server: no id at all, a bool, a blank string.
    for invalid in (True, "", " ", {"ecommerce": True}, {"other": "7000"}, 10**64):
        assert list(create.iter_errors({"external_product_id": invalid, "title": "Tea"})), invalid
        assert api.post("/products", json={"external_product_id": invalid, "title": "Tea"},
                        version=V11).status_code == 422, invalid


def test_a_plan_s_external_ids_take_the_same_forms_in_bulk_too():
    bulk = _body_schema(V11, "post", "/plans/bulk_create")
    plan = {"external_product_id": {"ecommerce": 7000}, "title": "Monthly", "type": "subscription",
            "external_variant_ids": [71, "72", {"ecommerce": 73}]}
    assert not list(bulk.iter_errors({"plans": [plan]}))
    assert list(bulk.iter_errors({"plans": [{**plan, "external_variant_ids": [True]}]}))


# The document: statuses the server answers ----------------------------------------------------

@pytest.mark.parametrize("version", [V01, V11])
def test_every_operation_documents_the_http_server_s_own_400(version):
    """The HTTP server answers a request target over 64 KiB (or a request it cannot parse) with
    a 400 before the API sees it, in the error shape (http/protocol.py): every operation documents
    it (tests/fuzz/ sends one, tests/api/test_http_protocol.py others)."""
    not_http = openapi.document(version)["components"]["responses"]["NotReadableHttp"]
    for method, path, operation in _operations(version):
        answer = operation["responses"]["400"]
        if "$ref" in answer:
            assert answer == {"$ref": "#/components/responses/NotReadableHttp"}, (method, path)
        else:  # an edge path that answers 400 itself too: the same shape, both named
            assert answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
            assert answer["description"].endswith(not_http["description"]), (method, path)
    assert list(not_http["content"]) == ["application/json"] and list(not_http["headers"]) == ["X-Request-Id"]
    assert not_http["content"]["application/json"]["example"] == {"errors": NOT_READABLE_HTTP}


def test_metrics_documents_what_it_answers_when_metrics_are_off(client):
    """Off (the default), `/metrics` is an unknown path: 401 without a token, 404 with one."""
    for version in (V01, V11):
        responses = openapi.document(version)["paths"]["/metrics"]["get"]["responses"]
        assert {"200", "401", "404", "405"} <= set(responses)


# The document: what openapi-python-client could not read -------------------------------------

@pytest.mark.parametrize("version", [V01, V11])
def test_every_array_of_the_document_says_what_its_items_are(version):
    """An array without `items` (utm_params, an event's custom_attributes, a list field) made the
    generator drop its whole component, and every operation answering it."""
    missing: list[str] = []
    stack: list[tuple[str, Any]] = [("#", openapi.document(version))]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "array" and "items" not in item:
                missing.append(where)
            stack.extend((f"{where}/{key}", value) for key, value in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}/{n}", value) for n, value in enumerate(item))
    assert missing == []


def test_a_query_enum_taking_both_cases_names_its_members():
    """`payment_type=CREDIT_CARD` and `credit_card` are both taken: the generator's default member
    names (the value in upper case) clashed; `x-enum-varnames` names them."""
    params = {p["name"]: p for p in openapi.document(V11)["paths"]["/payment_methods"]["get"]["parameters"]
              if "name" in p}
    schema = params["payment_type"]["schema"]
    assert len(set(schema["x-enum-varnames"])) == len(schema["enum"]) == len(schema["x-enum-varnames"])
    named = dict(zip(schema["enum"], schema["x-enum-varnames"]))
    assert (named["CREDIT_CARD"], named["credit_card"]) == ("CREDIT_CARD", "CREDIT_CARD_LOWER")


# The server: an idempotency key across versions ------------------------------------------------

def test_a_key_used_in_one_version_is_another_request_in_the_other(api):
    """Found running both versions against one token: a 2021-11 POST replayed the 2021-01 answer to
    the same key and body (200 and naive datetimes, outside the 2021-11 document). The version is
    part of the request now: the key with the other version answers 422 like any other request."""
    body = {"line_items": [], "buyer_accepts_marketing": True}  # schemathesis' own case
    first = api.post("/checkouts", json=body, version=V01, headers={"Idempotency-Key": "k-versions"})
    assert first.status_code == 200, first.text
    again = api.post("/checkouts", json=body, version=V01, headers={"Idempotency-Key": "k-versions"})
    assert (again.status_code, again.json()) == (200, first.json())
    other = api.post("/checkouts", json=body, version=V11, headers={"Idempotency-Key": "k-versions"})
    assert other.status_code == 422, other.text
    assert other.json() == {"errors": {"Idempotency-Key": ["was already used for another request"]}}


def test_external_product_ids_count_as_sent_repeats_included(api):
    """`make fuzz` sent 1,001 copies of one id: the repeats were dropped before the count, so the
    list passed the 1,000 the document's maxItems allows."""
    response = api.get("/products", params={"external_product_ids": ",".join(["7001"] * 1001)}, version=V11)
    assert response.status_code == 422, response.text
    assert response.json() == {"errors": {"external_product_ids": ["Invalid value: at most 1000 ids at a time"]}}
    assert api.get("/products", params={"external_product_ids": ",".join(["7001"] * 1000)},
                   version=V11).status_code == 200
