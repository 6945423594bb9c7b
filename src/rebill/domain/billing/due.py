"""When a store's work next falls due, so that a test clock advance (``travel.py``) can jump
from one such moment to the next instead of stepping through days when nothing happens.

``next_due(unit)`` is the earliest moment at which some work of ``unit``'s store is due: the
minimum of what each source in ``SOURCES`` answers. A source is one kind of due work, one
function ``(unit: Unit) -> datetime | None``: the earliest moment at which a row of its kind
is due (an aware datetime), or None when it has none. A moment at or before ``unit.now`` is
work already due that no run has done yet (a charge dated today, made before the advance;
work a run could not finish); the advance runs it at its next step.

Adding a kind of due work (upcoming-charge notices, webhook delivery retries, ...):

1. write its source here: one aggregate query (``min``) scoped to ``unit.store_id``, with the
   same conditions as the query that finds the work due, so the two never disagree; a date
   (a ``Date`` column) falls due when it has come, at midnight in the store's timezone:
   return ``came(unit, day)``;
2. append it to ``SOURCES``;
3. if that work is not done by the billing run (``run.run_store``), call it where the advance
   does each stop's work (``travel._work``).

A source that misses a kind of work does not lose it: the next billing run does it; an
advance would only do it late (at the next stop something else is due), so every kind the
billing run does has a source, and a test runs the billing run after an advance and expects
it to find nothing left.

Deferred regenerations (decisions §5.3) have no source: their 5-second window is real time,
not the store's clock; the advance runs every one of its store before each look
(``travel._regenerate``), and a due charge still flagged ``has_uncommitted_changes`` is
regenerated when it is paid (``run.process``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select

from rebill.models import charges, checkouts, orders

from ..charge.model import CAPTURE_WINDOW, ERROR, QUEUED
from ..unit import Unit, zone
from .claim import STALE_AFTER
from .sweep import UNCAPTURED, UNCAPTURED_AFTER, authorizations_untold, first_untold, lapsing

Source = Callable[[Unit], datetime | None]


def came(unit: Unit, day: date | None) -> datetime | None:
    """NOTE: decisions §6.12, a date "has come" at midnight in the store's timezone."""
    if day is None:
        return None
    return datetime.combine(day, time(0), tzinfo=zone(unit.store.timezone))


def _earliest(unit: Unit, column: ColumnElement[Any], *where: ColumnElement[bool]) -> Any:
    return unit.conn.execute(select(func.min(column)).where(*where)).scalar()


def queued_charges(unit: Unit) -> datetime | None:
    """NOTE: decisions §6.5, a queued charge is due on its date (claim.py ``due``). A claimed
    one waits for its claim (``abandoned_claims``)."""
    return came(unit, _earliest(unit, charges.c.scheduled_at, charges.c.store_id == unit.store_id,
                                charges.c.status == QUEUED, charges.c.claimed_by.is_(None)))


def retries(unit: Unit) -> datetime | None:
    """NOTE: decisions §6.4, §6.12, a charge in error is tried again on its retry date (null
    once closed)."""
    return came(unit, _earliest(unit, charges.c.retry_date, charges.c.store_id == unit.store_id,
                                charges.c.status == ERROR, charges.c.claimed_by.is_(None)))


def queued_orders(unit: Unit) -> datetime | None:
    """NOTE: decisions §6.12 Prepaid, a queued order (a paid prepaid charge's later one, a clone)
    is processed on its date (sweep.py ``release_queued_orders``)."""
    return came(unit, _earliest(unit, orders.c.scheduled_at, orders.c.store_id == unit.store_id,
                                orders.c.status == "queued"))


def uncaptured(unit: Unit) -> datetime | None:
    """NOTE: decisions §6.7, an authorization not captured is told 6 days after it was made,
    once (sweep.py ``flag_uncaptured``)."""
    first = _earliest(unit, charges.c.authorized_at, *authorizations_untold(unit, UNCAPTURED))
    return None if first is None else first + UNCAPTURED_AFTER


def lapsed(unit: Unit) -> datetime | None:
    """An authorization's capture window closes 7 days after it was made, and the billing run
    plans its address again then, once (sweep.py ``close_lapsed``)."""
    first = _earliest(unit, charges.c.authorized_at, *lapsing(unit))
    # The window's end included: it closes the moment after.
    return None if first is None else first + CAPTURE_WINDOW + timedelta(seconds=1)


def abandoned_claims(unit: Unit) -> datetime | None:
    """A claim no run finished is taken over once it is stale (run.py ``finish_abandoned``)."""
    first = _earliest(unit, charges.c.claimed_at, charges.c.store_id == unit.store_id,
                      charges.c.claimed_by.is_not(None))
    return None if first is None else first + STALE_AFTER


def abandoned_checkouts(unit: Unit) -> datetime | None:
    """A checkout's payment whose answer was never recorded is finished once its claim is stale
    (run.py ``finish_abandoned``, domain/checkout/charge.py)."""
    first = _earliest(unit, checkouts.c.claimed_at, checkouts.c.store_id == unit.store_id,
                      checkouts.c.claimed_by.is_not(None))
    return None if first is None else first + STALE_AFTER


def upcoming_notices(unit: Unit) -> datetime | None:
    """NOTE: issue 14, `charge/upcoming` and `order/upcoming` are told the store's
    `upcoming_notice_days` before the date (sweep.py ``tell_upcoming``)."""
    dates = [day for table in (charges, orders) if (day := first_untold(unit, table)) is not None]
    if not dates:
        return None
    return came(unit, min(dates) - timedelta(days=unit.store.upcoming_notice_days))


SOURCES: list[Source] = [queued_charges, retries, queued_orders, uncaptured, lapsed, abandoned_claims,
                         abandoned_checkouts, upcoming_notices]


def next_due(unit: Unit, sources: list[Source] = SOURCES) -> datetime | None:
    """The earliest moment at which work of the store is due, at or before ``unit.now`` for
    work due already; None when it has none."""
    return min((moment for source in sources if (moment := source(unit)) is not None), default=None)
