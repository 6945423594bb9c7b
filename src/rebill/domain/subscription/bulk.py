"""The 2021-01 bulk operations on one address (decisions §5.2, §5.16): 1 to 20
subscriptions created, updated or deleted all or nothing, and one replan at the end.

Every failing entry is named at once, ``{"subscriptions": {"<index>": {...}, ...}}`` (decisions
§2.3; found by an audit: only the first was): the entries after a failing one still run so that
theirs are checked too, and the request's unit then rolls back whatever any of them did."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rebill.errors import NotFound, ValidationFailed

from ..address import service as addresses
from ..schedule.reconcile import replan
from ..unit import Unit
from . import service
from .model import PurchaseItem, SubscriptionCreate, SubscriptionUpdate

T = TypeVar("T")


def _each(items: list[T], step: Callable[[T], Any], rename: Callable[[int, Any], Any]) -> list[Any]:
    done, errors = [], {}
    for index, item in enumerate(items):
        try:
            done.append(step(item))
        except NotFound:
            errors[str(index)] = {"id": ["not found on this address"]}
        except ValidationFailed as exc:
            errors[str(index)] = rename(index, exc.errors)
    if errors:
        raise ValidationFailed({"subscriptions": errors})
    return done


def _on_address(unit: Unit, address_id: int, subscription_id: int) -> PurchaseItem:
    current = service.get(unit, subscription_id)
    if current.address_id != address_id:
        raise NotFound()
    return current


def create(unit: Unit, address_id: int, commands: list[SubscriptionCreate],
           rename: Callable[[int, Any], Any]) -> list[PurchaseItem]:
    addresses.get(unit, address_id)  # 404 for an unknown or foreign address
    made = _each(commands, lambda command: service.create(unit, command, replan_now=False), rename)
    replan(unit, [address_id])
    return [service.get(unit, item.id) for item in made]


def update(unit: Unit, address_id: int, changes: list[tuple[int, SubscriptionUpdate]],
           rename: Callable[[int, Any], Any]) -> list[PurchaseItem]:
    addresses.get(unit, address_id)

    def one(pair: tuple[int, SubscriptionUpdate]) -> PurchaseItem:
        _on_address(unit, address_id, pair[0])
        return service.update(unit, pair[0], pair[1], replan_now=False)
    changed = _each(changes, one, rename)
    if any(command.commit for _, command in changes):
        # NOTE: decisions §5.3, when every entry says commit_update=false the charges wait.
        replan(unit, [address_id])
    return [service.get(unit, item.id) for item in changed]


def delete(unit: Unit, address_id: int, ids: list[int]) -> None:
    addresses.get(unit, address_id)

    def one(subscription_id: int) -> None:
        _on_address(unit, address_id, subscription_id)
        service.delete(unit, subscription_id, replan_now=False)
    _each(ids, one, lambda index, errors: errors)
    replan(unit, [address_id])
