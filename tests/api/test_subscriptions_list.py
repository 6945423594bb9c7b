"""Listing and counting subscriptions (decisions §3, §5.16; spec 01/02 Sorting and Including):
every filter of each version, sorting, cursors, include, and the 2021-01 count."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.api.test_subscriptions import V01, V11, create_sub, errors_of
from tests.builders import make_address, make_customer, make_subscription

CANCEL = {"cancellation_reason": "x"}


def ids_of(response: Any, plural: str = "subscriptions") -> list[int]:
    assert response.status_code == 200, response.text
    return [record["id"] for record in response.json()[plural]]


def listed(api: Any, **params: Any) -> list[int]:
    return ids_of(api.get("/subscriptions", params=params))


def counted(api: Any, **params: Any) -> int:
    response = api.get("/subscriptions/count", params=params, version=V01)
    assert response.status_code == 200, response.text
    return response.json()["count"]


@pytest.fixture
def world(api):
    """Two customers: the first with two addresses (s1 on a1, s2 on a2), the second with a
    cancelled s3 on a3. Each subscription names its own product and variant."""
    first, second = make_customer(api), make_customer(api)
    a1, a2, a3 = make_address(api, first), make_address(api, first), make_address(api, second)
    s1 = make_subscription(api, a1, external_product_id="501", external_variant_id="601")
    s2 = make_subscription(api, a2, external_product_id="502", external_variant_id="602")
    s3 = make_subscription(api, a3, external_product_id="503", external_variant_id="603")
    assert api.post(f"/subscriptions/{s3.id}/cancel", json=CANCEL).status_code == 200
    return {"customers": (first, second), "addresses": (a1, a2, a3), "subs": (s1.id, s2.id, s3.id)}


# Shape -----------------------------------------------------------------------------------------

def test_list_in_2021_11_carries_both_cursors_and_every_status_by_default(api, world):
    body = api.get("/subscriptions").json()
    assert set(body) == {"subscriptions", "next_cursor", "previous_cursor"}
    assert [s["id"] for s in body["subscriptions"]] == sorted(world["subs"], reverse=True)
    assert body["next_cursor"] is None and body["previous_cursor"] is None


def test_list_in_2021_01_carries_only_the_records(api, world):
    response = api.get("/subscriptions", version=V01)
    assert set(response.json()) == {"subscriptions"}
    assert "link" not in response.headers


def test_listed_records_are_the_same_as_retrieved_ones(vapi, world):
    for record in vapi.get("/subscriptions").json()["subscriptions"]:
        assert vapi.get(f"/subscriptions/{record['id']}").json() == {"subscription": record}


def test_list_shows_only_the_callers_store_and_no_one_time_items(vapi, world):
    from tests.builders import make_onetime
    make_subscription(vapi.other_store())
    make_onetime(vapi, world["addresses"][0])
    assert sorted(listed(vapi)) == sorted(world["subs"])


# Filters -----------------------------------------------------------------------------------------

def test_address_id_and_address_ids_filters(vapi, world):
    a1, a2, a3 = world["addresses"]
    s1, s2, s3 = world["subs"]
    assert listed(vapi, address_id=a2.id) == [s2]
    assert listed(vapi, address_ids=f"{a1.id},{a3.id}") == [s3, s1]


def test_customer_id_filter(vapi, world):
    first, second = world["customers"]
    s1, s2, s3 = world["subs"]
    assert listed(vapi, customer_id=first.id) == [s2, s1]
    assert listed(vapi, customer_id=second.id) == [s3]


def test_ids_filter(vapi, world):
    s1, s2, s3 = world["subs"]
    assert listed(vapi, ids=f"{s1},{s3}") == [s3, s1]


def test_status_filter_in_2021_11_is_lower_case(api, world):
    s1, s2, s3 = world["subs"]
    assert listed(api, status="active") == [s2, s1]
    assert listed(api, status="cancelled") == [s3]
    assert listed(api, status="expired") == []
    assert errors_of(api.get("/subscriptions", params={"status": "ACTIVE"})) == {
        "status": ["Invalid value: ACTIVE. Must be one of active, cancelled, expired"]}


def test_status_filter_in_2021_01_takes_upper_case(api, world):
    api.version = V01
    s1, s2, s3 = world["subs"]
    assert listed(api, status="ACTIVE") == [s2, s1]
    assert listed(api, status="CANCELLED") == [s3]
    assert set(errors_of(api.get("/subscriptions", params={"status": "PAUSED"}))) == {"status"}


def test_external_variant_id_filter_in_2021_11(api, world):
    assert listed(api, external_variant_id="602") == [world["subs"][1]]


def test_platform_variant_id_and_product_id_filters_in_2021_01(api, world):
    api.version = V01
    s1, s2, s3 = world["subs"]
    assert listed(api, platform_variant_id="603") == [s3]
    assert listed(api, product_id="501") == [s1]
    assert listed(api, product_id="501", platform_variant_id="602") == []


def test_created_and_updated_windows(vapi):
    address = make_address(vapi)
    first_at = vapi.clock.now()
    early = make_subscription(vapi, address).id
    second_at = vapi.clock.advance(seconds=10)
    late = make_subscription(vapi, address).id
    third_at = vapi.clock.advance(seconds=10)
    assert vapi.put(f"/subscriptions/{early}", json={"quantity": 3}).status_code == 200
    assert listed(vapi, created_at_min=second_at.isoformat()) == [late]
    assert listed(vapi, created_at_max=first_at.isoformat()) == [early]
    assert listed(vapi, updated_at_min=third_at.isoformat()) == [early]
    assert listed(vapi, updated_at_max=second_at.isoformat()) == [late]
    assert listed(vapi, created_at_min=first_at.isoformat(), created_at_max=second_at.isoformat()) == [late, early]


@pytest.mark.parametrize("param,value", [("address_id", "x"), ("address_ids", "1,x"), ("customer_id", "x"),
                                         ("ids", "1,two"), ("created_at_min", "soon"), ("updated_at_max", "soon")])
def test_a_bad_filter_value_answers_422_naming_it(vapi, param, value):
    assert set(errors_of(vapi.get("/subscriptions", params={param: value}))) == {param}


# Sorting -------------------------------------------------------------------------------------------

@pytest.fixture
def timed(vapi):
    """Three subscriptions created 10 s apart, then updated in another order (b, c, a)."""
    address = make_address(vapi)
    a = make_subscription(vapi, address).id
    vapi.clock.advance(seconds=10)
    b = make_subscription(vapi, address).id
    vapi.clock.advance(seconds=10)
    c = make_subscription(vapi, address).id
    for ident in (b, c, a):
        vapi.clock.advance(seconds=10)
        assert vapi.put(f"/subscriptions/{ident}", json={"quantity": 2}).status_code == 200
    return a, b, c


def test_sort_by_id_created_at_and_updated_at_both_ways(vapi, timed):
    a, b, c = timed
    assert listed(vapi) == [c, b, a]
    assert listed(vapi, sort_by="id-asc") == [a, b, c]
    assert listed(vapi, sort_by="id-desc") == [c, b, a]
    assert listed(vapi, sort_by="created_at-asc") == [a, b, c]
    assert listed(vapi, sort_by="created_at-desc") == [c, b, a]
    assert listed(vapi, sort_by="updated_at-asc") == [b, c, a]
    assert listed(vapi, sort_by="updated_at-desc") == [a, c, b]


def test_a_sort_on_another_field_answers_422(vapi):
    assert set(errors_of(vapi.get("/subscriptions", params={"sort_by": "price-asc"}))) == {"sort_by"}


@pytest.mark.parametrize("sort,order", [("id-asc", "abc"), ("updated_at-desc", "acb"), ("created_at-asc", "abc"),
                                        ("updated_at-asc", "bca")])
def test_cursors_walk_forward_and_back_in_2021_11(api, sort, order):
    api.version = V11
    address = make_address(api)
    made = {}
    for name in "abc":
        made[name] = make_subscription(api, address).id
        api.clock.advance(seconds=10)
    for name in "bca":
        api.clock.advance(seconds=10)
        api.put(f"/subscriptions/{made[name]}", json={"quantity": 2})
    expected = [made[name] for name in order]
    first = api.get("/subscriptions", params={"limit": 2, "sort_by": sort}).json()
    assert [s["id"] for s in first["subscriptions"]] == expected[:2]
    second = api.get("/subscriptions", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [s["id"] for s in second["subscriptions"]] == expected[2:]
    assert second["next_cursor"] is None
    back = api.get("/subscriptions", params={"limit": 2, "cursor": second["previous_cursor"]}).json()
    assert [s["id"] for s in back["subscriptions"]] == expected[:2]


def test_a_cursor_keeps_the_filters_and_refuses_other_parameters(api, world):
    s1, s2, s3 = world["subs"]
    first = api.get("/subscriptions", params={"limit": 1, "customer_id": world["customers"][0].id}).json()
    assert [s["id"] for s in first["subscriptions"]] == [s2]
    second = api.get("/subscriptions", params={"limit": 1, "cursor": first["next_cursor"]}).json()
    assert [s["id"] for s in second["subscriptions"]] == [s1] and second["next_cursor"] is None
    mixed = api.get("/subscriptions", params={"cursor": first["next_cursor"], "status": "active"})
    assert set(errors_of(mixed)) == {"status"}
    assert api.get("/subscriptions", params={"cursor": "garbage"}).json() == {"errors": {"cursor": ["Invalid value"]}}


def test_a_cursor_of_another_resource_answers_422(api, world):
    cursor = api.get("/addresses", params={"limit": 1}).json()["next_cursor"]
    assert cursor
    assert api.get("/subscriptions", params={"cursor": cursor}).json() == {"errors": {"cursor": ["Invalid value"]}}


def test_2021_01_pages_through_a_link_header(api, world):
    api.version = V01
    s1, s2, s3 = world["subs"]
    first = api.get("/subscriptions", params={"limit": 2})
    assert ids_of(first) == [s3, s2]
    url = first.headers["link"].split(";")[0].strip("<>")
    assert url.startswith("http://rebill.test/subscriptions?")
    query = parse_qs(urlsplit(url).query)
    second = api.get("/subscriptions", params={"limit": query["limit"][0], "page_info": query["page_info"][0]})
    assert ids_of(second) == [s1]


# Include -------------------------------------------------------------------------------------------

def test_include_address_and_customer_embeds_them_in_the_callers_shape(vapi, world):
    # NOTE: spec 02 lists `address` and `metafields` for 2021-01; spec 01 adds `customer`.
    include = "address,customer" if vapi.version == V11 else "address"
    records = vapi.get("/subscriptions", params={"include": include}).json()["subscriptions"]
    by_id = {r["id"]: r for r in records}
    s1 = by_id[world["subs"][0]]
    assert s1["include"]["address"] == vapi.get(f"/addresses/{world['addresses'][0].id}").json()["address"]
    if vapi.version == V11:
        assert s1["include"]["customer"] == vapi.get(f"/customers/{world['customers'][0].id}").json()["customer"]
        assert "subscriptions_active_count" in s1["include"]["customer"]


def test_include_address_on_a_single_subscription(vapi, world):
    record = vapi.get(f"/subscriptions/{world['subs'][2]}", params={"include": "address"}).json()["subscription"]
    assert record["include"]["address"]["id"] == world["addresses"][2].id


def test_without_include_records_carry_no_include_key(vapi, world):
    assert all("include" not in r for r in vapi.get("/subscriptions").json()["subscriptions"])


@pytest.mark.parametrize("value,version", [("charge_activities", V11), ("address,charge_activities", V11),
                                           ("bundle_selections,charge_activities", V11)])
def test_include_values_not_available_yet_answer_422(api, world, value, version):
    response = api.get("/subscriptions", params={"include": value}, version=version)
    missing = value.split(",")[-1]
    assert errors_of(response) == {"include": [f"{missing} is not available yet"]}


@pytest.mark.parametrize("value,version", [("bogus", V11), ("customer", V01), ("charges", V11),
                                           ("bundle_selections", V01)])
def test_unknown_include_values_answer_422(api, world, value, version):
    errors = errors_of(api.get("/subscriptions", params={"include": value}, version=version))
    assert list(errors) == ["include"] and errors["include"][0].startswith(f"Invalid value: {value}")


# Count (2021-01) -------------------------------------------------------------------------------------

def test_count_counts_the_callers_subscriptions(api, world):
    make_subscription(api.other_store())
    assert counted(api) == 3


def test_count_takes_every_list_filter(api, world):
    first, second = world["customers"]
    a1, a2, a3 = world["addresses"]
    s1, s2, s3 = world["subs"]
    assert counted(api, status="ACTIVE") == 2
    assert counted(api, status="CANCELLED") == 1
    assert counted(api, customer_id=first.id) == 2
    assert counted(api, address_id=a3.id) == 1
    assert counted(api, address_ids=f"{a1.id},{a2.id}") == 2
    assert counted(api, ids=f"{s1},{s3}") == 2
    assert counted(api, platform_variant_id="602") == 1
    assert counted(api, product_id="503") == 1
    now = api.clock.now()
    assert counted(api, created_at_min=(now + timedelta(seconds=1)).isoformat()) == 0
    assert counted(api, created_at_max=now.isoformat(), updated_at_min=now.isoformat()) == 3
    assert counted(api, updated_at_max=(now - timedelta(seconds=1)).isoformat()) == 0


def test_count_refuses_a_bad_filter(api):
    response = api.get("/subscriptions/count", params={"created_at_min": "soon"}, version=V01)
    assert errors_of(response) == {
        "created_at_min": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"]}


def test_count_answers_501_in_2021_11(api):
    assert api.get("/subscriptions/count", version=V11).status_code == 501


def test_a_subscription_created_through_2021_01_is_listed(api):
    sub = create_sub(api, version=V01)
    api.version = V01
    assert listed(api) == [sub["id"]]
