"""What makes a plan valid (decisions §5.4, §5.8): its type and subscription preferences, its
discount, its channels and variants. Pure functions over the complete plan, so a create, an
update merged with the stored plan, a bulk item and a 2021-01 product write obey the same rules.
Errors name the head (2021-11) fields."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from rebill.errors import ValidationFailed, add_error

from ..money import PERCENT_PLACES, decimal_places, minor_digits, quantize
from ..subscription.intervals import DAY_UNITS, MAX_FREQUENCY, RANGES
from .model import CHANNELS, DISCOUNT_TYPES, INTERVAL_UNITS, PLAN_TYPES, PREFERENCES, Plan, Product

PERCENT = Decimal("0.01")
# NOTE: the bounds subscriptions take (domain/subscription/intervals.py), so any plan can
# start a subscription; sort_order and grams are 32-bit columns downstream.
MAX_INT32 = 2**31 - 1
HUNDRED = Decimal(100)
# (low, high, the interval unit the field belongs to); order_day_of_week 0 = Monday (decisions §5.1).
DAY_FIELDS = {name: (*RANGES[name], unit) for name, unit in DAY_UNITS.items()}


def default_channels() -> dict[str, dict[str, bool]]:
    return {channel: {"display": True} for channel in CHANNELS}


def merge_channels(current: dict[str, Any] | None, given: dict[str, Any] | None) -> dict[str, Any]:
    """Every channel shows the plan unless told otherwise; a channel sent replaces its keys."""
    merged = {**default_channels(), **(current or {})}
    for channel, settings in (given or {}).items():
        merged[channel] = {**merged.get(channel, {}), **(settings or {})}
    return merged


def discount(amount: Decimal | None, kind: str | None, currency: str) -> tuple[Decimal | None, str | None]:
    """NOTE: decisions §5.8, a percentage is 0 < v <= 100 (two places), a fixed amount > 0 in the
    store currency with at most its minor digits. An amount without a type is a percentage."""
    if kind is not None and kind not in DISCOUNT_TYPES:
        raise ValidationFailed.field("discount_type", f"must be one of: {', '.join(DISCOUNT_TYPES)}")
    if amount is None:
        return None, kind
    kind = kind or "percentage"
    if kind == "percentage":
        if not 0 < amount <= HUNDRED:
            raise ValidationFailed.field("discount_amount", "must be greater than 0 and at most 100 for a percentage")
        if decimal_places(amount) > PERCENT_PLACES:
            raise ValidationFailed.field("discount_amount", f"has too many decimal places (at most {PERCENT_PLACES})")
        return amount.quantize(PERCENT), kind
    digits = minor_digits(currency)
    if amount <= 0:
        raise ValidationFailed.field("discount_amount", "must be greater than 0")
    if decimal_places(amount) > digits:
        raise ValidationFailed.field("discount_amount", f"has too many decimal places (at most {digits})")
    return amount.quantize(Decimal(1).scaleb(-digits)), kind


def preferences(plan_type: str, given: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored preferences: every key of PREFERENCES for a recurring plan, None for a
    onetime one. Interval units are lower case (decisions §5.16)."""
    if plan_type == "onetime":
        if given is not None and any(v is not None for v in given.values()):
            raise ValidationFailed.field("subscription_preferences", "must be empty for a onetime plan")
        return None
    if given is None:
        raise ValidationFailed.field("subscription_preferences", f"is required for a {plan_type} plan")
    values: dict[str, Any] = {name: given.get(name) for name in PREFERENCES}
    values["apply_cutoff_date_to_checkout"] = bool(values["apply_cutoff_date_to_checkout"])
    errors: dict[str, list[str]] = {}
    unit = values["interval_unit"]
    if unit is None:
        add_error(errors, "interval_unit", "is required")
    elif unit.lower() not in INTERVAL_UNITS:
        add_error(errors, "interval_unit", f"must be one of: {', '.join(INTERVAL_UNITS)}")
    else:
        unit = values["interval_unit"] = unit.lower()
    for name in ("order_interval_frequency", "charge_interval_frequency"):
        if values[name] is None:
            add_error(errors, name, "is required")
        elif not 1 <= values[name] <= MAX_FREQUENCY:
            add_error(errors, name, f"must be from 1 to {MAX_FREQUENCY}")
    order, charge = values["order_interval_frequency"], values["charge_interval_frequency"]
    if "order_interval_frequency" not in errors and "charge_interval_frequency" not in errors:
        if plan_type == "subscription" and charge != order:
            add_error(errors, "charge_interval_frequency", "must equal order_interval_frequency for a subscription plan")
        # NOTE: decisions §5.4, prepaid charges a multiple of the order interval, and more than one.
        if plan_type == "prepaid" and (charge <= order or charge % order):
            add_error(errors, "charge_interval_frequency",
                      "must be a multiple of order_interval_frequency and larger for a prepaid plan")
    for name, (low, high, belongs) in DAY_FIELDS.items():
        value = values[name]
        if value is None:
            continue
        if not low <= value <= high:
            add_error(errors, name, f"must be from {low} to {high}")
        elif unit in INTERVAL_UNITS and unit != belongs:
            add_error(errors, name, f"can only be set when interval_unit is {belongs}")
    expire = values["expire_after_specific_number_of_charges"]
    if expire is not None and not 1 <= expire <= MAX_INT32:
        # Copied to the 32-bit column of the subscriptions made from the plan.
        add_error(errors, "expire_after_specific_number_of_charges",
                  "must be at least 1" if expire < 1 else f"must be at most {MAX_INT32}")
    if errors:
        raise ValidationFailed({"subscription_preferences": errors})
    return values


def variant_ids(known: set[str] | None, given: list[str]) -> list[str]:
    """A plan restricted to variants names variants of its own product (``known``; None when
    the product is unknown and another error says so), each once."""
    errors: dict[str, list[str]] = {}
    seen: set[str] = set()
    for index, variant_id in enumerate(given):
        if known is not None and variant_id not in known:
            errors[str(index)] = ["is not a variant of the product"]
        elif variant_id in seen:
            errors[str(index)] = ["is duplicated"]
        seen.add(variant_id)
    if errors:
        raise ValidationFailed({"external_variant_ids": errors})
    return list(given)


def checked_plan(values: dict[str, Any], product: Product | None, currency: str,
                 kept: Iterable[str] = ()) -> dict[str, Any]:
    """The complete plan ``values`` (head names) as stored, every rule checked; all the bad
    fields at once. Without a product (not in the catalog) its variants are not checked;
    ``kept``: variant ids the plan already had on this product, valid even if gone from it."""
    known = None if product is None else {v.external_variant_id for v in product.variants} | set(kept)
    errors: dict[str, Any] = {}
    clean = dict(values)
    plan_type = (values["type"] or "").lower()
    if plan_type not in PLAN_TYPES:
        errors["type"] = [f"must be one of: {', '.join(PLAN_TYPES)}"]
    clean["type"] = plan_type
    checks = (
        (("discount_amount", "discount_type"),
         lambda: discount(values.get("discount_amount"), values.get("discount_type"), currency)),
        (("subscription_preferences",),
         lambda: (preferences(plan_type, values.get("subscription_preferences")),) if plan_type in PLAN_TYPES
         else (values.get("subscription_preferences"),)),
        (("external_variant_ids",), lambda: (variant_ids(known, values.get("external_variant_ids") or []),)),
    )
    for names, check in checks:
        try:
            clean.update(zip(names, check()))
        except ValidationFailed as exc:
            assert isinstance(exc.errors, dict)
            errors.update(exc.errors)
    if not -MAX_INT32 <= values.get("sort_order", 0) <= MAX_INT32:
        errors["sort_order"] = [f"must be from {-MAX_INT32} to {MAX_INT32}"]
    clean["channel_settings"] = merge_channels(None, values.get("channel_settings"))
    if errors:
        raise ValidationFailed(errors)
    return clean


def plan_price(price: Decimal, plan: Plan, currency: str) -> Decimal:
    """NOTE: decisions §5.8, the price less the plan's discount, never below zero (a fixed
    amount larger than the price makes it 0.00): the price of a subscription made from the
    plan, and of a dynamic bundle's contents priced by it."""
    amount = plan.discount_amount or Decimal(0)
    if plan.discount_type == "percentage":
        return quantize(price * (100 - amount) / 100, currency)
    if plan.discount_type == "fixed_amount":
        return max(quantize(price - amount, currency), Decimal(0))
    return quantize(price, currency)


def plan_fits(plan: Plan, external_product_id: str | None, external_variant_id: str | None) -> str | None:
    """Why ``plan`` cannot be the plan of an item of this product and variant, or None: a plan
    is a plan of one product (decisions §5.8), restricted to some of its variants when it names
    any (``external_variant_ids``)."""
    if external_product_id != plan.external_product_id:
        return f"is not a plan of the product {external_product_id}"
    if plan.external_variant_ids and external_variant_id not in plan.external_variant_ids:
        return f"does not apply to the variant {external_variant_id}"
    return None
