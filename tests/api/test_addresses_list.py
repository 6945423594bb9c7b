"""Listing, counting, paging, sorting and including addresses (spec 01 Addresses list query,
Pagination, Sorting, Including; spec 02 Addresses, Cursor paging in 2021-01; decisions §2.5,
§2.6, §3)."""

from __future__ import annotations

import base64
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from sqlalchemy import event

from tests.api.test_addresses_support import (
    V01,
    V11,
    bulk_addresses,
    clock_kept,
    fmt11,
    ids,
    link_targets,
)
from tests.builders import make_address, make_customer, make_discount, make_payment_method


def errors_of(response):
    assert response.status_code == 422, response.text
    return response.json()["errors"]


# --- filters --------------------------------------------------------------------------------------

def test_list_shows_only_the_stores_own_addresses(vapi):
    mine = make_address(vapi)
    make_address(vapi.other_store())
    assert ids(vapi.get("/addresses")) == [mine.id]


def test_list_2021_11_carries_next_and_previous_cursor_keys(api):
    make_address(api)
    body = api.get("/addresses").json()
    assert set(body) == {"addresses", "next_cursor", "previous_cursor"}
    assert body["next_cursor"] is None and body["previous_cursor"] is None


def test_list_2021_01_has_only_the_addresses_key(api):
    make_address(api)
    assert set(api.get("/addresses", version=V01).json()) == {"addresses"}


def test_list_rows_have_the_same_shape_as_get(vapi):
    address = make_address(vapi)
    row = vapi.get("/addresses").json()["addresses"][0]
    assert row == vapi.get(f"/addresses/{address.id}").json()["address"]


def test_filter_customer_id(vapi):
    one, two = make_customer(vapi), make_customer(vapi)
    a1, a2 = make_address(vapi, one), make_address(vapi, one)
    make_address(vapi, two)
    assert ids(vapi.get("/addresses", params={"customer_id": one.id})) == [a2.id, a1.id]


def test_filter_customer_id_that_is_not_an_integer_answers_422(vapi):
    assert set(errors_of(vapi.get("/addresses", params={"customer_id": "abc"}))) == {"customer_id"}


def test_filter_ids(vapi):
    made = bulk_addresses(vapi, make_customer(vapi), 4)
    wanted = f"{made[0]},{made[2]}"
    assert ids(vapi.get("/addresses", params={"ids": wanted})) == [made[2], made[0]]


def test_filter_ids_does_not_reach_another_stores_addresses(vapi):
    foreign = make_address(vapi.other_store())
    mine = make_address(vapi)
    assert ids(vapi.get("/addresses", params={"ids": f"{foreign.id},{mine.id}"})) == [mine.id]


@pytest.mark.parametrize("value", ["1,abc", "abc", "1;2", "1.5", ","])
def test_filter_ids_with_a_non_integer_answers_422(vapi, value):
    assert set(errors_of(vapi.get("/addresses", params={"ids": value}))) == {"ids"}


def test_filter_discount_id(vapi):
    first, second = make_discount(vapi, code="ALPHA"), make_discount(vapi, code="BETA")
    with_first = make_address(vapi, discounts=[{"id": first}])
    make_address(vapi, discounts=[{"id": second}])
    make_address(vapi)
    assert ids(vapi.get("/addresses", params={"discount_id": first})) == [with_first.id]
    assert ids(vapi.get("/addresses", params={"discount_id": 987654321})) == []


def test_filter_discount_id_that_is_not_an_integer_answers_422(vapi):
    assert set(errors_of(vapi.get("/addresses", params={"discount_id": "ALPHA"}))) == {"discount_id"}




def test_filter_discount_code(vapi):
    make_address(vapi, discounts=[{"id": make_discount(vapi, code="ALPHA")}])
    with_second = make_address(vapi, discounts=[{"id": make_discount(vapi, code="BETA")}])
    make_address(vapi)
    assert ids(vapi.get("/addresses", params={"discount_code": "BETA"})) == [with_second.id]
    assert ids(vapi.get("/addresses", params={"discount_code": "GAMMA"})) == []
    # NOTE: decisions §7.5, codes match case-insensitively.
    assert ids(vapi.get("/addresses", params={"discount_code": "beta"})) == [with_second.id]


def test_filter_discount_code_does_not_match_another_stores_code(api):
    other = api.other_store()
    make_address(other, discounts=[{"id": make_discount(other, code="SHARED")}])
    mine = make_address(api, discounts=[{"id": make_discount(api, code="SHARED")}])
    assert ids(api.get("/addresses", params={"discount_code": "SHARED"})) == [mine.id]


def _three_at_three_times(api, clock):
    """a at t0, b at t0+1h, c at t0+2h; then a updated at t0+3h. Returns ids and times."""
    customer = make_customer(api)
    t0 = clock.now()
    a = make_address(api, customer).id
    clock.advance(hours=1)
    b = make_address(api, customer).id
    clock.advance(hours=1)
    c = make_address(api, customer).id
    clock.advance(hours=1)
    assert api.put(f"/addresses/{a}", json={"address1": "2 Main St"}).status_code == 200
    return (a, b, c), [t0 + timedelta(hours=h) for h in range(4)]


def test_filter_created_at_min_and_max_are_inclusive(vapi):
    with clock_kept(vapi) as clock:
        (a, b, c), t = _three_at_three_times(vapi, clock)
        assert ids(vapi.get("/addresses", params={"created_at_min": fmt11(t[1])})) == [c, b]
        assert ids(vapi.get("/addresses", params={"created_at_max": fmt11(t[1])})) == [b, a]
        assert ids(vapi.get("/addresses", params={"created_at_min": fmt11(t[1]),
                                                  "created_at_max": fmt11(t[1])})) == [b]


def test_filter_updated_at_min_and_max(vapi):
    with clock_kept(vapi) as clock:
        (a, b, c), t = _three_at_three_times(vapi, clock)
        assert ids(vapi.get("/addresses", params={"updated_at_min": fmt11(t[3])})) == [a]
        assert ids(vapi.get("/addresses", params={"updated_at_max": fmt11(t[2])})) == [c, b]


@pytest.mark.parametrize("shape", ["{d}T{t}", "{d} {t}", "{d}T{t}Z", "{d}T{t}+00:00", "{d}T{t}+0000", "{d}T{t}"])
def test_datetime_filters_accept_the_documented_shapes(vapi, shape):
    with clock_kept(vapi) as clock:
        (a, b, c), t = _three_at_three_times(vapi, clock)
        value = shape.format(d=t[2].strftime("%Y-%m-%d"), t=t[2].strftime("%H:%M:%S"))
        assert ids(vapi.get("/addresses", params={"created_at_min": value})) == [c]


def test_datetime_filter_accepts_a_bare_date(vapi):
    with clock_kept(vapi) as clock:
        (a, b, c), t = _three_at_three_times(vapi, clock)
        next_day = (t[0] + timedelta(days=1)).strftime("%Y-%m-%d")
        assert ids(vapi.get("/addresses", params={"created_at_max": next_day})) == [c, b, a]
        assert ids(vapi.get("/addresses", params={"created_at_min": next_day})) == []


@pytest.mark.parametrize("name", ["created_at_min", "created_at_max", "updated_at_min", "updated_at_max"])
def test_datetime_filter_that_does_not_parse_answers_422_naming_it(vapi, name):
    response = vapi.get("/addresses", params={name: "yesterday"})
    assert errors_of(response) == {name: ["Invalid date: yesterday. Must be a valid ISO-8601 datetime string"]}


def test_is_active_true_is_empty_and_false_is_everything_while_no_subscription_exists(api):
    made = bulk_addresses(api, make_customer(api), 3)
    assert ids(api.get("/addresses", params={"is_active": "true"})) == []
    assert ids(api.get("/addresses", params={"is_active": "1"})) == []
    assert ids(api.get("/addresses", params={"is_active": "false"})) == made[::-1]
    assert ids(api.get("/addresses", params={"is_active": "0"})) == made[::-1]


def test_is_active_that_is_not_a_boolean_answers_422(api):
    assert set(errors_of(api.get("/addresses", params={"is_active": "maybe"}))) == {"is_active"}


def test_several_bad_filters_are_named_together(api):
    response = api.get("/addresses", params={"ids": "x", "customer_id": "y", "created_at_min": "z"})
    assert set(errors_of(response)) == {"ids", "customer_id", "created_at_min"}


def test_unknown_query_parameters_are_ignored(vapi):
    made = make_address(vapi)
    assert ids(vapi.get("/addresses", params={"colour": "blue"})) == [made.id]


# --- customer addresses (2021-01) -----------------------------------------------------------------

def test_2021_01_customer_addresses_lists_only_that_customers_addresses(api):
    one, two = make_customer(api), make_customer(api)
    a1, a2 = make_address(api, one), make_address(api, one)
    make_address(api, two)
    assert ids(api.get(f"/customers/{one.id}/addresses", version=V01)) == [a2.id, a1.id]


def test_2021_01_customer_addresses_of_an_unknown_or_foreign_customer_answers_404(api):
    foreign = make_customer(api.other_store())
    for customer_id in (987654321, foreign.id):
        response = api.get(f"/customers/{customer_id}/addresses", version=V01)
        assert (response.status_code, response.json()) == (404, {"errors": "Not Found"})


def test_2021_01_customer_addresses_honours_other_filters(api):
    customer = make_customer(api)
    made = bulk_addresses(api, customer, 3)
    response = api.get(f"/customers/{customer.id}/addresses", version=V01, params={"ids": f"{made[1]}"})
    assert ids(response) == [made[1]]


# --- sorting --------------------------------------------------------------------------------------

def test_default_sort_is_id_descending(vapi):
    made = bulk_addresses(vapi, make_customer(vapi), 4)
    assert ids(vapi.get("/addresses")) == sorted(made, reverse=True)


@pytest.mark.parametrize("sort_by, expected", [("id-asc", "asc"), ("id-desc", "desc")])
def test_sort_by_id(vapi, sort_by, expected):
    made = bulk_addresses(vapi, make_customer(vapi), 4)
    assert ids(vapi.get("/addresses", params={"sort_by": sort_by})) == sorted(made, reverse=expected == "desc")


def test_sort_by_updated_at_orders_by_time_then_id_in_the_same_direction(vapi):
    with clock_kept(vapi) as clock:
        a, b, c = bulk_addresses(vapi, make_customer(vapi), 3)
        clock.advance(minutes=1)
        assert vapi.put(f"/addresses/{b}", json={"address1": "9 Elm St"}).status_code == 200
        assert ids(vapi.get("/addresses", params={"sort_by": "updated_at-desc"})) == [b, c, a]
        assert ids(vapi.get("/addresses", params={"sort_by": "updated_at-asc"})) == [a, c, b]


@pytest.mark.parametrize("sort_by", ["created_at-asc", "created_at-desc", "id", "id-up", "zip-asc", "updated_at"])
def test_sort_by_outside_id_and_updated_at_answers_422(vapi, sort_by):
    assert set(errors_of(vapi.get("/addresses", params={"sort_by": sort_by}))) == {"sort_by"}


# --- limit and page -------------------------------------------------------------------------------

def test_limit_defaults_to_50(vapi):
    made = bulk_addresses(vapi, make_customer(vapi), 51)
    assert ids(vapi.get("/addresses")) == sorted(made, reverse=True)[:50]


def test_limit_up_to_250_is_accepted(vapi):
    made = bulk_addresses(vapi, make_customer(vapi), 3)
    assert ids(vapi.get("/addresses", params={"limit": 250})) == made[::-1]
    assert ids(vapi.get("/addresses", params={"limit": 2})) == made[::-1][:2]
    assert ids(vapi.get("/addresses", params={"limit": 1})) == made[::-1][:1]


@pytest.mark.parametrize("limit", ["251", "0", "-1", "abc", "2.5", "1000"])
def test_limit_outside_1_to_250_or_not_an_integer_answers_422(vapi, limit):
    assert set(errors_of(vapi.get("/addresses", params={"limit": limit}))) == {"limit"}


def test_page_numbers_page_through_the_rows(vapi):
    made = sorted(bulk_addresses(vapi, make_customer(vapi), 5), reverse=True)
    assert ids(vapi.get("/addresses", params={"limit": 2, "page": 1})) == made[0:2]
    assert ids(vapi.get("/addresses", params={"limit": 2, "page": 2})) == made[2:4]
    assert ids(vapi.get("/addresses", params={"limit": 2, "page": 3})) == made[4:]
    assert ids(vapi.get("/addresses", params={"limit": 2, "page": 4})) == []


def test_page_100_is_the_last_page_number_allowed(vapi):
    make_address(vapi)
    assert ids(vapi.get("/addresses", params={"page": 100})) == []


@pytest.mark.parametrize("page", ["101", "1000"])
def test_page_above_100_answers_422(vapi, page):
    assert set(errors_of(vapi.get("/addresses", params={"page": page}))) == {"page"}


@pytest.mark.parametrize("page", ["0", "-1", "x"])
def test_page_that_is_not_a_positive_integer_answers_422(vapi, page):
    assert set(errors_of(vapi.get("/addresses", params={"page": page}))) == {"page"}


# --- cursors (2021-11) ----------------------------------------------------------------------------

def _walk(api, first_params, key="next_cursor", limit=None):
    pages, body = [], api.get("/addresses", params=first_params).json()
    pages.append(body)
    while body[key]:
        params = {"cursor": body[key]}
        if limit:
            params["limit"] = limit
        response = api.get("/addresses", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body)
        assert len(pages) < 50
    return pages


def _page_ids(body):
    return [row["id"] for row in body["addresses"]]


def test_cursor_walks_forward_through_every_row_once(api):
    made = sorted(bulk_addresses(api, make_customer(api), 5), reverse=True)
    pages = _walk(api, {"limit": 2}, limit=2)
    assert [_page_ids(p) for p in pages] == [made[0:2], made[2:4], made[4:]]
    assert pages[0]["previous_cursor"] is None
    assert pages[-1]["next_cursor"] is None
    assert all(p["previous_cursor"] for p in pages[1:])


def test_cursor_walks_back_from_the_last_page_to_the_first(api):
    made = sorted(bulk_addresses(api, make_customer(api), 5), reverse=True)
    last = _walk(api, {"limit": 2}, limit=2)[-1]
    back = [last]
    while back[-1]["previous_cursor"]:
        response = api.get("/addresses", params={"cursor": back[-1]["previous_cursor"], "limit": 2})
        assert response.status_code == 200, response.text
        back.append(response.json())
        assert len(back) < 10
    assert [_page_ids(p) for p in back] == [made[4:], made[2:4], made[0:2]]
    assert back[-1]["next_cursor"]


def test_cursor_forward_then_back_returns_the_same_page(api):
    bulk_addresses(api, make_customer(api), 6)
    first = api.get("/addresses", params={"limit": 3}).json()
    second = api.get("/addresses", params={"cursor": first["next_cursor"], "limit": 3}).json()
    again = api.get("/addresses", params={"cursor": second["previous_cursor"], "limit": 3}).json()
    assert _page_ids(again) == _page_ids(first)


def test_cursor_carries_the_filters_and_sort_of_the_first_request(api):
    wanted, other = make_customer(api), make_customer(api)
    mine = []
    for _ in range(3):
        mine += bulk_addresses(api, wanted, 1)
        bulk_addresses(api, other, 1)
    pages = _walk(api, {"customer_id": wanted.id, "sort_by": "id-asc", "limit": 1}, limit=1)
    assert [_page_ids(p) for p in pages] == [[mine[0]], [mine[1]], [mine[2]]]


def test_cursor_carries_the_datetime_filter(api):
    with clock_kept(api) as clock:
        customer = make_customer(api)
        bulk_addresses(api, customer, 2)
        clock.advance(hours=1)
        later = bulk_addresses(api, customer, 3)
        pages = _walk(api, {"created_at_min": fmt11(clock.now()), "limit": 2}, limit=2)
    assert sum((_page_ids(p) for p in pages), []) == later[::-1]


def test_cursor_on_updated_at_with_ties_walks_every_row_once_both_ways(api):
    with clock_kept(api) as clock:
        customer = make_customer(api)
        tied = bulk_addresses(api, customer, 5)  # all share one updated_at second
        clock.advance(minutes=1)
        newer = bulk_addresses(api, customer, 2)
        expected = newer[::-1] + tied[::-1]
        pages = _walk(api, {"sort_by": "updated_at-desc", "limit": 2}, limit=2)
        assert sum((_page_ids(p) for p in pages), []) == expected
        back, body = [], pages[-1]
        while body["previous_cursor"]:
            body = api.get("/addresses", params={"cursor": body["previous_cursor"], "limit": 2}).json()
            back = _page_ids(body) + back
        assert back + _page_ids(pages[-1]) == expected


def test_cursor_on_updated_at_ascending_walks_every_row_once(api):
    with clock_kept(api) as clock:
        customer = make_customer(api)
        tied = bulk_addresses(api, customer, 3)
        clock.advance(minutes=1)
        newer = bulk_addresses(api, customer, 2)
        pages = _walk(api, {"sort_by": "updated_at-asc", "limit": 2}, limit=2)
    assert sum((_page_ids(p) for p in pages), []) == tied + newer


def test_cursor_carries_include_of_the_first_request(api):
    customer = make_customer(api)
    bulk_addresses(api, customer, 3)
    first = api.get("/addresses", params={"limit": 2, "include": "customer"}).json()
    assert all(row["include"]["customer"]["id"] == customer.id for row in first["addresses"])
    second = api.get("/addresses", params={"cursor": first["next_cursor"], "limit": 2}).json()
    assert [row["include"]["customer"]["id"] for row in second["addresses"]] == [customer.id]


def test_cursor_without_limit_uses_the_default_limit(api):
    made = bulk_addresses(api, make_customer(api), 3)
    first = api.get("/addresses", params={"limit": 1}).json()
    rest = api.get("/addresses", params={"cursor": first["next_cursor"]}).json()
    assert _page_ids(rest) == made[::-1][1:]
    assert rest["next_cursor"] is None


def test_page_info_is_accepted_as_an_alias_of_cursor(api):
    made = sorted(bulk_addresses(api, make_customer(api), 3), reverse=True)
    first = api.get("/addresses", params={"limit": 2}).json()
    response = api.get("/addresses", params={"page_info": first["next_cursor"], "limit": 2})
    assert ids(response) == made[2:]


@pytest.mark.parametrize("extra", [{"customer_id": "1"}, {"sort_by": "id-asc"}, {"ids": "1"}, {"page": "2"},
                                   {"include": "customer"}, {"updated_at_min": "2026-01-01"}])
def test_cursor_with_another_parameter_than_limit_answers_422(api, extra):
    bulk_addresses(api, make_customer(api), 3)
    cursor = api.get("/addresses", params={"limit": 1}).json()["next_cursor"]
    response = api.get("/addresses", params={"cursor": cursor, **extra})
    assert set(errors_of(response)) == set(extra)


@pytest.mark.parametrize("cursor", ["garbage", "eyJ4IjoxfQ", "!!!", base64.urlsafe_b64encode(b"[1,2]").decode()])
def test_cursor_that_does_not_decode_answers_422_invalid_value(api, cursor):
    response = api.get("/addresses", params={"cursor": cursor})
    assert response.status_code == 422
    assert response.json() == {"errors": {"cursor": ["Invalid value"]}}


def test_cursor_made_for_another_resource_answers_422_invalid_value(api):
    make_customer(api), make_customer(api)
    cursor = api.get("/customers", params={"limit": 1}).json()["next_cursor"]
    assert cursor
    response = api.get("/addresses", params={"cursor": cursor})
    assert response.json() == {"errors": {"cursor": ["Invalid value"]}}
    assert response.status_code == 422


def test_cursor_is_opaque_text_safe_in_a_url(api):
    bulk_addresses(api, make_customer(api), 2)
    cursor = api.get("/addresses", params={"limit": 1}).json()["next_cursor"]
    assert isinstance(cursor, str) and cursor
    assert all(ch.isalnum() or ch in "-_" for ch in cursor)


def test_cursor_does_not_reach_another_store(api):
    other = api.other_store()
    bulk_addresses(other, make_customer(other), 3)
    cursor = other.get("/addresses", params={"limit": 1}).json()["next_cursor"]
    mine = bulk_addresses(api, make_customer(api), 1)
    response = api.get("/addresses", params={"cursor": cursor})
    assert response.status_code in (200, 422)
    if response.status_code == 200:
        assert set(_page_ids(response.json())) <= set(mine)


def test_2021_11_page_number_request_carries_a_previous_cursor(api):
    made = sorted(bulk_addresses(api, make_customer(api), 5), reverse=True)
    second = api.get("/addresses", params={"limit": 2, "page": 2}).json()
    assert _page_ids(second) == made[2:4]
    back = api.get("/addresses", params={"cursor": second["previous_cursor"], "limit": 2}).json()
    assert _page_ids(back) == made[0:2]


# --- Link header (2021-01) ------------------------------------------------------------------------

def _follow(api, url):
    parts = urlsplit(url)
    return api.get(f"{parts.path}?{parts.query}", version=V01)


def test_2021_01_link_header_gives_absolute_next_url_with_limit_and_page_info(api):
    made = sorted(bulk_addresses(api, make_customer(api), 3), reverse=True)
    response = api.get("/addresses", version=V01, params={"limit": 2})
    assert ids(response) == made[:2]
    header = response.headers["Link"]
    targets = link_targets(header)
    assert set(targets) == {"next"}
    assert targets["next"].startswith("http://rebill.test/addresses?limit=2&page_info=")
    assert header == f'<{targets["next"]}>; rel="next"'


def test_2021_01_following_next_then_previous_links_walks_the_pages(api):
    made = sorted(bulk_addresses(api, make_customer(api), 5), reverse=True)
    first = api.get("/addresses", version=V01, params={"limit": 2})
    second = _follow(api, link_targets(first.headers["Link"])["next"])
    assert ids(second) == made[2:4]
    targets = link_targets(second.headers["Link"])
    assert set(targets) == {"next", "previous"}
    assert targets["previous"].startswith("http://rebill.test/addresses?limit=2&page_info=")
    third = _follow(api, targets["next"])
    assert ids(third) == made[4:]
    assert set(link_targets(third.headers["Link"])) == {"previous"}
    back = _follow(api, link_targets(third.headers["Link"])["previous"])
    assert ids(back) == made[2:4]
    assert ids(_follow(api, link_targets(back.headers["Link"])["previous"])) == made[0:2]


def test_2021_01_link_header_keeps_the_filters(api):
    wanted, other = make_customer(api), make_customer(api)
    mine = bulk_addresses(api, wanted, 3)
    bulk_addresses(api, other, 3)
    first = api.get("/addresses", version=V01, params={"limit": 2, "customer_id": wanted.id})
    second = _follow(api, link_targets(first.headers["Link"])["next"])
    assert ids(first) + ids(second) == mine[::-1]


def test_2021_01_no_link_header_when_everything_fits_one_page(api):
    bulk_addresses(api, make_customer(api), 2)
    response = api.get("/addresses", version=V01, params={"limit": 2})
    assert len(ids(response)) == 2
    assert "Link" not in response.headers
    assert "Link" not in api.get("/addresses", version=V01).headers


def test_2021_01_link_header_is_built_from_the_requests_own_scheme_and_host(api):
    from starlette.testclient import TestClient
    bulk_addresses(api, make_customer(api), 3)
    client = TestClient(api.client.app, base_url="https://shop.example.com")
    response = client.get("/addresses", params={"limit": 2},
                          headers={"X-Service-Access-Token": api.token, "X-Service-Version": V01})
    assert response.status_code == 200, response.text
    url = link_targets(response.headers["Link"])["next"]
    assert url.startswith("https://shop.example.com/addresses?limit=2&page_info=")


def test_2021_01_customer_addresses_link_points_at_the_customer_path(api):
    customer = make_customer(api)
    made = sorted(bulk_addresses(api, customer, 3), reverse=True)
    bulk_addresses(api, make_customer(api), 2)
    first = api.get(f"/customers/{customer.id}/addresses", version=V01, params={"limit": 2})
    url = link_targets(first.headers["Link"])["next"]
    assert url.startswith(f"http://rebill.test/customers/{customer.id}/addresses?limit=2&page_info=")
    assert ids(_follow(api, url)) == made[2:]


def test_2021_01_cursor_with_a_filter_beside_it_answers_422(api):
    bulk_addresses(api, make_customer(api), 3)
    url = link_targets(api.get("/addresses", version=V01, params={"limit": 1}).headers["Link"])["next"]
    page_info = url.split("page_info=", 1)[1]
    response = api.get("/addresses", version=V01, params={"page_info": page_info, "customer_id": 1})
    assert set(errors_of(response)) == {"customer_id"}


# --- include --------------------------------------------------------------------------------------

def test_include_customer_discount_and_payment_methods_embeds_them_under_include(api):
    customer = make_customer(api)
    payment_method = make_payment_method(api, customer)
    discount = make_discount(api, code="INC")
    address = make_address(api, customer, payment_method_id=payment_method, discounts=[{"id": discount}])
    plain = make_address(api, customer)
    response = api.get("/addresses", params={"include": "customer,discount,payment_methods"})
    rows = {row["id"]: row for row in response.json()["addresses"]}
    customer_view = api.get(f"/customers/{customer.id}").json()["customer"]
    included = rows[address.id]["include"]
    assert set(included) == {"customer", "discount", "payment_methods"}
    assert included["customer"] == customer_view
    assert (included["discount"]["id"], included["discount"]["code"]) == (discount, "INC")
    assert [pm["id"] for pm in included["payment_methods"]] == [payment_method]
    assert included["payment_methods"][0]["customer_id"] == customer.id
    assert rows[plain.id]["include"] == {"customer": customer_view, "discount": None, "payment_methods": []}


def test_include_on_get_of_one_address(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    body = api.get(f"/addresses/{address.id}", params={"include": "customer"}).json()["address"]
    assert body["include"] == {"customer": api.get(f"/customers/{customer.id}").json()["customer"]}


def test_without_include_no_include_key_is_rendered(vapi):
    address = make_address(vapi)
    assert "include" not in vapi.get(f"/addresses/{address.id}").json()["address"]
    assert "include" not in vapi.get("/addresses").json()["addresses"][0]


def test_2021_01_include_customer_embeds_the_2021_01_customer(api):
    customer = make_customer(api)
    address = make_address(api, customer)
    body = api.get(f"/addresses/{address.id}", version=V01, params={"include": "customer"}).json()["address"]
    assert body["include"]["customer"] == api.get(f"/customers/{customer.id}", version=V01).json()["customer"]


@pytest.mark.parametrize("version", [V01, V11])
def test_include_subscriptions_embeds_the_address_subscriptions(api, version):
    make_address(api)
    response = api.get("/addresses", params={"include": "subscriptions"}, version=version)
    assert response.status_code == 200
    assert response.json()["addresses"][0]["include"] == {"subscriptions": []}


@pytest.mark.parametrize("value", ["orders", "customer,bogus", "metafields"])
def test_include_of_an_unknown_value_answers_422(vapi, value):
    make_address(vapi)
    assert set(errors_of(vapi.get("/addresses", params={"include": value}))) == {"include"}


def test_include_on_get_of_one_unknown_value_answers_422(api):
    address = make_address(api)
    assert set(errors_of(api.get(f"/addresses/{address.id}", params={"include": "orders"}))) == {"include"}


def test_include_on_a_list_does_not_issue_one_query_per_row(api):
    def queries_for_page(n):
        other = api.other_store()
        who = make_customer(other)
        pm = make_payment_method(other, who)
        bulk_addresses(other, who, n, payment_method_id=pm, discounts=[{"id": make_discount(other)}])
        statements = []

        def record(conn, cursor, statement, *args):
            statements.append(statement)
        assert api.db.async_reads is not None or api.db.dialect == "sqlite"  # made now, to be listened to
        for engine in api.db.engines():
            event.listen(engine, "before_cursor_execute", record)
        try:
            response = other.get("/addresses", params={"include": "customer,discount,payment_methods"})
        finally:
            for engine in api.db.engines():
                event.remove(engine, "before_cursor_execute", record)
        assert len(response.json()["addresses"]) == n
        return len(statements)

    assert queries_for_page(2) == queries_for_page(12)


# --- count (2021-01) ------------------------------------------------------------------------------

def test_count_counts_the_stores_addresses(api):
    bulk_addresses(api, make_customer(api), 3)
    make_address(api.other_store())
    response = api.get("/addresses/count", version=V01)
    assert (response.status_code, response.json()) == (200, {"count": 3})


def test_count_honours_created_and_updated_windows(api):
    with clock_kept(api) as clock:
        (a, b, c), t = _three_at_three_times(api, clock)

        def count(**params):
            response = api.get("/addresses/count", version=V01, params=params)
            assert response.status_code == 200, response.text
            return response.json()["count"]

        assert count(created_at_min=fmt11(t[1])) == 2
        assert count(created_at_max=fmt11(t[0])) == 1
        assert count(created_at_min=fmt11(t[1]), created_at_max=fmt11(t[1])) == 1
        assert count(updated_at_min=fmt11(t[3])) == 1
        assert count(updated_at_max=fmt11(t[2])) == 2


def test_count_honours_discount_id_and_discount_code(api):
    alpha, beta = make_discount(api, code="ALPHA"), make_discount(api, code="BETA")
    for _ in range(2):
        make_address(api, discounts=[{"id": alpha}])
    make_address(api, discounts=[{"id": beta}])
    make_address(api)
    count = lambda **p: api.get("/addresses/count", version=V01, params=p).json()["count"]  # noqa: E731
    assert count(discount_id=alpha) == 2
    assert count(discount_id=beta) == 1
    assert count(discount_code="ALPHA") == 2
    assert count(discount_code="NONE") == 0
    assert count() == 4


def test_count_with_a_bad_filter_value_answers_422(api):
    response = api.get("/addresses/count", version=V01, params={"created_at_min": "nope"})
    assert set(errors_of(response)) == {"created_at_min"}
