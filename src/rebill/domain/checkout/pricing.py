"""What a checkout costs: the charge it would become, built by the schedule's own function
(``schedule/plan.build_charge``: lines, the discount, the store's shipping and tax rates,
totals to the currency's minor units through ``charge/totals.py``), so that the checkout, the
charge it makes and that charge's renewals are priced alike (decisions §5.9, §7.7.5).

Pure but for the discount's rules (``applied``), which read the customer's history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from ..address.model import Address
from ..charge import rates
from ..discount import repository as discounts
from ..discount import rules
from ..discount.inputs import collection_products
from ..discount.model import value_text
from ..discount.terms import Terms, line_totals
from ..money import format_amount, quantize
from ..schedule.plan import build_charge
from ..store.model import Store
from ..subscription.model import ACTIVE, PurchaseItem
from ..unit import Unit
from .model import ADDRESS_FIELDS

ZERO = Decimal(0)
TOTALS = ("subtotal_price", "total_discounts", "total_shipping", "total_tax", "total_price")


@dataclass(frozen=True)
class Priced:
    """The ``pricing`` document of a checkout and the totals kept beside it."""

    pricing: dict[str, Any]
    totals: dict[str, Decimal]
    taxes_included: bool


def _item(index: int, line: dict[str, Any], currency: str, store_id: int, now: datetime) -> PurchaseItem:
    """A line as the purchase item it becomes: what ``build_charge`` prices. Its id is its
    position (from 1), which keeps the lines in the order sent. Its price is the catalog's
    rounded to the checkout's currency, as a subscription made from the catalog is priced
    (subscription.service.catalog_values): what the checkout charges, its renewals charge."""
    return PurchaseItem(
        id=index + 1, store_id=store_id, kind=line["type"], customer_id=0, address_id=0, plan_id=None, status=ACTIVE,
        external_product_id=line["product_id"], external_variant_id=line["variant_id"], product_title=line["title"],
        variant_title=line["variant_title"], sku=line["sku"], sku_override=False, price=line_price(line, currency),
        quantity=line["quantity"], properties=line["properties"], grams=line["grams"], taxable=line["taxable"],
        requires_shipping=line["requires_shipping"], images=line["images"], presentment_currency=currency,
        next_charge_scheduled_at=None, charge_interval_frequency=line["charge_interval_frequency"],
        order_interval_frequency=line["order_interval_frequency"], order_interval_unit=line["order_interval_unit"],
        order_day_of_month=line["order_day_of_month"], order_day_of_week=line["order_day_of_week"],
        cutoff_day_of_month=line["cutoff_day_of_month"], cutoff_day_of_week=line["cutoff_day_of_week"],
        expire_after_specific_number_of_charges=line["expire_after_specific_number_of_charges"], anchor_day=None,
        charges_count=0, last_charge_date=None, cancelled_next_date=None, is_skippable=True, is_swappable=True,
        max_retries_reached=False, cancellation_reason=None, cancellation_reason_comments=None, cancelled_at=None,
        analytics_data=None, lock_version=0, created_at=now, updated_at=now)


def line_price(line: dict[str, Any], currency: str) -> Decimal:
    """The unit price of a line in ``currency``: the catalog's, rounded half up to its minor
    digits (a 12.50 catalog price is 13 in yen)."""
    return quantize(Decimal(line["price"]), currency)


def _place(store_id: int, shipping: dict[str, Any] | None, currency: str, note: str | None,
           attributes: list[dict[str, Any]], override: list[dict[str, Any]] | None, now: datetime) -> Address:
    """The address the charge would ship to, as ``build_charge`` reads one. ``override`` []:
    no shipping (nothing to ship, or no country yet); a list of one rate: that rate."""
    where = {name: (shipping or {}).get(name) for name in ADDRESS_FIELDS}
    return Address(
        id=0, store_id=store_id, customer_id=0, payment_method_id=None, discount_id=None,
        address1=where["address1"] or "", address2=where["address2"], city=where["city"] or "",
        company=where["company"], country_code=where["country_code"] or "", first_name=where["first_name"] or "",
        last_name=where["last_name"] or "", phone=where["phone"] or "", province=where["province"], zip=where["zip"],
        order_note=note, order_attributes=attributes, presentment_currency=currency,
        shipping_lines_override=override, shipping_lines_conserved=[], lock_version=0, created_at=now, updated_at=now)


def billing_of(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """A billing address with a street is the charge's; otherwise the shipping address bills."""
    if not document or not document.get("address1"):
        return None
    return {name: document.get(name) for name in ADDRESS_FIELDS}


def requires_shipping(lines: list[dict[str, Any]]) -> bool:
    """NOTE: spec 02 Checkout `requires_shipping`, true if any line requires shipping."""
    return any(line.get("requires_shipping") for line in lines)


def applied(unit: Unit, discount_id: int | None, lines: list[dict[str, Any]], currency: str,
            customer_id: int | None) -> tuple[Any, Terms | None, str | None]:
    """NOTE: decisions §7.7.15, the checkout's code and whether it applies: (its row or None,
    its terms when it applies, why it does not)."""
    if discount_id is None:
        return None, None, None
    row = discounts.get(unit.conn, unit.store_id, discount_id)
    if row is None:
        return None, None, "discount not found"
    reason = rules.refusal(unit, row, customer_id=customer_id, currency=currency, channel="checkout_page")
    # A code for a collection matches the lines of its products, as on charges.
    terms = Terms.of(row, currency, collection_products(unit.conn, unit.store_id, [row]).get(row.id))
    if reason is None:
        items = [_item(i, line, currency, unit.store_id, unit.now) for i, line in enumerate(lines)]
        reason = terms.refusal(items, line_totals(items, currency), "checkout")
    return row, (terms if reason is None else None), reason


def price(store: Store, today: date, now: datetime, *, lines: list[dict[str, Any]], currency: str,
          shipping: dict[str, Any] | None, billing: dict[str, Any] | None, note: str | None,
          attributes: list[dict[str, Any]], discount: tuple[Any, Terms | None, str | None],
          rate: dict[str, Any] | None = None) -> Priced:
    """The checkout as a charge: the store's first shipping rate for the country (or ``rate``,
    a shipping rates listing's), its tax rate, the code when it applies."""
    row, terms, reason = discount
    country = (shipping or {}).get("country_code")
    override: list[dict[str, Any]] | None = None
    if not country or not requires_shipping(lines):
        override = []
    elif rate is not None:
        override = [{"code": rate.get("code"), "price": format_amount(Decimal(str(rate["price"])), currency),
                     "title": rate.get("title")}]
    place = _place(store.id, shipping, currency, note, attributes, override, now)
    items = [_item(i, line, currency, store.id, now) for i, line in enumerate(lines)]
    values = build_charge(store, place, billing_of(billing), today, "success", items, terms).values if items else \
        _empty(store, place, currency, billing)
    if terms is not None and values["discount_id"] is None:
        # The charge took no code: its shipping, known only now, left a shipping code nothing
        # to take off. Said as the charge's refusal says it (found by a review: the checkout
        # showed the code applicable at 0.00, and held it against its usage limit).
        shipping_cost = sum((Decimal(line["price"]) for line in values["shipping_lines"]), ZERO)
        reason = terms.refusal(items, line_totals(items, currency), "checkout", shipping_cost) or reason
        terms = None
    pricing = {name: values[name] for name in ("line_items", "shipping_lines", "tax_lines", "discounts",
                                                "discount_id", "taxable", "total_weight_grams", "orders_count",
                                                "billing_address", "shipping_address")}
    pricing["requires_shipping"] = requires_shipping(lines)
    pricing["applied_discount"] = None if row is None and reason is None else {
        "amount": format_amount(values["total_discounts"] if terms is not None else ZERO, currency),
        "applicable": terms is not None,
        "non_applicable_reason": reason,
        # A fixed amount is in the store's currency (decisions §7.5), whatever the checkout's.
        "value": value_text(row.discount_type, row.value, store.currency) if row is not None else None,
        "value_type": row.discount_type if row is not None else None,
    }
    return Priced(pricing, {name: values[name] for name in TOTALS}, store.taxes_included)


def _empty(store: Store, place: Address, currency: str, billing: dict[str, Any] | None) -> dict[str, Any]:
    """A checkout with no lines yet costs nothing (``build_charge`` needs one line)."""
    shown = {name: getattr(place, name) for name in ADDRESS_FIELDS}
    return {"line_items": [], "shipping_lines": [], "tax_lines": [], "discounts": [], "discount_id": None,
            "taxable": False, "total_weight_grams": 0, "orders_count": 1,
            "billing_address": billing_of(billing) or shown,
            "shipping_address": shown, **dict.fromkeys(TOTALS, quantize(ZERO, currency))}


def shipping_rates(store: Store, country: str, currency: str) -> list[dict[str, Any]]:
    """NOTE: decisions §7.7.5, the store's rates for the country, the one a checkout takes first."""
    return rates.applicable(store.shipping_rates, country, currency)
