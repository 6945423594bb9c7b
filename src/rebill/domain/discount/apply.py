"""Applying and removing discounts on addresses and charges (spec 02 Discount application
endpoints, Charges rule 2; spec 01 Address `discounts`; decisions §7.5). Both change inputs of
the plan (the address's `discount_id`, a code applied to one queued charge) and replan: the
reconciler rewrites the queued charges and records one `charge/updated` per changed charge."""

from __future__ import annotations

from typing import Any

from rebill.errors import Conflict, NotFound, ValidationFailed

from ..address import repository as addresses
from ..address.model import Address
from ..charge import errored
from ..charge import repository as charges
from ..charge.model import QUEUED, Charge
from ..schedule.reconcile import replan
from ..subscription import repository as items
from ..unit import Unit
from . import repository, rules
from .inputs import collection_products
from .terms import Terms, basis_of, line_totals


def _address(unit: Unit, address_id: int) -> Address:
    if not addresses.lock(unit.conn, unit.store_id, [address_id]):
        raise NotFound()
    found = addresses.get(unit.conn, unit.store_id, address_id)
    assert found is not None
    return found


def _charge(unit: Unit, charge_id: int) -> Charge:
    found = charges.get(unit.conn, unit.store_id, charge_id, unit.now)
    if found is None:
        raise NotFound()
    addresses.lock(unit.conn, unit.store_id, [found.address_id])
    again = charges.get(unit.conn, unit.store_id, charge_id, unit.now)
    if again is None:
        raise NotFound()
    if again.claimed_by is not None:
        # A charge being paid does not change under its payment (decisions §6.3): its code is
        # applied or removed after, as a skip or a move waits (found by an audit: a 200 whose
        # change the payment ignored, with no event).
        raise Conflict("The charge is being paid; try again in a moment")
    return again


def address_discount(unit: Unit, address: Address | None, customer_id: int, currency: str, field: str,
                     discount_id: int | None, code: str | None, *, replacing: bool = False) -> int:
    """The id of a code an address may take now (also the 2021-11 `discounts` body of an
    address create or update, where ``address`` is None on create and a new code replaces the
    current one)."""
    row = rules.resolve(unit, field, discount_id, code, customer_id=customer_id)
    if address is not None and address.discount_id == row.id:
        return int(row.id)
    if address is not None and address.discount_id is not None and not replacing:
        # NOTE: spec 01/02, only one discount applies: remove the current one first.
        raise ValidationFailed.field(field, "the address already has a discount; remove it first")
    if address is not None and repository.open_charge_has_input(unit.conn, address.id):
        raise ValidationFailed.field(field, "a queued charge of the address already has a discount")
    rules.check(unit, row, field, customer_id=customer_id, currency=currency,
                except_address=address.id if address is not None else None)
    return int(row.id)


def _set_address_discount(unit: Unit, address: Address, discount_id: int | None) -> None:
    if not addresses.update_address(unit.conn, unit.store_id, address.id, address.lock_version,
                                    {"discount_id": discount_id, "updated_at": unit.now}):
        raise Conflict()
    unit.record("address/updated", address.id, changed=("discounts",))
    # A charge in retry follows its address's code as a queued one does (spec 02: "also removed
    # from future charges"), as an address update with `discounts` makes it.
    errored.follow(unit, [address.id])


def apply_to_address(unit: Unit, address_id: int, discount_id: int | None, code: str | None) -> Address:
    address = _address(unit, address_id)
    field = "discount_id" if discount_id is not None else "discount_code"
    if address.discount_id is not None:
        # NOTE: spec 02 Discount application endpoints, refused when the address has one.
        raise ValidationFailed.field(field, "the address already has a discount; remove it first")
    chosen = address_discount(unit, address, address.customer_id, address.presentment_currency, field,
                              discount_id, code)
    _set_address_discount(unit, address, chosen)
    return _reread(unit, address_id)


def remove_from_address(unit: Unit, address_id: int) -> Address:
    """NOTE: spec 02, also removed from the address's future charges (a replan). An address
    without a discount answers as it is (nothing to remove)."""
    address = _address(unit, address_id)
    if address.discount_id is not None:
        _set_address_discount(unit, address, None)
    return _reread(unit, address_id)


def _reread(unit: Unit, address_id: int) -> Address:
    found = addresses.get(unit.conn, unit.store_id, address_id)
    assert found is not None
    return found


def apply_to_charge(unit: Unit, charge_id: int, discount_id: int | None, code: str | None) -> Charge:
    charge = _charge(unit, charge_id)
    field = "discount_id" if discount_id is not None else "discount_code"
    row = rules.resolve(unit, field, discount_id, code, customer_id=charge.customer_id)
    if charge.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued charge can take a discount; this one is {charge.status}")
    address = addresses.get(unit.conn, unit.store_id, charge.address_id)
    assert address is not None
    # NOTE: spec 02 Charges rule 2, not on a charge that has one or whose address has one.
    if charge.discount_id is not None or repository.charge_input(unit.conn, charge.address_id, charge.scheduled_at):
        raise ValidationFailed.field(field, "the charge already has a discount; remove it first")
    if address.discount_id is not None:
        raise ValidationFailed.field(field, "the charge's address has a discount")
    rules.check(unit, row, field, customer_id=charge.customer_id, currency=charge.currency)
    lines = _check_qualifies(unit, charge, row, field)
    repository.add_charge_input(unit.conn, unit.store_id, charge.address_id, charge.scheduled_at, row.id, unit.now,
                                basis_of(lines, address))
    result = replan(unit, [charge.address_id])
    return _charge_after(unit, charge, result)


def _check_qualifies(unit: Unit, charge: Charge, row: Any, field: str) -> list[Any]:
    """NOTE: decisions §7.5, applying to a charge below `prerequisite_subtotal_min` (or with no
    line the code applies to) answers 422."""
    found = items.many(unit.conn, unit.store_id, charge.purchase_item_ids)
    lines = [found[i] for i in sorted(found)]
    terms = Terms.of(row, charge.currency, collection_products(unit.conn, unit.store_id, [row]).get(row.id))
    if (reason := terms.refusal(lines, line_totals(lines, charge.currency), "charge", charge.total_shipping)) is not None:
        raise ValidationFailed.field(field, reason)
    return lines


def remove_from_charge(unit: Unit, charge_id: int, address_id: int | None) -> Charge:
    """NOTE: spec 02 Discount application endpoints: with `address_id` the address's code is
    removed; a code on the address cannot be removed through the charge alone (422)."""
    charge = _charge(unit, charge_id)
    if address_id is not None:
        if address_id != charge.address_id:
            raise ValidationFailed.field("address_id", "is not the address of this charge")
        address = _address(unit, address_id)
        if address.discount_id is not None:
            _set_address_discount(unit, address, None)
        return _charge_after(unit, charge, None)
    if charge.status != QUEUED:
        raise ValidationFailed.field("status", f"only a queued charge's discount can be removed; "
                                               f"this one is {charge.status}")
    if repository.remove_charge_input(unit.conn, charge.address_id, charge.scheduled_at):
        result = replan(unit, [charge.address_id])
        return _charge_after(unit, charge, result)
    if charge.discount_id is not None:
        raise ValidationFailed.field("charge_id", "the discount is on the charge's address; remove it from the "
                                                  "address (send address_id)")
    return charge


def _charge_after(unit: Unit, charge: Charge, result: dict[Any, int] | None) -> Charge:
    charge_id = (result or {}).get((charge.address_id, charge.scheduled_at, QUEUED), charge.id)
    found = charges.get(unit.conn, unit.store_id, charge_id, unit.now)
    if found is None:
        raise NotFound()
    return found
