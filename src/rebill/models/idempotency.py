"""Idempotency keys (decisions §9.2, §6.12): one row per store, token and key, holding the
request's fingerprint and, once it has answered, the answer to replay."""

from sqlalchemy import Column, Integer, LargeBinary, String, Table, UniqueConstraint

from .base import IdType, JsonType, UtcDateTime, id_column, metadata

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    id_column(),
    Column("store_id", IdType, nullable=False),
    Column("token_id", IdType, nullable=False),
    Column("key", String(255), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    # running | applied (committed, no answer yet) | done | finished (its payment claim finished by
    # another: domain/claimed_keys.py)
    Column("state", String(8), nullable=False),
    Column("status", Integer, nullable=True),
    Column("headers", JsonType, nullable=True),
    Column("body", LargeBinary, nullable=True),
    Column("created_at", UtcDateTime(), nullable=False, index=True),
    Column("updated_at", UtcDateTime(), nullable=False),
    # The run of the payment claim the request left for the processor's answer (domain/claimed_keys.py).
    Column("claim", String(64), nullable=True, index=True),
    UniqueConstraint("store_id", "token_id", "key", name="uq_idempotency_keys_key"),
    sqlite_autoincrement=True,
)
