"""The store's audit trail (issue 14): every change, who made it and what it changed."""

from __future__ import annotations

from rebill.errors import NotFound

from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository
from .model import Event


def get(unit: Unit, event_id: int) -> Event:
    found = repository.get(unit.conn, unit.store_id, event_id)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)
