"""`GET /openapi.json`, `GET /docs` and `rebill openapi` (issue 17, docs/openapi.md): served
without a token on those paths only, the version chosen by the query or the header, the page and
its assets from the package with no network; and the shapes declared so far match what the
serializers render, in both versions."""

from __future__ import annotations

import re

import msgspec
import pytest
from typer.testing import CliRunner

from rebill.api import openapi
from rebill.cli import app as cli
from rebill.http.docs import ASSETS
from tests.openapi_check import ResponseChecker

VERSIONS = ("2021-01", "2021-11")


def test_the_document_needs_no_token_and_the_query_or_header_chooses_its_version(client):
    newest = client.get("/openapi.json")
    assert newest.status_code == 200 and newest.headers["content-type"] == "application/json"
    assert newest.json()["info"]["version"] == "2021-11" == newest.headers["x-service-version"]
    assert re.fullmatch("[0-9a-f]{32}", newest.headers["x-request-id"])
    assert "x-service-limit" not in newest.headers  # no token, no bucket
    assert client.get("/openapi.json", params={"version": "2021-01"}).json()["info"]["version"] == "2021-01"
    assert client.get("/openapi.json", headers={"X-Service-Version": "2021-01"}).json()["info"]["version"] == "2021-01"
    # The query wins over the header: a link names its version.
    both = client.get("/openapi.json", params={"version": "2021-11"}, headers={"X-Service-Version": "2021-01"})
    assert both.json()["info"]["version"] == "2021-11"
    # A token changes nothing, a bad one neither.
    assert client.get("/openapi.json", headers={"X-Service-Access-Token": "nope"}).status_code == 200
    assert newest.content == openapi.encoded("2021-11")


def test_an_unknown_version_answers_422_by_query_and_426_by_header(client):
    bad = client.get("/openapi.json", params={"version": "2020-01"})
    assert bad.status_code == 422
    assert bad.json() == {"errors": {"version": ["must be one of 2021-01, 2021-11"]}}
    header = client.get("/openapi.json", headers={"X-Service-Version": "2020-01"})
    assert header.status_code == 426
    assert header.json() == {"errors": "Invalid API version: 2020-01. Use one of 2021-01, 2021-11"}
    other = client.post("/openapi.json", json={})
    assert other.status_code == 405 and other.headers["allow"] == "GET, HEAD"


def test_the_reference_page_and_its_assets_are_served_from_the_package(client):
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    # The version switch: both documents, the newest first.
    assert '{"url": "/openapi.json?version=2021-11", "name": "2021-11"}, ' \
           '{"url": "/openapi.json?version=2021-01", "name": "2021-01"}' in html
    assert "validatorUrl: null" in html
    # Nothing loaded from another host: every URL of the page is one of ours.
    assert not re.search(r"(src|href)=\"https?://", html)
    for asset in re.findall(r'(?:src|href)="(/docs/static/[^"]+)"', html):
        served = client.get(asset)
        assert served.status_code == 200 and served.content, asset
        assert served.headers["content-type"] == ASSETS[asset.rsplit("/", 1)[1]].decode()
    bundle = client.get("/docs/static/swagger-ui-bundle.js")
    assert b"SwaggerUIBundle" in bundle.content
    assert client.get("/docs/static/swagger-editor.js").status_code == 404  # only the page's own files
    assert client.get("/docs/static/doc.html").status_code == 404


@pytest.mark.parametrize("path", ["/docs/", "/openapi.json/x", "/openapi", "/docsx", "/docs/static",
                                  "/x/docs", "/openapi.yaml", "/customers"])
def test_no_other_path_skips_the_token(client, path):
    answer = client.get(path)
    assert answer.status_code == 401 and answer.json() == {"errors": "Invalid or missing API token"}


@pytest.mark.parametrize("version", VERSIONS)
def test_rebill_openapi_writes_the_served_document(client, tmp_path, version):
    target = tmp_path / "openapi.json"
    result = CliRunner().invoke(cli, ["openapi", "--version", version, "--output", str(target)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert target.read_bytes() == client.get("/openapi.json", params={"version": version}).content
    printed = CliRunner().invoke(cli, ["openapi", "--version", version], catch_exceptions=False)
    assert msgspec.json.decode(printed.stdout_bytes) == openapi.document(version)
    assert printed.stdout_bytes == target.read_bytes()  # the same bytes on stdout (no newline added)
    refused = CliRunner().invoke(cli, ["openapi", "--version", "2020-01"])
    assert refused.exit_code == 2
    unwritable = CliRunner().invoke(cli, ["openapi", "--version", version, "--output", str(tmp_path)])
    assert unwritable.exit_code == 1 and f"cannot write {tmp_path}" in unwritable.output


def test_the_declared_shapes_match_what_the_serializers_render(api):
    """Customers, addresses, the store, token information and the small replies, in both versions,
    against the document strictly (the suite's own check only reports for now)."""
    from rebill.api.versions import VERSIONS as ALL
    checker = ResponseChecker(openapi.operations(), openapi.document, tuple(ALL))

    def checked(method, path, version, **kw):
        answer = api.request(method, path, version=version, **kw)
        problems = checker.check(method, answer.request.url.path, version, answer.status_code, answer.headers,
                                 answer.content)
        assert problems == [], [str(p) for p in problems]
        return answer

    for version in VERSIONS:
        customer = checked("POST", "/customers", version, json={
            "email": f"shape-{version}@example.com", "first_name": "Ada", "last_name": "Lovelace",
            "phone": "555", "billing_address1": "1 Main St", "billing_city": "Springfield",
            "billing_first_name": "Ada", "billing_last_name": "Lovelace", "billing_province": "Illinois",
            "billing_zip": "62701", "billing_country": "United States",
        }).json()["customer"]
        body = {"address1": "1 Main St", "city": "Springfield", "country_code": "US", "first_name": "Ada",
                "last_name": "Lovelace", "phone": "", "province": "Illinois", "zip": "62701",
                "order_attributes": [{"name": "gift", "value": "yes"}, {"name": "note"}],
                "shipping_lines_override": [{"code": "fast", "price": "4.5", "title": "Fast"}]}
        if version == "2021-11":
            address = checked("POST", "/addresses", version, json={"customer_id": customer["id"], **body})
        else:
            address = checked("POST", f"/customers/{customer['id']}/addresses", version, json=body)
        address_id = address.json()["address"]["id"]
        checked("PUT", f"/addresses/{address_id}", version, json={"shipping_lines_override": None})
        checked("GET", f"/customers/{customer['id']}", version, params={"include": "addresses"})
        checked("GET", f"/addresses/{address_id}", version, params={"include": "customer"})
        checked("GET", "/customers", version, params={"limit": 1})
        checked("GET", "/addresses", version)
        checked("PUT", f"/customers/{customer['id']}", version, json={"phone": None})
        checked("GET", "/", version)
        checked("GET", "/token_information", version)
        checked("GET", "/store" if version == "2021-11" else "/shop", version)
        checked("GET", "/customers/999999999", version)
        checked("POST", "/customers", version, json={})
        checked("DELETE", f"/addresses/{address_id}", version)
    checked("GET", "/customers/count", "2021-01")
    checked("GET", "/shop/shipping_countries", "2021-01")
    checked("POST", "/addresses/validate", "2021-01",
            json={"address1": "1 Main St", "city": "Springfield", "state": "IL", "zipcode": "62701"})
    checked("GET", f"/customers/{customer['id']}/delivery_schedule", "2021-11")
    checked("GET", "/plans", "2021-01")  # 501: the other version's endpoint


def test_the_clock_reply_matches_its_shape(api):
    from rebill.api.versions import VERSIONS as ALL
    checker = ResponseChecker(openapi.operations(), openapi.document, tuple(ALL))
    sandbox = api.other_store(sandbox=True)
    answer = sandbox.post("/store/clock/advance", json={"days": 1})
    assert answer.status_code == 200
    assert checker.check("POST", "/store/clock/advance", "2021-11", 200, answer.headers, answer.content) == []


@pytest.mark.parametrize("method, path, headers, status, named", [
    ("GET", "/openapi.json?version=x", {}, 422, "2021-01"),
    ("GET", "/openapi.json", {"X-Service-Version": "2099-01"}, 426, "2021-01"),
    ("DELETE", "/openapi.json", {"X-Service-Version": "2021-11"}, 405, "2021-11"),
    ("GET", "/docs/static/nope", {}, 404, "2021-01"),
    ("GET", "/docs", {"X-Service-Version": "2021-11"}, 200, "2021-11"),
    ("GET", "/openapi.json?version=2021-01", {"X-Service-Version": "2021-11"}, 200, "2021-01"),
])
def test_every_answer_of_the_reference_names_a_version(client, method, path, headers, status, named):
    """decisions §2.8 (found by an audit: only the document's 200 carried the header)."""
    answer = client.request(method, path, headers=headers)
    assert (answer.status_code, answer.headers["x-service-version"]) == (status, named)
