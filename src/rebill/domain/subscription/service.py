"""Subscription use cases: create, read, update, delete (decisions §5.1-§5.5, §5.16).
Lifecycle moves (cancel, activate, next date, address) are in ``lifecycle.py``. Every change
ends by replanning the charges of the addresses it touched (domain/schedule)."""

from __future__ import annotations

from datetime import date
from typing import Any

import msgspec

from rebill.errors import Conflict, NotFound, ValidationFailed

from .. import analytics
from ..address import repository as addresses
from ..address.model import Address
from ..bundle import authorized
from ..bundle import repository as bundles
from ..catalog import repository as catalog_repository
from ..catalog import service as catalog
from ..catalog.rules import plan_fits, plan_price
from ..charge import errored
from ..charge import repository as charges
from ..customer import activity
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..metafield import service as metafields
from ..money import places_problem, quantize
from ..schedule import pending
from ..schedule.dates import occurrences
from ..schedule.reconcile import replan
from ..store import clock as store_clock
from ..unit import Unit, zone
from . import intervals, repository
from .model import ACTIVE, API_NAMES, EXPIRED, SUBSCRIPTION, PurchaseItem, SubscriptionCreate, SubscriptionUpdate

MAX_QUANTITY = 1_000_000


def get(unit: Unit, subscription_id: int, kind: str = SUBSCRIPTION) -> PurchaseItem:
    found = repository.get(unit.conn, unit.store_id, kind, subscription_id)
    if found is None:
        raise NotFound()
    return found


def locked(unit: Unit, item_id: int, kind: str = SUBSCRIPTION, *, also: int | None = None) -> PurchaseItem:
    """The item read under its address's lock, as every change of an item must be (its
    address's replan, reconcile.replan): read it, lock its address (and the address ``also``,
    in id order: two addresses are always locked in that order), read it again. An item that
    moved to another address meanwhile answers 409: the caller's reading of it is stale."""
    current = get(unit, item_id, kind)
    wanted = sorted({current.address_id} | ({also} if also is not None else set()))
    found = addresses.lock(unit.conn, unit.store_id, wanted)
    if also is not None and also not in found:
        raise ValidationFailed.field("address_id", "address not found")
    again = get(unit, item_id, kind)
    if again.address_id != current.address_id:
        raise Conflict("The item moved to another address meanwhile; try again")
    return again


def check_next_date(unit: Unit, item_ids: list[int], when: date, field: str) -> None:
    """Whether ``when`` may be the items' next charge date, for every request that sets one.
    A date an item has skipped (decisions §5.12) would show a date on which it has no queued
    charge, the skip winning in the plan: refused, pointing at the skipped charge to unskip
    instead. A date on or before the one an item was last charged for (its next charge processed
    early) would bill a paid date again, or the paid one at its renewal (decisions §6.5; found
    by a stateful random audit: set_next_charge_date back onto the date just paid)."""
    skipped = repository.skipped_on(unit.conn, item_ids, when)
    if skipped:
        raise ValidationFailed.field(field, f"purchase item {skipped[0]} is skipped on {when}: unskip that "
                                            "charge instead")
    paid = repository.charged_since(unit.conn, item_ids, when)
    if paid:
        item_id, last = paid[0]
        raise ValidationFailed.field(field, f"purchase item {item_id} was already charged for {last.isoformat()}: "
                                            "its next charge date must come after it")


def set_by_hand(unit: Unit, item: PurchaseItem, when: date) -> dict[str, Any]:
    """The changes of an item whose next date is set by hand (intervals.set_by_hand: the date
    is the cadence's from then on), and its skips ahead that the new cadence no longer reaches
    dropped, as a new interval drops them (decisions §5.3). Found by an audit: a subscription
    moved from the 10th to the 12th kept its skip of January 10th, a date it is no longer charged
    on, and was billed on January 12th: the skip showed and did nothing. A skip still on the new
    cadence stays."""
    changes = intervals.set_by_hand(item, when)
    if item.kind != SUBSCRIPTION:
        return changes
    ahead = [d for d in repository.skipped_dates(unit.conn, item.id) if d >= unit.today]
    if ahead:
        # As far as a skip may lie (charge/service.skip_on_address counts as many dates).
        reached = set(occurrences(when, item.order_interval_unit or "day", item.charge_interval_frequency or 1,
                                  changes.get("anchor_day", item.anchor_day), until=max(ahead), limit=10_000))
        for day in ahead:
            if day not in reached:
                repository.remove_skip(unit.conn, item.id, day)
    return changes


def price_problem(price: Any, currency: str) -> str | None:
    """What is wrong with an item's price sent in an update, if anything."""
    return "must not be negative" if price < 0 else places_problem(price, currency)


def swaps(current: PurchaseItem, changes: dict[str, Any]) -> bool:
    """Whether ``changes`` give the item another product or variant (a product alone changes
    the variant too, once ``swap_values`` has filled it)."""
    return (changes.get("external_product_id", current.external_product_id),
            changes.get("external_variant_id", current.external_variant_id)) != \
        (current.external_product_id, current.external_variant_id)


def bundle_follows_swap(unit: Unit, current: PurchaseItem, changes: dict[str, Any]) -> None:
    """An item holding a bundle selection (spec 01: a selection is tied to its subscription and
    to a bundle variant, which validates its contents) swaps only to a variant that is a bundle,
    and its selection is tied to that bundle from then on: the bundle its item is, the one a
    delete of a bundle variant counts (found by an audit: a selection left naming the old bundle
    let the new one be deleted under it, and kept the old one from being deleted). Its contents
    are checked against the new bundle at their next write (docs/api-choices.md, Bundles).
    Swapped to a variant that is no bundle, its next orders would carry another bundle's
    contents: refused."""
    if not swaps(current, changes):
        return
    selection = bundles.selection_of_item(unit.conn, unit.store_id, current.id)
    if selection is None:
        return
    product = changes.get("external_product_id", current.external_product_id)
    variant = changes.get("external_variant_id", current.external_variant_id)
    # A key share lock, as a selection's own write takes: the bundle is not deleted under it.
    bundle = bundles.variant_of(unit.conn, unit.store_id, product, variant, lock=True)
    if bundle is None:
        raise ValidationFailed.field("external_variant_id", f"the variant {variant} is not a bundle, and this item "
                                                            f"holds bundle selection {selection}: delete it first")
    tied = {"bundle_variant_id": bundle.id, "external_product_id": bundle.external_product_id,
            "external_variant_id": bundle.external_variant_id}
    bundles.update_selection(unit.conn, unit.store_id, selection, {**tied, "updated_at": unit.now})
    unit.record("bundle_selection/updated", selection, customer_id=current.customer_id,
                changed=attributes.names(list(tied)))


def address_for(unit: Unit, address_id: int, field: str = "address_id") -> Address:
    """The address a purchase item goes on, locked for the unit (reconcile.replan)."""
    found = addresses.locked(unit.conn, unit.store_id, address_id)
    if found is None:
        raise ValidationFailed.field(field, "address not found")
    return found


def catalog_values(unit: Unit, values: dict[str, Any], *, currency: str) -> dict[str, Any]:
    """Fill what the caller left out from the catalog variant (decisions §5.1, "defaults
    from the catalog variant"): titles, price, sku, weight, tax and shipping flags, images."""
    given = values.get("price")  # a price the caller sent is never rounded; the catalog's is
    product_id = values.get("external_product_id")
    variant = catalog.variant_defaults(unit, product_id, values.get("external_variant_id")) if product_id else None
    if product_id and variant is None and (values.get("price") is None or not values.get("product_title")):
        raise ValidationFailed.field("external_variant_id" if values.get("external_variant_id") else
                                     "external_product_id", "not found in the catalog")
    if variant is not None:
        values["external_variant_id"] = values.get("external_variant_id") or variant.external_variant_id
        for name in ("product_title", "variant_title", "sku", "price"):
            if values.get(name) is None:
                values[name] = getattr(variant, name)
        values.setdefault("grams", variant.grams)
        values.setdefault("taxable", variant.taxable)
        values.setdefault("requires_shipping", variant.requires_shipping)
        values.setdefault("images", variant.images)
    errors: dict[str, list[str]] = {}
    if not values.get("product_title"):
        errors["product_title"] = ["is required (or a product of the catalog)"]
    if values.get("price") is None:
        errors["price"] = ["is required (or a product of the catalog with a price)"]
    elif values["price"] < 0:
        errors["price"] = ["must not be negative"]
    elif given is not None and (problem := places_problem(given, currency)):
        errors["price"] = [problem]
    if errors:
        raise ValidationFailed(errors)
    values["price"] = quantize(values["price"], currency)
    values.setdefault("grams", None)
    values.setdefault("taxable", True)
    values.setdefault("requires_shipping", True)
    values.setdefault("images", None)
    return values


def swap_values(unit: Unit, current: PurchaseItem, changes: dict[str, Any]) -> None:
    """A new product or variant: the catalog's defaults for what was not sent; a product the
    catalog does not hold keeps the item's own titles and sku (as a create with explicit fields
    would take them). The price is kept unless sent (docs/api-choices.md). Its own product sent
    alone is no swap (found by an audit: it took the product's first variant), nor its own
    product and variant sent back (found by an audit: a GET body sent back took the titles,
    sku, weight and flags of a catalog product added since, and the charge's shipping and tax
    with them)."""
    own_variant = changes.get("external_variant_id", current.external_variant_id) == current.external_variant_id
    if changes.get("external_product_id", current.external_product_id) == current.external_product_id and (
            own_variant or "external_variant_id" not in changes):
        changes.pop("external_product_id", None)
        changes.pop("external_variant_id", None)
        return
    product_id = changes.get("external_product_id", current.external_product_id)
    variant_id = changes.get("external_variant_id")
    swapped = {"external_product_id": product_id, "external_variant_id": variant_id,
               "product_title": changes.get("product_title"), "variant_title": changes.get("variant_title"),
               "sku": changes.get("sku"), "price": changes.get("price", current.price)}
    if not product_id or catalog.variant_defaults(unit, product_id, variant_id) is None:
        for name in ("product_title", "variant_title", "sku"):
            swapped[name] = changes.get(name, getattr(current, name))
    filled = catalog_values(unit, swapped, currency=current.presentment_currency)
    for name in ("external_variant_id", "product_title", "variant_title", "sku", "grams", "taxable",
                 "requires_shipping", "images"):
        changes[name] = filled[name]


def _check_plan(unit: Unit, plan_id: int) -> Any:
    """NOTE: decisions §1.1, a plan of another store is not found (a 422: the id is in the body)."""
    try:
        plan = catalog.get_plan(unit, plan_id)
    except NotFound:
        raise ValidationFailed.field("plan_id", "plan not found") from None
    if plan.type == "onetime":
        raise ValidationFailed.field("plan_id", "is a onetime plan")
    return plan


def _check_quantity(quantity: int) -> None:
    if not 1 <= quantity <= MAX_QUANTITY:
        raise ValidationFailed.field("quantity", f"must be from 1 to {MAX_QUANTITY}")


def _apply_plan(unit: Unit, values: dict[str, Any]) -> Any:
    """A plan gives the product and the cadence (decisions §5.8); returns the plan."""
    plan = _check_plan(unit, values["plan_id"])
    if values.get("external_product_id") is None:
        values["external_product_id"] = plan.external_product_id
    if values.get("external_variant_id") is None and plan.external_variant_ids \
            and values["external_product_id"] == plan.external_product_id:
        values["external_variant_id"] = plan.external_variant_ids[0]  # a variant the plan applies to
    preferences = plan.subscription_preferences or {}
    if all(values.get(name) is None for name in intervals.INTERVAL_FIELDS):
        values["charge_interval_frequency"] = preferences.get("charge_interval_frequency")
        values["order_interval_frequency"] = preferences.get("order_interval_frequency")
        values["order_interval_unit"] = preferences.get("interval_unit")
        for name in ("order_day_of_month", "order_day_of_week", "cutoff_day_of_month", "cutoff_day_of_week",
                     "expire_after_specific_number_of_charges"):
            if values.get(name) is None:
                values[name] = preferences.get(name)
    return plan


def create(unit: Unit, command: SubscriptionCreate, *, replan_now: bool = True) -> PurchaseItem:
    address = address_for(unit, command.address_id)
    values = msgspec.structs.asdict(command)
    plan = _apply_plan(unit, values) if command.plan_id is not None else None
    # Every rule of the body's own values at once (decisions §2.3; found by an audit: a bad
    # quantity, unit and price took three requests to learn).
    errors: dict[str, Any] = {}
    if command.status != ACTIVE:
        errors["status"] = ["a new subscription is active"]
    same_currency(errors, values.pop("presentment_currency"), address.presentment_currency)
    ValidationFailed.collect(errors, _check_quantity, command.quantity)
    ValidationFailed.collect(errors, intervals.check, values)  # the unit lower-cased in place
    ValidationFailed.collect(errors, catalog_values, unit, values, currency=address.presentment_currency)
    if command.next_charge_scheduled_at is not None:
        ValidationFailed.collect(errors, intervals.check_future, "next_charge_scheduled_at",
                                 command.next_charge_scheduled_at, unit.today)
    if errors:
        raise ValidationFailed(errors)
    if plan is not None:
        # A plan of another product, or one restricted to other variants, would give this item
        # its discount and cadence: refused as bundles refuse it (decisions §7.7 item 8).
        if problem := plan_fits(plan, values.get("external_product_id"), values.get("external_variant_id")):
            raise ValidationFailed.field("plan_id", problem)
        if command.price is None:
            # NOTE: decisions §5.8, the plan's discount applies to a price taken from the catalog.
            values["price"] = plan_price(values["price"], plan, address.presentment_currency)
    today = unit.today
    when = command.next_charge_scheduled_at
    # The cadence keeps the day of the date it was set on (docs/api-choices.md, Month ends): the
    # first date sent, else today, from which the first date is one interval on (found by an
    # audit: created on Jan 31, charged Feb 28, then Mar 28 instead of Mar 31).
    anchor = intervals.anchor_for(values["order_interval_unit"], when or today, values.get("order_day_of_month"),
                                  values.get("order_day_of_week"))
    if when is None:
        when = intervals.first_date(values, today)
    intervals.check_room("next_charge_scheduled_at", when, values["order_interval_unit"],
                         values["charge_interval_frequency"], anchor)
    values.update(
        store_id=unit.store_id,
        kind=SUBSCRIPTION,
        customer_id=address.customer_id,
        status=ACTIVE,
        presentment_currency=address.presentment_currency,
        next_charge_scheduled_at=when,
        anchor_day=anchor,
        sku_override=bool(values.get("sku_override")),
        charges_count=0,
        last_charge_date=None,
        cancelled_next_date=None,
        max_retries_reached=False,
        cancellation_reason=None,
        cancellation_reason_comments=None,
        cancelled_at=None,
        lock_version=1,
        created_at=unit.now,
        updated_at=unit.now,
    )
    item_id = repository.insert_item(unit.conn, values)
    unit.record("subscription/created", item_id, customer_id=address.customer_id)
    activity.refresh(unit, address.customer_id, has_active=True)
    if replan_now:
        replan(unit, [address.id], locked={address.id: address})
    return repository.inserted(unit.conn, item_id, values)


def kept_address(errors: dict[str, Any], current: PurchaseItem, changes: dict[str, Any], move: str) -> None:
    """An update's `address_id`: the address the item is on, sent back (a GET body), is no
    change; another is refused with where a move is made (found by an audit: it answered 200
    and moved nothing, and the caller believed the item moved)."""
    asked = changes.pop("address_id", None)
    if asked is not None and asked != current.address_id:
        errors["address_id"] = [f"is not changed by an update; {move}"]


def same_currency(errors: dict[str, Any], sent: str | None, currency: str) -> None:
    """A `presentment_currency` sent to a create or an update: an item is charged in its
    address's currency (decisions §5), so that one passes and another is refused, as an
    address's own is (found by an audit: `"USD"` on an address in yen answered 201 in JPY)."""
    if sent is not None and sent != currency:
        errors["presentment_currency"] = [f"must be the address's currency ({currency}): an item is charged in it"]


def update(unit: Unit, subscription_id: int, command: SubscriptionUpdate, *, replan_now: bool = True) -> PurchaseItem:
    current = locked(unit, subscription_id)
    changes = command.changes()
    # The body's own rules at once (decisions §2.3; found by an audit: a zero quantity, then a
    # price of three decimals, then an unknown unit, one request each).
    errors: dict[str, Any] = {}
    if "next_charge_scheduled_at" in changes and changes["next_charge_scheduled_at"] is None:
        # What a cancelled or expired subscription shows, sent back: no change (found by an audit).
        if current.next_charge_scheduled_at is not None:
            errors["next_charge_scheduled_at"] = ["cannot be null"]
        del changes["next_charge_scheduled_at"]
    asked = changes.pop("status", None)
    if asked is not None and asked.strip().lower() != current.status:
        # Found by an audit: `{"status": "cancelled"}` answered 200 and the subscription stayed
        # active. A status changes through its actions, which do what goes with it.
        errors["status"] = [f"is changed by POST /subscriptions/{subscription_id}/cancel or /activate, "
                            "not by an update"]
    kept_address(errors, current, changes, f"POST /subscriptions/{subscription_id}/change_address moves it")
    same_currency(errors, changes.pop("presentment_currency", None), current.presentment_currency)
    sent = [name for name in intervals.INTERVAL_FIELDS if name in changes]
    if sent and len(sent) != len(intervals.INTERVAL_FIELDS):
        # NOTE: decisions §5.3, the three interval fields change together or not at all.
        errors.update({name: ["must be sent with " + ", ".join(sent)]
                       for name in intervals.INTERVAL_FIELDS if name not in changes})
    if "quantity" in changes:
        ValidationFailed.collect(errors, _check_quantity, changes["quantity"])
    # The plan it was made from stays named after that plan is deleted (the record of where it
    # came from): a PUT that sends it back unchanged is no new plan to check.
    new_plan = ValidationFailed.collect(errors, _check_plan, unit, changes["plan_id"]) \
        if changes.get("plan_id") not in (None, current.plan_id) else None
    if current.status != ACTIVE and ({"next_charge_scheduled_at"} & set(changes)):
        errors["next_charge_scheduled_at"] = ["a cancelled or expired subscription has none"]
    elif changes.get("next_charge_scheduled_at", current.next_charge_scheduled_at) != current.next_charge_scheduled_at:
        # Its own date sent back is no change, past or not (found by an audit: a GET body of a
        # subscription in dunning, whose date is its failed charge's, sent back was 422).
        ValidationFailed.collect(errors, intervals.check_future, "next_charge_scheduled_at",
                                 changes["next_charge_scheduled_at"], unit.today)
    cadence = {name: changes.get(name, getattr(current, name)) for name in
               (*intervals.INTERVAL_FIELDS, "order_day_of_month", "order_day_of_week", "cutoff_day_of_month",
                "cutoff_day_of_week", "expire_after_specific_number_of_charges")}
    if any(name in changes for name in cadence) and not any(name in errors for name in intervals.INTERVAL_FIELDS):
        checked = ValidationFailed.collect(errors, intervals.check, cadence, changes)
        if checked is not None:
            cadence = checked
            changes.update({k: v for k, v in cadence.items() if k in changes})
    if "price" in changes and (problem := price_problem(changes["price"], current.presentment_currency)):
        errors["price"] = [problem]
    if errors:
        raise ValidationFailed(errors)
    if "external_variant_id" in changes or "external_product_id" in changes:
        swap_values(unit, current, changes)
        # Whatever was sent: a product alone changes the variant too (found by an audit).
        if not current.is_swappable and swaps(current, changes):
            raise ValidationFailed.field("external_variant_id", "this subscription is not swappable")
        bundle_follows_swap(unit, current, changes)
    if new_plan is not None and (problem := plan_fits(
            new_plan, changes.get("external_product_id", current.external_product_id),
            changes.get("external_variant_id", current.external_variant_id))):
        raise ValidationFailed.field("plan_id", problem)
    if "plan_id" not in changes and current.plan_id is not None and swaps(current, changes):
        # A swap its plan does not fit leaves the plan behind: the item keeps its price and
        # cadence, and names no plan it could not be created with (found by an audit). A plan
        # deleted since stays named, the record of where the item came from.
        kept = catalog_repository.plan(unit.conn, unit.store_id, current.plan_id)
        if kept is not None and plan_fits(kept, changes.get("external_product_id", current.external_product_id),
                                          changes.get("external_variant_id", current.external_variant_id)):
            changes["plan_id"] = None
    if "price" in changes:
        changes["price"] = quantize(changes["price"], current.presentment_currency)
    today = unit.today
    interval_changed = any(changes.get(n, getattr(current, n)) != getattr(current, n)
                           for n in (*intervals.INTERVAL_FIELDS, "order_day_of_month", "order_day_of_week"))
    if "next_charge_scheduled_at" in changes:
        if changes["next_charge_scheduled_at"] != current.next_charge_scheduled_at:
            errored.check_not_waiting(unit, subscription_id, "next_charge_scheduled_at")
            check_next_date(unit, [subscription_id], changes["next_charge_scheduled_at"],
                              "next_charge_scheduled_at")
    if interval_changed:
        # A new cadence gives a new next date, which a retry holding it would overwrite (as a
        # next date sent would be; found by an audit), and a new count of deliveries a charge
        # pays for: a cancelled subscription still on the charge its last retry closed would
        # have that charge billed for them (found by a random audit).
        errored.check_not_waiting(unit, subscription_id, next((n for n in cadence if n in changes), "order_interval_unit"))
        # NOTE: decisions §5.16, the creation date is the store's date (its "today" then).
        since = current.last_charge_date or current.created_at.astimezone(zone(unit.store.timezone)).date()
        if "next_charge_scheduled_at" not in changes and current.status == ACTIVE:
            changes["next_charge_scheduled_at"] = intervals.after_interval_change(cadence, since, today)
        elif current.status != ACTIVE and current.cancelled_next_date is not None:
            # The date an activation gives back (decisions §5.16) is the new cadence's, as an
            # active one's next date is (found by an audit: a monthly cadence made weekly while
            # cancelled went on from the old date on the old anchor, read as a weekday).
            changes["cancelled_next_date"] = intervals.after_interval_change(cadence, since, today)
    date_moved = changes.get("next_charge_scheduled_at", current.next_charge_scheduled_at) \
        != current.next_charge_scheduled_at
    # The date alone, or with the interval fields sent back as they are (found by a review: a GET
    # body with a new date went the cadence's way, and kept the skips the new date's cadence no
    # longer reaches). An order day sent with it stays the cadence's, the date charged once
    # (docs/api-choices.md, Order days).
    by_hand = date_moved and current.status == ACTIVE and not interval_changed and all(
        changes.get(name) is None for name in ("order_day_of_month", "order_day_of_week"))
    if by_hand:
        # The date alone, as set_next_charge_date sets it: its day is the cadence's from then on.
        changes.update(set_by_hand(unit, current, changes["next_charge_scheduled_at"]))
        intervals.check_room("next_charge_scheduled_at", changes["next_charge_scheduled_at"],
                             current.order_interval_unit, current.charge_interval_frequency,
                             changes.get("anchor_day", current.anchor_day))
    elif interval_changed or date_moved:
        # Only a cadence or a date that changes sets the anchor again: a PUT that sends both back
        # as they are keeps it (found by an audit: Jan 31's cadence, echoed after a skip had put
        # it on Feb 28, went on the 28th of every month).
        when = changes.get("next_charge_scheduled_at") or current.next_charge_scheduled_at \
            or changes.get("cancelled_next_date")
        if when is not None:
            changes["anchor_day"] = intervals.anchor_for(cadence["order_interval_unit"], when,
                                                         cadence.get("order_day_of_month"),
                                                         cadence.get("order_day_of_week"))
            intervals.check_room("next_charge_scheduled_at", when, cadence["order_interval_unit"],
                                 cadence["charge_interval_frequency"], changes["anchor_day"])
    if interval_changed:
        # NOTE: decisions §5.3, a new interval drops skipped and moved charges.
        repository.remove_skips(unit.conn, subscription_id, from_date=today)
    limit = changes.get("expire_after_specific_number_of_charges", current.expire_after_specific_number_of_charges)
    expires = current.status == ACTIVE and limit is not None and current.charges_count >= limit
    if expires:
        # NOTE: decisions §5.5, a limit lowered to the charges already made ends the subscription
        # now, as the billing run would have with its last charge (no next date, no queued charge).
        changes.update(status=EXPIRED, next_charge_scheduled_at=None)
        repository.remove_skips(unit.conn, subscription_id, from_date=today)
    # Sending what is stored, or what a GET shows, changes nothing: the shown default of an
    # analytics_data, and a prepaid item's `is_skippable: false` (found by an audit: stored, it
    # left the item unskippable once it was prepaid no more).
    still_prepaid = current.is_prepaid and (cadence["charge_interval_frequency"] or 0) > (
        cadence["order_interval_frequency"] or 0)  # a flag sent with a cadence that ends it counts
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v
               and not (k == "analytics_data" and analytics.same(current.analytics_data, v))
               and not (k == "is_skippable" and still_prepaid and v == current.shown_skippable)}
    if changes:
        changes["updated_at"] = unit.now
        if not repository.update_item(unit.conn, unit.store_id, subscription_id, current.lock_version, changes):
            raise Conflict()
        unit.record("subscription/updated", subscription_id, changed=attributes.names(changes, API_NAMES[SUBSCRIPTION]))
        # A charge in retry that holds it bills it as it is now: an expired subscription leaves
        # it (as a cancelled one does), and a new quantity, price or variant is in its money
        # (found by an audit: the retry billed the old line, or an expired subscription).
        errored.recompute(unit, errored.holding(unit, subscription_id), leaving={subscription_id} if expires else ())
        if expires:
            activity.refresh(unit, current.customer_id)
        if not command.commit:
            # NOTE: decisions §5.3, commit=false: the charges follow after the 5-second window.
            # The window is real waiting, not the store's test clock (domain/store/clock.py).
            pending.defer(unit.conn, unit.store_id, current.address_id, unit.now - store_clock.offset(unit.store))
            charges.mark_uncommitted(unit.conn, unit.store_id, current.address_id)
        elif replan_now:
            replan(unit, [current.address_id])
    return get(unit, subscription_id)


def delete(unit: Unit, subscription_id: int, kind: str = SUBSCRIPTION, *, replan_now: bool = True) -> None:
    current = locked(unit, subscription_id, kind)
    # Its bundle selection goes with it (a cascade): not while a charge waits to capture it.
    authorized.keep_contents(unit, subscription_id, "id", "delete it")
    # A charge in retry holding it must not take its money (domain/charge/errored.py).
    errored.recompute(unit, errored.holding(unit, subscription_id), leaving={subscription_id})
    repository.delete_item(unit.conn, unit.store_id, subscription_id)
    # The row is gone when the events are written: its customer is named here.
    unit.record(f"{kind}/deleted", subscription_id, {"id": subscription_id}, customer_id=current.customer_id)
    if kind == SUBSCRIPTION:
        metafields.forget(unit, current.customer_id, subscription=[subscription_id])  # NOTE: decisions §7.6
        activity.refresh(unit, current.customer_id)
    if replan_now:
        replan(unit, [current.address_id])


def list_page(unit: Unit, query: ListQuery, kind: str = SUBSCRIPTION) -> PageResult:
    return repository.page(unit.conn, unit.store_id, kind, query)


def count(unit: Unit, filters: dict[str, Any], kind: str = SUBSCRIPTION) -> int:
    return repository.count_where(unit.conn, unit.store_id, kind, filters)
