"""Date arithmetic of charge intervals (decisions §5.1, §5.3, §5.16): pure functions, no I/O.

A cadence is a unit (``day``, ``week``, ``month``) and a frequency. Monthly cadences keep an
anchor day, so that Jan 31 -> Feb 28 (or 29) -> Mar 31: the day is clamped to the month's
end, never carried over. A weekly cadence with an order day keeps that weekday as its anchor:
each date falls on the first such weekday on or after ``start`` plus the weeks, so a first
date given on another weekday does not carry over. Weekdays count from 0 = Monday (decisions
§5.1)."""

from __future__ import annotations

import calendar
from datetime import date, timedelta

UNITS = ("day", "week", "month")
# Far enough for any schedule a client can ask to see; keeps loops bounded on hostile input.
MAX_STEPS = 10_000


def add_months(start: date, months: int, anchor_day: int | None = None) -> date:
    index = start.year * 12 + start.month - 1 + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(anchor_day or start.day, last))


def add_interval(start: date, unit: str, frequency: int, anchor_day: int | None = None) -> date:
    """``start`` plus ``frequency`` units; a month keeps ``anchor_day`` (clamped), a week
    moves on to the weekday ``anchor_day`` when it has one."""
    if unit == "day":
        return start + timedelta(days=frequency)
    if unit == "week":
        later = start + timedelta(weeks=frequency)
        return later if anchor_day is None else later + timedelta(days=(anchor_day - later.weekday()) % 7)
    if unit == "month":
        return add_months(start, frequency, anchor_day)
    raise ValueError(f"unknown interval unit {unit!r}")


def anchor_on(day: date, unit: str, anchor_day: int | None) -> int | None:
    """``anchor_day`` when ``day`` falls on it (a month's day as clamped to ``day``'s month, a
    week's weekday), else None: a date off its cadence's day (a checkout's, or a subscription's
    day moved since) steps on from its own day, not from the cadence's."""
    if anchor_day is None or unit == "day":
        return anchor_day
    if unit == "week":
        return anchor_day if day.weekday() == anchor_day else None
    return anchor_day if day.day == min(anchor_day, calendar.monthrange(day.year, day.month)[1]) else None


def align(start: date, unit: str, day_of_month: int | None, day_of_week: int | None) -> date:
    """The first date on or after ``start`` that falls on the order day: a day of the month
    (clamped to short months) for monthly cadences, a weekday for weekly ones."""
    if unit == "month" and day_of_month:
        candidate = add_months(start, 0, day_of_month)
        return candidate if candidate >= start else add_months(start, 1, day_of_month)
    if unit == "week" and day_of_week is not None:
        return start + timedelta(days=(day_of_week - start.weekday()) % 7)
    return start


def first_after(start: date, unit: str, frequency: int, anchor_day: int | None, after: date) -> date:
    """The first date of the cadence through ``start`` that is strictly after ``after``
    (``start`` itself when it already is)."""
    current, steps = start, 0
    if unit == "day" and current <= after:
        # Whole steps at once: a daily cadence can be years behind.
        behind = (after - current).days // frequency + 1
        return current + timedelta(days=behind * frequency)
    while current <= after:
        current = add_interval(start, unit, frequency * (steps + 1), anchor_day)
        steps += 1
        if steps > MAX_STEPS:
            raise ValueError("cadence does not reach the date")
    return current


def occurrences(start: date, unit: str, frequency: int, anchor_day: int | None, *, until: date,
                limit: int) -> list[date]:
    """The dates of the cadence from ``start`` (included) up to ``until``, at most ``limit``.
    Every date is computed from ``start``, so month ends do not drift."""
    dates: list[date] = []
    step = 0
    while len(dates) < limit:
        try:
            current = add_interval(start, unit, frequency * step, anchor_day) if step else start
        except (OverflowError, ValueError):  # past 9999-12-31: later than any ``until``
            break
        if current > until:
            break
        dates.append(current)
        step += 1
    return dates
