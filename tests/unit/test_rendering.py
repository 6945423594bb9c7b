"""Datetime rendering of both versions (decisions §2.4): no fractions, ever; UTC."""

from datetime import datetime, timedelta, timezone

import pytest

from rebill.api.v2021_11.serializers import ts

UTC = timezone.utc


@pytest.mark.parametrize(("value", "expected"), [
    (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05+00:00"),
    (datetime(2026, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC), "2026-01-02T03:04:05+00:00"),  # cut, not rounded
    (datetime(2026, 12, 31, 23, 59, 59, 1, tzinfo=UTC), "2026-12-31T23:59:59+00:00"),
    (datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC), "0005-01-02T03:04:05+00:00"),
    (datetime(2026, 1, 2, 1, 4, 5, tzinfo=timezone(timedelta(hours=-2))), "2026-01-02T03:04:05+00:00"),
    (None, None),
])
def test_head_datetimes_are_utc_seconds_with_an_offset(value, expected):
    assert ts(value) == expected
