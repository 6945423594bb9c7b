"""Stores and tokens in the database."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import stores, tokens

from .model import Store, Token, TokenRecord


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _store(row: Any) -> Store:
    return Store(**row._mapping)


_by_id = Prepared(select(stores).where(stores.c.id == bindparam("id")))
_names = [c.name for c in stores.c]


def get(conn: Connection, store_id: int) -> Store | None:
    """Prepared: every replan reads its store fresh (a token's cached copy may be seconds old)."""
    row = _by_id.one(conn, id=store_id)
    return Store(**dict(zip(_names, row))) if row else None


def by_name(conn: Connection, name: str) -> Store | None:
    row = conn.execute(select(stores).where(stores.c.name == name)).first()
    return _store(row) if row else None


def all_stores(conn: Connection) -> list[Store]:
    return [_store(r) for r in conn.execute(select(stores).order_by(stores.c.id))]


def insert_store(conn: Connection, values: dict[str, Any]) -> Store:
    store_id = insert_row(conn, stores, values)
    found = get(conn, store_id)
    assert found is not None
    return found


def update_store(conn: Connection, store_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(stores).where(stores.c.id == store_id).values(**values))


def insert_token(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, tokens, values)


_token_lookup = (
    select(tokens.c.id, tokens.c.store_id, tokens.c.name, tokens.c.contact_email, tokens.c.client_name,
           tokens.c.scopes, tokens.c.rate_limit, tokens.c.revoked_at)
)


def token_by_raw(conn: Connection, raw: str) -> tuple[Token, Store] | None:
    row = conn.execute(_token_lookup.where(tokens.c.token_hash == hash_token(raw))).first()
    if row is None or row.revoked_at is not None:
        return None
    store = get(conn, row.store_id)
    if store is None:
        return None
    token = Token(id=row.id, store_id=row.store_id, name=row.name, contact_email=row.contact_email,
                  client_name=row.client_name, scopes=frozenset(row.scopes), rate_limit=row.rate_limit)
    return token, store



_token_records = select(*columns_for(TokenRecord, tokens.c))
_token_record = Prepared(_token_records.where(tokens.c.id == bindparam("id")))  # an async batch's every chunk


def tokens_of_store(conn: Connection, store_id: int) -> list[TokenRecord]:
    rows = conn.execute(_token_records.where(tokens.c.store_id == store_id).order_by(tokens.c.id))
    return [TokenRecord(*row) for row in rows]


def token_record(conn: Connection, token_id: int) -> TokenRecord | None:
    row = _token_record.one(conn, id=token_id)
    return TokenRecord(*row) if row else None


def revoke_token(conn: Connection, token_id: int, now: datetime) -> None:
    """Sets ``revoked_at`` once: a token already revoked keeps the time it was first revoked."""
    conn.execute(update(tokens).where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
                 .values(revoked_at=now, updated_at=now))
