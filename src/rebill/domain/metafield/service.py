"""Metafield use cases (spec 02 Metafields, decisions §7.2, §7.6). Field names are the head
(2021-11) names; both versions share every rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from sqlalchemy.exc import IntegrityError

from rebill.errors import NotFound, ValidationFailed

from ..event import attributes
from ..event.customers import customer_of_owner
from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import owners, repository
from .model import MAX_PER_OWNER, Metafield, MetafieldCreate, MetafieldUpdate
from .rules import check_value

TAKEN = "has already been taken for this owner and namespace"


def get(unit: Unit, metafield_id: int) -> Metafield:
    found = repository.get(unit.conn, unit.store_id, metafield_id)
    if found is None:
        raise NotFound()
    return found


def _require_owner_resource(filters: dict[str, Any]) -> None:
    # NOTE: decisions §7.2, `GET /metafields` needs `owner_resource` (a cursor carries it).
    if "owner_resource" not in filters:
        raise ValidationFailed.field("owner_resource", "is required")


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    _require_owner_resource(query.filters)
    return repository.page(unit.conn, unit.store_id, query)


def count(unit: Unit, filters: dict[str, Any]) -> int:
    # NOTE: decisions §7.6, the count takes the list's filters, the required one included.
    _require_owner_resource(filters)
    return repository.count_where(unit.conn, unit.store_id, filters)


def _check_owner(unit: Unit, resource: str, owner_id: int) -> None:
    """NOTE: decisions §7.2, the owner must exist in the store, and spec 02 Limits, it holds
    at most 50 metafields (both 422). The owner stays locked until the unit ends."""
    if not owners.exists_locked(unit.conn, unit.store_id, resource, owner_id, unit.now):
        raise ValidationFailed.field("owner_id", f"{resource} not found")
    if repository.count_of_owner(unit.conn, unit.store_id, resource, owner_id) >= MAX_PER_OWNER:
        raise ValidationFailed.field("owner_id", f"already has {MAX_PER_OWNER} metafields, the most an owner can have")


def _duplicate(exc: IntegrityError) -> Exception:
    """A concurrent write won the (owner, namespace, key) race after our check passed."""
    if "uq_metafields_owner_key" in str(exc.orig) or "metafields.store_id" in str(exc.orig):
        return ValidationFailed.field("key", TAKEN)
    return exc


def create(unit: Unit, command: MetafieldCreate) -> Metafield:
    check_value(command.value, command.value_type)
    _check_owner(unit, command.owner_resource, command.owner_id)
    # NOTE: decisions §7.6, (owner, namespace, key) is unique: a duplicate is 422, not an upsert.
    if repository.taken(unit.conn, unit.store_id, command.owner_resource, command.owner_id, command.namespace,
                        command.key):
        raise ValidationFailed.field("key", TAKEN)
    values = msgspec.structs.asdict(command)
    values.update(store_id=unit.store_id, description=command.description or "", created_at=unit.now,
                  updated_at=unit.now)
    try:
        metafield_id = repository.insert_metafield(unit.conn, values)
    except IntegrityError as exc:
        raise _duplicate(exc) from None
    unit.record("metafield/created", metafield_id)
    return get(unit, metafield_id)


def _changes(current: Metafield, command: MetafieldUpdate) -> dict[str, Any]:
    """What the command changes; sending what is already stored changes nothing."""
    changes = command.changes()
    if "description" in changes:
        changes["description"] = changes["description"] or ""
    return {k: v for k, v in changes.items() if getattr(current, k) != v}


def _owner_of(current: Metafield, changes: dict[str, Any]) -> tuple[str, int]:
    return changes.get("owner_resource", current.owner_resource), changes.get("owner_id", current.owner_id)


def update(unit: Unit, metafield_id: int, command: MetafieldUpdate) -> Metafield:
    """A move locks the new owner (owners.py) before the metafield's row: an owner's deleter
    takes the owner's locks first and the rows of its metafields after, so the other order
    could deadlock with it (PostgreSQL; a metafield moving onto a charge of its own address
    while the address is deleted)."""
    seen = get(unit, metafield_id)
    changes = _changes(seen, command)
    if not changes:
        # No event, same updated_at.
        return seen
    check_value(changes.get("value", seen.value), changes.get("value_type", seen.value_type))
    checked = None
    if _owner_of(seen, changes) != (seen.owner_resource, seen.owner_id):
        # NOTE: decisions §7.6, a PUT that moves the owner checks the new owner and its limit.
        checked = _owner_of(seen, changes)
        _check_owner(unit, *checked)
    current = repository.get(unit.conn, unit.store_id, metafield_id, lock=True)
    if current is None:
        raise NotFound()
    if current != seen:
        # Changed between the two reads: decide again on what is stored now.
        changes = _changes(current, command)
        if not changes:
            return current
        check_value(changes.get("value", current.value), changes.get("value_type", current.value_type))
    resource, owner_id = _owner_of(current, changes)
    if (resource, owner_id) != (current.owner_resource, current.owner_id):
        if (resource, owner_id) != checked:
            _check_owner(unit, resource, owner_id)
        if repository.taken(unit.conn, unit.store_id, resource, owner_id, current.namespace, current.key,
                            other_than=metafield_id):
            raise ValidationFailed.field("key", TAKEN)
    changes["updated_at"] = unit.now
    try:
        repository.update_metafield(unit.conn, unit.store_id, metafield_id, changes)
    except IntegrityError as exc:
        raise _duplicate(exc) from None
    unit.record("metafield/updated", metafield_id, changed=attributes.names(changes))
    return get(unit, metafield_id)


def delete(unit: Unit, metafield_id: int) -> None:
    current = repository.get(unit.conn, unit.store_id, metafield_id, lock=True)
    if current is None:
        raise NotFound()
    # The row is gone when the event is written: its owner's customer is found now.
    customer_id = customer_of_owner(unit.conn, unit.store_id, current.owner_resource, current.owner_id)
    repository.delete_metafield(unit.conn, unit.store_id, metafield_id)
    unit.record("metafield/deleted", metafield_id, {"id": metafield_id}, customer_id=customer_id)


def forget(unit: Unit, customers: int | Mapping[tuple[str, int], int] | None = None, /,
           **owners_by_resource: list[int]) -> None:
    """NOTE: decisions §7.6, deleting an owner deletes its metafields: called by the owners'
    delete paths in their own transaction, one statement and one event insert for all.
    ``customers`` names the owners' customer, whose rows may be gone when the events are
    written: one customer for all of them, or per (resource, owner id)."""
    gone = repository.delete_of_owners(unit.conn, unit.store_id, owners_by_resource)
    known: dict[int, int] = {}
    for metafield_id, resource, owner_id in gone:
        found = (owner_id if resource == "customer" else customers if isinstance(customers, int)
                 else (customers or {}).get((resource, owner_id)))
        if found is not None:
            known[metafield_id] = found
    unit.record_many("metafield/deleted", [metafield_id for metafield_id, _, _ in gone], with_id=True,
                     customer_ids=known)
