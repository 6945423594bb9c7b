"""Listing and counting orders: every filter in both versions, sorting, cursors across
unprocessed orders, include and the 2021-01 count (spec 01 Pagination, Sorting, Including;
spec 02 Sorting and include; decisions §3; docs/api-choices.md, Orders)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from rebill.api.v2021_01.contract import LISTS as OLD_LISTS
from tests.api.test_orders import V01, V11, set_order
from tests.builders import make_address, make_customer, make_orders, make_payment_method
from tests.conftest import make_api


@dataclass
class World:
    """Orders of one store, in id order: a (customer A's home, paid at T0), p0, p1, p2 (a
    prepaid charge of A's work address paid at T0+1h; p1 and p2 queued 7 and 14 days on), b
    (customer B, paid at T0+2h, platform order 5001)."""

    api: Any
    ids: dict[str, int]
    customers: dict[str, Any]
    addresses: dict[str, Any]
    items: dict[str, int]
    charges: dict[str, int]
    t0: datetime

    def of(self, *names: str) -> list[int]:
        return sorted(self.ids[n] for n in names)


@pytest.fixture(scope="module")
def world(client, database, clock) -> World:
    api = make_api(client, database, clock)
    before = clock.now()
    a_customer, b_customer = make_customer(api), make_customer(api, external_customer_id="cust-b")
    for customer in (a_customer, b_customer):
        make_payment_method(api, customer)
    home, work, away = make_address(api, a_customer), make_address(api, a_customer), make_address(api, b_customer)
    t0 = clock.now()
    a = make_orders(api, home)[0]
    clock.advance(hours=1)
    p = make_orders(api, work, order_interval_unit="day", order_interval_frequency=7, charge_interval_frequency=21)
    clock.advance(hours=1)
    b = make_orders(api, away)[0]
    set_order(api, b.id, external_order_id="5001")
    other = api.other_store()
    make_orders(other)  # another store's order never shows
    clock.set(before)
    ids = {"a": a.id, "p0": p[0].id, "p1": p[1].id, "p2": p[2].id, "b": b.id}
    return World(api, ids, {"A": a_customer, "B": b_customer}, {"home": home, "work": work, "away": away},
                 {name: o.line_items[0]["purchase_item_id"] for name, o in (("a", a), ("p", p[0]), ("b", b))},
                 {"a": a.charge_id, "p": p[0].charge_id, "b": b.charge_id}, t0)


def listed(api: Any, version: str, **params: Any) -> list[int]:
    response = api.get("/orders", params={"limit": 250, **params}, version=version)
    assert response.status_code == 200, response.text
    return [o["id"] for o in response.json()["orders"]]


def errors(api: Any, version: str, path: str = "/orders", **params: Any) -> Any:
    response = api.get(path, params=params, version=version)
    assert response.status_code == 422, response.text
    return response.json()["errors"]


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S")


# Filters ---------------------------------------------------------------------------------------

# (2021-11 name, 2021-01 name, value maker, expected orders)
FILTERS = [
    ("customer_id", "customer_id", lambda w: w.customers["A"].id, ("a", "p0", "p1", "p2")),
    ("address_id", "address_id", lambda w: w.addresses["work"].id, ("p0", "p1", "p2")),
    ("charge_id", "charge_id", lambda w: w.charges["p"], ("p0", "p1", "p2")),
    ("ids", "ids", lambda w: f"{w.ids['a']}, {w.ids['b']}", ("a", "b")),
    ("purchase_item_id", "subscription_id", lambda w: w.items["p"], ("p0", "p1", "p2")),
    ("external_order_id", "platform_order_id", lambda w: "5001", ("b",)),
    ("external_customer_id", "platform_customer_id", lambda w: "cust-b", ("b",)),
    ("processed_at_min", "shipped_date_min", lambda w: iso(w.t0 + timedelta(hours=1)), ("p0", "b")),
    ("processed_at_max", "shipped_date_max", lambda w: iso(w.t0 + timedelta(minutes=30)), ("a",)),
    ("created_at_min", "created_at_min", lambda w: iso(w.t0 + timedelta(hours=1)), ("p0", "p1", "p2", "b")),
    ("created_at_max", "created_at_max", lambda w: iso(w.t0), ("a",)),
    ("updated_at_min", "updated_at_min", lambda w: iso(w.t0 + timedelta(hours=2)), ("b",)),
    ("updated_at_max", "updated_at_max", lambda w: iso(w.t0 + timedelta(hours=1)), ("a", "p0", "p1", "p2")),
    ("scheduled_at_min", "scheduled_at_min", lambda w: str(w.t0.date() + timedelta(days=1)), ("p1", "p2")),
    ("scheduled_at_max", "scheduled_at_max", lambda w: str(w.t0.date() + timedelta(days=7)), ("a", "p0", "p1", "b")),
]


@pytest.mark.parametrize("head_name, old_name, value, expected", FILTERS, ids=[f[0] for f in FILTERS])
@pytest.mark.parametrize("version", [V11, V01])
def test_each_filter_selects_its_orders_in_each_version(world, version, head_name, old_name, value, expected):
    name = head_name if version == V11 else old_name
    assert sorted(listed(world.api, version, **{name: value(world)})) == world.of(*expected)


def test_purchase_item_ids_selects_the_orders_holding_any_of_them(world):
    value = f"{world.items['a']},{world.items['b']}"
    assert sorted(listed(world.api, V11, purchase_item_ids=value)) == world.of("a", "b")


@pytest.mark.parametrize("version, value, expected", [
    (V11, "queued", ("p1", "p2")),
    (V11, "success,queued", ("a", "p0", "p1", "p2", "b")),
    (V11, "cancelled", ()),
    (V01, "QUEUED", ("p1", "p2")),
    (V01, "SUCCESS", ("a", "p0", "b")),
    (V01, "queued", ("p1", "p2")),
])
def test_status_takes_one_or_several_statuses(world, version, value, expected):
    assert sorted(listed(world.api, version, status=value)) == world.of(*expected)


def test_the_other_versions_filter_names_are_ignored(world):
    everything = world.of("a", "p0", "p1", "p2", "b")
    assert sorted(listed(world.api, V11, subscription_id=world.items["a"])) == everything
    assert sorted(listed(world.api, V01, purchase_item_id=world.items["a"])) == everything
    assert sorted(listed(world.api, V01, external_order_id="5001")) == everything


@pytest.mark.parametrize("version", [V11, V01])
@pytest.mark.parametrize("params, expected", [
    ({"ids": "1,x"}, {"ids": ["Invalid ids: 1,x. Must be comma-separated integers"]}),
    ({"customer_id": "abc"}, {"customer_id": ["Invalid integer: abc"]}),
    ({"scheduled_at_min": "soon", "created_at_max": "2026-13-01"},
     {"scheduled_at_min": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"],
      "created_at_max": ["Invalid date: 2026-13-01. Must be a valid ISO-8601 datetime string"]}),
    ({"sort_by": "total_price-asc"}, None),
    ({"limit": "0"}, {"limit": ["must be an integer from 1 to 250"]}),
])
def test_bad_list_parameters_answer_422_naming_each(world, version, params, expected):
    found = errors(world.api, version, **params)
    if expected is None:
        sorts = ("id, updated_at, processed_at, scheduled_at" if version == V11
                 else "id, created_at, shipped_date, shipping_date, updated_at").split(", ")
        allowed = ", ".join(f"{s}-{d}" for s in sorts for d in ("asc", "desc"))
        expected = {"sort_by": [f"Invalid value: total_price-asc. Must be one of {allowed}"]}
    assert found == expected


def test_a_bad_status_names_the_allowed_ones(world):
    assert errors(world.api, V11, status="shipped") == {
        "status": ["Invalid value: shipped. Must be one or more of success, queued, cancelled, error"]}


# Sorting and cursors ---------------------------------------------------------------------------

@pytest.mark.parametrize("version, sort, expected", [
    (V11, None, ("b", "p2", "p1", "p0", "a")),
    (V11, "id-asc", ("a", "p0", "p1", "p2", "b")),
    # Not processed yet sorts after every processed order ascending, first descending.
    (V11, "processed_at-asc", ("a", "p0", "b", "p1", "p2")),
    (V11, "processed_at-desc", ("p2", "p1", "b", "p0", "a")),
    (V11, "scheduled_at-asc", ("a", "p0", "b", "p1", "p2")),
    (V11, "scheduled_at-desc", ("p2", "p1", "b", "p0", "a")),
    (V11, "updated_at-asc", ("a", "p0", "p1", "p2", "b")),
    (V01, None, ("b", "p2", "p1", "p0", "a")),
    (V01, "shipped_date-asc", ("a", "p0", "b", "p1", "p2")),
    (V01, "shipping_date-desc", ("p2", "p1", "b", "p0", "a")),
    (V01, "created_at-desc", ("b", "p2", "p1", "p0", "a")),
    (V01, "updated_at-desc", ("b", "p2", "p1", "p0", "a")),
])
def test_sort_orders(world, version, sort, expected):
    params = {"sort_by": sort} if sort else {}
    assert listed(world.api, version, **params) == [world.ids[n] for n in expected]


def _walk_2021_11(api: Any, params: dict[str, Any]) -> tuple[list[int], str | None]:
    seen: list[int] = []
    body = api.get("/orders", params=params, version=V11).json()
    last = None
    while True:
        seen += [o["id"] for o in body["orders"]]
        if not body["next_cursor"]:
            return seen, last
        last = body["next_cursor"]
        response = api.get("/orders", params={"cursor": last, "limit": params["limit"]}, version=V11)
        assert response.status_code == 200, response.text
        body = response.json()


@pytest.mark.parametrize("sort", ["processed_at-asc", "processed_at-desc", "scheduled_at-asc", "id-desc"])
def test_2021_11_cursors_page_through_every_order_once_across_unprocessed_ones(world, sort):
    seen, last = _walk_2021_11(world.api, {"sort_by": sort, "limit": 2})
    assert seen == listed(world.api, V11, sort_by=sort)
    back = world.api.get("/orders", params={"cursor": last, "limit": 2}, version=V11).json()
    previous = world.api.get("/orders", params={"cursor": back["previous_cursor"], "limit": 2}, version=V11).json()
    assert [o["id"] for o in previous["orders"]] == seen[:4][-2:]


def test_2021_01_pages_through_link_headers(world):
    api, seen = world.api, []
    params: dict[str, Any] = {"sort_by": "shipped_date-asc", "limit": 2}
    while True:
        response = api.get("/orders", params=params, version=V01)
        assert response.status_code == 200, response.text
        seen += [o["id"] for o in response.json()["orders"]]
        link = response.headers.get("Link", "")
        nxt = [part for part in link.split(", ") if 'rel="next"' in part]
        if not nxt:
            break
        url = urlparse(nxt[0].split(";")[0].strip("<>"))
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert seen == [world.ids[n] for n in ("a", "p0", "b", "p1", "p2")]


def test_a_cursor_of_another_resource_is_refused(world):
    charges = world.api.get("/charges", params={"limit": 1}, version=V11).json()
    assert charges["next_cursor"]
    assert errors(world.api, V11, cursor=charges["next_cursor"]) == {"cursor": ["Invalid value"]}


def test_page_numbers_work_too(world):
    assert listed(world.api, V11, limit=2, page=2, sort_by="id-asc") == [world.ids["p1"], world.ids["p2"]]


# Include ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [V11, V01])
def test_include_embeds_the_customer_and_the_subscriptions_of_each_order(world, version):
    response = world.api.get("/orders", params={"include": "customer,subscriptions"}, version=version)
    assert response.status_code == 200, response.text
    by_id = {o["id"]: o["include"] for o in response.json()["orders"]}
    for name, customer, item in (("a", "A", "a"), ("p1", "A", "p"), ("b", "B", "b")):
        embedded = by_id[world.ids[name]]
        assert embedded["customer"]["id"] == world.customers[customer].id
        assert [s["id"] for s in embedded["subscriptions"]] == [world.items[item]]


def test_get_one_takes_include_too(world):
    body = world.api.get(f"/orders/{world.ids['b']}", params={"include": "subscriptions"}, version=V11).json()
    assert [s["id"] for s in body["order"]["include"]["subscriptions"]] == [world.items["b"]]
    assert set(body["order"]["include"]) == {"subscriptions"}


@pytest.mark.parametrize("version", [V11, V01])
@pytest.mark.parametrize("path", ["/orders", "/orders/{id}"])
def test_unknown_include_values_are_refused(world, version, path):
    path = path.format(id=world.ids["a"])
    assert errors(world.api, version, path, include="customer,charges") == {
        "include": ["Invalid value: charges. Must be one of customer, metafields, subscriptions"]}


# Count (2021-01) -------------------------------------------------------------------------------

def count(api: Any, **params: Any) -> int:
    response = api.get("/orders/count", params=params, version=V01)
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"count"}
    return response.json()["count"]


def test_count_takes_exactly_the_filters_of_its_list():
    contract = OLD_LISTS["orders"]
    assert set(contract.count_filters) == set(contract.filters)


@pytest.mark.parametrize("head_name, old_name, value, expected", FILTERS, ids=[f[0] for f in FILTERS])
def test_count_counts_what_the_list_lists(world, head_name, old_name, value, expected):
    assert count(world.api, **{old_name: value(world)}) == len(expected)


def test_count_without_filters_counts_the_stores_orders_only(world):
    assert count(world.api) == 5
    assert count(world.api, status="QUEUED") == 2


def test_count_refuses_bad_filters(world):
    assert errors(world.api, V01, "/orders/count", subscription_id="x", status="SHIPPED") == {
        "subscription_id": ["Invalid integer: x"],
        "status": ["Invalid value: SHIPPED. Must be one or more of SUCCESS, QUEUED, CANCELLED, ERROR, success, "
                   "queued, cancelled, error"]}
