"""The rules of a subscription's cadence (decisions §5.1, §5.3, §5.4, §5.16): which interval
fields go together, what they may hold, and where the next charge date falls."""

from __future__ import annotations

from collections.abc import Container
from datetime import date
from typing import Any

from rebill.errors import ValidationFailed, add_error

from ..schedule.dates import UNITS, add_interval, align, first_after

INTERVAL_FIELDS = ("charge_interval_frequency", "order_interval_frequency", "order_interval_unit")
MAX_FREQUENCY = 1000
MAX_CHARGES = 2**31 - 1  # expire_after_specific_number_of_charges: a 32-bit column
# What each cadence field may hold, as ``check`` (and a plan's preferences, domain/catalog/rules.py)
# take it; the OpenAPI document states the same ranges (api/fields.py ``domain_range``).
RANGES = {
    "charge_interval_frequency": (1, MAX_FREQUENCY),
    "order_interval_frequency": (1, MAX_FREQUENCY),
    "order_day_of_month": (1, 31),
    "order_day_of_week": (0, 6),
    "cutoff_day_of_month": (0, 31),
    "cutoff_day_of_week": (0, 6),
    "expire_after_specific_number_of_charges": (1, MAX_CHARGES),
}


# The day fields and the interval unit each belongs to (plans check theirs alike,
# domain/catalog/rules.py).
DAY_UNITS = {"order_day_of_month": "month", "cutoff_day_of_month": "month",
             "order_day_of_week": "week", "cutoff_day_of_week": "week"}


def check(values: dict[str, Any], sent: Container[str] | None = None) -> dict[str, Any]:
    """The cadence fields of ``values`` checked together; the unit lower-cased (decisions §5.16).
    ``sent``: the fields the request sends (None: all, a create); a cutoff day is held to its
    unit only when sent, so one stored before that rule (a weekly item's day of the month,
    shown, moving no date) does not refuse an update of other fields (found by a review)."""
    errors: dict[str, list[str]] = {}
    unit = values.get("order_interval_unit")
    if isinstance(unit, str):
        unit = values["order_interval_unit"] = unit.strip().lower()
    if unit is None:
        add_error(errors, "order_interval_unit", "is required")  # as the frequencies say
    elif unit not in UNITS:
        add_error(errors, "order_interval_unit", f"must be one of: {', '.join(UNITS)}")
    for name in ("charge_interval_frequency", "order_interval_frequency"):
        value = values.get(name)
        if value is None:
            add_error(errors, name, "is required")
        elif not 1 <= value <= MAX_FREQUENCY:
            add_error(errors, name, f"must be from 1 to {MAX_FREQUENCY}")
    charge, order = values.get("charge_interval_frequency"), values.get("order_interval_frequency")
    if not errors and charge != order and (charge < order or charge % order):
        # NOTE: decisions §5.4, prepaid: a multiple of the order interval, and larger.
        add_error(errors, "charge_interval_frequency",
                  "must equal order_interval_frequency or be a larger multiple of it (prepaid)")
    for name, belongs in DAY_UNITS.items():
        # A cutoff day belongs to its cadence as an order day does (found by an audit: a weekly
        # subscription took a `cutoff_day_of_month`, which a plan refuses).
        value, (low, high) = values.get(name), RANGES[name]
        if value is None:
            continue
        if unit != belongs:
            # Order days always; a cutoff day when sent (``sent``).
            if name.startswith("order_") or sent is None or name in sent:
                add_error(errors, name, f"applies to {belongs}ly intervals only")
        elif not low <= value <= high:
            add_error(errors, name, "must be from 0 (Monday) to 6 (Sunday)" if belongs == "week"
                      else f"must be from {low} to {high}")
    limit = values.get("expire_after_specific_number_of_charges")
    if limit is not None and not 1 <= limit <= MAX_CHARGES:
        add_error(errors, "expire_after_specific_number_of_charges",
                  "must be at least 1" if limit < 1 else f"must be at most {MAX_CHARGES}")
    if errors:
        raise ValidationFailed(errors)
    return values


def check_future(name: str, when: date, today: date) -> None:
    """NOTE: decisions §5.3, a next charge date in the past answers 422; today is allowed."""
    if when < today:
        raise ValidationFailed.field(name, "must not be in the past")


LATE = "is too late: the charge after it would fall past 9999-12-31"


def has_room(when: date, unit: str | None, frequency: int | None, anchor_day: int | None = None) -> bool:
    """Whether the cadence date after ``when`` exists: billing moves a subscription's next
    charge one charge interval on, which must not fall past 9999-12-31."""
    if not unit or not frequency:
        return True
    try:
        add_interval(when, unit, frequency, anchor_day)
    except (OverflowError, ValueError):
        return False
    return True


def check_room(name: str, when: date, unit: str | None, frequency: int | None, anchor_day: int | None = None) -> None:
    """Hardening: a next charge date with no cadence date after it answers 422 now, rather
    than a 500 when the charge is paid and the next one cannot be dated."""
    if not has_room(when, unit, frequency, anchor_day):
        raise ValidationFailed.field(name, LATE)


def anchor_for(unit: str, when: date, day_of_month: int | None, day_of_week: int | None = None) -> int | None:
    """What a cadence keeps from one date to the next (schedule/dates.py): the day of the month
    (the order day, else the date's), or for a weekly cadence its order weekday, if any. A date
    moved by hand passes no order day: it becomes the cadence's own."""
    if unit == "month":
        return day_of_month or when.day
    return day_of_week if unit == "week" else None


def set_by_hand(item: Any, when: date) -> dict[str, Any]:
    """The changes of a monthly or weekly item whose next date is set by hand (a
    `set_next_charge_date`, a `change_address` or a merge with a date, its charge moved, a `PUT`
    of the date alone): that date's day is the cadence's from then on, and an order day that was
    set becomes that day, so that what the item shows is what it bills (found by an audit: the
    renewals followed the new day while `order_day_of_month` still showed the old one, and a
    `PUT` of the date went back to the order day). Other items: nothing to change."""
    unit = item.order_interval_unit
    if unit not in ("month", "week"):
        return {}
    changes: dict[str, Any] = {}
    if unit == "month" and item.order_day_of_month is not None:
        changes["order_day_of_month"] = when.day
    if unit == "week" and item.order_day_of_week is not None:
        changes["order_day_of_week"] = when.weekday()
    changes["anchor_day"] = anchor_for(unit, when, changes.get("order_day_of_month"),
                                       changes.get("order_day_of_week"))
    return changes


def first_date(values: dict[str, Any], today: date) -> date:
    """Without an explicit date, the first charge falls one charge interval from today, on the
    order day when one is set (docs/api-choices.md)."""
    unit = values["order_interval_unit"]
    start = add_interval(today, unit, values["charge_interval_frequency"], anchor_for(unit, today, None))
    return align(start, unit, values.get("order_day_of_month"), values.get("order_day_of_week"))


def after_interval_change(values: dict[str, Any], since: date, today: date) -> date:
    """NOTE: decisions §5.16, the last successful charge date (or the creation date) plus one
    new interval; if that is not after today, the first date after today on that cadence."""
    unit, frequency = values["order_interval_unit"], values["charge_interval_frequency"]
    start = align(since, unit, values.get("order_day_of_month"), values.get("order_day_of_week"))
    anchor = anchor_for(unit, start, values.get("order_day_of_month"), values.get("order_day_of_week"))
    candidate = add_interval(start, unit, frequency, anchor)
    if candidate > today:
        return candidate
    return first_after(start, unit, frequency, anchor, today)


def next_unskipped(when: date, unit: str, frequency: int, anchor_day: int | None, skipped: Any) -> date:
    """The first cadence date after ``when`` that is not in ``skipped`` (a date skipped ahead is
    passed over, decisions §5.12); raises OverflowError or ValueError past the calendar."""
    current = when
    while True:
        current = add_interval(current, unit, frequency, anchor_day)
        if current not in skipped:
            return current
