"""Alembic migrations go up, all the way down and up again on both databases, and the schema
they build matches the table definitions the code uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from rebill.db.engine import normalize_url
from rebill.db.migrate import alembic_config, upgrade
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
