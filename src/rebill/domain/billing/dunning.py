"""When a failed charge is tried again (decisions §6.4, §6.12): attempts on D, D+1, D+7, ...,
D+37 with the defaults (a day after the first failure, then every six days, eight attempts in
all), every day counted in the store's timezone."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from ..store.model import DEFAULT_DUNNING

CLOSED_MAX_RETRIES_REACHED = "CLOSED_MAX_RETRIES_REACHED"


def settings(dunning: dict[str, Any] | None) -> dict[str, Any]:
    return {**DEFAULT_DUNNING, **(dunning or {})}


def retry_date(dunning: dict[str, Any] | None, attempts: int, failed_on: date) -> date | None:
    """The date of the next attempt after ``attempts`` failed ones (the last on ``failed_on``),
    or None when that was the last one allowed."""
    rules = settings(dunning)
    if attempts >= int(rules["max_attempts"]):
        return None
    days = int(rules["first_retry_days"]) if attempts == 1 else int(rules["retry_every_days"])
    return failed_on + timedelta(days=days)
