"""db/among.py: ``column IN (ids)`` bound as one parameter answers what ``in_`` answers, on both
databases, for any number of ids, and keeps the column's index (SQLite)."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select

from rebill.db.among import among, among_bound
from rebill.db.prepared import Prepared
from rebill.models import customers
from tests.builders import make_customer
from tests.conftest import make_api


def test_among_answers_what_in_answers_for_empty_repeated_and_set_lists(client, database, clock):
    api = make_api(client, database, clock)
    made = [make_customer(api).id for _ in range(5)]
    mine = customers.c.store_id == api.store.id
    with database.read() as conn:
        for ids in ([], [made[0]], made[1:3] * 2, set(made), (i for i in [made[4], 10**12]), [None, made[2]]):
            wanted = list(ids)
            got = conn.execute(select(customers.c.id).where(mine, among(customers.c.id, wanted))).scalars().all()
            old = conn.execute(select(customers.c.id).where(mine, customers.c.id.in_(wanted))).scalars().all()
            assert sorted(got) == sorted(old) == sorted(set(wanted) & set(made))
        # One statement, executed again with other ids: the value is not cached with the text.
        assert conn.execute(select(customers.c.id).where(mine, among(customers.c.id, made[:1]))).scalars().all() == made[:1]


def test_among_bound_in_a_prepared_statement_answers_each_calls_ids(client, database, clock):
    """The replan's reads of many addresses (an async batch's chunk) are prepared once with the
    ids as their parameter: each call answers its own ids, as ``in_`` would."""
    api = make_api(client, database, clock)
    made = [make_customer(api).id for _ in range(4)]
    prepared = Prepared(select(customers.c.id).where(customers.c.store_id == bindparam("store_id"),
                                                     among_bound(customers.c.id, "ids")).order_by(customers.c.id))
    with database.read() as conn:
        for ids in (made[:2], made[1:], [made[3], made[3], 10**12], [], made):
            assert [row[0] for row in prepared.all(conn, store_id=api.store.id, ids=ids)] == sorted(set(ids) & set(made))
        assert prepared.all(conn, store_id=api.store.id + 1, ids=made) == []  # another store's ids
        with pytest.raises(Exception, match="invalid literal for int"):
            prepared.all(conn, store_id=api.store.id, ids=["1) OR (1=1"])


def test_among_takes_more_ids_than_a_statement_may_bind(client, database, clock):
    """SQLite binds at most 32,766 values in a statement, which ``in_`` would pass one by one."""
    api = make_api(client, database, clock)
    customer = make_customer(api)
    ids = list(range(10**9, 10**9 + 40_000)) + [customer.id]
    with database.read() as conn:
        assert conn.execute(select(customers.c.id).where(among(customers.c.id, ids))).scalars().all() == [customer.id]


def test_among_takes_only_integers(database):
    with database.read() as conn, pytest.raises(Exception) as raised:
        conn.execute(select(customers.c.id).where(among(customers.c.id, ["1) OR (1=1"])))
    assert "invalid literal for int()" in str(raised.value)


def test_on_sqlite_the_ids_are_looked_up_by_the_columns_index(database):
    if database.dialect != "sqlite":
        pytest.skip("SQLite's query plan")
    stmt = select(customers.c.id).where(customers.c.store_id == 1, among(customers.c.id, [1, 2]))
    sql = str(stmt.compile(dialect=database.engine.dialect, compile_kwargs={"literal_binds": False}))
    assert "json_each" in sql and "= 1" not in sql.split("json_each")[1]
    with database.read() as conn:
        plan = " ".join(row[3] for row in conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN " + sql.replace("?", "1", 1).replace("?", "'[1,2]'"), ()).all())
    assert "SEARCH customers" in plan and "SCAN customers" not in plan
    assert "rowid=?" in plan or "INTEGER PRIMARY KEY" in plan  # by the ids, not the store


def test_unindexed_keeps_sqlite_on_the_ids_index_and_changes_nothing_elsewhere(client, database, clock):
    """Beside ``among`` on an indexed id column, SQLite (no statistics) took the store's index
    and walked every subscription of the store (the billing day's replan, once a batch):
    ``unindexed`` keeps the store's term out of the choice. Same rows either way."""
    from rebill.db.among import unindexed
    from rebill.models import purchase_items

    api = make_api(client, database, clock)
    customer = make_customer(api)
    stmt = select(purchase_items.c.id).where(unindexed(purchase_items.c.store_id) == api.store.id,
                                             among(purchase_items.c.address_id, [1, 2]))
    with database.read() as conn:
        assert conn.execute(stmt).all() == []
        assert conn.execute(select(customers.c.id).where(unindexed(customers.c.store_id) == api.store.id,
                                                         among(customers.c.id, [customer.id]))).scalars().all() == [customer.id]
        if database.dialect == "sqlite":
            sql = str(stmt.compile(dialect=database.engine.dialect))
            plan = " ".join(row[3] for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + sql.replace("?", "1", 1).replace("?", "'[1,2]'"), ()).all())
            assert "ix_purchase_items_address_id" in plan and "store_id" not in plan
