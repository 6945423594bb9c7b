"""The OpenAPI document of each version (api/openapi/, docs/openapi.md): it validates, and it holds
every route of its version with the method, scope, parameters, body and replies the route
declares, read from the same contracts the dispatcher uses."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from openapi_spec_validator import validate
from starlette.routing import compile_path

from rebill.api import openapi
from rebill.api.declared import DELETED
from rebill.api.query import DATETIME_PATTERN, FILTER_FORMS, filter_datetime, parse_datetime
from rebill.api.versions import VERSIONS
from rebill.app import RESOURCES

OPERATIONS = [op for module in RESOURCES for op in module.endpoints.operations]
EDGE = {("/openapi.json", "get"), ("/docs", "get"), ("/processors/stripe/events/{key}", "post"), ("/metrics", "get")}


def _template(path: str) -> str:
    return compile_path(path)[1]


def _op(version: str, method: str, path: str) -> dict[str, Any]:
    return openapi.document(version)["paths"][path][method.lower()]


def _params(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in operation["parameters"] if "name" in p}


def _resolve(version: str, item: dict[str, Any]) -> dict[str, Any]:
    node: Any = openapi.document(version)
    for part in item["$ref"].lstrip("#/").split("/"):
        node = node[part]
    return node  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_the_document_of_each_version_validates(version):
    document = openapi.document(version)
    validate(document)
    assert document["openapi"].startswith("3.1") and document["info"]["version"] == version


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_every_route_of_the_version_and_nothing_else_is_in_the_document(version):
    wanted = {(_template(op.path), op.method.lower()) for op in OPERATIONS if version in op.versions}
    found = {(path, method) for path, methods in openapi.document(version)["paths"].items() for method in methods}
    assert found - EDGE == wanted


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: f"{op.method} {op.path}")
def test_each_operation_carries_its_scope_path_parameters_and_replies(op):
    for version in op.versions:
        operation = _op(version, op.method, _template(op.path))
        assert operation["security"] == [{"token": [op.scope, *op.also_needs] if op.scope else []}]
        params = {p["name"]: p for p in operation["parameters"] if p.get("in") == "path"}
        for name, convertor in compile_path(op.path)[2].items():
            assert params[name]["in"] == "path" and params[name]["required"] is True
            if op.path.count(f"{{{name}:id}}"):
                assert params[name]["schema"] == {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}
        statuses = {r.status_in(VERSIONS[version]) for r in op.reply}
        assert statuses and {str(s) for s in statuses} <= set(operation["responses"])
        # 503 everywhere: the database may be away (errors.DatabaseUnavailable), not only the processor.
        for status in ("401", "403", "426", "429", "500", "503"):
            assert operation["responses"][status] == {"$ref": f"#/components/responses/{_error_name(status)}"}
        if op.method in ("POST", "PUT", "DELETE"):
            assert {"409", "413", "415", "422"} <= set(operation["responses"])
        assert {str(s) for s in op.errors} <= set(operation["responses"])
        assert ({"$ref": "#/components/parameters/IdempotencyKey"} in operation["parameters"]
                or op.method != "POST")


def _error_name(status: str) -> str:
    return {"401": "Unauthorized", "403": "Forbidden", "426": "VersionInvalid", "429": "RateLimited",
            "500": "InternalError", "503": "ServiceUnavailable"}[status]


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.method in ("POST", "PUT")],
                         ids=lambda op: f"{op.method} {op.path}")
def test_every_post_and_put_declares_the_body_its_handler_parses(op):
    assert op.body is not None, "declare body= on the route (api/declared.py)"
    # The names it declares are the ones its handler (or its module's helpers) parse.
    source = inspect.getsource(inspect.getmodule(op.handler))  # type: ignore[arg-type]
    for name in op.body.names():
        assert f'"{name}"' in source
    for version in op.versions:
        assert "requestBody" in _op(version, op.method, _template(op.path))


def test_every_operation_declares_its_replies():
    assert [f"{op.method} {op.path}" for op in OPERATIONS if not op.reply] == []


def test_query_parameters_come_from_the_list_contracts():
    new = _params(_op("2021-11", "GET", "/customers"))
    assert new["email"]["schema"] == {"type": "string"}
    assert new["ids"]["schema"]["type"] == "array" and new["ids"]["style"] == "form" and new["ids"]["explode"] is False
    assert new["created_at_min"]["schema"]["anyOf"] == FILTER_FORMS
    assert new["sort_by"]["schema"]["enum"] == ["id-asc", "id-desc", "created_at-asc", "created_at-desc",
                                                "updated_at-asc", "updated_at-desc"]
    assert new["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 250, "default": 50}
    assert new["include"]["schema"]["items"]["enum"] == list(VERSIONS["2021-11"].lists["customers"].includes)
    assert {"cursor", "page_info", "page", "external_customer_id"} <= set(new)
    old = _params(_op("2021-01", "GET", "/customers"))
    assert old["status"]["schema"] == {"type": "string", "enum": ["ACTIVE", "INACTIVE"]}
    assert "platform_customer_id" in old and "external_customer_id" not in old
    assert _params(_op("2021-11", "GET", "/addresses"))["is_active"]["schema"] == {"type": "boolean"}
    assert _params(_op("2021-11", "GET", "/addresses"))["customer_id"]["schema"]["type"] == "integer"
    # A count takes its contract's count filters and no paging.
    count = _params(_op("2021-01", "GET", "/customers/count"))
    assert set(count) == {*VERSIONS["2021-01"].lists["customers"].count_filters}
    # A single record takes its list's include values; a route's own query is there too.
    assert _params(_op("2021-11", "GET", "/customers/{customer_id}"))["include"]["schema"]["items"]["enum"]
    schedule = _params(_op("2021-11", "GET", "/customers/{customer_id}/delivery_schedule"))
    assert schedule["delivery_count_future"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 50,
                                                           "default": 10}
    assert _params(_op("2021-11", "PUT", "/subscriptions/{subscription_id}"))["commit"]["schema"] == \
        {"type": "boolean"}
    # A route's own query parameter named as a path parameter is the query's too (found by an
    # audit: spec 02's `customer_id` filter of the payment sources was left out).
    sources = _op("2021-01", "GET", "/customers/{customer_id}/payment_sources")["parameters"]
    assert {(p["name"], p["in"]) for p in sources if "name" in p} >= {("customer_id", "path"), ("customer_id", "query"),
                                                                      ("cardholder_name", "query")}


# NOTE: decisions §2.5, every form a date filter takes, and forms it refuses.
TAKEN_DATES = ["2026-01-15", "2026-01-15T10:00", "2026-01-15 10:00:05", "2026-01-15T10:00:05Z",
               "2026-01-15t10:00:05z", "2026-01-15T10:00:05+00:00", "2026-01-15T10:00:05+0000",
               "2026-01-15T10:00:05.123456789Z", "2026-01-15T10:00:05 0000"]
# A body's datetime takes another offset; a filter does not (decisions §2.5).
OFFSET_DATES = ["2026-01-15T10:00:05.123456789-05:30", "2026-01-15T10:00:05+01:00", "2026-01-15T10:00:05-00:00"]
REFUSED_DATES = ["2026-W02", "20260115", "2026-01-15x10:00", "2026-01-15T10", "15/01/2026", "2026-1-5",
                 "2026-01-15T10:00:05.1234567890", "2026-01-15T10:00:05+5", "now", ""]


def test_date_filters_and_body_dates_state_the_forms_the_parser_takes():
    """Found by an audit: `format: date-time` told a client's validator that a bare date, a
    space for `T`, `+0000` or no zone are refused, which the service takes (decisions §2.5).
    The document's pattern, read as JSON Schema reads one (a search), takes what the parser
    takes and refuses what it refuses, here and in a body's date field; the formats stay beside
    it for generated clients (tests/fuzz/test_generated_client.py sends a date)."""
    forms = _params(_op("2021-11", "GET", "/customers"))["created_at_min"]["schema"]["anyOf"]
    assert {"type": "string", "format": "date"} in forms
    # The date-time form carries the filter's pattern: the format alone admits any offset.
    [timed] = [form for form in forms if form.get("format") == "date-time"]
    pattern = re.compile(timed["pattern"])
    assert all(form.get("pattern") in (None, timed["pattern"]) for form in forms)
    for text in TAKEN_DATES:
        assert pattern.search(text) and filter_datetime(text) and parse_datetime(text), text
    for text in REFUSED_DATES + OFFSET_DATES:
        assert not pattern.search(text), text
        with pytest.raises(ValueError):
            filter_datetime(text)
    body = _op("2021-11", "POST", "/subscriptions")["requestBody"]["content"]["application/json"]["schema"]
    body = openapi.document("2021-11")["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]] \
        if "$ref" in body else body
    assert {"type": "string", "pattern": DATETIME_PATTERN} in body["properties"]["next_charge_scheduled_at"]["anyOf"]
    for text in TAKEN_DATES + OFFSET_DATES:
        assert re.search(DATETIME_PATTERN, text) and parse_datetime(text), text
    for text in REFUSED_DATES:
        assert not re.search(DATETIME_PATTERN, text), text
        with pytest.raises(ValueError):
            parse_datetime(text)


def test_a_filter_a_list_cannot_go_without_is_said_and_a_count_requires_it():
    """Found by an audit: `owner_resource` (spec 02 Metafields, "must be given") and
    `collection_id` read as optional; on a list a cursor carries them, so they are said in words
    there (nothing but `limit` may go with a cursor), and a count marks them required."""
    for version, path, name in (("2021-11", "/metafields", "owner_resource"), ("2021-01", "/metafields", "owner_resource"),
                                ("2021-11", "/collection_products", "collection_id")):
        param = _params(_op(version, "GET", path))[name]
        assert param["required"] is False and param["description"].startswith("Required, unless a cursor"), path
    assert _params(_op("2021-01", "GET", "/metafields/count"))["owner_resource"]["required"] is True
    assert _params(_op("2021-01", "GET", "/customers"))["email"]["required"] is False


def test_include_values_the_server_answers_422_for_are_not_in_the_enum():
    """Found by an audit: `include=charge_activities` was in the enum and always answered 422."""
    include = _params(_op("2021-11", "GET", "/addresses"))["include"]
    assert "charge_activities" not in include["schema"]["items"]["enum"]
    assert "`charge_activities`" in include["description"]
    assert "referral_info" not in _params(_op("2021-01", "GET", "/customers"))["include"]["schema"]["items"]["enum"]


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_every_query_parser_of_a_list_contract_says_what_it_takes(version):
    """A parser without ``openapi`` (api/query.py ``typed``) would be documented as a plain string."""
    bare = [f"{plural}.{name}" for plural, contract in VERSIONS[version].lists.items()
            for name, (_, parser) in contract.filters.items() if not hasattr(parser, "openapi")]
    assert bare == []


def _body(version: str, method: str, path: str) -> dict[str, Any]:
    return _op(version, method, path)["requestBody"]["content"]["application/json"]["schema"]


def test_bodies_follow_their_schemas_in_each_version():
    new = _body("2021-11", "POST", "/customers")
    assert new["required"] == ["email", "first_name", "last_name"]
    assert new["properties"]["email"] == {"type": "string", "maxLength": 255, "pattern": r"\S"}
    assert new["properties"]["phone"] == {"type": ["string", "null"], "maxLength": 64}
    assert new["properties"]["tax_exempt"] == {"type": "boolean"}
    assert "additionalProperties" not in new  # unknown fields are ignored (decisions §2.3)
    old = _body("2021-01", "POST", "/customers")
    assert {"billing_address1", "billing_country", "billing_zip"} <= set(old["required"])
    assert "platform_customer_id" in old["properties"] and "external_customer_id" not in old["properties"]
    # An update requires nothing, a required field still cannot be null.
    update = _body("2021-11", "PUT", "/customers/{customer_id}")
    assert "required" not in update and update["properties"]["email"]["type"] == "string"
    # ... except the 2021-01 billing fields a customer with none sends back as null (api-choices).
    old_update = _body("2021-01", "PUT", "/customers/{customer_id}")["properties"]
    assert old_update["billing_address1"]["type"] == old_update["billing_country"]["type"] == ["string", "null"]
    assert old["properties"]["billing_address1"]["type"] == "string"
    # Nested objects and lists of objects.
    address = _body("2021-11", "POST", "/addresses")
    assert address["properties"]["customer_id"]["type"] == ["integer", "string"]
    line = address["properties"]["shipping_lines_override"]["items"]
    assert line["required"] == ["price"] and line["properties"]["price"]["type"] == ["string", "number"]
    assert "customer_id" not in _body("2021-01", "POST", "/customers/{customer_id}/addresses")["properties"]
    # 2021-01 takes `country` or `country_code`: one of them.
    assert _body("2021-01", "PUT", "/addresses/{address_id}")["properties"]["country"]["type"] == "string"
    assert {"anyOf"} <= set(_body("2021-01", "POST", "/customers/{customer_id}/addresses"))


def test_a_body_per_version_money_patterns_choices_and_bulk_bodies():
    old, new = _body("2021-01", "POST", "/products"), _body("2021-11", "POST", "/products")
    assert old != new
    # A refund's amount has the currency's minor digits, checked by the domain (decisions §2.7).
    refund = _body("2021-11", "POST", "/charges/{charge_id}/refund")["properties"]["amount"]
    assert refund["type"] == ["string", "number", "null"]
    assert re.fullmatch(refund["pattern"], "12.505") and not re.fullmatch(refund["pattern"], "-1")
    # A part of a charge has up to 24 integer digits, a price 12 (api/v2021_11/charges.py).
    assert re.fullmatch(refund["pattern"], "1234567890123") and not re.fullmatch(refund["pattern"], "1" + "0" * 24)
    assert not re.fullmatch(refund["pattern"], "1e5")
    # A number is bound by the same limits as a string (found by an audit: -5 and 1e20 passed).
    assert (refund["minimum"], refund["exclusiveMaximum"]) == (0, 10**24)
    price = _body("2021-11", "POST", "/onetimes")["properties"]["price"]
    assert not re.fullmatch(price["pattern"], "1234567890123") and price["exclusiveMaximum"] == 10**12
    from rebill.domain.metafield.model import OWNERS
    bare = _body("2021-11", "POST", "/metafields")["anyOf"][0]
    assert bare["properties"]["owner_resource"]["enum"] == sorted(OWNERS) and "owner_resource" in bare["required"]
    bulk = _body("2021-11", "POST", "/plans/bulk_create")
    assert bulk["required"] == ["plans"] and bulk["properties"]["plans"]["maxItems"] == 20
    update = _body("2021-11", "PUT", "/plans/bulk_update")["properties"]["plans"]["items"]
    assert update["required"] == ["id"]
    tasks = _body("2021-11", "POST", "/async_batches/{batch_id}/tasks")["properties"]["tasks"]
    assert tasks["maxItems"] == 1000 and tasks["items"]["required"] == ["body"]
    delete = _body("2021-01", "DELETE", "/addresses/{address_id}/subscriptions-bulk")
    assert delete["properties"]["subscriptions"]["items"]["required"] == ["id"]
    # Array and integer bounds the parser checks (api/fields.py min_items... found by an audit of
    # the thirteenth session: checked in code and not stated).
    sources = _body("2021-11", "POST", "/addresses/merge")["properties"]["source_addresses"]
    assert (sources["minItems"], sources["maxItems"]) == (1, 10)
    assert _body("2021-11", "POST", "/checkouts")["properties"]["line_items"]["maxItems"] == 100
    products = _body("2021-11", "POST", "/collections/{collection_id}/collection_products-bulk")
    assert (products["properties"]["collection_products"]["minItems"],
            products["properties"]["collection_products"]["maxItems"]) == (1, 250)
    selection = _body("2021-11", "POST", "/bundle_selections")["properties"]["items"]
    assert selection["minItems"] == 1 and selection["items"]["properties"]["quantity"]["minimum"] == 1
    details = _body("2021-11", "POST", "/payment_methods")["properties"]["payment_details"]
    month = details["properties"]["exp_month"] if "properties" in details else details["anyOf"][0]["properties"]["exp_month"]
    assert (month["minimum"], month["maximum"]) == (1, 12)
    clock = _body("2021-11", "POST", "/store/clock/advance")
    assert {tuple(a["required"]) for a in clock["anyOf"]} == {("days",), ("to",), ("hours",)}
    assert _op("2021-11", "POST", "/subscriptions/{subscription_id}/activate")["requestBody"]["required"] is False


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_a_second_scope_a_body_may_need_is_said_where_security_cannot_say_it(version):
    """Found by an audit: `security` names one scope; a 2021-01 customer body with a processor's
    token and an async batch need a second one, which depends on the body (docs/scopes.md)."""
    for method, path in (("POST", "/customers"), ("PUT", "/customers/{customer_id}")):
        assert "`write_payment_methods`" in _op(version, method, path)["description"]
    for method, path in (("POST", "/async_batches"), ("POST", "/async_batches/{batch_id}/tasks"),
                         ("POST", "/async_batches/{batch_id}/process")):
        assert "scope of the endpoint" in _op(version, method, path)["description"]


def test_webhook_topics_and_included_objects_are_each_versions_events_table():
    """Checked by the domain (one 422 with the address's problems), stated by the document."""
    from rebill.domain.webhook.topics import TOPICS
    for version in VERSIONS:
        created = _body(version, "POST", "/webhooks")["properties"]
        assert created["topic"]["enum"] == sorted(TOPICS[version])
        assert set(created["included_objects"]["items"]["enum"]) == {
            name for names in TOPICS[version].values() for name in names}
        # A webhook keeps its version when the other version's request updates it.
        updated = _body(version, "PUT", "/webhooks/{webhook_id}")["properties"]
        assert set(updated["topic"]["enum"]) == set(TOPICS["2021-11"]) | set(TOPICS["2021-01"])
    assert "product/created" in _body("2021-01", "POST", "/webhooks")["properties"]["topic"]["enum"]
    assert "product/created" not in _body("2021-11", "POST", "/webhooks")["properties"]["topic"]["enum"]


def test_a_metafield_body_may_be_wrapped_as_spec_02_writes_it():
    for version in VERSIONS:
        bare, wrapped = _body(version, "POST", "/metafields")["anyOf"]
        assert {"owner_resource", "namespace", "key", "value", "value_type"} <= set(bare["required"])
        assert wrapped["required"] == ["metafield"] and wrapped["properties"]["metafield"] == bare


def test_replies_in_each_version():
    created_new = _op("2021-11", "POST", "/customers")["responses"]["201"]
    assert created_new["content"]["application/json"]["schema"]["properties"]["customer"] == \
        {"$ref": "#/components/schemas/Customer"}
    assert "200" in _op("2021-01", "POST", "/customers")["responses"]
    assert "content" not in _op("2021-11", "DELETE", "/customers/{customer_id}")["responses"]["204"]
    assert _op("2021-01", "DELETE", "/customers/{customer_id}")["responses"]["200"]["content"]["application/json"][
        "schema"] == {"type": "object", "maxProperties": 0}
    page_new = _op("2021-11", "GET", "/customers")["responses"]["200"]
    assert page_new["content"]["application/json"]["schema"]["required"] == ["customers", "next_cursor",
                                                                                 "previous_cursor"]
    page_old = _op("2021-01", "GET", "/customers")["responses"]["200"]
    assert page_old["content"]["application/json"]["schema"]["required"] == ["customers"]
    assert page_old["headers"]["Link"] == {"$ref": "#/components/headers/Link"}
    shop = _op("2021-01", "GET", "/shop")["responses"]["200"]["content"]["application/json"]["schema"]
    assert shop["required"] == ["shop", "store"]
    assert _op("2021-11", "POST", "/webhooks/{webhook_id}/test")["responses"]["202"]
    for version in VERSIONS:
        for path, methods in openapi.document(version)["paths"].items():
            for method, operation in methods.items():
                for status, response in operation["responses"].items():
                    if "$ref" not in response and status.startswith("2") and (path, method) not in EDGE:
                        assert {"X-Request-Id", "X-Service-Version", "X-Service-Limit"} <= set(response["headers"])


def test_errors_have_one_shape_and_their_responses():
    document = openapi.document("2021-11")
    error = document["components"]["schemas"]["Error"]
    assert error["required"] == ["errors"]
    for name in ("Unauthorized", "NotFound", "ValidationFailed", "RateLimited", "NotInThisVersion",
                 "ServiceUnavailable", "PayloadTooLarge", "UnsupportedMediaType", "Conflict", "VersionInvalid",
                 "InternalError"):
        response = document["components"]["responses"][name]
        assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert "Retry-After" in document["components"]["responses"]["RateLimited"]["headers"]


def test_the_2021_01_products_are_deprecated_there_only():
    for op in OPERATIONS:
        for version in op.versions:
            operation = _op(version, op.method, _template(op.path))
            assert operation.get("deprecated", False) == (version in op.deprecated_in)
    operation = _op("2021-01", "GET", "/products")
    assert operation["deprecated"] is True
    assert {"Deprecation", "Sunset"} <= set(operation["responses"]["200"]["headers"])
    assert "deprecated" not in _op("2021-11", "GET", "/products")


def test_rebill_extensions_are_tagged_from_their_routes():
    tagged = {(method, path) for path, methods in openapi.document("2021-11")["paths"].items()
              for method, operation in methods.items() if operation.get("x-rebill-extension")}
    for method, path in tagged:
        assert "Rebill extensions" in _op("2021-11", method, path)["tags"]
    assert ("post", "/store/clock/advance") in tagged
    assert ("get", "/webhook_deliveries") in tagged and ("post", "/webhook_deliveries/replay") in tagged
    assert ("post", "/webhooks/{webhook_id}/enable") in tagged
    assert ("get", "/bundle_variants") in tagged
    assert {(m, p) for p, m in EDGE} <= tagged
    assert ("get", "/customers") not in tagged and ("post", "/webhooks/{webhook_id}/test") not in tagged
    declared = {(op.method.lower(), _template(op.path)) for op in OPERATIONS if op.extension and "2021-11" in op.versions}
    assert tagged - {(m, p) for p, m in EDGE} == declared


def test_the_token_less_paths_say_so():
    for version in VERSIONS:
        for path, method in EDGE:
            assert _op(version, method, path)["security"] == []


def test_deleted_replies_follow_the_version():
    for op in OPERATIONS:
        for reply in op.reply:
            if reply.status == DELETED:
                for version in op.versions:
                    assert str(VERSIONS[version].deleted_status) in _op(version, op.method, _template(op.path))[
                        "responses"]


@pytest.mark.parametrize("version", ["2021-01", "2021-11"])
def test_includes_embed_a_list_for_plural_names_and_one_record_or_null_otherwise(version):
    schemas = openapi.document(version)["components"]["schemas"]
    include = schemas["Subscription"]["properties"]["include"]["properties"]
    # `address` ends in "s" but names one record (includes.embed renders it alone).
    assert include["address"] == {"anyOf": [{"$ref": "#/components/schemas/Address"}, {"type": "null"}]}
    assert include["bundle_product"]["anyOf"][0] == {"$ref": "#/components/schemas/BundleVariant"}
    assert include["metafields"] == {"type": "array", "items": {"$ref": "#/components/schemas/Metafield"}}
    assert schemas["Customer"]["properties"]["include"]["properties"]["addresses"]["type"] == "array"


def test_a_route_declares_the_error_statuses_the_document_cannot_infer():
    # A GET without query or body answers 422 only when it says so (no shipping address yet).
    rates = _op("2021-11", "GET", "/checkouts/{token}/shipping_rates")["responses"]
    assert rates["422"] == {"$ref": "#/components/responses/ValidationFailed"}
    # Every GET documents 422: an `include` value on a record that takes none (decisions §3.8).
    assert _op("2021-11", "GET", "/store")["responses"]["422"] == {"$ref": "#/components/responses/ValidationFailed"}
