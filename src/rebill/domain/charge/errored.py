"""Charges in retry (status `error`) when what they hold changes under them.

A charge in retry is held out of the plan: its items wait for the retry (decisions §6.3), so
the reconciler never rewrites it. Some changes must still reach it before the retry takes the
money:

- a subscription cancelled or deleted, a one-time item deleted (decisions §5.16 takes the item
  out of its charge; a retry must not charge for it);
- a code fully disabled (decisions §7.5 clears it from errored charges).

Its money is computed again here by the function the plan uses, from the items it still holds,
its address and its date; its status, attempts and retry date stay. A charge left with no item
is deleted. A charge a billing run holds right now (claimed) is left alone: it is being paid."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from sqlalchemy import select

from rebill.errors import Conflict, ValidationFailed
from rebill.models import charge_items, charges

from ..address import repository as addresses
from ..customer import repository as customers
from ..discount import inputs as discount_inputs
from ..discount import repository as discounts
from ..discount.terms import basis_of
from ..event import attributes
from ..metafield import service as metafields
from ..schedule.plan import build_charge
from ..schedule.reconcile import billing_of, replan
from ..store import repository as stores
from ..subscription import repository as items
from ..unit import Unit
from . import repository
from .model import API_NAMES, ERROR

# What the items, the address, the store's rates and the code decide, all of it planned again;
# the rest of an errored charge (its date, status, currency, attempts) stays. The weight, the
# orders it makes and whether taxes are included follow with the money (found by an audit: a
# retry's order carried the weight of items cancelled meanwhile, and a store turned to taxes
# included left `taxes_included: false` on amounts computed with them).
PLANNED = ("shipping_address", "billing_address", "line_items", "shipping_lines", "tax_lines", "discounts",
           "discount_id", "subtotal_price", "total_discounts",
           "total_line_items_price", "total_tax", "total_shipping", "total_price",
           "taxable", "taxes_included", "total_weight_grams", "orders_count", "order_attributes", "note")


def holding(unit: Unit, item_id: int) -> list[int]:
    """The charges in retry that hold this purchase item."""
    stmt = (select(charges.c.id).join(charge_items, charge_items.c.charge_id == charges.c.id)
            .where(charge_items.c.purchase_item_id == item_id, charges.c.store_id == unit.store_id,
                   charges.c.status == ERROR))
    return sorted(unit.conn.execute(stmt).scalars())


def _in_retry(unit: Unit, address_ids: Collection[int] | None) -> list[int]:
    """The charges in retry of these addresses, or of every address of the store (None)."""
    stmt = select(charges.c.id).where(charges.c.store_id == unit.store_id, charges.c.status == ERROR)
    if address_ids is not None:
        stmt = stmt.where(charges.c.address_id.in_(sorted(address_ids)))
    return sorted(unit.conn.execute(stmt).scalars())


def follow(unit: Unit, address_ids: Collection[int] | None = None, *, also: Collection[int] = ()) -> None:
    """What these addresses' charges are made of besides their items changed (the address, its
    code, its customer's billing address, a code's collection; with None, every address of the
    store: its rates, decisions §5.9): their queued charges are planned again, and their charges
    in retry (and the charges ``also``) computed again, which their retry bills as they then are
    (found by audits: each of these left a retry billing what it was before)."""
    ids = addresses.ids_of_store(unit.conn, unit.store_id) if address_ids is None else sorted(address_ids)
    if ids:
        replan(unit, ids)
    recompute(unit, sorted({*also, *_in_retry(unit, address_ids)}))


def check_not_waiting(unit: Unit, item_id: int, field: str) -> None:
    """A subscription on a charge in error waits for that charge: a retry advances it from the
    charge's date (decisions §6.3), so a next date set meanwhile would show a date no charge
    has and then be overwritten. Refused, naming the charge (as a skip by date is). One on a
    charge being paid right now is refused with 409 (a lost race): the payment moves its date
    when it is recorded, and if it fails the charge keeps the item where it was (found by an
    audit on PostgreSQL: an item moved to another address meanwhile was charged twice for one
    date, by the retry there and by a new charge at its new address)."""
    if repository.being_paid(unit.conn, unit.store_id, item_id):
        raise Conflict(f"The charge of purchase item {item_id} is being paid; try again in a moment")
    found = repository.many(unit.conn, unit.store_id, holding(unit, item_id))
    for charge in found.values():
        if charge.retry_date is not None:
            raise ValidationFailed.field(field, f"purchase item {item_id} waits for the retry of charge {charge.id}")
        raise ValidationFailed.field(field, f"purchase item {item_id} is held by charge {charge.id}, whose last "
                                            "retry failed: process that charge first")


def recompute(unit: Unit, charge_ids: list[int], *, leaving: Collection[int] = ()) -> None:
    """The money of these charges in retry again, without the items ``leaving``, with the code
    the plan's discount inputs give them now (a code fully disabled is in none); empty ones are
    deleted."""
    found = [c for c in repository.many(unit.conn, unit.store_id, charge_ids).values()
             if c.status == ERROR and c.claimed_by is None]
    if not found:
        return
    store = stores.get(unit.conn, unit.store_id) or unit.store
    places = addresses.many(unit.conn, unit.store_id, [c.address_id for c in found])
    # NOTE: decisions §7.5, spec 02 Charges rule 2: the code of a charge in retry is found as the
    # plan finds a queued charge's (discount/inputs.py), not kept from what it carried: its own
    # code while it is made of what it was applied to, else its address's, within the code's
    # uses (these charges' own not counted as uses in flight). Found by an audit: a charge
    # below the minimum for a moment lost its address's code for good, and a code applied to
    # the charge alone stayed on after its items changed.
    computing = {c.id for c in found}
    others = [c for c in repository.open_of(unit.conn, unit.store_id, list(places)) if c.id not in computing]
    offers = discount_inputs.load(unit.conn, unit.store_id, places, others, unit.now)
    billing = customers.billing_addresses(unit.conn, unit.store_id, [c.customer_id for c in found])
    held = items.many(unit.conn, unit.store_id,  # every item of every charge: one query
                      sorted({i for c in found for i in c.purchase_item_ids if i not in leaving}))
    rows, removed = [], []
    dropped: list[tuple[int, date]] = []  # codes applied to a charge that is made of other things now
    gone: dict[int, int] = {}  # the charges left empty, and their customers
    names: dict[int, tuple[str, ...]] = {}  # the `updated_attributes` of each charge rewritten
    recoded: set[int] = set()  # the addresses whose charge in retry took or lost a code
    for charge in found:
        address = places.get(charge.address_id)
        if address is None:
            continue
        removed += [(charge.id, i) for i in charge.purchase_item_ids if i in leaving]
        kept = [held[i] for i in charge.purchase_item_ids if i in held]
        if not kept:
            gone[charge.id] = charge.customer_id
            continue
        offer = offers.get(address.id)
        terms, from_address = offer.for_charge(charge.scheduled_at, basis_of(kept, address)) if offer else (None, False)
        if offer is not None and charge.scheduled_at in offer.dropped:
            dropped.append((address.id, charge.scheduled_at))
        planned = build_charge(store, address, billing_of(billing.get(charge.customer_id)), charge.scheduled_at,
                               ERROR, kept, terms)
        if from_address and planned.values["discount_id"] is not None:
            offer.used_one()  # type: ignore[union-attr]
        money = {name: planned.values[name] for name in PLANNED}
        if money["discount_id"] != charge.discount_id:
            recoded.add(address.id)
        changed = attributes.differing(charge, money, API_NAMES)
        if not changed and not any(i in leaving for i in charge.purchase_item_ids):
            continue  # nothing of it changed: no write, no event
        names[charge.id] = changed
        rows.append({**money, "charge_id": charge.id, "updated_at": unit.now})
    discounts.drop_charge_inputs(unit.conn, dropped)
    repository.change_items(unit.conn, unit.store_id, [], removed)
    repository.update_many(unit.conn, (*PLANNED, "updated_at"), rows)
    unit.record_many("charge/updated", [row["charge_id"] for row in rows], changed=names)
    repository.delete_many(unit.conn, unit.store_id, list(gone))
    # The rows are gone when the events are written: their customers are named here.
    unit.record_many("charge/deleted", list(gone), with_id=True, customer_ids=gone)
    # NOTE: decisions §7.6
    metafields.forget(unit, {("charge", c): owner for c, owner in gone.items()}, charge=list(gone))
    if recoded:
        # A code a charge in retry took is a use in flight, one it lost is free again: the queued
        # charges of its address are planned again with that count (found by a stateful audit:
        # a single-use code applied while a charge was in retry went to the queued charge by
        # the replan, then to the retry by this computation, and both were paid with it).
        replan(unit, sorted(recoded))
