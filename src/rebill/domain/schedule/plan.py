"""What should be queued: one pure function from an address's purchase items, skips and
settings to the charges that should exist (design guide, "The billing engine").

One charge per (address, date, status): every active item due on the date is one line of
the queued charge (decisions §5.9), every item skipped on the date one line of the skipped
charge (decisions §5.11). No I/O here; the reconciler (``reconcile.py``) makes the stored
charges equal to the plan."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from ..address.model import Address
from ..charge import rates
from ..charge.totals import LineInput, compute
from ..discount.terms import AddressDiscounts, Terms, basis_of
from ..money import format_amount, quantize
from ..order import deliveries
from ..store.model import Store
from ..subscription.model import PurchaseItem
from .dates import add_interval

QUEUED, SKIPPED = "queued", "skipped"
# Charges and orders keep their weight in a 32-bit column (a heavier charge shows this much).
MAX_WEIGHT_GRAMS = 2**31 - 1

ADDRESS_FIELDS = ("address1", "address2", "city", "company", "country_code", "first_name", "last_name", "phone",
                  "province", "zip")


@dataclass
class PlannedCharge:
    address_id: int
    scheduled_at: date
    status: str
    item_ids: list[int]
    # The columns of ``models.charges`` the plan decides (charge.model.PLANNED).
    values: dict[str, Any]

    @property
    def key(self) -> tuple[int, date, str]:
        return self.address_id, self.scheduled_at, self.status


def shipping_address(address: Address) -> dict[str, Any]:
    return {name: getattr(address, name) for name in ADDRESS_FIELDS}


def _line(item: PurchaseItem, unit_price: Decimal, amounts: Any, currency: str, tax: dict[str, Any] | None,
          taxes_included: bool) -> dict[str, Any]:
    tax_lines = []
    if tax is not None and item.taxable and amounts.tax_due:
        tax_lines.append({"price": format_amount(amounts.tax_due, currency), "rate": rates.rate_text(tax),
                          "title": tax.get("title") or "Tax",
                          "unit_price": format_amount(amounts.unit_tax, currency)})
    return {
        "purchase_item_id": item.id,
        "purchase_item_type": item.kind,
        "external_product_id": item.external_product_id,
        "external_variant_id": item.external_variant_id,
        "title": item.product_title,
        "variant_title": item.variant_title,
        "sku": item.sku,
        "quantity": item.quantity,
        "unit_price": format_amount(unit_price, currency),
        "original_price": format_amount(unit_price, currency),
        "total_price": format_amount(amounts.total_price, currency),
        "taxable": item.taxable,
        "taxable_amount": format_amount(amounts.taxable_amount, currency),
        "tax_due": format_amount(amounts.tax_due, currency),
        "tax_lines": tax_lines,
        "unit_price_includes_tax": taxes_included,
        "grams": item.grams,
        "images": item.images,
        "properties": item.properties,
        "orders_per_charge": item.orders_per_charge,
    }


def build_charge(store: Store, address: Address, billing: dict[str, Any] | None, when: date, status: str,
                 items: list[PurchaseItem], terms: Terms | None = None) -> PlannedCharge:
    """``terms``: the discount the charge may carry (decisions §7.5); it carries it only when
    some line qualifies (``PlannedCharge.values["discount_id"]`` says whether it did)."""
    currency = address.presentment_currency
    items = sorted(items, key=lambda i: i.id)
    # NOTE: decisions §5.4, a prepaid line pays for every order of its charge interval.
    unit_prices = [item.price * item.orders_per_charge for item in items]
    if not any(item.requires_shipping for item in items):
        # Nothing to ship (a digital or service product), no shipping: what its checkout charged
        # (docs/api-choices.md, Checkouts), which its renewals charge again (found by an audit).
        shipping_lines = []
    elif address.shipping_lines_override is not None:
        shipping_lines = [{"code": line.get("code"), "price": line["price"], "title": line.get("title"),
                           "source": "override", "taxable": False, "tax_lines": []}
                          for line in address.shipping_lines_override]
    else:
        rate = rates.shipping_line(store.shipping_rates, address.country_code, currency)
        shipping_lines = [] if rate is None else [{
            "code": rate.get("code"), "price": format_amount(Decimal(str(rate["price"])), currency),
            "title": rate.get("title"), "source": "store", "taxable": False, "tax_lines": []}]
    shipping = [Decimal(line["price"]) for line in shipping_lines]
    offer = None
    if terms is not None:
        offer = terms.offer(items, [quantize(p * item.quantity, currency) for item, p in zip(items, unit_prices)],
                            sum(shipping, Decimal(0)))
        if offer is None:
            terms = None
    tax = rates.tax_rate(store.tax_rates, address.country_code, address.province)
    totals = compute(
        [LineInput(price, item.quantity, item.taxable) for item, price in zip(items, unit_prices)],
        currency=currency,
        discount=offer,
        shipping=shipping,
        tax_rate=rates.rate_value(tax),
        taxes_included=store.taxes_included,
    )
    lines = [_line(item, price, amounts, currency, tax, store.taxes_included)
             for item, price, amounts in zip(items, unit_prices, totals.lines)]
    tax_lines = [] if tax is None or not totals.total_tax else [
        {"price": format_amount(totals.total_tax, currency), "rate": rates.rate_text(tax),
         "title": tax.get("title") or "Tax"}]
    discounts = [] if terms is None else [terms.line()]
    values = {
        "customer_id": address.customer_id,
        "address_id": address.id,
        "scheduled_at": when,
        "status": status,
        "type": "recurring",
        "currency": currency,
        "line_items": lines,
        "shipping_lines": shipping_lines,
        "tax_lines": tax_lines,
        "discounts": discounts,
        "discount_id": terms.id if terms is not None else None,
        "billing_address": billing or shipping_address(address),
        "shipping_address": shipping_address(address),
        "order_attributes": address.order_attributes,
        "note": address.order_note,
        "taxable": any(item.taxable for item in items),
        "taxes_included": store.taxes_included,
        "subtotal_price": totals.subtotal_price,
        "total_discounts": totals.total_discounts,
        "total_line_items_price": totals.total_line_items_price,
        "total_tax": totals.total_tax,
        "total_shipping": totals.total_shipping,
        "total_price": totals.total_price,
        # A 32-bit column: each item's grams fit, but not always their sum times the quantities.
        "total_weight_grams": min(sum((item.grams or 0) * item.quantity * item.orders_per_charge for item in items),
                                  MAX_WEIGHT_GRAMS),
        # NOTE: decisions §6.12, the orders the charge will make: one per delivery date of its
        # prepaid items, each on its own order interval (the deliveries of one, when it has one).
        "orders_count": deliveries.count(when, items),
    }
    return PlannedCharge(address.id, when, status, [item.id for item in items], values)


def plan_address(store: Store, address: Address, billing: dict[str, Any] | None, items: list[PurchaseItem],
                 skips: list[tuple[int, date]], offers: AddressDiscounts | None = None,
                 waiting: Sequence[PurchaseItem] = ()) -> list[PlannedCharge]:
    """Every charge the address should have, queued and skipped, ordered by date. ``offers``:
    the discounts of the address and of its charges (decisions §7.5; skipped charges carry none).
    ``waiting``: items whose charge waits for its retry or is being paid; they get no queued
    charge, but their skips ahead stand (found by an audit: a failed payment deleted the item's
    skipped charge, which came back under another id once the retry paid)."""
    groups: dict[tuple[date, str], list[PurchaseItem]] = defaultdict(list)
    by_id = {item.id: item for item in (*items, *waiting)}
    skipped = set()
    for item_id, when in skips:
        item = by_id.get(item_id)
        if item is not None:
            groups[(when, SKIPPED)].append(item)
            skipped.add((item_id, when))
    for item in items:
        if not item.schedulable:
            continue
        when = item.next_charge_scheduled_at
        assert when is not None
        # A subscription whose next date is skipped is charged on the next date that is not.
        while (item.id, when) in skipped and item.kind == "subscription" and item.order_interval_unit:
            when = add_interval(when, item.order_interval_unit, item.charge_interval_frequency or 1, item.anchor_day)
        if (item.id, when) not in skipped:
            groups[(when, QUEUED)].append(item)
    planned = []
    for (when, status), members in sorted(groups.items()):
        basis = basis_of(members, address) if offers is not None and when in offers.by_date else None
        terms, of_address = offers.for_charge(when, basis) if offers is not None and status == QUEUED else (None, False)
        charge = build_charge(store, address, billing, when, status, members, terms)
        if of_address and charge.values["discount_id"] is not None:
            # NOTE: spec 02 Discount duration, each new queued charge is one more application.
            offers.used_one()  # type: ignore[union-attr]
        planned.append(charge)
    return planned
