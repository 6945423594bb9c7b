"""Moving a subscription along (decisions §5.2, §5.16): cancel, activate, a new next charge
date, another address. Each ends by replanning the charges of the addresses it touched."""

from __future__ import annotations

from datetime import date, timedelta

from rebill.errors import Conflict, ValidationFailed

from ..charge import errored
from ..customer import activity
from ..event import attributes
from ..schedule.reconcile import replan
from ..unit import Unit
from . import intervals, repository
from .model import ACTIVE, API_NAMES, CANCELLED, EXPIRED, PurchaseItem
from .service import address_for, check_next_date, get, locked, set_by_hand


def _save(unit: Unit, current: PurchaseItem, changes: dict[str, object], topic: str) -> None:
    changes["updated_at"] = unit.now
    if not repository.update_item(unit.conn, unit.store_id, current.id, current.lock_version, changes):
        raise Conflict()
    unit.record(topic, current.id, changed=attributes.differing(current, changes, API_NAMES[current.kind]))


def cancel(unit: Unit, subscription_id: int, reason: str, comments: str | None) -> PurchaseItem:
    current = locked(unit, subscription_id)
    if current.status != ACTIVE:
        raise ValidationFailed.field("status", f"the subscription is {current.status}, not active")
    # NOTE: decisions §5.16, cancel clears the next date and takes the item out of its charge;
    # skips still ahead go with it, skipped charges already past stay as history.
    repository.remove_skips(unit.conn, subscription_id, from_date=unit.today)
    _save(unit, current, {"status": CANCELLED, "cancelled_at": unit.now, "cancellation_reason": reason,
                          "cancellation_reason_comments": comments, "next_charge_scheduled_at": None,
                          "cancelled_next_date": current.next_charge_scheduled_at}, "subscription/cancelled")
    activity.refresh(unit, current.customer_id)
    replan(unit, [current.address_id])
    # A charge in retry holding it must not take its money either (domain/charge/errored.py).
    errored.recompute(unit, errored.holding(unit, subscription_id), leaving={subscription_id})
    return get(unit, subscription_id)


def activate(unit: Unit, subscription_id: int) -> PurchaseItem:
    current = locked(unit, subscription_id)
    if current.status == ACTIVE:
        raise ValidationFailed.field("status", "the subscription is already active")
    if current.status == EXPIRED:
        raise ValidationFailed.field("status", "an expired subscription cannot be activated")
    limit = current.expire_after_specific_number_of_charges
    if limit is not None and current.charges_count >= limit:
        # NOTE: decisions §5.5, it would be active with no charge to come; it is done.
        raise ValidationFailed.field("status", f"the subscription has had its {limit} charges "
                                               "(expire_after_specific_number_of_charges)")
    today = unit.today
    # NOTE: decisions §5.16, the date it had when cancelled if still ahead, else tomorrow.
    when = current.cancelled_next_date
    changes: dict[str, object] = {}
    if when is None or when <= today:
        when = today + timedelta(days=1)
        # A new date, not the cadence's: the cadence runs from it, as from any date set by hand
        # (found by an audit: activated onto the 6th, paid there, renewed on the old anchor's 1st).
        changes = set_by_hand(unit, current, when)
    _save(unit, current, {"status": ACTIVE, "cancelled_at": None, "cancellation_reason": None,
                          "cancellation_reason_comments": None, "cancelled_next_date": None,
                          "next_charge_scheduled_at": when, "max_retries_reached": False, **changes},
          "subscription/activated")
    activity.refresh(unit, current.customer_id)
    # Cancelled by its last failed retry (decisions §6.4), it is still on that closed charge,
    # which would hold it out of the plan for good: it leaves it, as a cancel takes an item out
    # of a charge in retry, so that the queued charge of §5.16 follows (the closed charge keeps
    # the rest of what it holds, or is deleted when it held only this).
    errored.recompute(unit, errored.holding(unit, subscription_id), leaving={subscription_id})
    replan(unit, [current.address_id])
    return get(unit, subscription_id)


def set_next_charge_date(unit: Unit, subscription_id: int, when: date) -> PurchaseItem:
    current = locked(unit, subscription_id)
    if current.status != ACTIVE:
        raise ValidationFailed.field("date", f"the subscription is {current.status}: it has no next charge")
    intervals.check_future("date", when, unit.today)
    if when != current.next_charge_scheduled_at:
        # A charge in retry or being paid moves the date on when it is recorded (409 or 422).
        errored.check_not_waiting(unit, subscription_id, "date")
        check_next_date(unit, [subscription_id], when, "date")
        # Later charges follow the new date: it becomes the anchor of a monthly cadence.
        changes = {"next_charge_scheduled_at": when, **set_by_hand(unit, current, when)}
        intervals.check_room("date", when, current.order_interval_unit, current.charge_interval_frequency,
                             changes.get("anchor_day", current.anchor_day))
        _save(unit, current, changes, "subscription/updated")
        replan(unit, [current.address_id])
    return get(unit, subscription_id)


def change_address(unit: Unit, subscription_id: int, address_id: int, when: date | None) -> PurchaseItem:
    # Both addresses locked in id order (never the target first: two moves the other way
    # round would deadlock), the item read under them.
    current = locked(unit, subscription_id, also=address_id)
    target = address_for(unit, address_id)
    if target.customer_id != current.customer_id:
        raise ValidationFailed.field("address_id", "address belongs to another customer")
    if target.presentment_currency != current.presentment_currency:
        raise ValidationFailed.field("address_id", "address has another presentment currency")
    changes: dict[str, object] = {}
    if address_id != current.address_id:
        # A charge in retry that holds it keeps its address: the retry would ship it there.
        errored.check_not_waiting(unit, subscription_id, "address_id")
        changes["address_id"] = address_id
    if when is not None:
        if current.status != ACTIVE:
            raise ValidationFailed.field("next_charge_scheduled_at", "the subscription is not active")
        intervals.check_future("next_charge_scheduled_at", when, unit.today)
        if when != current.next_charge_scheduled_at:
            errored.check_not_waiting(unit, subscription_id, "next_charge_scheduled_at")
            check_next_date(unit, [subscription_id], when, "next_charge_scheduled_at")
            changes.update(next_charge_scheduled_at=when, **set_by_hand(unit, current, when))
            intervals.check_room("next_charge_scheduled_at", when, current.order_interval_unit,
                                 current.charge_interval_frequency, changes.get("anchor_day", current.anchor_day))
    if changes:
        _save(unit, current, changes, "subscription/updated")
        repository.move_skips(unit.conn, subscription_id, address_id)
        replan(unit, {current.address_id, address_id})
    return get(unit, subscription_id)
