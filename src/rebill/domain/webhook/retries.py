"""When a failed delivery is tried again (decisions §8.4): 20 attempts in all over about 48
hours, close together first (a receiver restarting) and hours apart later (a receiver down
for a day). Fixed, without jitter, so that a test clock can step through them exactly."""

from __future__ import annotations

from datetime import timedelta

MAX_ATTEMPTS = 20

# The wait after the 1st, 2nd, ... 19th failed attempt.
DELAYS = tuple(timedelta(seconds=s) for s in (
    5, 30, 60, 120, 300, 600, 900, 1800,                     # about an hour in all
    3600, 3600, 7200, 7200, 10800, 14400, 18000, 21600, 21600, 28800, 32400,
))
assert len(DELAYS) == MAX_ATTEMPTS - 1

# NOTE: decisions §8.4, a 2xx within 5 seconds ends a delivery.
TIMEOUT_SECONDS = 5.0


def after(failed_attempts: int) -> timedelta | None:
    """The wait before the next attempt once ``failed_attempts`` attempts have failed, or None
    when none is left."""
    if failed_attempts >= MAX_ATTEMPTS:
        return None
    return DELAYS[failed_attempts - 1]


def total() -> timedelta:
    return sum(DELAYS, timedelta(0))
