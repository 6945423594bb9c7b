"""UtcDateTime's own bind processor on SQLite (models/base.py) writes exactly the text
SQLAlchemy's chain would (naive UTC, microseconds always), so stored rows compare and sort as
before; its one-value memo never answers one datetime with another's text."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy.dialects import sqlite
from sqlalchemy.types import TypeDecorator

from rebill.models.base import UtcDateTime

DIALECT = sqlite.dialect()
VALUES = [
    datetime(2026, 1, 1, tzinfo=timezone.utc),
    datetime(2026, 11, 26, 17, 34, 7, 123456, tzinfo=timezone.utc),
    datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=timezone(timedelta(hours=-3))),  # crosses to the next UTC hour
    datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=5, minutes=30))),  # the previous UTC day
    datetime(1, 1, 1),  # naive: taken as UTC, as before
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
]


def _reference(value: datetime | None) -> str | None:
    """SQLAlchemy's own way: TypeDecorator's process_bind_param, then SQLite's DATETIME."""
    decorator = UtcDateTime().dialect_impl(DIALECT)
    return TypeDecorator.bind_processor(decorator, DIALECT)(value)


@pytest.mark.parametrize("value", VALUES, ids=str)
def test_the_text_is_sqlalchemys(value: datetime) -> None:
    process = UtcDateTime()._cached_bind_processor(DIALECT)
    assert process(value) == _reference(value)
    assert process(value) == _reference(value)  # from the memo, the same


def test_none_and_wrong_types_behave_as_before() -> None:
    process = UtcDateTime()._cached_bind_processor(DIALECT)
    assert process(None) is None
    with pytest.raises(AttributeError):  # process_bind_param reads .tzinfo, as it always did
        process("2026-01-01")


def test_equal_but_distinct_values_and_alternating_values_each_get_their_own_text() -> None:
    process = UtcDateTime()._cached_bind_processor(DIALECT)
    a = datetime(2026, 5, 5, 10, 0, tzinfo=timezone.utc)
    b = datetime(2026, 5, 5, 12, 0, tzinfo=timezone(timedelta(hours=2)))  # equal to a, another object
    c = datetime(2026, 5, 6, tzinfo=timezone.utc)
    assert [process(v) for v in (a, c, a, b, c)] == [_reference(v) for v in (a, c, a, b, c)]


def test_threads_sharing_the_processor_never_get_anothers_text() -> None:
    process = UtcDateTime()._cached_bind_processor(DIALECT)
    wrong: list[tuple[datetime, str]] = []

    def work(offset: int) -> None:
        values = [datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=offset * 10_000 + i) for i in range(2000)]
        expected = [_reference(v) for v in values]
        for _ in range(5):
            for value, text in zip(values, expected):
                got = process(value)
                if got != text:
                    wrong.append((value, got))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_other_databases_keep_sqlalchemys_chain() -> None:
    from sqlalchemy.dialects import postgresql

    dialect = postgresql.dialect()
    value = datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=timezone(timedelta(hours=-3)))
    got = UtcDateTime()._cached_bind_processor(dialect)
    converted = got(value) if got else UtcDateTime().process_bind_param(value, dialect)
    assert converted == datetime(2026, 3, 4, 8, 6, 7, 8)
