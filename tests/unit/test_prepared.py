"""Prepared statements return exactly what SQLAlchemy's own execution returns, on both
databases, inside and outside a unit's transaction."""

from sqlalchemy import bindparam

from rebill.db.prepared import Prepared
from rebill.domain.customer import repository
from rebill.domain.customer.model import Customer
from rebill.models import customers
from tests.builders import make_customer, make_payment_method
from tests.conftest import make_api

STMT = repository._select.where(customers.c.id == bindparam("id"), customers.c.store_id == bindparam("store_id"))


def test_prepared_row_equals_sqlalchemy_row_with_literals_json_bools_and_datetimes(client, database, clock):
    api = make_api(client, database, clock)
    customer = make_customer(api, analytics_data={"utm_params": [{"utm_source": "x"}]}, tax_exempt=True)
    make_payment_method(api, customer)
    prepared = Prepared(STMT)
    with database.read() as conn:
        fast = prepared.one(conn, id=customer.id, store_id=api.store.id)
        slow = conn.execute(STMT, {"id": customer.id, "store_id": api.store.id}).one()
    assert fast == list(slow)
    row = Customer(*fast)  # the select's columns are the struct's fields, in order
    assert row.id == customer.id and row.email == customer.email
    assert row.has_valid_payment_method is True and row.tax_exempt is True
    assert row.subscriptions_active_count == 0  # a literal of the statement, not a parameter
    assert row.created_at.tzinfo is not None
    assert row.analytics_data == {"utm_params": [{"utm_source": "x"}]}


def test_prepared_read_of_another_store_finds_nothing(client, database, clock):
    api = make_api(client, database, clock)
    customer = make_customer(api)
    with database.read() as conn:
        assert Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id + 10_000) is None


def test_prepared_read_on_the_loop_connection_sees_committed_writes(client, database, clock):
    api = make_api(client, database, clock)
    customer = make_customer(api)
    reader = database.read_on_loop if database.inline_reads else database.read
    with reader() as conn:
        assert Customer(*Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id)).first_name == "Ada"
    with database.write() as conn:
        repository.update_customer(conn, api.store.id, customer.id, {"first_name": "Grace"})
    with reader() as conn:
        assert Customer(*Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id)).first_name == "Grace"


def test_only_the_email_unique_violation_becomes_email_taken():
    from sqlalchemy.exc import IntegrityError

    from rebill.domain.customer.service import _email_race
    from rebill.errors import ValidationFailed

    taken = _email_race(IntegrityError("INSERT", {}, Exception(
        'duplicate key value violates unique constraint "uq_customers_store_email"')))
    assert isinstance(taken, ValidationFailed) and taken.errors == {"email": ["has already been taken"]}
    assert isinstance(_email_race(IntegrityError("INSERT", {}, Exception(
        "UNIQUE constraint failed: customers.store_id, customers.email_key"))), ValidationFailed)
    other = IntegrityError("INSERT", {}, Exception("FOREIGN KEY constraint failed"))
    assert _email_race(other) is other


def test_columns_for_takes_the_struct_field_order_and_refuses_what_cannot_be_built():
    import msgspec
    import pytest
    from sqlalchemy import column

    from rebill.db.rows import columns_for

    class Row(msgspec.Struct):
        b: int
        a: int
        extra: int = 0

    assert [c.name for c in columns_for(Row, [column("a"), column("b"), column("extra")])] == ["b", "a", "extra"]
    assert [c.name for c in columns_for(Row, [column("a"), column("b")], leave_out=("extra",))] == ["b", "a"]
    with pytest.raises(TypeError, match="no column for"):
        columns_for(Row, [column("a"), column("extra")])
    with pytest.raises(TypeError, match="must come last"):
        columns_for(Row, [column("a"), column("b"), column("extra")], leave_out=("a",))

    class KeywordsOnly(msgspec.Struct, kw_only=True):
        a: int

    with pytest.raises(TypeError, match="positional"):
        columns_for(KeywordsOnly, [column("a")])
