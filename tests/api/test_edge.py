"""The HTTP edge: authentication, versions, error shapes and the headers every response carries
(spec 01 Authentication, Errors, Versioning; decisions §1.5, §1.6, §2.1-§2.3, §2.8, §9.1)."""

from __future__ import annotations

import re

import pytest

from rebill.domain.store.model import SCOPES

OFFSET_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
LIMIT = re.compile(r"^(\d+)/40$")


def _error_string(response) -> str:
    body = response.json()
    assert set(body) == {"errors"}, body
    assert isinstance(body["errors"], str) and body["errors"], body
    return body["errors"]


def _raw_get(api, path, **headers):
    """A GET with exactly the given headers (Api.get always adds a version)."""
    return api.client.get(path, headers=headers)


# Authentication -------------------------------------------------------------------------


def test_missing_token_answers_401_with_errors_and_edge_headers(api):
    response = _raw_get(api, "/customers", **{"X-Service-Version": "2021-11"})
    assert response.status_code == 401
    _error_string(response)
    assert response.headers["X-Request-Id"]
    assert response.headers["X-Service-Version"] == "2021-11"  # the valid version asked for


def test_empty_token_answers_401(api):
    response = api.get("/", token="")
    assert response.status_code == 401
    _error_string(response)


def test_unknown_token_answers_401_with_errors_and_edge_headers(api):
    response = api.get("/customers", token="rb_not-a-real-token")
    assert response.status_code == 401
    _error_string(response)
    assert response.headers["X-Request-Id"]
    assert response.headers["X-Service-Version"] in ("2021-01", "2021-11")


def test_root_without_token_answers_401(api):
    response = _raw_get(api, "/")
    assert response.status_code == 401
    _error_string(response)


def test_missing_token_wins_over_invalid_version(api):
    response = _raw_get(api, "/", **{"X-Service-Version": "1999-01"})
    assert response.status_code == 401


def test_token_of_uninstalled_store_answers_403(api):
    other = api.other_store(installed=False)
    response = other.get("/customers")
    assert response.status_code == 403
    _error_string(response)
    assert response.headers["X-Request-Id"]
    assert response.headers["X-Service-Version"]


def test_an_uninstalled_stores_403_names_the_stores_default_version(api):
    """Found by an audit: a store of 2021-11 had its 403 (and 429) say 2021-01, the fallback
    for answers of no known store."""
    other = api.other_store(installed=False, default_api_version="2021-11")
    reply = other.client.get("/customers", headers={"X-Service-Access-Token": other.token})
    assert reply.status_code == 403 and reply.headers["X-Service-Version"] == "2021-11"


def test_uninstalled_store_answers_403_even_on_root(api):
    other = api.other_store(installed=False)
    assert other.get("/").status_code == 403


def test_uninstalled_store_answers_403_before_checking_version(api):
    other = api.other_store(installed=False)
    assert other.get("/", version="1999-01").status_code == 403


def test_root_with_valid_token_answers_200(vapi):
    response = vapi.get("/")
    assert response.status_code == 200, response.text


# Versions ---------------------------------------------------------------------------------


def test_version_header_absent_uses_default_store_version_2021_01(api):
    response = _raw_get(api, "/", **{"X-Service-Access-Token": api.token})
    assert response.status_code == 200
    assert response.headers["X-Service-Version"] == "2021-01"


def test_version_header_absent_uses_store_default_version_2021_11(api):
    other = api.other_store(default_api_version="2021-11")
    response = _raw_get(other, "/", **{"X-Service-Access-Token": other.token})
    assert response.status_code == 200
    assert response.headers["X-Service-Version"] == "2021-11"


def test_version_default_decides_shape_when_header_absent(api):
    """/store exists only in 2021-11: reachable without a header only for a 2021-11 store."""
    new = api.other_store(default_api_version="2021-11")
    assert _raw_get(new, "/store", **{"X-Service-Access-Token": new.token}).status_code == 200
    assert _raw_get(api, "/store", **{"X-Service-Access-Token": api.token}).status_code == 501


def test_version_header_is_echoed(vapi, version):
    response = vapi.get("/")
    assert response.headers["X-Service-Version"] == version


def test_explicit_version_overrides_store_default(api):
    other = api.other_store(default_api_version="2021-11")
    response = other.get("/", version="2021-01")
    assert response.headers["X-Service-Version"] == "2021-01"


@pytest.mark.parametrize("bad", ["2020-01", "2021-12", "latest", "2021_11"])
def test_invalid_version_answers_426(api, bad):
    response = api.get("/", version=bad)
    assert response.status_code == 426
    _error_string(response)
    assert response.headers["X-Request-Id"]
    assert response.headers["X-Service-Version"] == "2021-01"  # an invalid one is never echoed


def test_store_endpoint_in_2021_01_answers_501(api):
    response = api.get("/store", version="2021-01")
    assert response.status_code == 501
    _error_string(response)


@pytest.mark.parametrize("path", ["/shop", "/shop/shipping_countries"])
def test_shop_endpoints_in_2021_11_answer_501(api, path):
    response = api.get(path, version="2021-11")
    assert response.status_code == 501
    _error_string(response)


def test_customer_count_in_2021_11_answers_501(api):
    assert api.get("/customers/count", version="2021-11").status_code == 501


# Routing errors and bodies ------------------------------------------------------------------


def test_unknown_path_answers_404_not_found(vapi):
    response = vapi.get("/no_such_thing")
    assert response.status_code == 404
    assert response.json() == {"errors": "Not Found"}


def test_non_integer_id_in_path_answers_404(vapi):
    response = vapi.get("/customers/abc")
    assert response.status_code == 404
    assert response.json() == {"errors": "Not Found"}


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_an_id_with_a_final_newline_matches_no_route(vapi, method):
    """Found by an audit: the route's `$` matched before a final newline, so `/customers/1%0A`
    read, updated or deleted customer 1 (a space or a CR already answered 404)."""
    from tests.builders import make_customer
    customer = make_customer(vapi)
    body = {"first_name": "Changed"} if method == "PUT" else None
    response = vapi.request(method, f"/customers/{customer.id}%0A", json=body)
    assert (response.status_code, response.json()) == (404, {"errors": "Not Found"})
    assert vapi.get(f"/customers/{customer.id}").json()["customer"]["first_name"] != "Changed"


@pytest.mark.parametrize("method,path", [("DELETE", "/customers"), ("PATCH", "/customers"),
                                         ("POST", "/token_information"), ("PUT", "/")])
def test_wrong_method_on_known_path_answers_405(vapi, method, path):
    response = vapi.request(method, path)
    assert response.status_code == 405
    assert response.json() == {"errors": "Method Not Allowed"}


def test_405_names_the_allowed_methods_in_allow_header(api):
    response = api.request("DELETE", "/customers")
    assert response.status_code == 405
    allowed = {m.strip() for m in response.headers.get("Allow", "").split(",")}
    assert {"GET", "POST"} <= allowed


def test_allow_names_the_methods_of_the_requests_version_only(api):
    """Found by an audit: a 2021-01 405 on `/collections/{id}` listed PUT and DELETE, which
    answer 501 there (2021-11 endpoints)."""
    old = api.request("PATCH", "/collections/1", version="2021-01")
    assert old.status_code == 405 and old.headers["Allow"] == "GET, HEAD"
    new = api.request("PATCH", "/collections/1", version="2021-11")
    assert new.status_code == 405 and new.headers["Allow"] == "DELETE, GET, HEAD, PUT"


@pytest.mark.parametrize("body", [b"[]", b'[{"email": "a@example.com"}]', b"{not json", b'"text"', b"42",
                                  b"null", b"\xff\xfe"])
def test_post_body_that_is_not_a_json_object_answers_415(vapi, body):
    response = vapi.post("/customers", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 415
    _error_string(response)


def test_put_body_that_is_an_array_answers_415(vapi):
    response = vapi.put("/customers/1", content=b"[1, 2]", headers={"Content-Type": "application/json"})
    assert response.status_code == 415


def test_json_object_body_that_fails_validation_answers_422_not_415(vapi):
    response = vapi.post("/customers", json={})
    assert response.status_code == 422
    assert isinstance(response.json()["errors"], dict)


# Headers on every response -------------------------------------------------------------------


def test_every_response_carries_distinct_request_ids(api):
    responses = [api.get("/"), api.get("/"), api.get("/nope"), api.get("/", token="bad"),
                 api.get("/", version="1999-01")]
    ids = [r.headers["X-Request-Id"] for r in responses]
    assert all(ids)
    assert len(set(ids)) == len(ids)


def test_authenticated_responses_carry_service_limit_out_of_40(api):
    first = api.get("/")
    assert first.headers["X-Service-Limit"] == "1/40"
    second = api.get("/customers")
    match = LIMIT.match(second.headers["X-Service-Limit"])
    assert match and int(match.group(1)) >= 1


@pytest.mark.parametrize("method,path,version,status", [
    ("GET", "/nope", "2021-11", 404),
    ("DELETE", "/customers", "2021-11", 405),
    ("GET", "/store", "2021-01", 501),
    ("POST", "/customers", "2021-11", 415),
])
def test_error_responses_after_auth_still_carry_all_edge_headers(api, method, path, version, status):
    response = api.request(method, path, version=version, content=b"[]")
    assert response.status_code == status
    assert response.headers["X-Request-Id"]
    assert response.headers["X-Service-Version"] == version
    assert LIMIT.match(response.headers["X-Service-Limit"])


def test_scope_error_carries_edge_headers(api):
    token = api.token_with("read_customers")
    response = api.get("/store", token=token, version="2021-11")
    assert response.status_code == 403
    assert response.headers["X-Service-Version"] == "2021-11"
    assert LIMIT.match(response.headers["X-Service-Limit"])


def test_responses_are_json(vapi):
    assert vapi.get("/").headers["content-type"].startswith("application/json")
    assert vapi.get("/nope").headers["content-type"].startswith("application/json")


# Token information -------------------------------------------------------------------------


def test_token_information_shape_in_both_versions(vapi):
    response = vapi.get("/token_information")
    assert response.status_code == 200, response.text
    info = response.json()["token_information"]
    assert set(info) >= {"name", "contact_email", "scopes", "client"}
    assert info["name"] == "tests"
    assert set(info["client"]) >= {"name", "contact_email"}
    assert isinstance(info["scopes"], list)
    assert set(info["scopes"]) == set(SCOPES)


def test_token_information_lists_exactly_the_token_scopes(vapi):
    token = vapi.token_with("read_customers", "read_store")
    info = vapi.get("/token_information", token=token).json()["token_information"]
    assert sorted(info["scopes"]) == ["read_customers", "read_store"]


def test_token_information_needs_no_scope(vapi):
    token = vapi.token_with()
    response = vapi.get("/token_information", token=token)
    assert response.status_code == 200
    assert response.json()["token_information"]["scopes"] == []


# Store ----------------------------------------------------------------------------------


STORE_FIELDS = {"id", "name", "email", "phone", "currency", "enabled_presentment_currencies",
                "checkout_platform", "default_api_version", "timezone", "weight_unit", "created_at", "updated_at"}


def test_store_in_2021_11_has_decision_fields_with_offset_datetimes(api):
    response = api.get("/store", version="2021-11")
    assert response.status_code == 200, response.text
    store = response.json()["store"]
    assert STORE_FIELDS <= set(store)
    assert store["id"] == api.store.id
    assert store["name"] == api.store.name
    assert store["currency"] == "USD"
    assert "USD" in store["enabled_presentment_currencies"]
    assert store["checkout_platform"] == "custom"
    assert store["default_api_version"] == "2021-01"
    assert store["timezone"] == {"iana_name": "UTC", "iana_timezone": "UTC", "name": "(GMT+00:00) UTC"}
    for key in ("created_at", "updated_at"):
        assert OFFSET_DATETIME.match(store[key]), store[key]
    assert store["created_at"] == api.store.created_at.isoformat()


def test_store_reflects_its_settings(api):
    other = api.other_store(currency="EUR", presentment_currencies=["USD"], checkout_platform="platform_s_hosted",
                            default_api_version="2021-11", timezone="Europe/Paris")
    store = other.get("/store", version="2021-11").json()["store"]
    assert store["currency"] == "EUR"
    assert set(store["enabled_presentment_currencies"]) == {"EUR", "USD"}
    assert store["checkout_platform"] == "platform_s_hosted"
    assert store["default_api_version"] == "2021-11"
    assert store["timezone"]["iana_name"] == "Europe/Paris"


def test_shop_in_2021_01_has_shop_and_store_keys_with_naive_datetimes(api):
    response = api.get("/shop", version="2021-01")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) >= {"shop", "store"}
    assert body["shop"] == body["store"]
    shop = body["shop"]
    assert STORE_FIELDS <= set(shop)
    assert shop["id"] == api.store.id
    for key in ("created_at", "updated_at"):
        assert NAIVE_DATETIME.match(shop[key]), shop[key]


def test_shipping_countries_lists_the_store_countries_with_provinces(api):
    other = api.other_store(ships_to=["US", "CA"])
    response = other.get("/shop/shipping_countries", version="2021-01")
    assert response.status_code == 200, response.text
    countries = response.json()["shipping_countries"]
    assert [c["code"] for c in countries] == ["US", "CA"]
    by_code = {c["code"]: c for c in countries}
    assert by_code["US"]["name"] == "United States"
    assert by_code["CA"]["name"] == "Canada"
    for country in countries:
        assert set(country) >= {"code", "name", "provinces"}
        assert all(set(p) >= {"code", "name"} for p in country["provinces"])
        codes = [p["code"] for p in country["provinces"]]
        assert len(codes) == len(set(codes)), "each province once"
    assert {"code": "CA", "name": "California"} in by_code["US"]["provinces"]
    assert {"code": "QC", "name": "Quebec"} in by_code["CA"]["provinces"]
    assert len(by_code["CA"]["provinces"]) == 13


def test_shipping_countries_of_a_country_without_subdivision_requirement(api):
    other = api.other_store(ships_to=["DE"])
    countries = other.get("/shop/shipping_countries", version="2021-01").json()["shipping_countries"]
    assert [c["code"] for c in countries] == ["DE"]
    assert countries[0]["name"] == "Germany"


@pytest.mark.parametrize("path,version", [("/store", "2021-11"), ("/shop", "2021-01"),
                                          ("/shop/shipping_countries", "2021-01")])
def test_store_endpoints_need_read_store_scope(api, path, version):
    without = api.token_with("read_customers", "write_customers")
    response = api.get(path, token=without, version=version)
    assert response.status_code == 403
    _error_string(response)
    with_scope = api.token_with("read_store")
    assert api.get(path, token=with_scope, version=version).status_code == 200


def test_read_scope_is_enough_for_customer_list_but_not_for_create(api):
    token = api.token_with("read_customers")
    assert api.get("/customers", token=token).status_code == 200
    response = api.post("/customers", json={"email": "x@example.com", "first_name": "A", "last_name": "B"},
                        token=token)
    assert response.status_code == 403
    _error_string(response)


def test_other_version_endpoint_answers_501_even_without_scope(api):
    token = api.token_with()
    assert api.get("/store", token=token, version="2021-01").status_code == 501


def test_a_websocket_is_refused_not_crashed_on(api):
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect):
        with api.client.websocket_connect("/customers", headers={"X-Service-Access-Token": api.token}):
            pass
    assert api.get("/").status_code == 200  # the app carries on
