"""What a billing run does besides paying charges, once per store and run:

- queued orders are processed when their date comes: `success`, `processed_at`,
  `order/processed` and `order/success` (decisions §6.12, Prepaid): a prepaid charge's later
  orders (made when the charge was paid) and clones (`POST /orders/{id}/clone`, a queued copy
  on a date: found by an audit, they stayed queued for good);
- an authorization still uncaptured 6 days after it was made fires `charge/uncaptured`, once
  (decisions §6.7);
- an authorization whose capture window closed records `charge/authorization_lapsed`, once, and
  its address's queued charges are planned again: while it could be captured it counted as a use
  of the code it carries, lapsed it does not, and the code goes back to the next charge (found by
  an audit: the stored charge kept the plan of before the lapse and was billed without it);
- a queued charge and a queued order are told `charge/upcoming` and
  `order/upcoming` the store's `upcoming_notice_days` ahead of their date (default 3; 0 tells
  nothing), once per date: a charge moved to another date is told again (issue 14).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from sqlalchemy import Table, exists, func, or_, select, update

from rebill.models import charges, events, orders

from ..charge.model import CAPTURE_WINDOW, PENDING, QUEUED
from ..schedule.reconcile import replan
from ..unit import Unit

UNCAPTURED_AFTER = timedelta(days=6)
UNCAPTURED, LAPSED = "charge/uncaptured", "charge/authorization_lapsed"


def _due_orders(unit: Unit) -> list[int]:
    return list(unit.conn.execute(select(orders.c.id).where(
        orders.c.store_id == unit.store_id, orders.c.status == "queued", orders.c.scheduled_at <= unit.today)).scalars())


def authorizations_untold(unit: Unit, topic: str) -> list[Any]:
    """Conditions on `charges`: the store's authorizations (pending) not told ``topic`` yet.
    The sweeps below and their due moments (due.py) read them alike."""
    told = exists().where(events.c.store_id == unit.store_id, events.c.topic == topic,
                          events.c.resource_id == charges.c.id)
    return [charges.c.store_id == unit.store_id, charges.c.status == PENDING, charges.c.authorized_at.is_not(None),
            ~told]


def _uncaptured(unit: Unit) -> list[int]:
    return list(unit.conn.execute(select(charges.c.id).where(
        *authorizations_untold(unit, UNCAPTURED), charges.c.authorized_at <= unit.now - UNCAPTURED_AFTER)).scalars())


def lapsing(unit: Unit) -> list[Any]:
    """Conditions on `charges`: authorizations whose window's closing is not told yet; one being
    captured (claimed) is the capture's."""
    return [*authorizations_untold(unit, LAPSED), charges.c.claimed_by.is_(None)]


def _lapsed(unit: Unit) -> list[tuple[int, int]]:
    """(charge, address) of each authorization past its capture window not told yet."""
    return [(row[0], row[1]) for row in unit.conn.execute(select(charges.c.id, charges.c.address_id).where(
        *lapsing(unit), charges.c.authorized_at < unit.now - CAPTURE_WINDOW).order_by(charges.c.id))]


def anything_due(unit: Unit) -> bool:
    """A read first: most runs of most stores have nothing here, and need no write."""
    return bool(_due_orders(unit) or _uncaptured(unit) or _lapsed(unit))


def upcoming_due(unit: Unit) -> bool:
    return bool(_untold(unit, charges) or _untold(unit, orders))


def _untold_where(unit: Unit, table: Table) -> list[object]:
    """Queued rows of the store whose date is coming and has not been told (a charge, or an
    order: a prepaid charge's later one or a clone)."""
    status = QUEUED if table is charges else "queued"
    conditions = [table.c.store_id == unit.store_id, table.c.status == status,
                  or_(table.c.upcoming_told_for.is_(None), table.c.upcoming_told_for != table.c.scheduled_at)]
    return conditions


def _within_notice(unit: Unit, table: Table) -> list[object]:
    """NOTE: issue 14, told `days` ahead; a date already come is paid, not announced."""
    today = unit.today
    return [table.c.scheduled_at > today, table.c.scheduled_at <= today + timedelta(days=unit.store.upcoming_notice_days)]


def _untold(unit: Unit, table: Table) -> list[int]:
    if unit.store.upcoming_notice_days <= 0:
        return []
    return list(unit.conn.execute(select(table.c.id).where(
        *_untold_where(unit, table), *_within_notice(unit, table))).scalars())


def first_untold(unit: Unit, table: Table) -> date | None:
    """The earliest date still to be told: its notice falls due ``upcoming_notice_days``
    before it (domain/billing/due.py)."""
    if unit.store.upcoming_notice_days <= 0:
        return None
    return unit.conn.execute(select(func.min(table.c.scheduled_at)).where(
        *_untold_where(unit, table), table.c.scheduled_at > unit.today)).scalar()


def tell_upcoming(unit: Unit) -> tuple[list[int], list[int]]:
    """`charge/upcoming` and `order/upcoming` for what comes within the store's notice days;
    returns the charges and orders told."""
    told = []
    for table, topic in ((charges, "charge/upcoming"), (orders, "order/upcoming")):
        ids = _untold(unit, table)
        if ids:
            # Only the rows this statement marks are told: on PostgreSQL two runs of one store
            # (a worker's and a clock advance's) may both have read them untold; the second
            # waits for the first's row locks, then finds them told (found by an audit: one
            # order told three times for one date). RETURNING, on both databases. The window
            # is asked again too: a row whose date a request moved while this waited for its
            # lock is told at its new date's time, not now (found by an audit: moved 24 days
            # ahead, it was told then, and marked told for the new date).
            ids = sorted(unit.conn.execute(
                update(table).where(table.c.id.in_(ids), *_untold_where(unit, table), *_within_notice(unit, table))
                .values(upcoming_told_for=table.c.scheduled_at).returning(table.c.id)).scalars())
            unit.record_many(topic, ids)
        told.append(ids)
    return told[0], told[1]


def release_queued_orders(unit: Unit) -> list[int]:
    due = _due_orders(unit)
    if due:
        # Only the orders this statement changed are told: one deleted or processed meanwhile
        # is not (RETURNING, on both databases), nor one whose date a request moved while this
        # waited for its lock (found by an audit on PostgreSQL: a delayed order answered 200
        # with its new date was sent at once).
        due = sorted(unit.conn.execute(
            update(orders).where(orders.c.id.in_(due), orders.c.status == "queued", orders.c.scheduled_at <= unit.today)
            .values(status="success", processed_at=unit.now, updated_at=unit.now).returning(orders.c.id)).scalars())
        unit.record_many("order/processed", due)
        unit.record_many("order/success", due)
    return due


def flag_uncaptured(unit: Unit) -> list[int]:
    """Tells each authorization 6 days old, once. Its charge's row is locked first, then the
    events are read again in a statement of their own: on PostgreSQL two runs of one store
    queue on the lock, and the second's look sees the first's events (found by an audit: one
    authorization told three times by overlapping runs, each having read it untold)."""
    candidates = _uncaptured(unit)
    if candidates:
        unit.conn.execute(select(charges.c.id).where(charges.c.id.in_(candidates)).order_by(charges.c.id)
                          .with_for_update())
    waiting = _uncaptured(unit) if candidates else []
    unit.record_many(UNCAPTURED, waiting)
    return waiting


def close_lapsed(unit: Unit) -> list[int]:
    """Tells each authorization whose capture window closed, once, and plans its address's
    charges again (the module's docstring). Locked and read again as ``flag_uncaptured``."""
    candidates = _lapsed(unit)
    if candidates:
        unit.conn.execute(select(charges.c.id).where(charges.c.id.in_([c for c, _ in candidates]))
                          .order_by(charges.c.id).with_for_update())
    lapsed = _lapsed(unit) if candidates else []
    unit.record_many(LAPSED, [charge_id for charge_id, _ in lapsed])
    if lapsed:
        replan(unit, sorted({address_id for _, address_id in lapsed}))
    return [charge_id for charge_id, _ in lapsed]
