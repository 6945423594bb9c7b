"""What a billing run does besides paying charges, once per store and run:

- a prepaid charge's later orders (`queued`, made when the charge was paid) are processed when
  their date comes: `success`, `processed_at`, `order/processed` (decisions §6.12, Prepaid);
- an authorization still uncaptured 6 days after it was made fires `charge/uncaptured`, once
  (decisions §6.7).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import and_, exists, select, update

from rebill.models import charges, events, orders

from ..charge.model import PENDING
from ..unit import Unit

UNCAPTURED_AFTER = timedelta(days=6)


def _due_orders(unit: Unit) -> list[int]:
    return list(unit.conn.execute(select(orders.c.id).where(
        orders.c.store_id == unit.store_id, orders.c.status == "queued", orders.c.is_prepaid.is_(True),
        orders.c.charge_id.is_not(None), orders.c.scheduled_at <= unit.today)).scalars())


def _uncaptured(unit: Unit) -> list[int]:
    told = exists().where(events.c.store_id == unit.store_id, events.c.topic == "charge/uncaptured",
                          events.c.resource_id == charges.c.id)
    return list(unit.conn.execute(select(charges.c.id).where(
        charges.c.store_id == unit.store_id, charges.c.status == PENDING,
        and_(charges.c.authorized_at.is_not(None), charges.c.authorized_at <= unit.now - UNCAPTURED_AFTER),
        ~told)).scalars())


def anything_due(unit: Unit) -> bool:
    """A read first: most runs of most stores have nothing here, and need no write."""
    return bool(_due_orders(unit) or _uncaptured(unit))


def release_prepaid_orders(unit: Unit) -> list[int]:
    due = _due_orders(unit)
    if due:
        # Only the orders this statement changed are told: one deleted or processed meanwhile
        # is not (RETURNING, on both databases).
        due = sorted(unit.conn.execute(
            update(orders).where(orders.c.id.in_(due), orders.c.status == "queued")
            .values(status="success", processed_at=unit.now, updated_at=unit.now).returning(orders.c.id)).scalars())
        unit.record_many("order/processed", due)
    return due


def flag_uncaptured(unit: Unit) -> list[int]:
    waiting = _uncaptured(unit)  # again inside the write: two runs never tell it twice
    unit.record_many("charge/uncaptured", waiting)
    return waiting
