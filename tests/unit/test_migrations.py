"""Alembic migrations go up, all the way down and up again on both databases, and the schema
they build matches the table definitions the code uses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, create_engine, func, inspect, select, types
from sqlalchemy.dialects import postgresql

from rebill.db.engine import normalize_url
from rebill.db.migrate import alembic_config, upgrade
from rebill.domain.customer.model import BILLING_FIELDS
from rebill.models import metadata
from tests.conftest import fresh_database_url

TABLES = {"stores", "tokens", "customers", "addresses", "payment_methods", "discounts", "events"}


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    with fresh_database_url(request.param, tmp_path) as url:
        yield url


def _tables(url: str) -> set[str]:
    engine = create_engine(normalize_url(url))
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_round_trip(fresh_url):
    config = alembic_config(fresh_url)
    command.upgrade(config, "head")
    assert TABLES <= _tables(fresh_url)
    head = _revision(fresh_url)
    assert head is not None

    command.downgrade(config, "base")
    assert _tables(fresh_url) & TABLES == set()
    assert _revision(fresh_url) is None

    command.upgrade(config, "head")
    assert TABLES <= _tables(fresh_url)
    assert _revision(fresh_url) == head


def test_upgrade_twice_is_a_no_op(fresh_url):
    upgrade(fresh_url)
    upgrade(fresh_url)
    assert TABLES <= _tables(fresh_url)


def test_migrated_schema_matches_the_models(fresh_url):
    upgrade(fresh_url)
    engine = create_engine(normalize_url(fresh_url))
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert diff == []


def _filled(table: Any, **given: Any) -> dict[str, Any]:
    """A row for ``table`` with ``given`` and a plain value in every other required column."""
    row = dict(given)
    for column in table.columns:
        if column.name in row or column.nullable or column.primary_key:
            continue
        kind = column.type
        if isinstance(kind, (types.JSON, postgresql.JSONB)):
            row[column.name] = {}
        elif isinstance(kind, types.Boolean):
            row[column.name] = False
        elif isinstance(kind, types.DateTime):
            row[column.name] = datetime(2026, 1, 1)
        elif isinstance(kind, types.Integer):
            row[column.name] = 0
        else:
            text = f"{column.name}-{len(row)}"
            row[column.name] = text[-(getattr(kind, "length", None) or len(text)):]
    return row


def _reflected(engine: Any) -> dict[str, Any]:
    tables = MetaData()
    tables.reflect(engine)
    return tables.tables


def _insert(conn: Any, table: Any, **given: Any) -> int:
    """One row of ``table`` (required columns filled with plain values); returns its id."""
    return conn.execute(table.insert().values(_filled(table, **given)).returning(table.c.id)).scalar_one()


def test_0002_moves_billing_columns_into_one_document_and_back_without_touching_addresses(fresh_url):
    config = alembic_config(fresh_url)
    command.upgrade(config, "0001")
    engine = create_engine(normalize_url(fresh_url))
    try:
        old = _reflected(engine)
        with engine.begin() as conn:
            store_id = _insert(conn, old["stores"])
            billed = _insert(conn, old["customers"], store_id=store_id, billing_city="Toronto",
                             billing_country_code="CA", billing_zip="M5J 2X6")
            plain = _insert(conn, old["customers"], store_id=store_id)
            _insert(conn, old["addresses"], store_id=store_id, customer_id=billed)

        command.upgrade(config, "head")
        new = _reflected(engine)
        assert not [c for c in new["customers"].columns if c.name.startswith("billing_") and
                    c.name != "billing_address"]
        with engine.connect() as conn:
            documents = dict(conn.execute(select(new["customers"].c.id,
                                                 new["customers"].c.billing_address)).all())
            assert conn.execute(select(func.count()).select_from(new["addresses"])).scalar_one() == 1
        document = documents[billed]
        if isinstance(document, str):  # SQLite hands reflected JSON back as text
            document = json.loads(document)
        assert document == {**dict.fromkeys(BILLING_FIELDS), "city": "Toronto", "country_code": "CA",
                            "zip": "M5J 2X6"}
        assert documents[plain] is None

        command.downgrade(config, "0001")
        back = _reflected(engine)
        with engine.connect() as conn:
            row = conn.execute(select(back["customers"]).where(back["customers"].c.id == billed)).one()
            assert (row.billing_city, row.billing_country_code, row.billing_zip, row.billing_address1) == \
                ("Toronto", "CA", "M5J 2X6", None)
            assert conn.execute(select(func.count()).select_from(back["addresses"])).scalar_one() == 1
    finally:
        engine.dispose()


def test_a_batch_rebuild_of_a_parent_table_on_sqlite_keeps_its_children(tmp_path):
    """Why migrations run inside ``foreign_keys_off``: with foreign keys on, rebuilding
    customers (drop, recreate, copy) would delete every address through the cascade."""
    from alembic.operations import Operations

    from rebill.db.engine import make_engine
    from rebill.db.migrate import foreign_keys_off

    url = f"sqlite:///{tmp_path / 'rebuild.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        tables = _reflected(engine)
        addresses = tables["addresses"]
        with engine.begin() as conn:
            store_id = _insert(conn, tables["stores"])
            customer_id = _insert(conn, tables["customers"], store_id=store_id)
            _insert(conn, addresses, store_id=store_id, customer_id=customer_id)

        with engine.connect() as conn, foreign_keys_off(conn):
            assert conn.connection.dbapi_connection.execute("PRAGMA foreign_keys").fetchone() == (0,)
            with conn.begin():
                with Operations(MigrationContext.configure(conn)).batch_alter_table(
                        "customers", recreate="always") as batch:
                    batch.alter_column("phone", existing_type=types.String(64), nullable=True)
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(addresses)).scalar_one() == 1
            assert conn.connection.dbapi_connection.execute("PRAGMA foreign_keys").fetchone() == (1,)
    finally:
        engine.dispose()


def test_foreign_keys_off_refuses_to_end_with_an_orphan(tmp_path):
    from rebill.db.engine import make_engine
    from rebill.db.migrate import foreign_keys_off

    url = f"sqlite:///{tmp_path / 'orphan.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        addresses = _reflected(engine)["addresses"]
        with pytest.raises(RuntimeError, match="parent is gone"):
            with engine.connect() as conn, foreign_keys_off(conn):
                with conn.begin():
                    _insert(conn, addresses, store_id=404, customer_id=404)
    finally:
        engine.dispose()


def test_0017_empties_null_store_contacts_numbers_the_orders_of_each_store_and_keeps_the_triggers(fresh_url):
    """Stores' null email and phone become `''` (and back on the way down); orders made before
    get 1, 2, 3... per store in id order and each store's counter its last number; `stores`
    keeps its revision triggers (migration 0012) and, on SQLite, AUTOINCREMENT through the
    rebuild that changes its columns' nullability."""
    from datetime import date

    from sqlalchemy import text

    config = alembic_config(fresh_url)
    command.upgrade(config, "0016")
    engine = create_engine(normalize_url(fresh_url))
    try:
        old = _reflected(engine)
        with engine.begin() as conn:
            plain = _insert(conn, old["stores"])
            known = _insert(conn, old["stores"], email="owner@shop.test", phone="555")
            made = [(store, _insert(conn, old["orders"], store_id=store, scheduled_at=date(2026, 1, 1)))
                    for store in (plain, known, plain, plain, known)]

        command.upgrade(config, "head")
        new = _reflected(engine)
        stores, orders = new["stores"], new["orders"]
        with engine.begin() as conn:
            contacts = {r.id: (r.email, r.phone, r.checkout_logo_url) for r in conn.execute(select(stores))}
            assert contacts == {plain: ("", "", ""), known: ("owner@shop.test", "555", "")}
            numbers = dict(conn.execute(select(orders.c.id, orders.c.number)).all())
            assert [numbers[order_id] for _, order_id in made] == [1, 1, 2, 3, 2]
            counters = dict(conn.execute(select(new["order_numbers"].c.store_id,
                                                new["order_numbers"].c.last_number)).all())
            assert counters == {plain: 3, known: 2}
            revision = conn.execute(select(new["revisions"].c.value)).scalar_one()
            conn.execute(stores.update().where(stores.c.id == plain).values(phone="1"))
            assert conn.execute(select(new["revisions"].c.value)).scalar_one() == revision + 1
            if conn.dialect.name == "sqlite":
                for table in ("stores", "orders"):
                    ddl = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = :t"), {"t": table}).scalar()
                    assert "AUTOINCREMENT" in ddl, table

        command.downgrade(config, "0016")
        back = _reflected(engine)
        assert "order_numbers" not in back and "number" not in back["orders"].c
        assert "checkout_logo_url" not in back["stores"].c
        with engine.begin() as conn:
            contacts = {r.id: (r.email, r.phone) for r in conn.execute(select(back["stores"]))}
            assert contacts == {plain: (None, "1"), known: ("owner@shop.test", "555")}
            revision = conn.execute(select(back["revisions"].c.value)).scalar_one()
            conn.execute(back["stores"].update().where(back["stores"].c.id == plain).values(phone=None))
            assert conn.execute(select(back["revisions"].c.value)).scalar_one() == revision + 1
    finally:
        engine.dispose()


def test_0020_indexes_the_payload_each_delivery_names_and_the_downgrade_drops_it(fresh_url):
    """The retention purge asks whether any delivery still names a payload (domain/webhook/retention.py)."""
    def indexes() -> set[str]:
        engine = create_engine(normalize_url(fresh_url))
        try:
            return {index["name"] for index in inspect(engine).get_indexes("webhook_deliveries")}
        finally:
            engine.dispose()

    config = alembic_config(fresh_url)
    command.upgrade(config, "0020")
    assert "ix_webhook_deliveries_payload" in indexes()
    command.downgrade(config, "0019")
    assert "ix_webhook_deliveries_payload" not in indexes()
    assert "ix_webhook_deliveries_store" in indexes()


def test_0023_marks_the_replays_not_sent_yet_and_the_downgrade_drops_the_column(fresh_url):
    """A replay waiting for its first attempt at the upgrade keeps its mark (the old rule:
    no attempt in this series, an earlier one logged); other deliveries are no replays."""
    config = alembic_config(fresh_url)
    command.upgrade(config, "0022")
    engine = create_engine(normalize_url(fresh_url))
    try:
        old = _reflected(engine)
        when = datetime(2026, 11, 1, 12, 0)
        with engine.begin() as conn:
            store = _insert(conn, old["stores"])
            hook = _insert(conn, old["webhooks"], store_id=store)
            payload = _insert(conn, old["webhook_payloads"], store_id=store, body=b"{}")
            made = {name: _insert(conn, old["webhook_deliveries"], store_id=store, webhook_id=hook, payload_id=payload,
                                  status=status, attempts=attempts, last_attempt_at=last)
                    for name, status, attempts, last in (("replay", "pending", 0, when), ("new", "pending", 0, None),
                                                         ("retry", "pending", 2, when), ("done", "succeeded", 1, when))}
        command.upgrade(config, "0023")
        new = _reflected(engine)
        with engine.begin() as conn:
            marks = dict(conn.execute(select(new["webhook_deliveries"].c.id, new["webhook_deliveries"].c.replayed)).all())
        assert {name: marks[row] for name, row in made.items()} == {"replay": 1, "new": 0, "retry": 0, "done": 0}
        command.downgrade(config, "0022")
        assert "replayed" not in _reflected(engine)["webhook_deliveries"].c
    finally:
        engine.dispose()


def test_0027_makes_json_columns_json_and_0028_keeps_the_codes_of_deleted_discounts(fresh_url):
    """0027: PostgreSQL's JSON columns keep the text as written (`json`, not `jsonb`); 0028 fills
    `deleted_discounts` from the charges that name a discount no longer there, with the code
    their discount line shows, as codes are matched (NFC, trimmed, lower-cased)."""
    config = alembic_config(fresh_url)
    command.upgrade(config, "0026")
    engine = create_engine(normalize_url(fresh_url))
    try:
        old = _reflected(engine)
        with engine.begin() as conn:
            store = _insert(conn, old["stores"])
            kept = _insert(conn, old["discounts"], store_id=store, code="KEPT", code_key="kept")
            customer = _insert(conn, old["customers"], store_id=store)
            address = _insert(conn, old["addresses"], store_id=store, customer_id=customer)
            for discount_id, code in ((kept, "KEPT"), (kept + 7, " E\u0301TE\u0301 "), (kept + 7, "other"),
                                      (kept + 9, "ΟΔΟΣ")):
                _insert(conn, old["charges"], store_id=store, customer_id=customer, address_id=address,
                        discount_id=discount_id, discounts=[{"code": code}], scheduled_at=date(2026, 1, 1))
        command.upgrade(config, "0028")
        new = _reflected(engine)
        if engine.dialect.name == "postgresql":
            assert {c.type.__class__.__name__ for t in new.values() for c in t.columns
                    if isinstance(c.type, types.JSON)} == {"JSON"}
        with engine.begin() as conn:
            gone = set(conn.execute(select(new["deleted_discounts"].c.id, new["deleted_discounts"].c.store_id,
                                           new["deleted_discounts"].c.code_key)).all())
        assert gone == {(kept + 7, store, "\u00e9t\u00e9"), (kept + 9, store, "οδος")}
        command.downgrade(config, "0026")
        assert "deleted_discounts" not in _reflected(engine)
    finally:
        engine.dispose()
