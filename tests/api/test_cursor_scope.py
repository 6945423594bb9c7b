"""A cursor belongs to the list that made it (decisions §3.3: it carries every filter of its
first request; one made for another resource answers 422 `{"cursor": ["Invalid value"]}`).
Found by an audit: a cursor used in the other version, or on the list of another parent, was
taken, and the filters it carried were silently dropped."""

from __future__ import annotations

import re

from tests.builders import make_address, make_customer

V01, V11 = "2021-01", "2021-11"
INVALID = {"errors": {"cursor": ["Invalid value"]}}


def _page_info(link: str) -> str:
    found = re.search(r"page_info=([^&>]+)>; rel=\"next\"", link)
    assert found, link
    return found.group(1)


def test_a_cursor_is_refused_by_the_other_version_and_taken_by_its_own(api):
    customer = make_customer(api)
    for _ in range(3):
        make_address(api, customer)
    first = api.get("/addresses", params={"limit": 1, "sort_by": "id-asc"}, version=V11)
    cursor = first.json()["next_cursor"]
    own = api.get("/addresses", params={"cursor": cursor, "limit": 1}, version=V11)
    assert own.status_code == 200 and len(own.json()["addresses"]) == 1
    other = api.get("/addresses", params={"page_info": cursor, "limit": 1}, version=V01)
    assert (other.status_code, other.json()) == (422, INVALID)

    make_customer(api)  # two customers at least: the first page of one has a next
    page_info = _page_info(api.get("/customers", params={"limit": 1}, version=V01).headers["Link"])
    refused = api.get("/customers", params={"cursor": page_info}, version=V11)
    assert (refused.status_code, refused.json()) == (422, INVALID)
    assert api.get("/customers", params={"page_info": page_info}, version=V01).status_code == 200


def test_a_cursor_of_one_parents_list_is_refused_on_another_list(api):
    customer, other = make_customer(api), make_customer(api)
    for _ in range(3):
        make_address(api, customer)
    make_address(api, other)
    nested = api.get(f"/customers/{customer.id}/addresses", params={"limit": 1}, version=V01)
    assert nested.status_code == 200, nested.text
    page_info = _page_info(nested.headers["Link"])
    follow = api.get(f"/customers/{customer.id}/addresses", params={"page_info": page_info}, version=V01)
    assert follow.status_code == 200
    assert {a["customer_id"] for a in follow.json()["addresses"]} == {customer.id}
    for path in ("/addresses", f"/customers/{other.id}/addresses"):
        refused = api.get(path, params={"page_info": page_info}, version=V01)
        assert (refused.status_code, refused.json()) == (422, INVALID), path
