"""2021-01 count endpoints take every filter of their list (issue 7; decisions §3.6;
docs/api-choices.md, Customers): a client that counts what it lists gets the same number.
The time windows, `status` and the discount filters have their own tests in
``test_customers_list.py`` and ``test_addresses_list.py``."""

from __future__ import annotations

from typing import Any

import pytest

from rebill.api.v2021_01.contract import LISTS
from tests.api.test_customers import create, set_columns
from tests.builders import make_address, make_customer, make_discount

V01 = "2021-01"


def count(api: Any, path: str, **params: Any) -> int:
    response = api.get(path, params=params, version=V01)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"count"} and type(body["count"]) is int, body
    return body["count"]


def listed(api: Any, plural: str, **params: Any) -> int:
    response = api.get(f"/{plural}", params={**params, "limit": 250}, version=V01)
    assert response.status_code == 200, response.text
    return len(response.json()[plural])


def errors_of(response: Any) -> Any:
    assert response.status_code == 422, response.text
    return response.json()["errors"]


@pytest.mark.parametrize("plural", ["customers", "addresses"])
def test_count_takes_exactly_the_filters_of_its_list(plural):
    contract = LISTS[plural]
    assert set(contract.count_filters) == set(contract.filters)


# Addresses ----------------------------------------------------------------------------------

def test_address_count_by_customer_id_counts_that_customers_addresses(api):
    first, second = make_customer(api), make_customer(api)
    for _ in range(3):
        make_address(api, first)
    make_address(api, second)
    make_customer(api)  # a customer without addresses
    make_address(api.other_store())
    assert count(api, "/addresses/count", customer_id=first.id) == 3
    assert count(api, "/addresses/count", customer_id=second.id) == 1
    assert count(api, "/addresses/count") == 4
    assert count(api, "/addresses/count", customer_id=987654321) == 0


def test_address_count_does_not_count_another_stores_customer(api):
    other = api.other_store()
    theirs = make_customer(other)
    make_address(other, theirs)
    assert count(api, "/addresses/count", customer_id=theirs.id) == 0


def test_address_count_by_ids(api):
    a, b, _ = (make_address(api) for _ in range(3))
    theirs = make_address(api.other_store())
    assert count(api, "/addresses/count", ids=f"{a.id},{b.id}") == 2
    assert count(api, "/addresses/count", ids=f"{a.id},{theirs.id}") == 1


def test_address_count_combines_filters(api):
    customer = make_customer(api)
    discount = make_discount(api, code="BOTH")
    make_address(api, customer, discounts=[{"id": discount}])
    make_address(api, customer)
    make_address(api, discounts=[{"id": discount}])
    assert count(api, "/addresses/count", customer_id=customer.id, discount_id=discount) == 1
    assert count(api, "/addresses/count", customer_id=customer.id, discount_code="BOTH") == 1


@pytest.mark.parametrize("params,field", [
    ({"customer_id": "abc"}, "customer_id"),
    ({"ids": "1,x"}, "ids"),
])
def test_address_count_refuses_bad_filter_values(api, params, field):
    assert set(errors_of(api.get("/addresses/count", params=params, version=V01))) == {field}


def test_address_count_ignores_is_active_which_2021_01_lists_do_not_take(api):
    make_address(api)
    assert count(api, "/addresses/count", is_active="true") == 1


def test_address_count_matches_the_list_for_every_filter(api):
    first, second = make_customer(api), make_customer(api)
    discount = make_discount(api, code="MATCH")
    made = [make_address(api, first, discounts=[{"id": discount}]), make_address(api, first),
            make_address(api, second)]
    cases = [{}, {"customer_id": first.id}, {"customer_id": second.id}, {"discount_id": discount},
             {"discount_code": "MATCH"}, {"ids": f"{made[0].id},{made[2].id}"}]
    for params in cases:
        assert count(api, "/addresses/count", **params) == listed(api, "addresses", **params), params


# Customers ----------------------------------------------------------------------------------

def test_customer_count_by_email_is_case_insensitive(api):
    api.version = V01
    create(api, email="ada@example.com")
    create(api, email="grace@example.com")
    assert count(api, "/customers/count", email="ada@example.com") == 1
    assert count(api, "/customers/count", email="ADA@Example.com") == 1
    assert count(api, "/customers/count", email="nobody@example.com") == 0


def test_customer_count_by_email_stays_in_the_store(api):
    api.version = V01
    create(api.other_store(), email="shared@example.com")
    assert count(api, "/customers/count", email="shared@example.com") == 0


def test_customer_count_by_hash_ids_and_platform_customer_id(api):
    api.version = V01
    a = create(api, platform_customer_id="p-1")
    b = create(api, platform_customer_id="p-2")
    create(api)
    assert count(api, "/customers/count", hash=a["hash"]) == 1
    assert count(api, "/customers/count", ids=f"{a['id']},{b['id']}") == 2
    assert count(api, "/customers/count", platform_customer_id="p-2") == 1
    assert count(api, "/customers/count", platform_customer_id="p-3") == 0


def test_customer_count_combines_filters(api):
    api.version = V01
    a = create(api)
    b = create(api)
    set_columns(api, a["id"], status="active")
    assert count(api, "/customers/count", ids=f"{a['id']},{b['id']}", status="ACTIVE") == 1
    assert count(api, "/customers/count", email=b["email"], status="ACTIVE") == 0


@pytest.mark.parametrize("params,field", [
    ({"ids": "1,two"}, "ids"),
    ({"status": "SLEEPING"}, "status"),
])
def test_customer_count_refuses_bad_filter_values(api, params, field):
    assert set(errors_of(api.get("/customers/count", params=params, version=V01))) == {field}


def test_customer_count_ignores_the_2021_11_name_of_the_platform_id(api):
    api.version = V01
    create(api, platform_customer_id="p-1")
    create(api)
    assert count(api, "/customers/count", external_customer_id="p-1") == 2


def test_customer_count_matches_the_list_for_every_filter(api):
    api.version = V01
    a = create(api, platform_customer_id="p-1")
    b = create(api)
    create(api)
    set_columns(api, b["id"], status="active")
    cases = [{}, {"email": a["email"]}, {"hash": b["hash"]}, {"ids": f"{a['id']},{b['id']}"},
             {"platform_customer_id": "p-1"}, {"status": "ACTIVE"}, {"status": "INACTIVE"}]
    for params in cases:
        assert count(api, "/customers/count", **params) == listed(api, "customers", **params), params
