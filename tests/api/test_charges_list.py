"""Listing and counting charges: every filter of spec 02 and its 2021-11 counterpart, sorting,
cursors, include and the 2021-01 count (spec 01 Pagination, Sorting, Including; spec 02
Charges; decisions §3)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from tests.api.test_charges import V01, V11, days, errors_of, only, set_charge, stored, weekly
from tests.api.test_charges_totals import with_discount
from tests.builders import make_address, make_customer, make_payment_method


@dataclass
class World:
    """Charges of one store, ids in this order: a (+5 days) and b (+9, skipped) of one address,
    e (+16, b's subscription queued again after the skip), then an hour later c (+7, another
    customer's address, discounted) and d (+3, processed, platform order 5001)."""

    api: Any
    customer: Any
    other_customer: Any
    home: Any
    away: Any
    subs: dict[str, Any]
    ids: dict[str, int]
    discount_id: int
    discount_code: str
    first_hour: Any
    second_hour: Any


@pytest.fixture
def world(api: Any) -> Iterator[World]:
    """The clock moves an hour while the world is built; it is put back afterwards, so the
    shared clock never drifts across midnight from one test to the next."""
    before = api.clock.now()
    yield _world(api)
    api.clock.set(before)


def _world(api: Any) -> World:
    customer, other_customer = make_customer(api), make_customer(api)
    home, away = make_address(api, customer), make_address(api, other_customer)
    first_hour = api.clock.now()
    subs = {"a": weekly(api, home, on=5), "b": weekly(api, home, on=9)}
    assert len(stored(api, home.id)) == 2
    b = [c for c in stored(api, home.id) if c.scheduled_at == days(api, 9)][0]
    assert api.post(f"/charges/{b.id}/skip", json={}).status_code == 200
    api.clock.advance(hours=1)
    second_hour = api.clock.now()
    subs["c"] = weekly(api, away, on=7)
    discount_id = with_discount(api, away, "percentage", "10")
    code = api.get(f"/charges/{only(api, away.id).id}").json()["charge"]["discounts"][0]["code"]
    d_address = make_address(api, other_customer, address1="7 Old Rd")
    subs["d"] = weekly(api, d_address, on=3)
    d = only(api, d_address.id)
    set_charge(api, d.id, status="success", processed_at=second_hour, external_order_id="5001")
    a, e = stored(api, home.id, "queued")
    ids = {"a": a.id, "b": b.id, "e": e.id, "c": only(api, away.id).id, "d": d.id}
    assert sorted(ids.values()) == list(ids.values())
    return World(api, customer, other_customer, home, away, subs, ids, discount_id, code, first_hour, second_hour)


def listed(api: Any, params: dict[str, Any], version: str = V11) -> list[int]:
    response = api.get("/charges", params=params, version=version)
    assert response.status_code == 200, response.text
    return [c["id"] for c in response.json()["charges"]]


def counted(api: Any, params: dict[str, Any]) -> int:
    response = api.get("/charges/count", params=params, version=V01)
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["count"] and type(body["count"]) is int
    return int(body["count"])


def names(world: World, ids: list[int]) -> list[str]:
    by_id = {v: k for k, v in world.ids.items()}
    return [by_id.get(i, f"?{i}") for i in ids]


def iso(moment: Any) -> str:
    return moment.replace(microsecond=0).isoformat()


# (2021-11 params, 2021-01 params, expected names in id order)
FILTERS = [
    ({}, {}, "abecd"),
    ({"status": "queued"}, {"status": "QUEUED"}, "aec"),
    ({"status": "skipped,success"}, {"status": "SKIPPED,SUCCESS"}, "bd"),
    ({"status": "queued"}, {"status": "queued"}, "aec"),
    ({"scheduled_at": "+9"}, {"date": "+9"}, "b"),
    ({"scheduled_at_min": "+5", "scheduled_at_max": "+7"}, {"date_min": "+5", "date_max": "+7"}, "ac"),
    ({"scheduled_at_min": "+6"}, {"date_min": "+6"}, "bec"),
    ({"scheduled_at_max": "+5"}, {"date_max": "+5"}, "ad"),
    ({"created_at_min": "second"}, {"created_at_min": "second"}, "cd"),
    ({"created_at_max": "first"}, {"created_at_max": "first"}, "abe"),
    ({"updated_at_min": "second"}, {"updated_at_min": "second"}, "cd"),
    ({"updated_at_max": "first"}, {"updated_at_max": "first"}, "abe"),
    ({"processed_at_min": "first"}, {"processed_at_min": "first"}, "d"),
    ({"processed_at_max": "second"}, {"processed_at_max": "second"}, "d"),
    ({"address_id": "home"}, {"address_id": "home"}, "abe"),
    ({"customer_id": "other"}, {"customer_id": "other"}, "cd"),
    ({"discount_id": "discount"}, {"discount_id": "discount"}, "c"),
    ({"discount_code": "code"}, {"discount_code": "code"}, "c"),
    ({"purchase_item_id": "sub_c"}, {"subscription_id": "sub_c"}, "c"),
    ({"purchase_item_id": "sub_b"}, {"subscription_id": "sub_b"}, "be"),
    ({"purchase_item_ids": "sub_a,sub_d"}, None, "ad"),
    ({"external_order_id": "5001"}, {"platform_order_id": "5001"}, "d"),
    ({"ids": "ids_bc"}, {"ids": "ids_bc"}, "bc"),
    ({"address_id": "home", "status": "queued"}, {"address_id": "home", "status": "QUEUED"}, "ae"),
]


def resolve(world: World, params: dict[str, str]) -> dict[str, str]:
    api = world.api
    values = {"home": str(world.home.id), "other": str(world.other_customer.id),
              "discount": str(world.discount_id), "code": world.discount_code,
              "first": iso(world.first_hour), "second": iso(world.second_hour),
              "ids_bc": f"{world.ids['b']},{world.ids['c']}",
              "sub_a,sub_d": f"{world.subs['a'].id},{world.subs['d'].id}", "sub_c": str(world.subs["c"].id),
              "sub_b": str(world.subs["b"].id)}
    out = {}
    for key, value in params.items():
        if value.startswith("+"):
            out[key] = days(api, int(value[1:])).isoformat()
        else:
            out[key] = values.get(value, value)
    return out


@pytest.mark.parametrize("head, old, expected", FILTERS, ids=[str(f[0] or "none") for f in FILTERS])
def test_every_filter_lists_and_counts_what_it_names(world, head, old, expected):
    api = world.api
    mine = set(world.ids.values())
    got = [i for i in listed(api, resolve(world, head), V11) if i in mine]
    assert names(world, got) == list(expected)
    if old is not None:
        got01 = [i for i in listed(api, resolve(world, old), V01) if i in mine]
        assert names(world, got01) == list(expected)
        assert counted(api, resolve(world, old)) == len(expected)


def test_lists_of_one_store_never_show_another_stores_charges(world):
    other = world.api.other_store()
    weekly(other, make_address(other))
    assert sorted(listed(world.api, {})) == sorted(world.ids.values())
    assert counted(world.api, {}) == 5


def test_a_date_filter_takes_a_datetime_and_uses_its_date(world):
    when = f"{days(world.api, 9).isoformat()}T15:30:00Z"
    assert names(world, listed(world.api, {"scheduled_at": when})) == ["b"]


def test_processed_charges_older_than_90_days_are_left_out_of_lists_and_counts(world):
    api = world.api
    set_charge(api, world.ids["d"], processed_at=api.clock.now() - timedelta(days=91))
    assert names(world, listed(api, {})) == ["a", "b", "e", "c"]
    assert counted(api, {}) == 4


@pytest.mark.parametrize("version, params, errors", [
    (V11, {"status": "bogus"}, {"status": ["Invalid value: bogus. Must be one or more of success, error, queued, "
                                           "skipped, refunded, partially_refunded, pending_manual_payment, pending"]}),
    (V11, {"status": "QUEUED"}, None),
    (V11, {"scheduled_at": "soon"}, {"scheduled_at": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"]}),
    (V01, {"date_min": "soon"}, {"date_min": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"]}),
    (V11, {"created_at_min": "2021-13-01"},
     {"created_at_min": ["Invalid date: 2021-13-01. Must be a valid ISO-8601 datetime string"]}),
    (V11, {"ids": "1,x"}, {"ids": ["Invalid ids: 1,x. Must be comma-separated integers"]}),
    (V11, {"purchase_item_ids": "x"}, {"purchase_item_ids": ["Invalid ids: x. Must be comma-separated integers"]}),
    (V11, {"address_id": "x"}, {"address_id": ["Invalid integer: x"]}),
    (V01, {"subscription_id": "x"}, {"subscription_id": ["Invalid integer: x"]}),
    (V01, {"customer_id": "1.5"}, {"customer_id": ["Invalid integer: 1.5"]}),
    (V11, {"discount_id": "abc"}, {"discount_id": ["Invalid integer: abc"]}),
    (V11, {"limit": "0"}, {"limit": ["must be an integer from 1 to 250"]}),
    (V11, {"limit": "251"}, {"limit": ["must be an integer from 1 to 250"]}),
])
def test_bad_filters_answer_422_naming_the_parameter(api, version, params, errors):
    response = api.get("/charges", params=params, version=version)
    if errors is None:
        assert response.status_code == 422, response.text  # 2021-11 statuses are lower case
        return
    assert errors_of(response) == errors


@pytest.mark.parametrize("params", [{"status": "bogus"}, {"date": "soon"}, {"ids": "x"}, {"subscription_id": "x"}])
def test_count_checks_its_filters_like_the_list(api, params):
    list_errors = errors_of(api.get("/charges", params=params, version=V01))
    assert errors_of(api.get("/charges/count", params=params, version=V01)) == list_errors


def test_count_needs_read_orders(api):
    response = api.get("/charges/count", version=V01, token=api.token_with("read_subscriptions"))
    assert (response.status_code, response.json()) == (
        403, {"errors": "This token lacks the scope this endpoint needs: read_orders"})


# Sorting and paging -------------------------------------------------------------------------

def test_the_default_order_is_id_ascending(world):
    assert names(world, listed(world.api, {})) == ["a", "b", "e", "c", "d"]
    assert names(world, listed(world.api, {}, V01)) == ["a", "b", "e", "c", "d"]


@pytest.mark.parametrize("sort, expected", [
    ("id-asc", "abecd"), ("id-desc", "dceba"),
    ("created_at-asc", "abecd"), ("created_at-desc", "dceba"),
    ("updated_at-asc", "abecd"), ("updated_at-desc", "dceba"),
])
def test_sorting_by_id_and_datetimes(world, vapi, sort, expected):
    assert "".join(names(world, listed(world.api, {"sort_by": sort}, vapi.version))) == expected


@pytest.mark.parametrize("sort, expected", [("scheduled_at-asc", "dacbe"), ("scheduled_at-desc", "ebcad")])
def test_sorting_by_scheduled_at_in_2021_11(world, sort, expected):
    assert "".join(names(world, listed(world.api, {"sort_by": sort}))) == expected


@pytest.mark.parametrize("sort, expected", [("charge_date-asc", "dacbe"), ("charge_date-desc", "ebcad")])
def test_sorting_by_charge_date_in_2021_01(world, sort, expected):
    assert "".join(names(world, listed(world.api, {"sort_by": sort}, V01))) == expected


@pytest.mark.parametrize("version, sort, allowed", [
    (V11, "charge_date-asc", "id-asc, id-desc, created_at-asc, created_at-desc, updated_at-asc, updated_at-desc, "
                             "scheduled_at-asc, scheduled_at-desc"),
    (V01, "scheduled_at-asc", "id-asc, id-desc, created_at-asc, created_at-desc, updated_at-asc, updated_at-desc, "
                              "charge_date-asc, charge_date-desc"),
    (V11, "total_price-asc", None),
])
def test_each_version_sorts_by_its_own_names_only(api, version, sort, allowed):
    errors = errors_of(api.get("/charges", params={"sort_by": sort}, version=version))
    assert list(errors) == ["sort_by"]
    if allowed is not None:
        assert errors == {"sort_by": [f"Invalid value: {sort}. Must be one of {allowed}"]}


def _walk(api: Any, params: dict[str, Any]) -> list[int]:
    seen: list[int] = []
    response = api.get("/charges", params={**params, "limit": 1}, version=V11)
    while True:
        body = response.json()
        assert response.status_code == 200, response.text
        seen += [c["id"] for c in body["charges"]]
        if body["next_cursor"] is None:
            return seen
        response = api.get("/charges", params={"cursor": body["next_cursor"], "limit": 1}, version=V11)


@pytest.mark.parametrize("sort", ["id-asc", "id-desc", "updated_at-desc", "created_at-asc"])
def test_cursors_walk_every_page_once_in_order(world, sort):
    assert _walk(world.api, {"sort_by": sort}) == listed(world.api, {"sort_by": sort})


@pytest.mark.parametrize("sort", ["scheduled_at-asc", "scheduled_at-desc"])
def test_cursors_walk_by_scheduled_at(world, sort):
    assert _walk(world.api, {"sort_by": sort}) == listed(world.api, {"sort_by": sort})


def test_a_cursor_keeps_the_filters_and_previous_goes_back(world):
    api = world.api
    first = api.get("/charges", params={"address_id": world.home.id, "limit": 1}).json()
    assert first["previous_cursor"] is None and names(world, [c["id"] for c in first["charges"]]) == ["a"]
    second = api.get("/charges", params={"cursor": first["next_cursor"], "limit": 1}).json()
    assert names(world, [c["id"] for c in second["charges"]]) == ["b"]
    third = api.get("/charges", params={"cursor": second["next_cursor"], "limit": 1}).json()
    assert names(world, [c["id"] for c in third["charges"]]) == ["e"] and third["next_cursor"] is None
    back = api.get("/charges", params={"cursor": second["previous_cursor"], "limit": 1}).json()
    assert names(world, [c["id"] for c in back["charges"]]) == ["a"]


def test_a_cursor_beside_another_filter_answers_422(world):
    api = world.api
    cursor = api.get("/charges", params={"limit": 1}).json()["next_cursor"]
    assert errors_of(api.get("/charges", params={"cursor": cursor, "status": "queued"})) == {
        "status": ["cannot be combined with cursor; only limit can"]}
    assert errors_of(api.get("/charges", params={"cursor": "garbage"})) == {"cursor": ["Invalid value"]}


def test_2021_01_pages_through_the_link_header(world):
    api = world.api
    response = api.get("/charges", params={"limit": 2}, version=V01)
    assert names(world, [c["id"] for c in response.json()["charges"]]) == ["a", "b"]
    link = response.headers["link"]
    assert link.startswith("<http://rebill.test/charges?") and 'rel="next"' in link
    url = link.split(">")[0][1:]
    following = api.client.get(url, headers={"X-Service-Access-Token": api.token, "X-Service-Version": V01})
    assert names(world, [c["id"] for c in following.json()["charges"]]) == ["e", "c"]
    assert "next_cursor" not in response.json()


@pytest.mark.parametrize("params", [{"created_at_min": "first"}, {"updated_at_min": "first"}, {"ids": "ids_bc"}])
def test_2021_01_charge_lists_filtered_by_created_updated_min_or_ids_carry_no_link(world, params):
    response = world.api.get("/charges", params={**resolve(world, params), "limit": 1}, version=V01)
    assert response.status_code == 200 and len(response.json()["charges"]) == 1
    assert "link" not in response.headers
    other = world.api.get("/charges", params={"created_at_max": iso(world.second_hour), "limit": 1}, version=V01)
    assert 'rel="next"' in other.headers["link"]


# Include ------------------------------------------------------------------------------------

def test_include_customer_and_payment_methods_embeds_them_in_list_and_get(world):
    api = world.api
    method_id = make_payment_method(api, world.customer)
    body = api.get("/charges", params={"include": "customer,payment_methods", "address_id": world.home.id}).json()
    for charge in body["charges"]:
        assert charge["include"]["customer"]["id"] == world.customer.id
        assert charge["include"]["customer"]["email"] == world.customer.email
        assert [m["id"] for m in charge["include"]["payment_methods"]] == [method_id]
    one = api.get(f"/charges/{world.ids['c']}", params={"include": "payment_methods"}).json()["charge"]
    assert one["include"] == {"payment_methods": []}
    assert "include" not in api.get(f"/charges/{world.ids['c']}").json()["charge"]


@pytest.mark.parametrize("version, value", [(V11, "charge_activities")])
def test_include_values_not_built_yet_answer_422(api, version, value):
    for path in ("/charges", "/charges/1"):
        assert errors_of(api.get(path, params={"include": value}, version=version)) == {
            "include": [f"{value} is not available yet"]}


@pytest.mark.parametrize("version, value", [(V11, "addresses"), (V01, "customer")])
def test_include_values_the_spec_does_not_list_answer_422(api, version, value):
    errors = errors_of(api.get("/charges", params={"include": value}, version=version))
    assert list(errors) == ["include"] and errors["include"][0].startswith(f"Invalid value: {value}.")


def test_a_charges_payment_methods_are_the_one_it_was_paid_with_or_will_be(api):
    """docs/api-choices.md, Include: a charge embeds the method its payment was taken with, or
    for a charge not tried yet the one that will pay it (the address's, else the default); found
    by an audit: it listed every method of the customer, those made after the payment too."""
    from tests.builders import charges_of, make_orders
    first = make_orders(api)[0]
    paid_by = api.get(f"/charges/{first.charge_id}").json()["charge"]
    customer_id = paid_by["customer"]["id"]
    [method] = api.get("/payment_methods", params={"customer_id": customer_id}).json()["payment_methods"]
    later = make_payment_method(api, type("C", (), {"id": customer_id})())

    def embedded(charge_id: int) -> list[int]:
        body = api.get(f"/charges/{charge_id}", params={"include": "payment_methods"}).json()["charge"]
        return [m["id"] for m in body["include"]["payment_methods"]]

    assert embedded(first.charge_id) == [method["id"]]  # not the one made afterwards
    [queued] = [c for c in charges_of(api, first.address_id) if c.status == "queued"]
    assert embedded(queued.id) == [method["id"]]  # the default pays it
    assert api.put(f"/addresses/{first.address_id}", json={"payment_method_id": later}).status_code == 200
    assert embedded(queued.id) == [later]  # the address's own method now
    assert embedded(first.charge_id) == [method["id"]]
    # The list embeds the same, page-wide.
    listed = api.get("/charges", params={"include": "payment_methods", "address_id": first.address_id}).json()
    assert {c["id"]: [m["id"] for m in c["include"]["payment_methods"]] for c in listed["charges"]} == {
        first.charge_id: [method["id"]], queued.id: [later]}
