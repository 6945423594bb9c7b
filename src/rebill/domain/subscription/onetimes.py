"""One-time items (decisions §5.6): one line on the charge of their date, then done."""

from __future__ import annotations

from typing import Any

import msgspec

from rebill.errors import Conflict, ValidationFailed

from ..charge import errored
from ..event import attributes
from ..money import quantize
from ..schedule.reconcile import replan
from ..unit import Unit
from . import intervals, repository
from .model import ACTIVE, API_NAMES, CANCELLED, ONETIME, OnetimeCreate, OnetimeUpdate, PurchaseItem
from .service import (
    _check_quantity,
    address_for,
    bundle_follows_swap,
    catalog_values,
    check_next_date,
    get,
    kept_address,
    locked,
    price_problem,
    same_currency,
    swap_values,
)


def create(unit: Unit, command: OnetimeCreate) -> PurchaseItem:
    address = address_for(unit, command.address_id)
    # Every rule of the body's own values at once, as a subscription's create (decisions §2.3;
    # found by an audit: a bad quantity, date and title took three requests to learn).
    errors: dict[str, Any] = {}
    ValidationFailed.collect(errors, _check_quantity, command.quantity)
    ValidationFailed.collect(errors, intervals.check_future, "next_charge_scheduled_at",
                             command.next_charge_scheduled_at, unit.today)
    given = msgspec.structs.asdict(command)
    same_currency(errors, given.pop("presentment_currency"), address.presentment_currency)
    values = ValidationFailed.collect(errors, catalog_values, unit, given, currency=address.presentment_currency)
    if errors:
        raise ValidationFailed(errors)
    values.update(
        store_id=unit.store_id, kind=ONETIME, customer_id=address.customer_id, plan_id=None, status=ACTIVE,
        presentment_currency=address.presentment_currency, sku_override=bool(values.get("sku_override")),
        charges_count=0, last_charge_date=None, cancelled_next_date=None, is_skippable=True, is_swappable=False,
        max_retries_reached=False, cancellation_reason=None, cancellation_reason_comments=None, cancelled_at=None,
        analytics_data=None, lock_version=1, created_at=unit.now, updated_at=unit.now,
        # No cadence: written out, so that the values are the whole row (repository.inserted).
        charge_interval_frequency=None, order_interval_frequency=None, order_interval_unit=None,
        order_day_of_month=None, order_day_of_week=None, cutoff_day_of_month=None, cutoff_day_of_week=None,
        expire_after_specific_number_of_charges=None, anchor_day=None,
    )
    item_id = repository.insert_item(unit.conn, values)
    unit.record("onetime/created", item_id, customer_id=address.customer_id)
    replan(unit, [address.id], locked={address.id: address})
    return repository.inserted(unit.conn, item_id, values)


def _check_changeable(unit: Unit, current: PurchaseItem, changes: dict[str, object]) -> None:
    """NOTE: decisions §5.6, a one-time item is one line on the charge of its date, then done. A
    change after that, or while the charge that holds it waits for a retry or is being paid,
    would show what no charge will ever bill (the retry bills the line as it was): refused, as
    a subscription's next date is (docs/api-choices.md). An update that changes nothing passes."""
    field = "next_charge_scheduled_at" if "next_charge_scheduled_at" in changes else next(iter(changes))
    if current.status != ACTIVE:
        raise ValidationFailed.field(field, f"the one-time item is {current.status}: it was charged and is done")
    errored.check_not_waiting(unit, current.id, field)  # 409 while its charge is being paid
    if "next_charge_scheduled_at" in changes:
        check_next_date(unit, [current.id], changes["next_charge_scheduled_at"], "next_charge_scheduled_at")


def update(unit: Unit, onetime_id: int, command: OnetimeUpdate) -> PurchaseItem:
    current = locked(unit, onetime_id, ONETIME)
    changes = command.changes()
    errors: dict[str, Any] = {}  # the body's own rules at once (decisions §2.3)
    asked = changes.pop("is_cancelled", None)
    if asked is not None and asked != (current.status == CANCELLED):
        # Found by an audit: 2021-01 `{"status": "CANCELLED"}` answered 200 and the item stayed
        # on its charge, to be billed. A one-time item goes by its delete.
        errors["is_cancelled"] = [f"is not changed by an update; DELETE /onetimes/{onetime_id} removes the "
                                  "one-time item"]
    kept_address(errors, current, changes, "a one-time item is deleted and made again on the other address")
    same_currency(errors, changes.pop("presentment_currency", None), current.presentment_currency)
    if "quantity" in changes:
        ValidationFailed.collect(errors, _check_quantity, changes["quantity"])
    if changes.get("next_charge_scheduled_at", current.next_charge_scheduled_at) != current.next_charge_scheduled_at:
        # Its own date sent back is no change, past or not (found by an audit: a processed
        # item's GET body sent back answered "must not be in the past").
        ValidationFailed.collect(errors, intervals.check_future, "next_charge_scheduled_at",
                                 changes["next_charge_scheduled_at"], unit.today)
    if "price" in changes and (problem := price_problem(changes["price"], current.presentment_currency)):
        errors["price"] = [problem]
    if errors:
        raise ValidationFailed(errors)
    if "external_variant_id" in changes or "external_product_id" in changes:
        swap_values(unit, current, changes)
        bundle_follows_swap(unit, current, changes)
    if "price" in changes:
        changes["price"] = quantize(changes["price"], current.presentment_currency)
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    if changes:
        _check_changeable(unit, current, changes)
        changes["updated_at"] = unit.now
        if not repository.update_item(unit.conn, unit.store_id, onetime_id, current.lock_version, changes):
            raise Conflict()
        if "next_charge_scheduled_at" in changes:
            # Its one date moves (decisions §5.6): a skip of the old date is no longer its (found by an
            # audit: the item sat on the old date's skipped charge and on the new date's queued one).
            repository.remove_skips(unit.conn, onetime_id)
        unit.record("onetime/updated", onetime_id, changed=attributes.names(changes, API_NAMES[ONETIME]))
        replan(unit, [current.address_id])
    return get(unit, onetime_id, ONETIME)
