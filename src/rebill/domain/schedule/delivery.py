"""A customer's delivery schedule (decisions §5.15, §5.16): the deliveries its purchase items
will make from today on, projected from the items and their skips, with the orders already paid
for as they are stored.

``project`` is a pure function, no I/O; ``for_customer`` reads its inputs and calls it.

- A subscription delivers on every date of its cadence from its next charge date
  (``dates.occurrences``), for as many charges as it has left
  (``expire_after_specific_number_of_charges`` minus ``charges_count``). A skipped date is a
  delivery whose lines are skipped; it does not use up a charge.
- A prepaid subscription delivers on every order interval: order k of a charge on the charge's
  date plus k order intervals (decisions §5.4). The later orders of a charge already paid are
  stored, queued until their date (decisions §6.12): they are shown as stored (their id, date,
  address and lines, moved by a delay or changed by an update, and whatever became of the
  subscription since), not projected; so is a clone of an order, queued on its date.
- A one-time item delivers on its date, skipped when the date is skipped.
- One order per address, charge and status on a date: the lines of a queued charge, the lines
  of a skipped charge, and the lines of dates that have no charge yet (later cadence dates),
  queued and skipped apart, as charges are kept (docs/api-choices.md); a stored order is one
  order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import msgspec

from ..address import repository as addresses
from ..address.model import Address
from ..charge import repository as charges
from ..charge.model import PENDING, QUEUED, SKIPPED, capturable
from ..customer.model import Customer
from ..order import repository as orders
from ..order.model import Order
from ..payment_method import repository as payment_methods
from ..subscription import repository as items
from ..subscription.model import ACTIVE, ONETIME, SUBSCRIPTION, PurchaseItem
from ..unit import Unit
from .dates import MAX_STEPS, add_interval, anchor_on, occurrences
from .plan import ADDRESS_FIELDS, shipping_address

# NOTE: decisions §5.16, at most 50 delivery dates; 10 and 365 days unless asked otherwise.
DEFAULT_COUNT, MAX_COUNT = 10, 50
DEFAULT_INTERVAL_DAYS, MAX_INTERVAL_DAYS = 365, 3650


class DeliveryLine(msgspec.Struct, frozen=True):
    """What one item delivers: from the item as it is now (a projected delivery) or from a
    stored order's line (a delivery already paid for)."""

    subscription_id: int | None  # none for a checkout's one-time line (it makes no purchase item)
    plan_type: str
    is_skippable: bool
    is_skipped: bool
    product_title: str | None
    variant_title: str | None
    external_product_id: str | None
    external_variant_id: str | None
    images: dict[str, Any]
    properties: list[Any]
    quantity: int
    unit_price: Decimal  # of one delivery: a prepaid item's price is per order (docs/api-choices.md)

    @property
    def subtotal_price(self) -> Decimal:
        return self.unit_price * self.quantity

    @classmethod
    def of_item(cls, item: PurchaseItem, is_skipped: bool) -> DeliveryLine:
        return cls(item.id, ONETIME if item.kind == ONETIME else "prepaid" if item.is_prepaid else SUBSCRIPTION,
                   item.shown_skippable, is_skipped, item.product_title, item.variant_title,
                   item.external_product_id, item.external_variant_id, item.images or {}, item.properties,
                   item.quantity, item.price)

    @classmethod
    def of_order_line(cls, line: dict[str, Any]) -> DeliveryLine:
        """A charge's line, copied into its order: a prepaid line's price pays every order of
        the charge (schedule/plan.py), one delivery is its share."""
        per_charge = line.get("orders_per_charge") or 1
        kind = line.get("purchase_item_type") or SUBSCRIPTION
        return cls(line.get("purchase_item_id"), ONETIME if kind == ONETIME else "prepaid" if per_charge > 1 else kind,
                   False, False, line.get("title"), line.get("variant_title"), line.get("external_product_id"),
                   line.get("external_variant_id"), line.get("images") or {}, line.get("properties") or [],
                   line["quantity"], Decimal(line["unit_price"]) / per_charge)


class DeliveryOrder(msgspec.Struct, frozen=True):
    id: int | None  # a stored order's; a projected one has none yet (spec 03)
    address_id: int
    charge_id: int | None
    is_skipped: bool
    currency: str
    shipping_address: dict[str, Any]
    lines: list[DeliveryLine]

    @property
    def total_price(self) -> Decimal:
        return sum((line.subtotal_price for line in self.lines), Decimal(0))

    @property
    def sort_key(self) -> tuple[int, bool, int, int]:
        """By address, queued before skipped, then by charge (no charge yet first), then by order."""
        return self.address_id, self.is_skipped, self.charge_id or 0, self.id or 0

    @classmethod
    def of_order(cls, order: Order) -> DeliveryOrder:
        # The lines in the order's own order (its charge's: by item). A checkout's one-time
        # line has no purchase item, so no id to sort by (found by a review: a clone of such
        # an order made the schedule fail).
        return cls(order.id, order.address_id, order.charge_id, False, order.currency,
                   {name: order.shipping_address.get(name) for name in ADDRESS_FIELDS},
                   [DeliveryLine.of_order_line(line) for line in order.line_items])


class Delivery(msgspec.Struct, frozen=True):
    date: date
    orders: list[DeliveryOrder]


class _Projected(msgspec.Struct, frozen=True):
    """One delivery of one item: its date, whether it is skipped, and the date of the charge
    that pays for it (an earlier date for a prepaid item's later orders)."""

    date: date
    is_skipped: bool
    charge_date: date


def _orders_of_charge(item: PurchaseItem, charge_date: date) -> list[date]:
    """NOTE: decisions §5.4, a prepaid charge makes charge/order orders, one per order interval."""
    unit, frequency = item.order_interval_unit or "day", item.order_interval_frequency or 1
    anchor = anchor_on(charge_date, unit, item.anchor_day)  # as order/deliveries.py dates them
    return [add_interval(charge_date, unit, frequency * k, anchor) if k else charge_date
            for k in range(item.orders_per_charge)]


def _subscription(item: PurchaseItem, skipped: set[date], authorized: Iterable[date], today: date, until: date,
                  limit: int) -> list[_Projected]:
    found: dict[date, _Projected] = {}
    for charge_date in authorized:
        # NOTE: decisions §6.12 Authorize-only, a pending charge makes its orders when it is
        # captured; until then the later ones of a prepaid charge are projected from it (the
        # item has moved on to its next date, whatever became of it since).
        for when in _orders_of_charge(item, charge_date)[1:]:
            if today <= when <= until:
                found[when] = _Projected(when, False, charge_date)
    if item.status != ACTIVE:
        return list(found.values())
    for when in skipped:
        if today <= when <= until:
            found[when] = _Projected(when, True, when)
    if item.schedulable and item.order_interval_unit:
        assert item.next_charge_scheduled_at is not None
        limit_charges = item.expire_after_specific_number_of_charges
        remaining = None if limit_charges is None else limit_charges - item.charges_count
        cadence = occurrences(item.next_charge_scheduled_at, item.order_interval_unit,
                              item.charge_interval_frequency or 1, item.anchor_day, until=until, limit=MAX_STEPS)
        ahead = 0
        for charge_date in cadence:
            if remaining is not None and remaining <= 0:
                break
            if charge_date in skipped:
                continue  # shown above as skipped; a skipped date uses up no charge
            if remaining is not None:
                remaining -= 1
            for when in _orders_of_charge(item, charge_date):
                if today <= when <= until:
                    found[when] = _Projected(when, False, charge_date)
                    ahead += 1
            if ahead >= limit:
                break  # the item's later dates cannot be among the first ``limit`` dates
    return list(found.values())


def _onetime(item: PurchaseItem, skipped: set[date], today: date, until: date) -> list[_Projected]:
    if item.status != ACTIVE:
        return []
    dates = set(skipped)
    if item.next_charge_scheduled_at is not None:
        dates.add(item.next_charge_scheduled_at)
    return [_Projected(when, when in skipped, when) for when in dates if today <= when <= until]


def project(items: Iterable[PurchaseItem], skips: Iterable[tuple[int, date]],
            charge_ids: Mapping[tuple[int, date], int], addresses: Mapping[int, Address],
            stored: Iterable[Order] = (), authorized: Mapping[int, list[date]] | None = None, *,
            today: date, until: date, limit: int,
            charge_of_date: Mapping[tuple[int, date, str], int] | None = None) -> list[Delivery]:
    """The deliveries of ``items`` from ``today`` to ``until`` (both included), with the
    ``stored`` orders already made, at most ``limit`` dates. ``skips`` are (item id, date);
    ``charge_ids`` maps (item id, charge date) to the id of the stored charge that holds the
    item on that date; ``addresses`` holds the items' addresses; ``authorized`` maps an item to
    the dates of its pending (authorized, not captured) charges, whose orders are not made yet.
    ``charge_of_date`` maps (address, date, status) to the stored queued or skipped charge: an
    item charged on that date joins it (decisions §5.9, one charge per address, date and
    status), so its delivery is that charge's order (found by an audit: the schedule showed it
    as an order of its own, beside the charge's, where billing made one order of both)."""
    charge_of_date = charge_of_date or {}
    authorized = authorized or {}
    skipped: dict[int, set[date]] = defaultdict(set)
    for item_id, when in skips:
        skipped[item_id].add(when)
    groups: dict[date, dict[tuple[int, int | None, bool], list[PurchaseItem]]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        if item.kind == SUBSCRIPTION:
            projected = _subscription(item, skipped[item.id], authorized.get(item.id, ()), today, until, limit)
        else:
            projected = _onetime(item, skipped[item.id], today, until)
        for p in projected:
            charge_id = charge_ids.get((item.id, p.charge_date)) or charge_of_date.get(
                (item.address_id, p.charge_date, SKIPPED if p.is_skipped else QUEUED))
            groups[p.date][(item.address_id, charge_id, p.is_skipped)].append(item)
    by_date: dict[date, list[DeliveryOrder]] = defaultdict(list)
    for when, of_date in groups.items():
        for (address_id, charge_id, is_skipped), held in of_date.items():
            held.sort(key=lambda item: item.id)
            by_date[when].append(DeliveryOrder(
                None, address_id, charge_id, is_skipped, held[0].presentment_currency,
                shipping_address(addresses[address_id]), [DeliveryLine.of_item(item, is_skipped) for item in held]))
    for order in stored:
        if today <= order.scheduled_at <= until:
            by_date[order.scheduled_at].append(DeliveryOrder.of_order(order))
    return [Delivery(when, sorted(by_date[when], key=lambda order: order.sort_key)) for when in sorted(by_date)[:limit]]


# The service ---------------------------------------------------------------------------------

class DeliverySchedule(msgspec.Struct, frozen=True):
    """What the endpoint renders: the customer, the deliveries, and the payment methods the
    orders are paid with (by address id)."""

    customer: Customer
    deliveries: list[Delivery]
    payment_methods: dict[int, Any]  # address id -> the payment method row its orders are paid with


def for_customer(unit: Unit, customer: Customer, *, count: int, future_days: int,
                 date_max: date | None) -> DeliverySchedule:
    """NOTE: decisions §5.16, deliveries from today on, at most ``count`` dates, none later than
    today + ``future_days`` nor than ``date_max``."""
    customer_id = customer.id
    today = unit.today
    until = today + timedelta(days=future_days)
    if date_max is not None:
        until = min(until, date_max)
    conn, store_id = unit.conn, unit.store_id
    found = {a.id: a for a in addresses.of_customers(conn, store_id, [customer_id])}
    owned = [item for kind in ("subscription", "onetime")
             for item in items.of(conn, store_id, kind, customer_ids=[customer_id])]
    # Items sit on their customer's addresses; should one not, its address is still shown.
    found.update(addresses.many(conn, store_id, [i.address_id for i in owned if i.address_id not in found]))
    skips = [(item_id, when) for _, item_id, when in items.skips_of(conn, list(found))] if found else []
    held = charges.of_addresses(conn, store_id, list(found), (QUEUED, SKIPPED, PENDING))
    charge_ids = {(line["purchase_item_id"], charge.scheduled_at): charge.id for charge in held
                  for line in charge.line_items}
    charge_of_date = {(charge.address_id, charge.scheduled_at, charge.status): charge.id for charge in held
                      if charge.status in (QUEUED, SKIPPED)}
    authorized: dict[int, list[date]] = defaultdict(list)
    for charge in held:
        if charge.status == PENDING and capturable(charge.authorized_at, charge.claimed_by, unit.now):
            for line in charge.line_items:
                authorized[line["purchase_item_id"]].append(charge.scheduled_at)
    # Orders already made and queued (a paid prepaid charge's later orders, clones), as stored,
    # wherever they were moved (found by an audit: the later orders were projected from the
    # subscription as it is now).
    stored = orders.queued_between(conn, store_id, customer_id, today, until) if until >= today else []
    deliveries = (project(owned, skips, charge_ids, found, stored, authorized, today=today, until=until,
                          limit=count, charge_of_date=charge_of_date) if until >= today else [])
    methods = payment_methods.of_customers(conn, store_id, [customer_id])
    by_id = {m.id: m for m in methods}
    default = next((m for m in methods if m.is_default), None)  # a customer with methods has one
    # An address's own payment method, else the customer's default one (also for an order
    # whose address was deleted since it was paid).
    paying = {address_id: by_id.get(a.payment_method_id, default) if a.payment_method_id else default
              for address_id, a in found.items()}
    paying.update({o.address_id: default for o in stored if o.address_id not in found})
    return DeliverySchedule(customer, deliveries, {k: v for k, v in paying.items() if v is not None})
