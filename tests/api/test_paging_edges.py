"""Query parameters sent twice, and a cursor past rows deleted since (spec 01 Pagination,
decisions §3.4; docs/api-choices.md "Paging"): found by an audit, each failed before its fix."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_customers import V01, V11, create
from tests.builders import make_address, make_subscription


def _ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.text
    return [c["id"] for c in response.json()["customers"]]


def test_a_list_filter_sent_twice_takes_both_values(vapi):
    first, second, _third = create(vapi), create(vapi), create(vapi)
    got = _ids(vapi.get(f"/customers?ids={first['id']}&ids={second['id']}"))
    assert sorted(got) == sorted([first["id"], second["id"]])


def test_a_2021_01_status_sent_twice_counts_both_statuses(api):
    api.version = V01
    address = make_address(api)
    make_subscription(api, address)
    queued = api.get("/charges/count?status=QUEUED").json()["count"]
    assert queued == 1
    assert api.get("/charges/count?status=QUEUED&status=SKIPPED").json() == {"count": 1}
    assert api.get("/charges/count?status=SKIPPED&status=QUEUED").json() == {"count": 1}  # not the last alone
    assert api.get("/charges/count?status=SKIPPED").json() == {"count": 0}


@pytest.mark.parametrize("query", ["limit=10&limit=20", "sort_by=id-asc&sort_by=id-desc"])
def test_a_single_value_sent_twice_with_two_values_is_refused(vapi, query):
    create(vapi)
    response = vapi.get(f"/customers?{query}")
    assert response.status_code == 422, response.text
    assert query.split("=")[0] in response.json()["errors"]


def test_a_single_value_sent_twice_alike_is_taken(vapi):
    for _ in range(3):
        create(vapi)
    assert len(_ids(vapi.get("/customers?limit=2&limit=2"))) == 2


def test_the_documents_version_sent_twice_with_two_values_is_refused(client):
    response = client.get("/openapi.json?version=2021-11&version=2021-01")
    assert response.status_code == 422
    assert "version" in response.json()["errors"]
    assert client.get("/openapi.json?version=2021-01&version=2021-01").json()["info"]["version"] == "2021-01"


def _page(api: Any, **params: Any) -> tuple[list[int], str | None, str | None]:
    body = api.get("/customers", params=params, version=V11).json()
    return [c["id"] for c in body["customers"]], body["next_cursor"], body["previous_cursor"]


@pytest.mark.parametrize("sort_by", ["id-desc", "id-asc", "created_at-desc", "created_at-asc"])
def test_a_cursor_back_onto_deleted_rows_still_leads_to_the_page_it_came_from(api, sort_by):
    made = [create(api)["id"] for _ in range(6)]
    first, after_first, _ = _page(api, limit=3, sort_by=sort_by)
    second, _, before_second = _page(api, limit=3, cursor=after_first)
    assert sorted(first + second) == sorted(made)
    for customer_id in first:
        assert api.delete(f"/customers/{customer_id}").status_code in (200, 204)
    empty, forward, backward = _page(api, limit=3, cursor=before_second)
    assert (empty, backward) == ([], None) and forward is not None
    assert _page(api, limit=3, cursor=forward)[0] == second  # its boundary row included


@pytest.mark.parametrize("sort_by", ["id-desc", "id-asc", "updated_at-desc", "updated_at-asc"])
def test_a_cursor_onto_deleted_rows_still_leads_back(api, sort_by):
    for _ in range(6):
        create(api)
    first, after_first, _ = _page(api, limit=3, sort_by=sort_by)
    second, _, _ = _page(api, limit=3, cursor=after_first)
    for customer_id in second:
        assert api.delete(f"/customers/{customer_id}").status_code in (200, 204)
    empty, forward, backward = _page(api, limit=3, cursor=after_first)
    assert (empty, forward) == ([], None) and backward is not None
    assert _page(api, limit=3, cursor=backward)[0] == first
