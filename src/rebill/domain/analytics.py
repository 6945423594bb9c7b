"""`analytics_data` of customers, subscriptions, charges and checkouts as every reply shows it
(spec 03: `utm_params` is an array, also when the client sent none), and so as a write compares
it: the shown default sent back is no change (found by an audit: the first round trip of a
customer or subscription stored the default over null, with an update event)."""

from __future__ import annotations

from typing import Any


def shown(data: dict[str, Any] | None) -> dict[str, Any]:
    if not data:
        return {"utm_params": []}
    if data.get("utm_params") is None:
        return {**data, "utm_params": []}
    return data


def same(stored: dict[str, Any] | None, sent: dict[str, Any] | None) -> bool:
    return shown(stored) == shown(sent)
