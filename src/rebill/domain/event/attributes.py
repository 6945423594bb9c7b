"""The `updated_attributes` of an update's event (2021-11 `GET /events`): the names of the
fields it changed, as the head (2021-11) API names them.

A service knows what it changed by its columns; a resource whose columns and head fields
differ keeps a small map next to its service (column -> head name, or None for a column no
version shows: `anchor_day`, `lock_version`...). A column only 2021-01 shows keeps its own name
(a customer's `accepts_marketing`, `processor_type`, `billing_address`): an event of its change
says what changed (docs/webhooks.md). Bookkeeping columns never count."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Written by every update, shown by none as a change of its own.
BOOKKEEPING = frozenset({"updated_at", "lock_version"})
NO_RENAMES: Mapping[str, str | None] = {}


def names(columns: Iterable[str], renames: Mapping[str, str | None] = NO_RENAMES) -> tuple[str, ...]:
    """The head names of the changed ``columns``, sorted, each once."""
    shown = set()
    for column in columns:
        if column in BOOKKEEPING:
            continue
        name = renames.get(column, column)
        if name is not None:
            shown.add(name)
    return tuple(sorted(shown))


def differing(current: Any, values: Mapping[str, Any], renames: Mapping[str, str | None] = NO_RENAMES
              ) -> tuple[str, ...]:
    """The head names of the ``values`` that differ from ``current``'s attributes."""
    return names((k for k, v in values.items() if k not in BOOKKEEPING and getattr(current, k) != v), renames)
