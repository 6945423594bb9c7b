"""What a product shows of its plans in 2021-01 (its `subscription_defaults` and discount): the
first recurring plan (by sort order, then id) gives the defaults and the discount; the frequency
options are those of every recurring plan with its interval unit. Read by the 2021-01 product
view (api/v2021_01/catalog.py) and by the plan writers, which tell the product's change
(plans.py ``_products_changed``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec

from .model import Plan, PurchaseOptions

DAY_AND_LIMIT_FIELDS = ("order_day_of_month", "order_day_of_week", "cutoff_day_of_month", "cutoff_day_of_week",
                        "expire_after_specific_number_of_charges")


class Derived(msgspec.Struct, kw_only=True):
    """A product's purchase options as its plans give them."""

    options: PurchaseOptions
    discount_amount: Decimal | None
    discount_type: str | None


def derive(product_plans: list[Plan]) -> Derived:
    recurring = [p for p in product_plans if p.is_subscription]
    has_onetime = any(not p.is_subscription for p in product_plans)
    first = recurring[0] if recurring else None
    prefs: dict[str, Any] = (first.subscription_preferences or {}) if first else {}
    unit = prefs.get("interval_unit")
    frequencies = list(dict.fromkeys(
        p.subscription_preferences["order_interval_frequency"] for p in recurring
        if p.subscription_preferences and p.subscription_preferences.get("interval_unit") == unit))
    storefront = ("subscription_and_onetime" if recurring and has_onetime
                  else "subscription_only" if recurring else "onetime")
    options = PurchaseOptions(
        storefront_purchase_options=storefront, order_interval_unit=unit,
        order_interval_frequency_options=frequencies,
        charge_interval_frequency=prefs.get("charge_interval_frequency"),
        apply_cutoff_date_to_checkout=bool(prefs.get("apply_cutoff_date_to_checkout")),
        **{name: prefs.get(name) for name in DAY_AND_LIMIT_FIELDS})
    return Derived(options=options, discount_amount=first.discount_amount if first else None,
                   discount_type=first.discount_type if first else None)


def changes_between(before: Derived | None, after: Derived) -> tuple[str, ...]:
    """The 2021-01 product fields a write of its plans changed (``before`` None: it had no view
    yet): the names `product/updated` gives in `updated_attributes` (found by an audit: none)."""
    if before is None:
        return ("discount_amount", "discount_type", "subscription_defaults")
    return tuple(name for name, old, new in (("discount_amount", before.discount_amount, after.discount_amount),
                                             ("discount_type", before.discount_type, after.discount_type),
                                             ("subscription_defaults", before.options, after.options))
                 if old != new)
