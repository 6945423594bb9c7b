"""Make the stored queued and skipped charges of some addresses equal to their plan
(design guide, "The billing engine"): insert the charges that are new, update in place the
ones that changed, delete the ones that vanished, each with its event.

Every change that can affect a charge ends by calling :func:`replan` for the addresses it
touched, so no code path edits a queued charge by hand. Ids are stable: a planned charge
takes the id of the stored charge with the same address, date and status, else of the
stored charge with the same address and date (a whole skip or unskip turns one charge into
the other), else, when the caller moved a date, of the charge it moved."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from decimal import Decimal
from typing import Any

from rebill.errors import Conflict

from ..address import repository as addresses
from ..address.model import Address
from ..charge import repository as charges
from ..charge.model import API_NAMES, ERROR, PLANNED, QUEUED, SKIPPED, OpenCharge
from ..customer import repository as customers
from ..discount import inputs as discount_inputs
from ..discount import repository as discounts
from ..event import attributes
from ..metafield import service as metafields
from ..store import repository as stores
from ..subscription import repository as items
from ..unit import Unit
from . import pending
from .plan import PlannedCharge, plan_address

REWRITTEN = (*PLANNED, "has_uncommitted_changes", "updated_at")
BATCH = 500  # addresses per round trip; keeps IN lists far below SQLite's variable limit
# The origins of units a request makes: its own, and an async batch task's (api/tasks.py).
REQUESTS = ("api", "batch")
Key = tuple[int, date, str]


def _new_row(unit: Unit, planned: PlannedCharge, original: date | None) -> dict[str, Any]:
    return {
        **planned.values,
        "store_id": unit.store_id,
        "tags": None,
        "total_refunds": Decimal(0),
        "processed_at": None,
        "error": None,
        "error_type": None,
        "charge_attempts": 0,
        "retry_date": None,
        "last_charge_attempt": None,
        "external_order_id": None,
        "external_transaction_id": None,
        "payment_processor": None,
        "has_uncommitted_changes": False,
        "merged_at": None,
        "original_scheduled_at": original or planned.scheduled_at,
        "lock_version": 1,
        "created_at": unit.now,
        "updated_at": unit.now,
    }


def billing_of(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """A customer's 2021-01 billing address, when it has one, is the charge's billing address."""
    if not document or not document.get("address1"):
        return None
    return {name: document.get(name) for name in ("address1", "address2", "city", "company", "country_code",
                                                  "first_name", "last_name", "phone", "province", "zip")}


def held(open_charges: list[OpenCharge], today: date) -> tuple[list[OpenCharge], set[int]]:
    """The open charges a replan may rewrite, and the items the others hold back from the plan:
    those of a charge in dunning (its items wait for its retry, decisions §6.3) or claimed by a
    billing run (being paid now: nothing may change under the payment). A skipped charge whose
    date has passed is history (docs/api-choices.md): neither rewritten nor deleted, and it
    holds nothing back (found by an audit: a quantity change rewrote it, a failed renewal
    deleted it and the retry made it again under a new id)."""
    free: list[OpenCharge] = []
    taken: set[int] = set()
    for charge in open_charges:
        if charge.status == SKIPPED and charge.scheduled_at < today:
            continue
        if charge.claimed_by is not None or charge.status == ERROR:
            taken.update(charge.purchase_item_ids)
        else:
            free.append(charge)
    return free, taken


def plan_of(unit: Unit, address_ids: list[int], held_items: set[int] | None = None,
            open_charges: list[OpenCharge] | None = None, offers_out: dict[int, Any] | None = None,
            found: dict[int, Address] | None = None) -> list[PlannedCharge]:
    """The plan of these addresses from what is stored now (also what tests compare with).
    ``offers_out`` receives the discount inputs the plan used; ``found``, the addresses when
    the caller has read them already."""
    store = stores.get(unit.conn, unit.store_id) or unit.store
    if found is None:
        found = addresses.many(unit.conn, unit.store_id, address_ids)
    if open_charges is None:
        open_charges = charges.open_of(unit.conn, unit.store_id, list(found))
    if held_items is None:
        held_items = held(open_charges, unit.today)[1]
    # NOTE: design guide, discounts are inputs of the plan, never patches on stored charges.
    offers = discount_inputs.load(unit.conn, unit.store_id, found, open_charges, unit.now)
    if offers_out is not None:
        offers_out.update(offers)
    billing = customers.billing_addresses(unit.conn, unit.store_id, [a.customer_id for a in found.values()])
    by_address: dict[int, list[Any]] = defaultdict(list)
    waiting: dict[int, list[Any]] = defaultdict(list)
    for item in items.for_plan(unit.conn, unit.store_id, list(found)):
        (waiting if item.id in held_items else by_address)[item.address_id].append(item)
    skips: dict[int, list[tuple[int, date]]] = defaultdict(list)
    for address_id, item_id, when in items.skips_of(unit.conn, list(found)):
        skips[address_id].append((item_id, when))
    planned: list[PlannedCharge] = []
    today = unit.today
    for address_id in sorted(found):
        address = found[address_id]
        planned += [p for p in plan_address(store, address, billing_of(billing.get(address.customer_id)),
                                            by_address[address_id], skips[address_id], offers.get(address_id),
                                            waiting=waiting[address_id])
                    if p.status != SKIPPED or p.scheduled_at >= today]  # past skips are history (held)
    return planned


def replan(unit: Unit, address_ids: Any, *, moved: dict[tuple[int, date], date] | None = None,
           locked: dict[int, Address] | None = None, keep: dict[Key, int] | None = None) -> dict[Key, int]:
    """Reconcile the charges of ``address_ids``; returns the charge id of every planned key.
    ``moved`` maps (address, old date) to the new date of a charge whose date the caller moved.
    ``locked``: addresses by id the caller has locked and read in this unit, unchanged since,
    which the replan takes as they are instead of locking and reading them again (a create's
    address; a batch chunk's, which its tasks read: ``Unit.replans``).
    ``keep`` names the stored charge a planned key must take, when it is still there: a whole
    skip keeps its charge's id (decisions §5.16) even where a skipped charge of the date was
    already stored (that one is then merged into it and deleted).
    A unit that collects its replans (``Unit.replans``) gets them run later by its owner, and
    an empty result: only use cases that ignore the result run in such a unit."""
    if unit.replans is not None and not moved and not keep:
        for address_id in address_ids:
            unit.replans.setdefault(address_id, None)
        unit.replans.update(locked or {})
        return {}
    ids = sorted(set(address_ids))
    result: dict[Key, int] = {}
    for start in range(0, len(ids), BATCH):
        result.update(_replan_batch(unit, ids[start:start + BATCH], moved or {}, locked or {}, keep or {}))
    return result


def _replan_batch(unit: Unit, ids: list[int], moved: dict[tuple[int, date], date],
                  locked: dict[int, Address], keep: dict[Key, int]) -> dict[Key, int]:
    known = {i: locked[i] for i in ids if i in locked}
    rest = [i for i in ids if i not in known]
    found = {**known, **addresses.many(unit.conn, unit.store_id, rest, lock=True)}
    open_charges = charges.open_of(unit.conn, unit.store_id, ids)
    stored, held_items = held(open_charges, unit.today)
    offers: dict[int, Any] = {}
    planned = plan_of(unit, ids, held_items, open_charges, offers, found)
    if offers:
        discounts.drop_charge_inputs(unit.conn, discount_inputs.stale(offers, {p.key for p in planned}, open_charges))
    by_date: dict[tuple[int, date], list[OpenCharge]] = defaultdict(list)
    for charge in stored:
        by_date[(charge.address_id, charge.scheduled_at)].append(charge)

    taken: dict[Key, OpenCharge] = {}
    used: set[int] = set()
    planned_keys = {plan.key for plan in planned}
    for key, charge_id in keep.items():
        charge = next((c for c in by_date.get(key[:2], ()) if c.id == charge_id), None)
        if charge is not None and key in planned_keys:
            taken[key] = charge
            used.add(charge.id)
    # Same address, date and status first; then same address and date.
    for exact in (True, False):
        for plan in planned:
            if plan.key in taken:
                continue
            for charge in by_date.get((plan.address_id, plan.scheduled_at), ()):
                if charge.id not in used and (charge.status == plan.status or not exact):
                    taken[plan.key] = charge
                    used.add(charge.id)
                    break
    # A moved charge keeps its id at its new date when nothing was there already.
    merged_into: set[Key] = set()
    for (address_id, old), new in moved.items():
        for charge in by_date.get((address_id, old), ()):
            if charge.id in used or charge.status != "queued":
                continue
            key = (address_id, new, "queued")
            if key in taken:
                merged_into.add(key)
            elif any(p.key == key for p in planned):
                taken[key] = charge
                used.add(charge.id)

    # NOTE: decisions §5.9, one queued charge per address and date: a request that would plan a
    # second one beside the charge a billing run is paying now (an item moved onto its date)
    # waits instead (found by an audit: both were paid, with two shipping fees); so does an async
    # batch's task, which answers as its request would (found by an audit: a task made the second
    # charge, and both were paid). The run's own replans, jobs and the command line are not
    # requests: they keep the plan as it comes.
    being_paid = {(c.address_id, c.scheduled_at) for c in open_charges
                  if c.claimed_by is not None and c.status == QUEUED} if unit.origin in REQUESTS else set()
    inserts: list[PlannedCharge] = []
    item_pairs: list[tuple[int, int]] = []
    removed: list[tuple[int, int]] = []
    rewritten: list[dict[str, Any]] = []
    names: dict[int, tuple[str, ...]] = {}  # the `updated_attributes` of each rewritten charge
    flag_only: list[int] = []  # charges whose `has_uncommitted_changes` alone goes back
    result: dict[Key, int] = {}
    for plan in planned:
        charge = taken.get(plan.key)
        if charge is None:
            if plan.status == QUEUED and (plan.address_id, plan.scheduled_at) in being_paid:
                raise Conflict("The address's charge of that date is being paid; try again in a moment")
            inserts.append(plan)
            continue
        result[plan.key] = charge.id
        changed = [k for k, v in plan.values.items() if getattr(charge, k) != v]
        extra: dict[str, Any] = {}
        if plan.key in merged_into:
            extra["merged_at"] = unit.now
        if charge.scheduled_at != plan.scheduled_at and charge.original_scheduled_at is None:
            extra["original_scheduled_at"] = charge.scheduled_at
        if extra:
            charges.update_one(unit.conn, unit.store_id, charge.id, extra)
            changed.extend(extra)
        if changed:
            if charge.has_uncommitted_changes:
                changed.append("has_uncommitted_changes")
            rewritten.append({**plan.values, "charge_id": charge.id, "has_uncommitted_changes": False,
                              "updated_at": unit.now})
            names[charge.id] = attributes.names(changed, API_NAMES)
        elif charge.has_uncommitted_changes:
            # The flag alone goes back, as it came (charges.mark_uncommitted): no event and the
            # same `updated_at` (found by an audit: the regeneration told charge/updated of a
            # charge of another date that nothing had changed).
            flag_only.append(charge.id)
        if charge.purchase_item_ids != plan.item_ids:
            before, after = set(charge.purchase_item_ids), set(plan.item_ids)
            item_pairs += [(charge.id, item_id) for item_id in sorted(after - before)]
            removed += [(charge.id, item_id) for item_id in sorted(before - after)]
    # Every changed charge gets the whole plan in one statement (the unchanged columns are
    # written with the values they have).
    charges.update_many(unit.conn, REWRITTEN, rewritten)
    charges.clear_uncommitted(unit.conn, unit.store_id, flag_only)
    # Every planned charge's customer is the plan's: named here, the events need no look-up.
    unit.record_many("charge/updated", [row["charge_id"] for row in rewritten], changed=names,
                     customer_ids={row["charge_id"]: row["customer_id"] for row in rewritten})

    # The rows are gone when the events are written: their customers are named here.
    owners = {c.id: c.customer_id for c in stored if c.id not in used}
    gone = list(owners)
    charges.delete_many(unit.conn, unit.store_id, gone)
    unit.record_many("charge/deleted", gone, with_id=True, customer_ids=owners)
    # NOTE: decisions §7.6, one statement for all
    metafields.forget(unit, {("charge", c): owner for c, owner in owners.items()}, charge=gone)

    new_ids = charges.insert_many(unit.conn, [_new_row(unit, plan, None) for plan in inserts])
    for plan, charge_id in zip(inserts, new_ids):
        result[plan.key] = charge_id
        item_pairs += [(charge_id, item_id) for item_id in plan.item_ids]
    unit.record_many("charge/created", new_ids,
                     customer_ids={charge_id: plan.values["customer_id"] for plan, charge_id in zip(inserts, new_ids)})
    charges.change_items(unit.conn, unit.store_id, item_pairs, removed)
    pending.clear(unit.conn, ids)
    return result
