"""Prepared statements return exactly what SQLAlchemy's own execution returns, on both
databases, inside and outside a unit's transaction."""

from sqlalchemy import bindparam

from rebill.db.prepared import Prepared
from rebill.domain.customer import repository
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
        slow = conn.execute(STMT, {"id": customer.id, "store_id": api.store.id}).one()._asdict()
    assert fast == slow
    assert fast["has_valid_payment_method"] is True and fast["tax_exempt"] is True
    assert fast["subscriptions_active_count"] == 0  # a literal of the statement, not a parameter
    assert fast["created_at"].tzinfo is not None
    assert fast["analytics_data"] == {"utm_params": [{"utm_source": "x"}]}


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
        assert Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id)["first_name"] == "Ada"
    with database.write() as conn:
        repository.update_customer(conn, api.store.id, customer.id, {"first_name": "Grace"})
    with reader() as conn:
        assert Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id)["first_name"] == "Grace"


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
