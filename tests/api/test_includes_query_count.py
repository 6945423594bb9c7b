"""A list with ``include`` issues a bounded number of SQL statements, independent of the number
of rows (decisions §3.8: "A list with include must not issue one query per row")."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from sqlalchemy import event

from tests.builders import make_address, make_customer, make_order, make_payment_method
from tests.conftest import make_api


@contextmanager
def counting(db):
    """The statements run on every engine of ``db`` (PostgreSQL's reads have one of their own)."""
    statements: list[str] = []
    assert db.async_reads is not None or db.dialect == "sqlite"  # made now, so that it is listened to

    def before(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    for engine in db.engines():
        event.listen(engine, "before_cursor_execute", before)
    try:
        yield statements
    finally:
        for engine in db.engines():
            event.remove(engine, "before_cursor_execute", before)


def _seed(api, n: int) -> list:
    customers = []
    for i in range(n):
        customer = make_customer(api)
        make_address(api, customer)
        if i % 2 == 0:
            make_payment_method(api, customer)
        customers.append(customer)
    return customers


@pytest.fixture(scope="module")
def small(client, database, clock):
    api = make_api(client, database, clock)
    _seed(api, 5)
    return api


@pytest.fixture(scope="module")
def large(client, database, clock):
    api = make_api(client, database, clock)
    _seed(api, 20)
    return api


def _list(api, version, include):
    with counting(api.db) as statements:
        response = api.get("/customers", version=version, params={"limit": 250, **({"include": include} if include else {})})
    assert response.status_code == 200, response.text
    return response.json()["customers"], list(statements)


@pytest.mark.parametrize("version", ["2021-01", "2021-11"])
def test_list_with_includes_issues_the_same_statements_for_5_and_20_rows(small, large, version):
    include = "addresses,payment_methods"
    few, few_statements = _list(small, version, include)
    many, many_statements = _list(large, version, include)
    assert len(few) == 5 and len(many) == 20
    assert len(many_statements) == len(few_statements), many_statements
    assert len(many_statements) <= 10


def test_include_adds_one_statement_per_include_value_not_per_row(large):
    plain = _list(large, "2021-11", "")[1]
    one = _list(large, "2021-11", "addresses")[1]
    two = _list(large, "2021-11", "addresses,payment_methods")[1]
    assert len(one) == len(plain) + 1
    assert len(two) == len(plain) + 2


def test_included_objects_are_embedded_per_record(large):
    customers, _ = _list(large, "2021-11", "addresses,payment_methods")
    for record in customers:
        embedded = record["include"]
        assert set(embedded) == {"addresses", "payment_methods"}
        assert [a["customer_id"] for a in embedded["addresses"]] == [record["id"]]
        assert all(pm["customer_id"] == record["id"] for pm in embedded["payment_methods"])
    counts = sorted(len(r["include"]["payment_methods"]) for r in customers)
    assert counts == [0] * 10 + [1] * 10


def test_get_one_with_include_is_bounded_too(api):
    customer = make_customer(api)
    for _ in range(3):
        make_address(api, customer)
    with counting(api.db) as statements:
        response = api.get(f"/customers/{customer.id}", params={"include": "addresses,payment_methods"})
    assert response.status_code == 200, response.text
    assert len(response.json()["customer"]["include"]["addresses"]) == 3
    assert len(statements) <= 8, statements


# Orders (issue 8): include values of an order list load once per page too.

@pytest.fixture(scope="module")
def small_orders(client, database, clock):
    api = make_api(client, database, clock)
    for _ in range(5):
        make_order(api)
    return api


@pytest.fixture(scope="module")
def large_orders(client, database, clock):
    api = make_api(client, database, clock)
    for _ in range(20):
        make_order(api)
    return api


def _orders(api, version, include):
    with counting(api.db) as statements:
        response = api.get("/orders", version=version, params={"limit": 250, **({"include": include} if include else {})})
    assert response.status_code == 200, response.text
    return response.json()["orders"], list(statements)


@pytest.mark.parametrize("version", ["2021-01", "2021-11"])
def test_order_list_with_includes_issues_the_same_statements_for_5_and_20_rows(small_orders, large_orders, version):
    few, few_statements = _orders(small_orders, version, "customer,subscriptions")
    many, many_statements = _orders(large_orders, version, "customer,subscriptions")
    assert len(few) == 5 and len(many) == 20
    assert len(many_statements) == len(few_statements), many_statements
    assert all(len(o["include"]["subscriptions"]) == 1 for o in many)


def test_each_order_include_value_adds_one_statement(large_orders):
    plain = _orders(large_orders, "2021-11", "")[1]
    assert len(_orders(large_orders, "2021-11", "customer")[1]) == len(plain) + 1
    assert len(_orders(large_orders, "2021-11", "customer,subscriptions")[1]) == len(plain) + 2


# Metafields (issue 9): `include=metafields` loads the metafields of a whole page in one statement.

def _with_metafields(api, n: int) -> None:
    from tests.builders import charges_of, make_metafield, make_subscription
    for _ in range(n):
        customer = make_customer(api)
        make_payment_method(api, customer)
        address = make_address(api, customer)
        subscription = make_subscription(api, address)
        [charge] = charges_of(api, address.id)
        make_metafield(api, customer)
        make_metafield(api, subscription, owner_resource="subscription")
        make_metafield(api, charge, owner_resource="charge")
    for order in [make_order(api) for _ in range(n)]:
        make_metafield(api, order, owner_resource="order")


@pytest.fixture(scope="module")
def small_metafields(client, database, clock):
    api = make_api(client, database, clock)
    _with_metafields(api, 3)
    return api


@pytest.fixture(scope="module")
def large_metafields(client, database, clock):
    api = make_api(client, database, clock)
    _with_metafields(api, 12)
    return api


METAFIELD_LISTS = ["/customers", "/subscriptions", "/charges", "/orders"]


def _listed(api, path, version, include):
    with counting(api.db) as statements:
        response = api.get(path, version=version, params={"limit": 250, **({"include": include} if include else {})})
    assert response.status_code == 200, response.text
    return response.json()[path.strip("/")], list(statements)


@pytest.mark.parametrize("version", ["2021-01", "2021-11"])
@pytest.mark.parametrize("path", METAFIELD_LISTS)
def test_include_metafields_issues_the_same_statements_for_few_and_many_rows(small_metafields, large_metafields,
                                                                              path, version):
    few, few_statements = _listed(small_metafields, path, version, "metafields")
    many, many_statements = _listed(large_metafields, path, version, "metafields")
    assert len(many) > len(few) >= 3
    assert len(many_statements) == len(few_statements), many_statements
    with_one = [r for r in many if r["include"]["metafields"]]
    assert with_one and all(len(r["include"]["metafields"]) == 1 for r in with_one)


@pytest.mark.parametrize("path", METAFIELD_LISTS)
def test_include_metafields_adds_one_statement(large_metafields, path):
    plain = _listed(large_metafields, path, "2021-11", "")[1]
    assert len(_listed(large_metafields, path, "2021-11", "metafields")[1]) == len(plain) + 1


def test_charge_payment_methods_add_one_statement_for_a_page(small_metafields, large_metafields):
    """A charge's method (the one it was paid with, or its address's, else the default) is read
    in one statement for the page, whatever the number of charges."""
    plain = _listed(large_metafields, "/charges", "2021-11", "")[1]
    few, few_statements = _listed(small_metafields, "/charges", "2021-11", "payment_methods")
    many, many_statements = _listed(large_metafields, "/charges", "2021-11", "payment_methods")
    assert len(many) > len(few) >= 3
    assert len(many_statements) == len(few_statements) == len(plain) + 1
    assert all(len(c["include"]["payment_methods"]) == 1 for c in many)
