"""What a payment's result does (decisions §6.3, §6.4, §6.7, §6.12), recorded in one
transaction with every event, and only by the run that holds the charge's claim.

- captured: the charge is paid (`success`), its orders are made (several for prepaid), its
  subscriptions advance one charge interval from the charge's date (or expire on their Nth
  charge), its one-time items are processed, and the address is replanned so the next
  queued charges appear;
- authorized (authorize-only): the charge is `pending` until captured; its items advance as
  for a payment, and its orders wait for the capture;
- failed: the charge is in `error` with the attempt counted and the next retry date; the last
  allowed attempt closes it and runs the store's action.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

import msgspec
from sqlalchemy import bindparam, null, select, update

from rebill.db.among import among
from rebill.db.prepared import Prepared
from rebill.models import charges, customers, payment_methods, purchase_items

from ..address import repository as addresses
from ..bundle import order_lines as bundle_lines
from ..charge import errored
from ..charge import repository as charge_repo
from ..charge.model import API_NAMES as CHARGE_NAMES
from ..charge.model import ERROR, PENDING, SUCCESS, Charge
from ..customer import activity
from ..discount import repository as discounts
from ..event import attributes, outbox
from ..order import deliveries
from ..order import repository as orders
from ..payment.gateway import AUTHORIZED, CAPTURED, CARD_EXPIRED, CUSTOMER_NEEDS_TO_UPDATE_CARD, Result
from ..schedule import pending
from ..schedule.reconcile import replan
from ..store import clock as store_clock
from ..subscription import repository as items
from ..subscription.intervals import next_unskipped
from ..subscription.model import ACTIVE, CANCELLED, EXPIRED, PROCESSED, SUBSCRIPTION, PurchaseItem
from ..subscription.model import API_NAMES as ITEM_NAMES
from ..unit import Unit
from . import dunning

# NOTE: decisions §6.12, these failures say the method itself is no good.
INVALIDATING = (CARD_EXPIRED, CUSTOMER_NEEDS_TO_UPDATE_CARD)


@dataclass(frozen=True, slots=True)
class Recorded:
    charge_id: int
    status: str  # success | pending | error
    amount: Decimal
    currency: str
    closed: bool = False  # the last allowed attempt failed
    retry: bool = False  # it had failed before


def record(unit: Unit, run: str, answers: list[tuple[Charge, Result, int | None]],
           processor: str) -> list[Recorded]:
    """Records each answer for the charges this run still holds; a charge whose claim is no
    longer this run's (another run took over a claim it thought abandoned) is left to it.
    Set-based: one statement per kind of row for the whole batch, and one replan of every
    address the batch touched."""
    if not answers:
        return []
    # The items' addresses too, locked with the charges' in one sorted pass: an item moved to
    # another address while its charge was being paid (change_address, merge) gets its next
    # charge planned there.
    item_ids = [i for c, _, _ in answers for i in c.purchase_item_ids]
    homes = set(unit.conn.execute(select(purchase_items.c.address_id).where(
        purchase_items.c.store_id == unit.store_id, among(purchase_items.c.id, item_ids))).scalars()) if item_ids else set()
    addresses.lock(unit.conn, unit.store_id, sorted({c.address_id for c, _, _ in answers} | homes))
    # A claimed charge does not change (replans hold it, decisions §6.3): the rows read at the
    # claim are still its rows, if the claim is still this run's.
    still = set(unit.conn.execute(select(charges.c.id).where(
        charges.c.store_id == unit.store_id, among(charges.c.id, [c.id for c, _, _ in answers]),
        charges.c.claimed_by == run)).scalars())
    mine = [(c, r, m) for c, r, m in answers if c.id in still]
    held = items.many(unit.conn, unit.store_id, [i for c, _, _ in mine for i in c.purchase_item_ids])
    batch = _Batch(unit)
    batch.applied = _applied_to_charges(unit, [c for c, _, _ in mine])
    batch.skipped = _skipped_ahead(unit, held.values())
    recorded = []
    for charge, result, method_id in mine:
        recorded.append(batch.add(charge, result, method_id, processor,
                                  [held[i] for i in charge.purchase_item_ids if i in held]))
    batch.write()
    _recompute_failed(unit, mine, held)
    replan(unit, sorted({c.address_id for c, _, _ in mine} | {i.address_id for i in held.values()}))
    # The orders' numbers last: taking them locks the store's order counter until the COMMIT
    # (order/repository.py), so the runs of several workers billing one store each hold it for
    # this end only. What the orders' events render (their webhook payloads show the number)
    # waits for it; the batch's other events are written first.
    outbox.flush(unit.conn)
    batch.number_orders()
    return recorded


class _Batch:
    """The rows one batch of outcomes changes, written together."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.charges: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        self.orders: list[tuple[Charge, list[PurchaseItem]]] = []
        self.valid_methods: set[int] = set()
        self.events: dict[str, list[int]] = defaultdict(list)
        # The customer of each charge, item and order the events name, per resource: known
        # here, so the events need no look-up (domain/event/customers.py, one query each).
        self.owners: dict[str, dict[int, int]] = defaultdict(dict)
        # The `updated_attributes` of the `*/updated` events, per topic and id.
        self.changed: dict[str, dict[int, tuple[str, ...]]] = defaultdict(dict)
        self.refresh: set[int] = set()
        self.closing: list[Charge] = []
        # NOTE: decisions §7.5, one use per successful charge carrying a code (its redemption).
        self.uses: list[dict[str, Any]] = []
        self.applied: dict[int, dict[date, int]] = {}
        self.made: list[int] = []  # the orders, numbered last (number_orders)
        self.processed: list[int] = []  # those of them processed now
        # The dates each held subscription has skipped ahead: its next date passes over them.
        self.skipped: dict[int, set[date]] = {}
        # Subscriptions this batch expires: their skips from today on go, as when a lowered
        # limit expires one (subscription/service.py) or a cancel ends it (found by an audit:
        # an expired subscription kept a future skipped charge that nothing could unskip).
        self.expiring: list[int] = []

    def add(self, charge: Charge, result: Result, method_id: int | None, processor: str,
            held: list[PurchaseItem]) -> Recorded:
        unit = self.unit
        row = {"_id": charge.id, "status": charge.status, "processed_at": charge.processed_at,
               "external_transaction_id": charge.external_transaction_id, "error": None, "error_type": None,
               "retry_date": None, "authorized_at": charge.authorized_at, "charge_attempts": charge.charge_attempts + 1,
               "last_charge_attempt": unit.now, "payment_method_id": method_id, "payment_processor": processor,
               "orders_count": charge.orders_count, "updated_at": unit.now}
        self.charges.append(row)
        self.owners["charge"][charge.id] = charge.customer_id
        retry = charge.charge_attempts > 0
        if result.outcome in (CAPTURED, AUTHORIZED):
            paid = result.outcome == CAPTURED
            row.update(status=SUCCESS if paid else PENDING, processed_at=unit.now,
                       external_transaction_id=result.transaction_id, authorized_at=None if paid else unit.now)
            if method_id is not None and result.asked:  # a charge of 0 tried no card
                self.valid_methods.add(method_id)
            self._advance(charge, held)
            if paid:
                self._use(charge)
                self.orders.append((charge, held))
                # The plan already counts the orders a charge pays for (spec 01 Charge
                # `orders_count`, "more than 1 for prepaid"): the count is what was made.
                row["orders_count"] = _order_count(charge, held)
                self.events["charge/paid"].append(charge.id)
            else:
                self._updated("charge", charge.id, attributes.differing(charge, _columns(row), CHARGE_NAMES))
            return Recorded(charge.id, row["status"], charge.total_price, charge.currency, retry=retry)
        attempts = row["charge_attempts"]
        next_try = dunning.retry_date(unit.store.dunning, attempts, unit.today)
        closed = next_try is None
        row.update(status=ERROR, error=result.error, retry_date=next_try,
                   error_type=dunning.CLOSED_MAX_RETRIES_REACHED if closed else result.error_type)
        if result.error_type in INVALIDATING:
            _method_status(unit, method_id, "invalid", result.error)
        self.events["charge/failed"].append(charge.id)
        # A charge whose retries were already over, processed by hand and failing again, was
        # told and closed once (decisions §6.4: when the last allowed attempt fails).
        closed = closed and not (charge.status == ERROR and charge.error_type == dunning.CLOSED_MAX_RETRIES_REACHED)
        if closed:
            self.events["charge/max_retries_reached"].append(charge.id)
            self.closing.append(charge)
        return Recorded(charge.id, ERROR, charge.total_price, charge.currency, closed, retry)

    def _use(self, charge: Charge) -> None:
        if charge.discount_id is None:
            return
        on_charge = self.applied.get(charge.address_id, {}).get(charge.scheduled_at) == charge.discount_id
        self.uses.append({"discount_id": charge.discount_id, "charge_id": charge.id, "customer_id": charge.customer_id,
                          "address_id": charge.address_id, "via": "charge" if on_charge else "address"})

    def _advance(self, charge: Charge, held: list[PurchaseItem]) -> None:
        """Each subscription moves one charge interval on from the charge's date, or expires with
        its Nth charge (decisions §6.12: in this transaction, with no next queued charge); each
        one-time item is done."""
        for item in held:
            row = {"_id": item.id, "status": item.status, "charges_count": item.charges_count,
                   "last_charge_date": charge.scheduled_at, "max_retries_reached": item.max_retries_reached,
                   "next_charge_scheduled_at": item.next_charge_scheduled_at,
                   "cancelled_next_date": item.cancelled_next_date, "updated_at": self.unit.now}
            if item.kind == SUBSCRIPTION and item.status == CANCELLED:
                # Cancelled while this charge was being paid (a charge being paid does not
                # change): the charge still paid for it. It counts, and the date an activation
                # would restore moves past the paid one, so the cycle is never billed twice.
                after = _next_date(charge, item, self.unit.today, self.skipped.get(item.id, ()))
                row.update(charges_count=item.charges_count + 1,
                           cancelled_next_date=max(item.cancelled_next_date or after, after) if after else None)
                self._item_updated(item, row)
                continue
            if item.status != ACTIVE:
                continue
            if item.kind != SUBSCRIPTION:
                row["status"] = PROCESSED
            else:
                row.update(charges_count=item.charges_count + 1, max_retries_reached=False)
                limit = item.expire_after_specific_number_of_charges
                if limit is not None and row["charges_count"] >= limit:
                    row.update(status=EXPIRED, next_charge_scheduled_at=None)
                    self.refresh.add(item.customer_id)
                    self.expiring.append(item.id)
                elif (after := _next_date(charge, item, self.unit.today, self.skipped.get(item.id, ()))) is None:
                    # No date after this one in the calendar (a date set by hand at its very
                    # end): the subscription is done, as after its last charge.
                    row.update(status=EXPIRED, next_charge_scheduled_at=None)
                    self.refresh.add(item.customer_id)
                    self.expiring.append(item.id)
                else:
                    row["next_charge_scheduled_at"] = after
            self._item_updated(item, row)

    def _item_updated(self, item: PurchaseItem, row: dict[str, Any]) -> None:
        self.items.append(row)
        self.owners[item.kind][item.id] = item.customer_id
        changed = attributes.differing(item, _columns(row), ITEM_NAMES[item.kind])
        if changed:
            # Nothing it shows changed (a subscription cancelled while its charge was paid gets
            # only its count and restore date, which no version shows): no event, as an update
            # that changes nothing records none (found by an audit: `updated_attributes: []`).
            self._updated(item.kind, item.id, changed)

    def _updated(self, resource: str, resource_id: int, changed: tuple[str, ...]) -> None:
        self.events[f"{resource}/updated"].append(resource_id)
        self.changed[f"{resource}/updated"][resource_id] = changed

    def write(self) -> None:
        unit = self.unit
        _CHARGE_OUTCOME.run_many(unit.conn, self.charges)
        _ITEM_ADVANCE.run_many(unit.conn, self.items)
        if self.expiring:
            items.remove_skips_of(unit.conn, self.expiring, from_date=unit.today)
        # In this transaction, only for charges whose claim is still this run's: a charge paid
        # twice at once or retried counts once (and the redemption is unique per charge).
        discounts.record_uses(unit.conn, unit.store_id, self.uses, unit.now)
        if self.valid_methods:
            changed = unit.conn.execute(update(payment_methods).where(
                payment_methods.c.store_id == unit.store_id, among(payment_methods.c.id, self.valid_methods),
                payment_methods.c.status != "valid").values(status="valid", status_reason=None, updated_at=unit.now)
                .returning(payment_methods.c.customer_id)).scalars()
            # NOTE: spec 01 events, a method's change is told on its customer (as the API does).
            self.events["customer/payment_method_updated"] += sorted(set(changed))
        self.made, self.processed, self.owners["order"] = _insert_orders(unit, self.orders, numbered=False)
        _stamp_first_charge(unit, {c.customer_id for c, _ in self.orders})
        for topic, ids in self.events.items():
            unit.record_many(topic, ids, changed=self.changed.get(topic), customer_ids=self.owners.get(topic.split("/")[0]))
        _close(unit, self.closing)
        for customer_id in self.refresh:
            activity.refresh(unit, customer_id)

    def number_orders(self) -> None:
        """The batch's orders get their numbers, then their events are recorded."""
        made, unit = self.made, self.unit
        orders.number(unit.conn, unit.store_id, made)
        _order_events(unit, made, self.processed, self.owners["order"])


# One statement each for the whole batch: every row sets the same columns.
_CHARGE_OUTCOME = Prepared(update(charges).where(charges.c.id == bindparam("_id")).values(
    {name: bindparam(name) for name in ("status", "processed_at", "external_transaction_id", "error", "error_type",
                                        "retry_date", "authorized_at", "charge_attempts", "last_charge_attempt",
                                        "payment_method_id", "payment_processor", "orders_count", "updated_at")}
    | {"claimed_by": null(), "claimed_at": null(), "lock_version": charges.c.lock_version + 1}))
_ITEM_ADVANCE = Prepared(update(purchase_items).where(purchase_items.c.id == bindparam("_id")).values(
    {name: bindparam(name) for name in ("status", "charges_count", "last_charge_date", "max_retries_reached",
                                        "next_charge_scheduled_at", "cancelled_next_date", "updated_at")}
    | {"lock_version": purchase_items.c.lock_version + 1}))


# The cancellation reason of a subscription that its charge's last failed retry cancelled
# (decisions §6.4): it stays on that closed charge, which a process may still retry.
MAX_RETRIES_REASON = "max retries reached"


def _cancelled_meanwhile(item: PurchaseItem) -> bool:
    """A subscription cancelled while its charge was being paid. A cancel takes an item out of a
    charge in retry at once (decisions §5.16), so the only cancelled ones a charge in error still
    holds otherwise are those its own max-retries action cancelled: those it keeps (found by an
    audit: a process of a closed charge that failed again emptied and deleted it, answering 404)."""
    closed_it = item.max_retries_reached and item.cancellation_reason == MAX_RETRIES_REASON
    return item.kind == SUBSCRIPTION and item.status == CANCELLED and not closed_it


def _recompute_failed(unit: Unit, mine: list[tuple[Charge, Result, int | None]], held: dict[int, PurchaseItem]) -> None:
    """A charge that failed and waits for a retry is billed by that retry as its items are then
    (docs/api-choices.md): while it was being paid it could not change (decisions §6.3), so what
    changed meanwhile reaches it now that it is no longer claimed, as it would have at once on a
    charge in retry. An item cancelled or deleted meanwhile leaves it (decisions §5.16; emptied,
    it is deleted); a new quantity, price or variant computes its money again (found by a race
    audit on PostgreSQL: an update that answered 200 during the payment was never billed, and the
    retry took the old amount). Unchanged charges are not written. A paid charge keeps what it
    paid for (_advance)."""
    failed: list[int] = []
    gone: set[int] = set()
    for charge, result, _ in mine:
        if result.outcome in (CAPTURED, AUTHORIZED):
            continue
        failed.append(charge.id)
        gone |= {i for i in charge.purchase_item_ids if i not in held or _cancelled_meanwhile(held[i])}
    if failed:
        errored.recompute(unit, failed, leaving=gone)


def _skipped_ahead(unit: Unit, held: Iterable[PurchaseItem]) -> dict[int, set[date]]:
    """Per held subscription, the dates it has skipped (one read for the batch's addresses)."""
    mine = {i.id: i.address_id for i in held if i.kind == SUBSCRIPTION}
    found: dict[int, set[date]] = defaultdict(set)
    if mine:
        for _, item_id, when in items.skips_of(unit.conn, sorted(set(mine.values()))):
            if item_id in mine:
                found[item_id].add(when)
    return found


def _columns(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the statements above without its key (``_id``): the columns it sets."""
    return {k: v for k, v in row.items() if k != "_id"}


def _next_date(charge: Charge, item: PurchaseItem, today: date, skipped: Collection[date] = ()) -> date | None:
    """The subscription's next charge date after ``charge`` (one charge interval on, past the
    dates it has skipped ahead, decisions §5.12), or None past the end of the calendar: the
    payment is already taken, so this never raises. A charge paid late (a retry that succeeded
    days into dunning) whose next date would not be after today takes the first date after
    today on that cadence, as decisions §5.16 does for a new interval: found by an audit, a
    weekly subscription whose sixth retry succeeded was billed for each of the five weeks in
    dunning in the same run (each next date already due), a monthly one twice in a day."""
    assert item.order_interval_unit and item.charge_interval_frequency
    when = charge.scheduled_at
    try:
        while True:
            when = next_unskipped(when, item.order_interval_unit, item.charge_interval_frequency,
                                  item.anchor_day, skipped)
            if when > today:
                return when
    except (OverflowError, ValueError):
        return None


def _save(unit: Unit, charge_id: int, values: dict[str, Any]) -> None:
    charge_repo.update_one(unit.conn, unit.store_id, charge_id, values)


def _method_status(unit: Unit, method_id: int | None, status: str, reason: str | None) -> None:
    if method_id is None:
        return
    changed = unit.conn.execute(update(payment_methods)
                                .where(payment_methods.c.id == method_id, payment_methods.c.store_id == unit.store_id,
                                       payment_methods.c.status != status)
                                .values(status=status, status_reason=reason, updated_at=unit.now)
                                .returning(payment_methods.c.customer_id)).scalar()
    if changed is not None:
        unit.record("customer/payment_method_updated", changed)


def items_of(unit: Unit, charge: Charge) -> list[PurchaseItem]:
    found = items.many(unit.conn, unit.store_id, charge.purchase_item_ids)
    return [found[i] for i in charge.purchase_item_ids if i in found]


def as_charged(charge: Charge, found: list[PurchaseItem]) -> list[PurchaseItem]:
    """``found`` (the charge's items as they are now) delivering what the charge's lines paid
    for: each line's deliveries (``orders_per_charge``, from its planning), each stepped by its
    item's order interval, as an order's delay steps (order/dates.py). A capture's orders come
    from here (found by an audit: an item made prepaid while its charge was authorized made
    three orders of a charge that paid for one, and a prepaid one shortened made fewer than
    paid for). An item deleted meanwhile has no interval left to date its later orders: its
    first order delivers it (docs/api-choices.md, "Capture")."""
    paid = {line.get("purchase_item_id"): line.get("orders_per_charge") or 1 for line in charge.line_items}
    out = []
    for item in found:
        deliveries_paid = paid.get(item.id, 1)
        if item.kind == SUBSCRIPTION and item.order_interval_frequency and item.orders_per_charge != deliveries_paid:
            item = msgspec.structs.replace(
                item, charge_interval_frequency=item.order_interval_frequency * deliveries_paid)
        out.append(item)
    return out


def _update_item(unit: Unit, item: PurchaseItem, changes: dict[str, Any], topic: str) -> None:
    changes["updated_at"] = unit.now
    # The address lock is held: nothing else writes this item now, so its version holds.
    items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, changes)
    unit.record(topic, item.id, changed=attributes.differing(item, changes, ITEM_NAMES[item.kind]))


def _applied_to_charges(unit: Unit, paid: list[Charge]) -> dict[int, dict[date, int]]:
    """The codes applied to single charges of the batch (the rest carry their address's)."""
    with_code = sorted({c.address_id for c in paid if c.discount_id is not None})
    return discounts.charge_inputs(unit.conn, with_code) if with_code else {}


def count_use(unit: Unit, charge: Charge) -> None:
    """A captured charge is a successful one: its code's use (decisions §7.5)."""
    batch = _Batch(unit)
    batch.applied = _applied_to_charges(unit, [charge])
    batch._use(charge)
    discounts.record_uses(unit.conn, unit.store_id, batch.uses, unit.now)


def _stamp_first_charge(unit: Unit, customer_ids: set[int]) -> None:
    """A customer's first paid charge (paid at once or captured) stamps its
    `first_charge_processed_at`; later ones leave it."""
    if customer_ids:
        unit.conn.execute(update(customers).where(
            customers.c.store_id == unit.store_id, among(customers.c.id, customer_ids),
            customers.c.first_charge_processed_at.is_(None)).values(first_charge_processed_at=unit.now))


def make_orders(unit: Unit, charge: Charge, held: list[PurchaseItem], *, captured: bool = True) -> list[int]:
    """The orders of one paid charge (a capture, or a checkout's payment: ``captured`` False),
    with their events and the charge's count."""
    _stamp_first_charge(unit, {charge.customer_id})
    made, processed, owners = _insert_orders(unit, [(charge, held)])
    _order_events(unit, made, processed, owners)
    if captured:
        # NOTE: docs/webhooks.md, the payment of every order the captured charge made was captured.
        unit.record_many("order/payment_captured", made, customer_ids=owners)
    _save(unit, charge.id, {"orders_count": len(made)})
    return made


def _order_events(unit: Unit, made: list[int], processed: list[int], owners: dict[int, int]) -> None:
    unit.record_many("order/created", made, customer_ids=owners)
    unit.record_many("order/processed", processed, customer_ids=owners)
    unit.record_many("order/success", processed, customer_ids=owners)  # NOTE: docs/webhooks.md, 2021-11's name for it


def _order_count(charge: Charge, held: list[PurchaseItem]) -> int:
    return deliveries.count(charge.scheduled_at, held)


def _insert_orders(unit: Unit, paid: list[tuple[Charge, list[PurchaseItem]]], *,
                   numbered: bool = True) -> tuple[list[int], list[int], dict[int, int]]:
    """One order per delivery date (order/deliveries.py): the first on the charge's date,
    `success`; a prepaid charge's later ones `queued`, each on a date on which one of its
    prepaid items delivers by its own order interval (decisions §6.12: the item's order k on the
    charge's date plus k of its order intervals), numbered by date (their `sequence`). A later
    order whose date has come already (a charge paid late) is processed now, as the billing
    run would release it on its date (found by an audit: it waited for the next run, a day late
    on a test clock). Returns the orders' ids, those processed now, and each one's customer."""
    rows, item_ids = [], []
    # NOTE: spec 01 Bundle selection, a new order takes the current contents of its selections.
    lines = bundle_lines.with_contents(unit.conn, unit.store_id, [(c.id, c.line_items) for c, _ in paid])
    for charge, held in paid:
        prepaid = any(i.kind == SUBSCRIPTION and i.is_prepaid for i in held)
        rows.append({**_order_row(unit, charge, 0, charge.scheduled_at, prepaid), "line_items": lines[charge.id]})
        item_ids.append(charge.purchase_item_ids)
        for k, (when, again) in enumerate(deliveries.later_orders(charge.scheduled_at, held), start=1):
            # NOTE: decisions §5.4, §5.6: the later orders deliver the prepaid items only, each on
            # its own dates; a pay-as-you-go or one-time item of the same charge is delivered
            # once, by the first (its next delivery is its own next charge).
            delivered = [line for line in lines[charge.id] if line.get("purchase_item_id") in again]
            rows.append({**_order_row(unit, charge, k, when, prepaid), "line_items": delivered})
            item_ids.append([i for i in charge.purchase_item_ids if i in again])
    made = orders.insert_many(unit.conn, rows, item_ids, numbered=numbered)
    return (made, [order_id for order_id, row in zip(made, rows) if row["status"] == "success"],
            {order_id: row["customer_id"] for order_id, row in zip(made, rows)})


def _order_row(unit: Unit, charge: Charge, k: int, when: date, prepaid: bool) -> dict[str, Any]:
    now = k == 0 or when <= unit.today
    return {
        "store_id": unit.store_id, "customer_id": charge.customer_id, "address_id": charge.address_id,
        "charge_id": charge.id, "status": "success" if now else "queued", "type": charge.type,
        "is_prepaid": prepaid, "sequence": k, "scheduled_at": when, "processed_at": unit.now if now else None,
        "currency": charge.currency, "line_items": charge.line_items, "shipping_lines": charge.shipping_lines,
        "tax_lines": charge.tax_lines, "discounts": charge.discounts, "billing_address": charge.billing_address,
        "shipping_address": charge.shipping_address, "order_attributes": charge.order_attributes,
        "note": charge.note, "tags": charge.tags, "taxable": charge.taxable,
        "subtotal_price": charge.subtotal_price, "total_discounts": charge.total_discounts,
        "total_line_items_price": charge.total_line_items_price, "total_tax": charge.total_tax,
        "total_shipping": charge.total_shipping, "total_price": charge.total_price,
        "total_weight_grams": charge.total_weight_grams, "external_order_id": None, "external_order_name": None,
        "external_order_number": None, "error": None, "created_at": unit.now, "updated_at": unit.now,
    }


def _close(unit: Unit, closing: list[Charge]) -> None:
    """NOTE: decisions §6.4, the last attempt failed: every subscription of each closing charge
    is marked `max_retries_reached`, then the store's action runs. Every charge the batch closes
    marks its own first, and only then are customers cancelled: found by an audit, two charges
    of one customer closing in one run, the first's customer cancel took the second's
    subscription out of it as from any charge in retry, and deleted it (empty), its
    subscription left without `max_retries_reached`."""
    if not closing:
        return
    action = dunning.settings(unit.store.dunning)["on_max_retries"]
    customer_ids = set()
    closed: set[int] = set()
    for charge in closing:
        for item in items_of(unit, charge):
            if item.kind != SUBSCRIPTION or item.status != ACTIVE:
                continue
            changes: dict[str, Any] = {"max_retries_reached": True}
            topic = "subscription/updated"
            if action in ("cancel_subscriptions", "cancel_subscriptions_and_customer"):
                changes.update(_cancelled(unit, item))
                topic = "subscription/cancelled"
            _update_item(unit, item, changes, topic)
            customer_ids.add(item.customer_id)
            closed.add(item.id)
    if action == "cancel_subscriptions_and_customer":
        for customer_id in sorted({c.customer_id for c in closing}):
            _cancel_customer(unit, customer_id, closed)
            customer_ids.add(customer_id)
    for customer_id in customer_ids:
        activity.refresh(unit, customer_id)


def _cancelled(unit: Unit, item: PurchaseItem) -> dict[str, Any]:
    """A subscription cancelled by the store's action; as a cancel by request does (docs/api-
    choices.md), its skips from today on go, or an activation would bring them back off its new
    cadence (found by an audit)."""
    items.remove_skips(unit.conn, item.id, from_date=unit.today)
    return {"status": CANCELLED, "cancelled_at": unit.now, "cancellation_reason": MAX_RETRIES_REASON,
            "cancellation_reason_comments": None, "next_charge_scheduled_at": None,
            "cancelled_next_date": item.next_charge_scheduled_at}


def _cancel_customer(unit: Unit, customer_id: int, closed: set[int]) -> None:
    """NOTE: decisions §6.4, `cancel_subscriptions_and_customer`: the customer is cancelled too,
    that is every subscription it still has, wherever it ships (a customer has no cancelled state
    of its own: with none active it shows inactive, `customer/deactivated`); found by an audit: the
    action did what `cancel_subscriptions` does. Their rows are locked here (another request may
    be changing them), and charges in retry holding them let them go, as after a cancel by
    request. The queued charges of their other addresses follow through the deferred
    regeneration (schedule/pending.py, as after a `commit=false` update, and paid only once
    regenerated): this unit holds its batch's address locks, and taking others here would break
    the order every writer takes them in."""
    rest = [i for i in items.active_subscriptions_of(unit.conn, unit.store_id, customer_id, lock=True)
            if i.id not in closed]
    for item in rest:
        _update_item(unit, item, _cancelled(unit, item), "subscription/cancelled")
        errored.recompute(unit, errored.holding(unit, item.id), leaving={item.id})
    real_now = unit.now - store_clock.offset(unit.store)
    for address_id in sorted({i.address_id for i in rest}):
        pending.defer(unit.conn, unit.store_id, address_id, real_now)
        charge_repo.mark_uncommitted(unit.conn, unit.store_id, address_id)
