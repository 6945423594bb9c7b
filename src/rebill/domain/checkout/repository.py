"""Checkouts in the database. Every statement is scoped to one store (decisions §1.1)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, or_, select, update

from rebill.db.prepared import Prepared
from rebill.db.rows import columns_for
from rebill.db.statements import insert_row
from rebill.models import checkouts

from .model import Checkout

# How long a payment in flight holds the checkout before another request may take it over (as
# a billing run's claim on a charge, decisions §6.5).
STALE_AFTER = timedelta(seconds=60)

_select = select(*columns_for(Checkout, checkouts.c))
_by_token = Prepared(_select.where(checkouts.c.token == bindparam("token"),
                                   checkouts.c.store_id == bindparam("store_id")))


def get(conn: Connection, store_id: int, token: str, *, lock: bool = False) -> Checkout | None:
    """``lock`` holds the row until the unit ends (PostgreSQL; SQLite serializes writers)."""
    if not lock:
        row = _by_token.one(conn, token=token, store_id=store_id)
        return Checkout(*row) if row else None
    stmt = _select.where(checkouts.c.token == token, checkouts.c.store_id == store_id).with_for_update()
    found = conn.execute(stmt).first()
    return Checkout(*found) if found else None


def insert(conn: Connection, values: dict[str, Any]) -> int:
    return insert_row(conn, checkouts, values)


def save(conn: Connection, store_id: int, checkout_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(checkouts).where(checkouts.c.id == checkout_id, checkouts.c.store_id == store_id)
                 .values(**values))


def claim(conn: Connection, store_id: int, checkout_id: int, run: str, now: datetime, stale_after: timedelta,
          values: dict[str, Any]) -> bool:
    """Takes the checkout for a payment unless a live claim holds it or it is completed: one
    conditional UPDATE, so only one request (or run) ever wins (as charges are claimed,
    domain/billing/claim.py)."""
    stmt = (update(checkouts)
            .where(checkouts.c.id == checkout_id, checkouts.c.store_id == store_id,
                   checkouts.c.completed_at.is_(None),
                   or_(checkouts.c.claimed_by.is_(None), checkouts.c.claimed_at <= now - stale_after))
            .values(claimed_by=run, claimed_at=now, **values))
    return conn.execute(stmt).rowcount == 1


def live_claims_with_code(conn: Connection, store_id: int, discount_id: int, other_than: int) -> list[str]:
    """The lower-cased e-mails of the other checkouts (``other_than`` 0: of any) being charged
    with this code: their payment in flight, claimed and not completed, a stale claim too (its
    payment's answer was lost, and it will be finished with its code; found by an audit: once
    stale, another checkout took a one-use code, and both were recorded with it)."""
    stmt = select(checkouts.c.email).where(
        checkouts.c.store_id == store_id, checkouts.c.discount_id == discount_id, checkouts.c.id != other_than,
        checkouts.c.completed_at.is_(None), checkouts.c.claimed_by.is_not(None))
    return [(email or "").strip().lower() for email in conn.execute(stmt).scalars()]


def release(conn: Connection, store_id: int, checkout_id: int, run: str) -> None:
    conn.execute(update(checkouts).where(checkouts.c.id == checkout_id, checkouts.c.store_id == store_id,
                                         checkouts.c.claimed_by == run)
                 .values(claimed_by=None, claimed_at=None, payment=None))


def abandoned(conn: Connection, store_id: int, before: datetime) -> list[str]:
    """The tokens of checkouts whose payment claim went stale with no answer recorded."""
    return list(conn.execute(select(checkouts.c.token).where(
        checkouts.c.store_id == store_id, checkouts.c.claimed_by.is_not(None),
        checkouts.c.claimed_at <= before).order_by(checkouts.c.id)).scalars())

