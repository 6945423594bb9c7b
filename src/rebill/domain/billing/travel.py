"""Moving a sandbox store's test clock (decisions §6.11, §6.12): forward only, by ``days``
x 24 h, to a date ``to`` at the same time of day, or by ``hours`` x 1 h.

An advance is the walk of one step at a time (a day; an hour for ``hours``) with a billing
run after each step, so everything that falls due inside it happens in order, as if the
time had really passed. It only stops on the steps at which something has come due
(``due.next_due``): a run on any other step would find nothing to do, so skipping it changes
nothing but the time taken. After each stop's run it looks again, so the work a run makes (a
paid charge's next queued charge, a failed one's retry date) is found by the next look.

One advance of a store at a time: it holds the clock with a lease in real time (the store's
`clock_moving_until`, renewed at each stop, released at the end), and a second advance meanwhile
answers 409. Two walks from the same start would each end at their own target, one of them
losing its time (found by an audit: two advances of 3 days moved the clock 3 days).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime, timedelta, tzinfo

from sqlalchemy import case, or_, update

from rebill.db.engine import Database
from rebill.errors import Conflict, Forbidden, NotFound, ValidationFailed
from rebill.models import stores

from ..payment.gateway import Gateway
from ..schedule import pending
from ..schedule.reconcile import replan
from ..store import clock as store_clock
from ..store import repository as store_repo
from ..store.model import Store
from ..unit import Unit, mark_applied, zone
from ..webhook import delivery
from . import due, run

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
MOST_DAYS = 36_500
MOST_HOURS = MOST_DAYS * 24
# The latest today a store's clock may reach: a century before the calendar ends (9999-12-31),
# the reach of the longest advance, so that what a store computes from its today (a first
# charge date, a year of deliveries, a retry 37 days on) still has a date to land on.
LAST_TODAY = date(9899, 12, 31)
# How long an advance holds its store's clock past its latest stop: a process that died mid
# walk frees the clock after this. Each stop's billing run is far shorter.
LEASE = timedelta(minutes=5)


class ClockMoving(Conflict):
    """Another advance holds the store's clock: this one did nothing (no billing run ran)."""

    default = "The store's test clock is already moving: try again once that advance has answered"


def check(db: Database, real_now: Callable[[], datetime], store_id: int, *, days: int | None = None,
          to: date | None = None, hours: int | None = None) -> None:
    """What ``advance`` refuses before it moves anything (403, 422), asked alone: a request
    refused here starts no billing run (api/resources/store.py)."""
    store = _store(db, store_id)
    if not store.sandbox:
        raise Forbidden("Only a sandbox store can move its clock")
    _target(store, real_now() + store_clock.offset(store), days, to, hours)


def advance(db: Database, gateway: Gateway, real_now: Callable[[], datetime], store_id: int, *,
            days: int | None = None, to: date | None = None, hours: int | None = None,
            progress: Callable[[date], None] | None = None,
            deliver: Callable[[Store], object] | None = None) -> tuple[datetime, run.Summary]:
    """Moves the store's clock by ``days`` x 24 h, to ``to`` at the same time of day, or by
    ``hours`` x 1 h; returns the store's new "now" and what the billing runs on the way did.
    ``progress`` is told the store's date at each stop: each step it ran, and the end.
    ``deliver`` sends the store's due webhook deliveries (jobs/deliver.py ``drain_now``): each
    stop's deliveries go out after its billing run, the retries of failed ones at the stops
    where they fall due (issue 14: a sandbox store's test clock moves its retry schedule)."""
    check(db, real_now, store_id, days=days, to=to, hours=hours)  # a bad request: 422 first
    store = _store(db, store_id)
    # The store as last written holds this advance's lease (``clock_moving_until``): each stop
    # renews the one it holds, and the end lets go of it.
    store = _hold(db, store, real_now)
    try:
        # From the clock as the hold found it: an advance that ended just before counts.
        start = now = real_now() + store_clock.offset(store)
        target, step = _target(store, now, days, to, hours)
        grid = _grid(start, step, zone(store.timezone))
        sources = due.SOURCES + ([_deliveries] if deliver is not None else [])
        summary = run.Summary()
        while now < target:
            _regenerate(db, store, real_now)
            with db.read() as conn:
                when = due.next_due(Unit(conn, store, now), sources)
            now = _stop(grid, start, now, step, target, when)
            store = _set(db, store, now, real_now)
            if when is not None and when <= now:
                _work(db, gateway, store, real_now, summary)
                if deliver is not None:
                    deliver(store)
            if progress is not None:
                progress(now.astimezone(zone(store.timezone)).date())
    finally:
        _release(db, store)
    return now, summary


def _hold(db: Database, store: Store, real_now: Callable[[], datetime]) -> Store:
    """The store's clock for this advance, or 409 while another advance holds it."""
    real = real_now()
    with db.write() as conn:
        taken = conn.execute(update(stores).where(
            stores.c.id == store.id,
            or_(stores.c.clock_moving_until.is_(None), stores.c.clock_moving_until < real))
            .values(clock_moving_until=real + LEASE)).rowcount
        fresh = store_repo.get(conn, store.id)
    if not taken or fresh is None:
        raise ClockMoving()
    return fresh


def _release(db: Database, store: Store) -> None:
    """Lets go of this advance's own lease only (one whose lease lapsed must not free the
    advance that took the clock; found by a review)."""
    with db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == store.id,
                                          stores.c.clock_moving_until == store.clock_moving_until)
                     .values(clock_moving_until=None))


def _grid(start: datetime, step: timedelta, tz: tzinfo) -> Callable[[int], datetime]:
    """The walk's k-th step from ``start``: the same time of day on each following date of the
    store (a day's step), or ``k`` hours on. A day's step is not 24 hours: across a change to
    summer time the store's day has 23, and a walk of 24-hour steps that starts in the last hour
    of a day never stops on the next date, whose charges it then paid a day late (found by an
    audit)."""
    if step != DAY:
        return lambda k: start + k * step
    local = start.astimezone(tz)

    def at(k: int) -> datetime:
        return datetime.combine(local.date() + k * DAY, local.time(), tzinfo=tz).astimezone(start.tzinfo)
    return at


def _stop(grid: Callable[[int], datetime], start: datetime, now: datetime, step: timedelta, target: datetime,
          when: datetime | None) -> datetime:
    """The first step after ``now`` at which ``when`` has come, the target at the latest.
    Steps count from the advance's start, as the step-by-step walk took them, so each run
    happens at the moment it always did (``processed_at``, the events' times). Work due
    already (``when`` not after ``now``: it was there before the advance, or a run could not
    finish it) is run at the next step, as the walk would, so the advance always moves on."""
    if when is None or when >= target:
        return target
    # A first guess by whole steps of fixed length, then the grid's own steps (a store's day
    # is 23 to 25 hours long) either way.
    k = max(-((start - when) // step), (now - start) // step + 1, 1)
    while k > 1 and grid(k - 1) >= when and grid(k - 1) > now:
        k -= 1
    while grid(k) < when or grid(k) <= now:
        k += 1
    return min(grid(k), target)


def _deliveries(unit: Unit) -> datetime | None:
    """The store's next delivery attempt (its own source: only an advance that delivers stops
    for it)."""
    return delivery.next_due(unit.conn, unit.store_id)


def _work(db: Database, gateway: Gateway, store: Store, real_now: Callable[[], datetime],
          summary: run.Summary) -> None:
    """A stop's work: the billing run (charges, retries, prepaid orders, authorizations left
    uncaptured, abandoned claims). A kind of due work that the billing run does not do adds
    its call here and its source in due.py."""
    run.run_store(db, gateway, store, store_clock.clock_for(store, real_now), summary=summary)


def _regenerate(db: Database, store: Store, real_now: Callable[[], datetime]) -> None:
    """NOTE: decisions §5.3, §6.12: the store's deferred regenerations, whatever their window,
    before each look at what is due. Their 5 seconds are real time, but an advance is the
    store's time passing: a look that came before them missed what a `commit=false` change
    had moved earlier (found by an audit: a date moved from the 25th to the 20th, then an
    advance at once, billed on the 25th; a cadence made shorter lost the charges in between).
    The deferrals a stop's billing run makes (a customer cancelled with the charge) are done
    before the next look too."""
    with db.read() as conn:  # most looks find none: no write transaction for them
        address_ids = pending.of_store(conn, store.id)
    if address_ids:
        with db.write() as conn:
            replan(Unit(conn, store, store_clock.clock_for(store, real_now)), address_ids)


def _target(store: Store, now: datetime, days: int | None, to: date | None,
            hours: int | None) -> tuple[datetime, timedelta]:
    """The advance's end and its step."""
    given = [name for name, value in (("days", days), ("to", to), ("hours", hours)) if value is not None]
    if len(given) != 1:
        raise ValidationFailed({name: ["give one of days, to or hours"] for name in given or ["days"]})
    local = now.astimezone(zone(store.timezone))
    room = (LAST_TODAY - local.date()).days  # whole days the clock may still move
    if days is not None:
        if _count(days, "days", MOST_DAYS) > room:
            raise ValidationFailed.field("days", _too_late(room))
        return now + days * DAY, DAY
    if hours is not None:
        if _count(hours, "hours", MOST_HOURS) > room * 24:
            raise ValidationFailed.field("hours", _too_late(room))
        return now + hours * HOUR, HOUR
    assert to is not None
    if to <= local.date():
        raise ValidationFailed.field("to", f"must be after the store's today ({local.date().isoformat()})")
    if (to - local.date()).days > MOST_DAYS:
        raise ValidationFailed.field("to", f"must be at most {MOST_DAYS} days ahead")
    if to > LAST_TODAY:
        raise ValidationFailed.field("to", _too_late(room))
    # NOTE: decisions §6.12, `to` keeps the time of day.
    return datetime.combine(to, local.timetz()).astimezone(now.tzinfo), DAY


def _too_late(room: int) -> str:
    """Repeated advances stop a century before the calendar's end (it was a 500 there)."""
    return f"would take the store's today past {LAST_TODAY.isoformat()} (at most {max(room, 0)} days from now)"


def _count(value: object, name: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationFailed.field(name, f"must be a whole number of {name}, at least 1")
    if value > most:
        raise ValidationFailed.field(name, f"must be at most {most}")
    return value


def _set(db: Database, store: Store, now: datetime, real_now: Callable[[], datetime]) -> Store:
    seconds = math.ceil((now - real_now()).total_seconds())
    with db.write() as conn:
        # Forward only; the hold renewed in the same statement (one revision bump a stop). A
        # walk that lost its hold (a stop longer than the lease, and another advance took the
        # clock) stops here: 409, the clock where its last stop left it.
        mine = stores.c.clock_moving_until == store.clock_moving_until
        if not conn.execute(update(stores).where(stores.c.id == store.id, mine)
                            .values(clock_offset_seconds=case((stores.c.clock_offset_seconds < seconds, seconds),
                                                              else_=stores.c.clock_offset_seconds),
                                    clock_moving_until=real_now() + LEASE)).rowcount:
            raise Conflict("The store's test clock was taken over by another advance: this one stopped")
        mark_applied(conn)  # a keyed advance's move is its outcome, whatever falls due after it
        fresh = store_repo.get(conn, store.id)
    store_clock.moved(store, seconds)
    assert fresh is not None
    return fresh


def _store(db: Database, store_id: int) -> Store:
    with db.read() as conn:
        store = store_repo.get(conn, store_id)
    if store is None:
        raise NotFound()
    return store
