"""What a bundle may hold, and what its items cost (spec 01 Bundle selection, decisions §7.4,
§7.7 item 8; docs/api-choices.md, Bundles).

Items are checked against their bundle variant as the collections stand now: each item's product
in the collection it names, or, without one, in one of the bundle's collections (the first, in
the bundle's order, that holds it); its variant in the catalog; each product and variant once per
collection. Then the quantities: per collection and in all, within the bundle's ranges. A bad
item is named by its index under `items`; a range the selection misses is a message of `items`.

Prices: in a dynamic bundle each item costs its variant's catalog price less a plan's discount:
the selection's `plan_id` (a plan of the bundle's product that applies to its variant), else the
greatest discount among the plans of the item's own product, else none. A fixed bundle's items show their catalog price; the
bundle's own price is what is charged."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rebill.errors import ValidationFailed

from ..catalog import repository as catalog
from ..catalog.model import Plan, Product
from ..catalog.rules import plan_fits, plan_price
from ..collection import repository as collections
from ..money import quantize
from ..unit import Unit
from .model import DEFAULT_SOURCE, DYNAMIC, BundleVariant, ItemInput

ITEMS = "items"
# NOTE: docs/api-choices.md, Hardening: money has at most 12 integer digits. A dynamic bundle's
# price becomes its purchase item's, which must stay a price the item's own endpoint takes.
MAX_PRICE = Decimal(10) ** 12


def plan_for(unit: Unit, variant: BundleVariant, plan_id: int | None) -> Plan | None:
    """NOTE: decisions §7.7 item 8, `plan_id` names a plan of the bundle's product that applies
    to the bundle's variant, as a subscription's plan must (422 otherwise; another store's plan
    is not found). Found by an audit: a plan restricted to another variant gave its discount."""
    if plan_id is None:
        return None
    plan = catalog.plan(unit.conn, unit.store_id, plan_id)
    if plan is None:
        raise ValidationFailed.field("plan_id", "plan not found")
    if plan.external_product_id != variant.external_product_id:
        raise ValidationFailed.field("plan_id", f"is not a plan of the bundle's product {variant.external_product_id}")
    if problem := plan_fits(plan, variant.external_product_id, variant.external_variant_id):
        raise ValidationFailed.field("plan_id", problem)  # restricted to other variants
    return plan


def fitting_plan(plan: Plan | None, variant: BundleVariant) -> Plan | None:
    """``plan`` if it still applies to the bundle's variant (a plan deleted, moved or narrowed
    since is forgotten)."""
    if plan is None or plan_fits(plan, variant.external_product_id, variant.external_variant_id):
        return None
    return plan


def _bounds(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"from {low} to {high}" if low != high else f"exactly {low}"
    return f"at least {low}" if low is not None else f"at most {high}"


def _outside(count: int, low: int | None, high: int | None) -> bool:
    return (low is not None and count < low) or (high is not None and count > high)


class _Catalog:
    """The catalog products the items name, and (for a dynamic bundle without a plan) their
    plans: one statement each for the whole selection."""

    def __init__(self, unit: Unit, items: list[ItemInput], plans: bool) -> None:
        wanted = sorted({i.external_product_id for i in items})
        self.products: dict[str, Product] = {}
        for external_id in wanted:
            product = catalog.product_by_external_id(unit.conn, unit.store_id, external_id)
            if product is not None:
                self.products[external_id] = product
        self.plans = catalog.plans_of_products(unit.conn, unit.store_id, [p.id for p in self.products.values()]) \
            if plans else {}

    def price(self, item: ItemInput) -> tuple[bool, Decimal | None]:
        """Whether the variant is in the catalog, and its catalog price."""
        product = self.products.get(item.external_product_id)
        found = next((v for v in product.variants if v.external_variant_id == item.external_variant_id), None) \
            if product is not None else None
        return found is not None, found.price if found is not None else None

    def best(self, item: ItemInput, price: Decimal, currency: str) -> Decimal:
        """NOTE: decisions §7.7 item 8, the greatest discount among the plans of the item's
        product that apply to its variant (a plan restricted to other variants prices none of
        this one, as a subscription to it would refuse that plan; found by an audit)."""
        product = self.products[item.external_product_id]
        return min((plan_price(price, plan, currency) for plan in self.plans.get(product.id, [])
                    if plan_fits(plan, item.external_product_id, item.external_variant_id) is None),
                   default=quantize(price, currency))


def checked(unit: Unit, variant: BundleVariant, items: list[ItemInput], plan: Plan | None,
            currency: str) -> list[dict[str, Any]]:
    """The items as stored ({collection_id, collection_source, external_product_id,
    external_variant_id, quantity, price}), or ValidationFailed naming what does not fit."""
    order = [r.collection_id for r in variant.collections]
    held = collections.external_product_ids_of(unit.conn, unit.store_id, order)
    dynamic = variant.price_rule == DYNAMIC
    known = _Catalog(unit, items, plans=dynamic and plan is None)
    errors: dict[str, Any] = {}
    seen: dict[tuple[int, str, str], int] = {}
    rows: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        problems: dict[str, list[str]] = {}
        collection_id = item.collection_id
        if collection_id is not None and collection_id not in held:
            problems["collection_id"] = [f"collection {collection_id} is not one of this bundle's collections"]
        elif collection_id is not None and item.external_product_id not in held[collection_id]:
            problems["external_product_id"] = [f"product {item.external_product_id} is not in collection "
                                               f"{collection_id}"]
        elif collection_id is None:
            collection_id = next((c for c in order if item.external_product_id in held[c]), None)
            if collection_id is None:
                problems["external_product_id"] = [f"product {item.external_product_id} is in none of this "
                                                   f"bundle's collections"]
        in_catalog, price = known.price(item)
        if not problems and not in_catalog:
            problems["external_variant_id"] = [f"variant {item.external_variant_id} is not a variant of product "
                                               f"{item.external_product_id} in the catalog"]
        elif not problems and dynamic and price is None:
            problems["external_variant_id"] = ["has no price in the catalog (a dynamic bundle prices its items "
                                               "from it)"]
        key = (collection_id or 0, item.external_product_id, item.external_variant_id)
        if not problems and key in seen:
            problems["external_variant_id"] = [f"is already selected from this collection in item {seen[key]}"]
        seen.setdefault(key, index)
        if problems:
            errors[str(index)] = problems
            continue
        assert collection_id is not None
        base = price or Decimal(0)
        if dynamic:
            base = plan_price(base, plan, currency) if plan is not None else known.best(item, base, currency)
        rows.append({"collection_id": collection_id, "collection_source": item.collection_source or DEFAULT_SOURCE,
                     "external_product_id": item.external_product_id,
                     "external_variant_id": item.external_variant_id, "quantity": item.quantity,
                     "price": quantize(base, currency)})
    if errors:
        raise ValidationFailed({ITEMS: errors})
    _check_quantities(variant, rows)
    if dynamic and total(rows) >= MAX_PRICE:
        raise ValidationFailed({ITEMS: [f"the bundle would cost {total(rows)}, out of range for a price "
                                        f"(at most 12 integer digits)"]})
    return rows


def _check_quantities(variant: BundleVariant, rows: list[dict[str, Any]]) -> None:
    """NOTE: decisions §7.4, the quantity ranges of each collection and of the whole bundle."""
    counts: dict[int, int] = {}
    for row in rows:
        counts[row["collection_id"]] = counts.get(row["collection_id"], 0) + row["quantity"]
    messages = [f"collection {r.collection_id} needs {_bounds(r.min_quantity, r.max_quantity)} item(s); the "
                f"selection has {counts.get(r.collection_id, 0)}"
                for r in variant.collections if _outside(counts.get(r.collection_id, 0), r.min_quantity,
                                                         r.max_quantity)]
    total = sum(counts.values())
    if _outside(total, variant.min_quantity, variant.max_quantity):
        messages.append(f"the bundle needs {_bounds(variant.min_quantity, variant.max_quantity)} item(s) in all; "
                        f"the selection has {total}")
    if messages:
        raise ValidationFailed({ITEMS: messages})


def total(rows: list[dict[str, Any]]) -> Decimal:
    """What one bundle of these items costs: each item's price times its quantity."""
    return sum((row["price"] * row["quantity"] for row in rows), Decimal(0))
