"""Merging addresses (spec 01 Addresses merge, decisions §5.14, §5.16): every purchase item of
the source addresses moves to the target, with its skips; the charges of every address
involved are replanned.

All or nothing: every id is checked before anything moves, and a problem with any address
(unknown, another customer's, another presentment currency, the target itself) answers 422
naming the entry, with nothing changed."""

from __future__ import annotations

from datetime import date
from typing import Any

import msgspec

from rebill.errors import Conflict, ValidationFailed

from ..charge import errored
from ..event import attributes
from ..schedule.reconcile import replan
from ..subscription import intervals
from ..subscription import repository as items
from ..subscription.model import ACTIVE, API_NAMES, SUBSCRIPTION
from ..subscription.service import check_next_date, set_by_hand
from ..unit import Unit
from . import repository, service
from .model import Address

# NOTE: spec 01 Limits, at most 10 source addresses in one merge.
MAX_SOURCES = 10


class AddressMerge(msgspec.Struct, kw_only=True):
    target_id: int
    source_ids: list[int]
    delete_sources: bool = False
    next_charge_date: date | None = None


def _check(unit: Unit, command: AddressMerge) -> tuple[Address, list[Address]]:
    """The target and the sources, locked; every problem named at once."""
    ids = [command.target_id, *command.source_ids]
    repository.lock(unit.conn, unit.store_id, sorted(set(ids)))
    found = repository.many(unit.conn, unit.store_id, ids)
    target = found.get(command.target_id)
    errors: dict[str, Any] = {}
    if target is None:
        errors["target_address"] = {"id": ["address not found"]}
    if command.next_charge_date is not None:
        # NOTE: decisions §5.3, a next charge date in the past answers 422; today is allowed.
        if command.next_charge_date < unit.today:
            errors["next_charge_date"] = ["must not be in the past"]
    sources: dict[str, Any] = {}
    seen: set[int] = set()
    for index, source_id in enumerate(command.source_ids):
        source = found.get(source_id)
        if source_id in seen:
            problem = "is duplicated in this request"
        elif source_id == command.target_id:
            problem = "must not be the target address"
        elif source is None:
            problem = "address not found"
        elif target is None:
            problem = None
        elif source.customer_id != target.customer_id:
            # NOTE: docs/api-choices.md, a merge stays within one customer.
            problem = "address belongs to another customer"
        elif source.presentment_currency != target.presentment_currency:
            # NOTE: spec 01 Addresses merge, another presentment currency fails the whole merge.
            problem = (f"address has another presentment currency ({source.presentment_currency}; "
                       f"the target's is {target.presentment_currency})")
        else:
            problem = None
        seen.add(source_id)
        if problem:
            sources[str(index)] = {"id": [problem]}
    if sources:
        errors["source_addresses"] = sources
    if errors:
        raise ValidationFailed(errors)
    assert target is not None
    return target, [found[i] for i in command.source_ids]


def _check_not_waiting(unit: Unit, source_ids: list[int], moving: list[Any]) -> None:
    """An item that a charge in retry holds stays with that charge, which keeps its address: the
    retry would bill and ship it to the source (deleted, perhaps) while the item shows the
    target. Refused, naming the charge (as a next date is, docs/api-choices.md)."""
    errors: dict[str, Any] = {}
    for item in moving:
        try:
            errored.check_not_waiting(unit, item.id, "id")
        except ValidationFailed as exc:
            errors.setdefault(str(source_ids.index(item.address_id)), exc.errors)
    if errors:
        raise ValidationFailed({"source_addresses": errors})


def merge(unit: Unit, command: AddressMerge) -> Address:
    if not command.source_ids or len(command.source_ids) > MAX_SOURCES:
        raise ValidationFailed.field("source_addresses", f"must have 1 to {MAX_SOURCES} items")
    target, sources = _check(unit, command)
    source_ids = [s.id for s in sources]
    when = command.next_charge_date
    moving = {kind: items.of(unit.conn, unit.store_id, kind, address_ids=source_ids)
              for kind in ("subscription", "onetime")}
    _check_not_waiting(unit, command.source_ids, [i for kind in moving.values() for i in kind])
    for kind in ("subscription", "onetime"):
        for item in moving[kind]:
            changes: dict[str, Any] = {"address_id": target.id, "updated_at": unit.now}
            # NOTE: decisions §5.16, the new date applies to the moved subscriptions only (the
            # active ones: a cancelled or expired subscription has no next charge).
            if when is not None and kind == SUBSCRIPTION and item.status == ACTIVE:
                # Not onto a date it skipped, as a next date set any other way (found by an audit).
                check_next_date(unit, [item.id], when, "next_charge_date")
                changes["next_charge_scheduled_at"] = when
                # The date becomes the anchor of a monthly cadence, as a date set by hand does.
                changes.update(set_by_hand(unit, item, when))
                intervals.check_room("next_charge_date", when, item.order_interval_unit,
                                     item.charge_interval_frequency, changes.get("anchor_day", item.anchor_day))
            if not items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, changes):
                raise Conflict()
            items.move_skips(unit.conn, item.id, target.id)
            unit.record(f"{kind}/updated", item.id, changed=attributes.differing(item, changes, API_NAMES[kind]))
    replan(unit, [target.id, *source_ids])
    if command.delete_sources:
        for source_id in source_ids:
            service.delete(unit, source_id)
    return service.get(unit, target.id)
