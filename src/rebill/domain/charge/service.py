"""Charge use cases: reads, skip and unskip, moving a charge's date (spec 02 Charges,
decisions §5.11-§5.13, §5.16). Skips and dates are inputs of the plan: these change them
on the purchase items and replan; the reconciler writes the charges."""

from __future__ import annotations

from datetime import date
from typing import Any

from rebill.errors import Conflict, NotFound, ValidationFailed

from ..address import repository as addresses
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..schedule.dates import occurrences
from ..schedule.reconcile import replan
from ..subscription import repository as items
from ..subscription.intervals import check_room, has_room, next_unskipped
from ..subscription.model import ACTIVE, API_NAMES, SUBSCRIPTION, PurchaseItem
from ..subscription.service import check_next_date, set_by_hand
from ..unit import Unit
from . import errored, repository
from .model import ERROR, QUEUED, SKIPPED, Charge


def get(unit: Unit, charge_id: int) -> Charge:
    found = repository.get(unit.conn, unit.store_id, charge_id, unit.now)
    if found is None:
        raise NotFound()
    return found


def check_next_dates(unit: Unit, charge_id: int) -> None:
    """Hardening: paying a charge moves each of its subscriptions one charge interval on from
    the charge's date; a charge whose subscription has no cadence date after it (the end of the
    calendar) answers 422 before any payment is asked for, never a 500 after it."""
    charge = get(unit, charge_id)
    for item in items.many(unit.conn, unit.store_id, charge.purchase_item_ids).values():
        if item.kind == SUBSCRIPTION and item.status == ACTIVE and not has_room(
                charge.scheduled_at, item.order_interval_unit, item.charge_interval_frequency, item.anchor_day):
            raise ValidationFailed.field("scheduled_at", f"purchase item {item.id} would have its next charge "
                                                         "past 9999-12-31: the charge cannot be processed")


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query, unit.now)


def count(unit: Unit, filters: dict[str, Any]) -> int:
    return repository.count_where(unit.conn, unit.store_id, filters, unit.now)


def _locked(unit: Unit, charge_id: int) -> Charge:
    """The charge under its address's lock; a charge a billing run, capture or refund holds
    right now cannot be skipped, unskipped or moved (409, as an address delete answers)."""
    charge = get(unit, charge_id)
    addresses.lock(unit.conn, unit.store_id, [charge.address_id])
    charge = get(unit, charge_id)
    if charge.claimed_by is not None:
        raise Conflict("The charge is being paid; try again in a moment")
    return charge


def _chosen(charge: Charge, item_ids: list[int] | None, field: str) -> list[int]:
    """NOTE: decisions §5.16, an absent list is the whole charge; an empty one names nothing
    (found by an audit: `[]` skipped the whole charge)."""
    on_charge = charge.purchase_item_ids
    if item_ids is None:
        return on_charge
    if not item_ids:
        raise ValidationFailed.field(field, "must name at least one purchase item")
    foreign = [i for i in item_ids if i not in on_charge]
    if foreign:
        raise ValidationFailed.field(field, f"not on this charge: {', '.join(map(str, foreign))}")
    return list(dict.fromkeys(item_ids))


def _skippable(item: PurchaseItem, field: str) -> None:
    if item.is_prepaid:
        # NOTE: decisions §5.11, prepaid items cannot be skipped.
        raise ValidationFailed.field(field, f"purchase item {item.id} is prepaid and cannot be skipped")
    if not item.is_skippable:
        raise ValidationFailed.field(field, f"purchase item {item.id} is not skippable")


def _next_after(item: PurchaseItem, when: date, skipped: set[date]) -> date:
    """The item's first cadence date after ``when`` that is not skipped."""
    assert item.order_interval_unit and item.charge_interval_frequency
    return next_unskipped(when, item.order_interval_unit, item.charge_interval_frequency, item.anchor_day, skipped)


def _skip_items(unit: Unit, chosen: list[PurchaseItem], when: date, field: str) -> None:
    for item in chosen:
        items.add_skip(unit.conn, unit.store_id, item.address_id, item.id, when)
        moved: dict[str, Any] = {}
        if item.kind == SUBSCRIPTION and item.next_charge_scheduled_at == when:
            skipped = set(items.skipped_dates(unit.conn, item.id))
            try:
                after = _next_after(item, when, skipped)
            except (OverflowError, ValueError):  # a date set by hand at the end of the calendar
                after = None
            if after is None or not has_room(after, item.order_interval_unit, item.charge_interval_frequency,
                                             item.anchor_day):
                # Hardening: the next charge must have a cadence date after it (intervals.check_room).
                raise ValidationFailed.field(field, f"purchase item {item.id} cannot be skipped: its next charge "
                                                    "would fall too close to 9999-12-31")
            moved = {"next_charge_scheduled_at": after}
            items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, {**moved, "updated_at": unit.now})
        # The event names the next date it moved (found by an audit: it named nothing, where a
        # cancel names every field it changes).
        unit.record(f"{item.kind}/skipped", item.id, changed=attributes.names(moved, API_NAMES[item.kind]))


def skip(unit: Unit, charge_id: int, item_ids: list[int] | None, field: str = "purchase_item_ids") -> Charge:
    """NOTE: decisions §5.11, the chosen items (all when none is named) move to a skipped
    charge of the date; each skipped subscription gets its next date and a new queued charge."""
    charge = _locked(unit, charge_id)
    if charge.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued charge can be skipped; this one is {charge.status}")
    if charge.scheduled_at < unit.today:
        # Its date has passed and it waits for the next billing run: a skip of it would be
        # history the plan drops (found by an audit: a 409 "try again" that never passed).
        raise ValidationFailed.field("scheduled_at", "a charge whose date has passed is due and cannot be skipped")
    chosen = items.many(unit.conn, unit.store_id, _chosen(charge, item_ids, field))
    for item in chosen.values():
        _skippable(item, field)
    _skip_items(unit, list(chosen.values()), charge.scheduled_at, field)
    key = (charge.address_id, charge.scheduled_at, SKIPPED)
    # NOTE: decisions §5.16, a whole skip keeps the charge's id, also onto a skipped charge of the date.
    whole = set(chosen) == set(charge.purchase_item_ids)
    return _skipped(unit, replan(unit, [charge.address_id], keep={key: charge.id} if whole else None), key)


def unskip(unit: Unit, charge_id: int, item_ids: list[int] | None, field: str = "purchase_item_ids") -> Charge:
    charge = _locked(unit, charge_id)
    if charge.status != SKIPPED:
        raise ValidationFailed.field("status", f"only a skipped charge can be unskipped; this one is {charge.status}")
    if charge.scheduled_at < unit.today:
        raise ValidationFailed.field("scheduled_at", "a skipped charge in the past cannot be unskipped")
    chosen = items.many(unit.conn, unit.store_id, _chosen(charge, item_ids, field))
    if item_ids is None and len(chosen) > 1:
        # The whole charge: the items that wait for a retry or a payment stay skipped, the others
        # come back (found by a review: one waiting item kept every other one skipped). Named
        # items, or a charge of waiting items alone, are checked below.
        free = {i: item for i, item in chosen.items()
                if not errored.holding(unit, i) and not repository.being_paid(unit.conn, unit.store_id, i)}
        chosen = free or chosen
    for item in chosen.values():
        if item.status != ACTIVE:
            raise ValidationFailed.field(field, f"purchase item {item.id} is {item.status}")
        # A later date already paid (a charge processed early, or a retry that went through): its
        # cadence has moved on from there, and bringing this date back would bill the paid one
        # again when it renews (found by an audit: two paid charges of one date). NOTE: §6.5.
        if item.last_charge_date is not None and item.last_charge_date > charge.scheduled_at:
            raise ValidationFailed.field(field, f"purchase item {item.id} was already charged for "
                                                f"{item.last_charge_date.isoformat()}, after this date")
        # An item whose earlier charge waits for its retry or is being paid has no queued charge
        # to come back to until that is done (found by an audit: the unskip answered 404).
        errored.check_not_waiting(unit, item.id, field)
    for item in chosen.values():
        items.remove_skip(unit.conn, item.id, charge.scheduled_at)
        moved = {}
        if item.kind == SUBSCRIPTION and (item.next_charge_scheduled_at is None
                                          or item.next_charge_scheduled_at > charge.scheduled_at):
            moved = {"next_charge_scheduled_at": charge.scheduled_at}
            items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, {**moved, "updated_at": unit.now})
        unit.record(f"{item.kind}/unskipped", item.id, changed=attributes.names(moved, API_NAMES[item.kind]))
    result = replan(unit, [charge.address_id])
    # The earliest queued charge holding the unskipped items: the date's own, or, for a date
    # skipped ahead of the items' next charge (decisions §5.12), the one they are next charged
    # on (found by an audit: the date's queued charge was answered though it held other items).
    wanted = set(chosen)
    here = next((charge_id for (_, _, status), charge_id in sorted(result.items())
                 if status == QUEUED and wanted & set(get(unit, charge_id).purchase_item_ids)), None)
    if here is None:
        raise NotFound()
    return get(unit, here)


def change_date(unit: Unit, charge_id: int, when: date) -> Charge:
    """NOTE: decisions §5.13, the whole charge moves; onto a date where the address already
    has a queued charge, the two merge into one (that one's id stays)."""
    charge = _locked(unit, charge_id)
    if charge.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued charge can be moved; this one is {charge.status}")
    if when < unit.today:
        raise ValidationFailed.field("next_charge_date", "must not be in the past")
    if when != charge.scheduled_at:
        check_next_date(unit, charge.purchase_item_ids, when, "next_charge_date")
        for item in items.many(unit.conn, unit.store_id, charge.purchase_item_ids).values():
            # The moved date sets the cadence from now on.
            changes: dict[str, Any] = {"next_charge_scheduled_at": when, "updated_at": unit.now,
                                       **set_by_hand(unit, item, when)}
            if item.kind == SUBSCRIPTION:
                check_room("next_charge_date", when, item.order_interval_unit, item.charge_interval_frequency,
                           changes.get("anchor_day", item.anchor_day))
            items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, changes)
            unit.record(f"{item.kind}/updated", item.id,
                        changed=attributes.differing(item, changes, API_NAMES[item.kind]))
    result = replan(unit, [charge.address_id], moved={(charge.address_id, charge.scheduled_at): when})
    return get(unit, result[(charge.address_id, when, QUEUED)])


def skip_on_address(unit: Unit, address_id: int, when: date, item_ids: list[int], field: str) -> Charge:
    """NOTE: decisions §5.12, skip a future date on which those subscriptions would be
    charged: the charge of that date is skipped, or created skipped if none exists yet."""
    if not addresses.lock(unit.conn, unit.store_id, [address_id]):
        raise NotFound()
    if when <= unit.today:
        raise ValidationFailed.field("date", "must be in the future")
    if not item_ids:
        raise ValidationFailed.field(field, "must name at least one purchase item")
    chosen = items.many(unit.conn, unit.store_id, item_ids)
    missing = [i for i in item_ids if i not in chosen or chosen[i].address_id != address_id]
    if missing:
        raise ValidationFailed.field(field, f"not on this address: {', '.join(map(str, missing))}")
    # An item on a charge being paid or in retry is out of the plan until that charge is done
    # (decisions §6.3): its dates cannot be skipped meanwhile.
    open_charges = repository.open_of(unit.conn, unit.store_id, [address_id])
    held = {i: c for c in open_charges if c.claimed_by is not None or c.status == ERROR for i in c.purchase_item_ids}
    for item in chosen.values():
        if item.id in held and held[item.id].claimed_by is not None:
            raise Conflict(f"Purchase item {item.id} is on a charge being paid; try again in a moment")
        if item.id in held:
            raise ValidationFailed.field(field, f"purchase item {item.id} waits for the retry of charge "
                                                f"{held[item.id].id}")
        _skippable(item, field)
        if item.status != ACTIVE or item.next_charge_scheduled_at is None:
            raise ValidationFailed.field(field, f"purchase item {item.id} is {item.status}")
        due = ([item.next_charge_scheduled_at] if item.kind != SUBSCRIPTION else
               occurrences(item.next_charge_scheduled_at, item.order_interval_unit or "day",
                           item.charge_interval_frequency or 1, item.anchor_day, until=when, limit=10_000))
        skipped = set(items.skipped_dates(unit.conn, item.id))
        if item.kind == SUBSCRIPTION and item.expire_after_specific_number_of_charges is not None:
            # NOTE: spec 01, a date within the delivery schedule: a subscription with a charge
            # limit has that many charges left, a skipped date taking none of them (found by an
            # audit: dates after its last charge were skipped, and moved that charge on).
            due = _within_charges_left(due, skipped,
                                       item.expire_after_specific_number_of_charges - item.charges_count)
        if when not in due:
            raise ValidationFailed.field("date", f"purchase item {item.id} is not charged on {when.isoformat()}")
        if when in skipped:
            raise ValidationFailed.field("date", f"purchase item {item.id} is already skipped on {when.isoformat()}")
    _skip_items(unit, list(chosen.values()), when, field)
    key = (address_id, when, SKIPPED)
    # NOTE: decisions §5.16, skipping every item of the date's queued charge skips that charge,
    # which keeps its id, as a skip through the charge does (found by an audit: it was deleted).
    queued = next((c for c in open_charges if c.status == QUEUED and c.scheduled_at == when), None)
    whole = queued is not None and set(queued.purchase_item_ids) <= set(chosen)
    return _skipped(unit, replan(unit, [address_id], keep={key: queued.id} if whole else None), key)


def _within_charges_left(dates: list[date], skipped: set[date], left: int) -> list[date]:
    """The first of ``dates`` up to the ``left``-th one not skipped."""
    kept: list[date] = []
    for day in dates:
        if left <= 0:
            break
        kept.append(day)
        if day not in skipped:
            left -= 1
    return kept


def _skipped(unit: Unit, planned: dict[Any, int], key: Any) -> Charge:
    """The skipped charge the replan made; none means its items were held meanwhile (409)."""
    if key not in planned:
        raise Conflict("The charge could not be skipped: its items are held by a payment; try again")
    return get(unit, planned[key])
