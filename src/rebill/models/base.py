"""Column types shared by every table.

Tables are SQLAlchemy Core ``Table`` objects (not ORM classes): repositories issue Core
statements and map rows to domain objects themselves, which keeps the request path short
(see docs/architecture.md).
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, DateTime, ForeignKey, Integer, MetaData, String, TypeDecorator

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# NOTE: decisions §1.2, ids are integers unique across the deployment (per table, never
# reused: SQLite AUTOINCREMENT, PostgreSQL sequences).
IdType = BigInteger().with_variant(Integer, "sqlite")
# `json` on PostgreSQL too, not `jsonb`: it keeps the text as written (key order, numbers), as
# SQLite does, so that both answer alike (migration 0027).
JsonType = JSON()


class UtcDateTime(TypeDecorator[datetime]):
    """Stores naive UTC, returns aware UTC; both databases compare it the same way."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value

    def bind_processor(self, dialect: Any) -> Any:
        """On SQLite, one function from an aware datetime to SQLAlchemy's stored text, instead
        of TypeDecorator's chain (a dict built per value), remembering the last value: a
        write's timestamps are mostly one ``now`` (created_at, updated_at, its event's
        created_at), formatted once. The memo is one tuple, swapped whole, so threads sharing
        the processor never see a value with another's text; it holds its datetime, whose
        identity therefore cannot be reused by another object."""
        standard = super().bind_processor(dialect)
        if dialect.name != "sqlite":
            return standard
        utc = timezone.utc
        memo: list[tuple[Any, Any]] = [(None, None)]

        def process(value: Any) -> Any:
            last = memo[0]
            if value is last[0]:
                return last[1]
            if type(value) is not datetime:
                return standard(value)  # None, or anything else, as SQLAlchemy takes it
            naive = value if value.tzinfo is None else value.astimezone(utc).replace(tzinfo=None)
            # SQLAlchemy's SQLite storage format: microseconds always written.
            text = naive.isoformat(" ", "microseconds")
            memo[0] = (value, text)
            return text
        return process

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        """Returns aware UTC, with one function per value rather than TypeDecorator's chain
        (every row of every read decodes two or three of these)."""
        utc = timezone.utc
        if dialect.name == "sqlite":
            # SQLite keeps SQLAlchemy's ISO text; parsing it with the zone attached costs a
            # fifth of parsing it and then calling ``replace(tzinfo=...)``.
            parse = datetime.fromisoformat
            return lambda value: None if value is None else parse(value + "+00:00")
        return lambda value: None if value is None else value.replace(tzinfo=utc)


class DecimalText(TypeDecorator[Decimal]):
    """Exact decimals on both databases (SQLite has no exact NUMERIC): stored as text."""

    impl = String(40)
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: Any) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: str | None, dialect: Any) -> Decimal | None:
        return None if value is None else Decimal(value)


def id_column() -> Column[Any]:
    return Column("id", IdType, primary_key=True, autoincrement=True)


def store_column() -> Column[Any]:
    return Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), nullable=False, index=True)


def timestamps() -> list[Column[Any]]:
    return [
        Column("created_at", UtcDateTime(), nullable=False),
        Column("updated_at", UtcDateTime(), nullable=False),
    ]

