"""Prepared statements return exactly what SQLAlchemy's own execution returns, on both
databases, inside and outside a unit's transaction."""

from sqlalchemy import bindparam, insert

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


def test_a_dropped_postgresql_connection_fails_in_sqlalchemys_terms_and_is_replaced(database, client, clock):
    import psycopg
    import pytest
    from sqlalchemy import create_engine
    from sqlalchemy.exc import DBAPIError

    from rebill.db.engine import Database
    from tests.conftest import PG_ADMIN

    if database.dialect != "postgresql":
        pytest.skip("SQLite has no connection to drop")
    api = make_api(client, database, clock)
    customer = make_customer(api)
    url = database.engine.url.render_as_string(hide_password=False)
    single = Database(create_engine(url, pool_size=1, max_overflow=0))  # one connection, reused
    try:
        with single.read() as conn:
            pid = conn.connection.dbapi_connection.info.backend_pid
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(DBAPIError):
            with single.read() as conn:
                Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id)
        with single.read() as conn:  # the pool dropped the dead connection and opened another
            assert Customer(*Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id)).id == customer.id
    finally:
        single.dispose()


def test_prepared_insert_refuses_a_table_with_python_side_defaults():
    import pytest
    from sqlalchemy import Column, Integer, MetaData, String, Table

    from rebill.db.prepared import PreparedInsert

    table = Table("t", MetaData(), Column("id", Integer, primary_key=True), Column("kind", String, default="x"))
    with pytest.raises(TypeError, match=r"t: columns with Python-side defaults \['kind'\]"):
        PreparedInsert(table)


def test_prepared_insert_stores_json_booleans_and_datetimes_as_sqlalchemy_would(client, database, clock):
    from datetime import datetime, timezone

    from sqlalchemy import select

    from rebill.db.statements import insert_row
    from rebill.models import events

    api = make_api(client, database, clock)
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    with database.write() as conn:
        first = insert_row(conn, events, {"store_id": api.store.id, "topic": "x/created", "resource": "x",
                                          "resource_id": 7, "data": {"a": [1, None, "b"]}, "created_at": when})
        second = insert_row(conn, events, {"store_id": api.store.id, "topic": "x/deleted", "resource": "x",
                                           "resource_id": 7, "data": None, "created_at": when})
    assert second > first
    with database.read() as conn:
        rows = conn.execute(select(events.c.id, events.c.data, events.c.created_at)
                            .where(events.c.id.in_([first, second])).order_by(events.c.id)).all()
    assert [tuple(r) for r in rows] == [(first, {"a": [1, None, "b"]}, when), (second, None, when)]


def _on_a_read_lane(database, work):
    """``work(sync_conn)`` as a PostgreSQL GET runs it: in a greenlet over one of the API's
    asyncpg read connections (db/read_lanes.py), which prepared statements run on directly.
    The lanes are closed on their loop before it ends, as the server's shutdown does."""
    import asyncio

    async def run():
        try:
            async with database.async_reads.connection() as conn:
                return await conn.run_sync(work)
        finally:
            await database.close_loop_reads()
    return asyncio.run(run())


def test_on_the_api_read_connections_a_prepared_read_equals_sqlalchemys_row(client, database, clock):
    import pytest
    if database.async_reads is None:
        pytest.skip("PostgreSQL's asyncpg read connections")
    api = make_api(client, database, clock)
    customer = make_customer(api, analytics_data={"utm_params": [{"utm_source": "x"}]}, tax_exempt=True)
    with database.read() as conn:
        slow = list(conn.execute(STMT, {"id": customer.id, "store_id": api.store.id}).one())

    def both(conn):
        assert conn.dialect.driver == "asyncpg"
        return (Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id),
                Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id + 10_000),
                Prepared(STMT).all(conn, id=customer.id, store_id=api.store.id))
    fast, missing, every = _on_a_read_lane(database, both)
    assert fast == slow and missing is None and every == [slow]


def test_on_the_api_read_connections_errors_are_sqlalchemys_and_a_dropped_one_is_unavailable(client, database, clock):
    import psycopg
    import pytest
    from sqlalchemy import literal_column, select
    from sqlalchemy.exc import DBAPIError

    from rebill.db.engine import unavailable
    from tests.conftest import PG_ADMIN
    if database.async_reads is None:
        pytest.skip("PostgreSQL's asyncpg read connections")
    divide = Prepared(select(literal_column("1") / bindparam("d")))

    def refused(conn):
        with pytest.raises(DBAPIError) as caught:
            divide.one(conn, d=0)
        return caught.value
    error = _on_a_read_lane(database, refused)
    assert "division by zero" in str(error) and not unavailable(error)  # a statement refused: not an outage

    def dropped(conn):
        pid = conn.connection.dbapi_connection._connection.get_server_pid()
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(DBAPIError) as caught:
            divide.one(conn, d=1)
        return caught.value
    error = _on_a_read_lane(database, dropped)
    assert unavailable(error)  # the request answers 503 and the lanes drop the connection


def test_constants_are_written_into_the_text_and_only_the_callers_values_are_bound(client, database, clock):
    """The status words, flags and numbers the code fixes are part of the SQL (binding them on
    every call was a twentieth of a customer read); the caller's values stay parameters, and a
    constant a parameter style or a quote could misread stays one too. The rows are the same."""
    from sqlalchemy import literal, select

    from rebill.db.prepared import _Compiled, _inlined
    api = make_api(client, database, clock)
    customer = make_customer(api, first_name="50% O'Brien")
    dialect = database.engine.dialect
    compiled = _Compiled(_inlined(STMT, dialect), dialect)
    assert "'subscription'" in compiled.sql and "'error'" in compiled.sql
    assert sorted(name for _, name, _ in compiled.slots) == ["id", "store_id"]
    assert len(compiled.fixed) == 2  # nothing bound but the caller's two
    odd = select(customers.c.id).where(customers.c.first_name == literal("50% O'Brien"),
                                       customers.c.id == bindparam("id"))
    kept = _Compiled(_inlined(odd, dialect), dialect)
    assert "O'Brien" not in kept.sql and len(kept.fixed) == 2
    with database.read() as conn:
        assert Prepared(odd).one(conn, id=customer.id) == [customer.id]
        assert Prepared(STMT).one(conn, id=customer.id, store_id=api.store.id) == list(
            conn.execute(STMT, {"id": customer.id, "store_id": api.store.id}).one())


def test_many_rows_bind_as_each_row_alone_would_on_every_driver():
    """``arguments_many`` (the billing run's batches) builds a column at a time and processes a
    value once when the row above has the same object: it must give each row what ``arguments``
    gives it alone, for an INSERT whose parameters are all the caller's, a statement with a
    constant among them, one parameter and none; on positional and named drivers."""
    from datetime import UTC, date, datetime
    from decimal import Decimal

    from psycopg.types.json import Json, Jsonb
    from sqlalchemy import select, update
    from sqlalchemy.dialects import postgresql, sqlite

    from rebill.db.prepared import _Compiled
    from rebill.models import charges

    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    rows = [{"store_id": 1, "scheduled_at": date(2026, 12, n % 28 + 1), "currency": "USD",
             "line_items": [{"n": n}], "tax_lines": [], "taxable": n % 2 == 0, "note": None,
             "total_price": Decimal(f"{n}.10"), "created_at": now, "updated_at": now,
             "processed_at": now if n % 3 else None} for n in range(7)]
    statements = [
        (insert(charges), list(rows[0])),
        (update(charges).where(charges.c.id == bindparam("_id")).values(status="success", note=bindparam("note"),
                                                                         processed_at=bindparam("processed_at")), None),
        (select(charges.c.id).where(charges.c.id == bindparam("_id")), None),
        (select(charges.c.id).where(charges.c.status == "queued"), None),
    ]

    def plain(args):  # psycopg's Json wrappers compare by identity: their value instead
        values = args.items() if isinstance(args, dict) else enumerate(args)
        return {key: value.obj if isinstance(value, (Json, Jsonb)) else value for key, value in values}

    for dialect in (sqlite.dialect(), postgresql.psycopg.dialect(), postgresql.asyncpg.dialect()):
        for stmt, keys in statements:
            compiled = _Compiled(stmt, dialect, column_keys=keys)
            batch = [{**row, "_id": n} for n, row in enumerate(rows)]
            many = [plain(args) for args in compiled.arguments_many(batch)]
            assert many == [plain(compiled.arguments(row)) for row in batch], (dialect.driver, stmt)
            assert len(many) == len(batch)


def test_the_quicker_binds_of_dates_flags_and_json_answer_as_sqlalchemys_own(tmp_path):
    """db/prepared.py ``_quicker``: on SQLite a date, a flag and a JSON value take a short way;
    every value binds as SQLAlchemy's own processor binds it, and what that one refuses is
    refused alike (it still decides)."""
    from datetime import date, datetime
    from decimal import Decimal

    import pytest
    from sqlalchemy import JSON, Boolean, Date, String

    from rebill.db.engine import Database
    from rebill.db.prepared import _quicker
    db = Database.from_url(f"sqlite:///{tmp_path / 'quicker.db'}")  # the server's JSON options
    dialect = db.engine.dialect
    cases = [
        (Date(), [date(2026, 1, 2), date(1, 1, 1), date(999, 12, 31), date(9999, 12, 31),
                  datetime(2026, 1, 2, 3, 4), None], ["2026-01-02", 5]),
        (Boolean(), [True, False, None], [2, "yes"]),
        (JSON(), [{"a": [1, Decimal("1.50"), None]}, [], {}, [1, "x"], None, "text", 5, True], [object()]),
    ]
    for kind, values, refused in cases:
        standard = kind.dialect_impl(dialect).bind_processor(dialect)
        quick = _quicker(kind, dialect, standard)
        assert quick is not standard, kind
        for value in values:
            assert quick(value) == standard(value) and type(quick(value)) is type(standard(value)), (kind, value)
        for value in refused:
            with pytest.raises(Exception) as theirs:
                standard(value)
            with pytest.raises(type(theirs.value)):
                quick(value)
    plain = String().dialect_impl(dialect).bind_processor(dialect)
    assert _quicker(String(), dialect, plain) is plain
    db.dispose()
