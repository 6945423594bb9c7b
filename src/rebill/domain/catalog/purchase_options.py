"""How a product may be bought, as the deprecated 2021-01 product endpoints put it
(`subscription_defaults` and a discount), written as plans and read back from them
(spec 01 Plans: "the old product endpoints map to" the plan endpoints; decisions §5.16).

The catalog stores no purchase options of its own: the plans are the truth, so a product
changed through the 2021-11 plan endpoints reads the same in 2021-01.

- Writing: ``storefront_purchase_options`` `subscription_only` gives subscription plans,
  `subscription_and_onetime` subscription plans and one onetime plan, `onetime` one onetime plan.
  There is one subscription plan per order interval frequency option (one, as is usual, gives
  exactly one); a single option with a larger ``charge_interval_frequency`` gives a prepaid plan.
  The product discount goes to the subscription plans (2021-01 discounts subscriptions only).
- Reading (derived.py): the first recurring plan (by sort order, then id) gives the defaults; the frequency
  options are those of every recurring plan with its interval unit.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from msgspec import UNSET

from rebill.errors import NotFound, ValidationFailed

from ..unit import Unit
from . import plans, repository, rules
from .derived import DAY_AND_LIMIT_FIELDS, changes_between, derive
from .model import LegacyProductWrite, Plan, Product, PurchaseOptions
from .service import change_product, get_product_by_id, insert_product

STOREFRONT = ("subscription_only", "subscription_and_onetime", "onetime")
# Preference names as `subscription_defaults` calls them.
OPTION_NAMES = {"interval_unit": "order_interval_unit", "order_interval_frequency": "order_interval_frequency_options"}


def _frequency_label(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _option_errors(exc: ValidationFailed) -> dict[str, Any]:
    """Plan preference errors in the names of `subscription_defaults`."""
    assert isinstance(exc.errors, dict)
    found = exc.errors.get("subscription_preferences")
    if isinstance(found, dict):
        return {OPTION_NAMES.get(name, name): messages for name, messages in found.items()}
    return {"storefront_purchase_options": found or ["is invalid"]}


def _plan_specs(options: dict[str, Any], amount: Decimal | None, kind: str | None,
                currency: str) -> list[dict[str, Any]]:
    """The plans the options ask for, in order, every rule checked (all errors at once)."""
    errors: dict[str, Any] = {}
    option_errors: dict[str, Any] = {}
    storefront = options.get("storefront_purchase_options") or "subscription_only"
    if storefront not in STOREFRONT:
        option_errors["storefront_purchase_options"] = [f"must be one of: {', '.join(STOREFRONT)}"]
    # NOTE: a 2021-01 product shows 0 for "no discount", and clients send it back.
    if amount is not None and amount == 0:
        amount = None
    specs: list[dict[str, Any]] = []
    if storefront in ("subscription_only", "subscription_and_onetime"):
        unit = options.get("order_interval_unit")
        frequencies = list(dict.fromkeys(options.get("order_interval_frequency_options") or []))
        charge = options.get("charge_interval_frequency")
        if not frequencies:
            option_errors["order_interval_frequency_options"] = ["cannot be empty for a subscription product"]
        elif len(frequencies) > plans.BULK_LIMIT:
            # One plan per option: no more than a bulk request may make.
            option_errors["order_interval_frequency_options"] = [f"has too many items (at most {plans.BULK_LIMIT})"]
            frequencies = []
        prepaid = len(frequencies) == 1 and charge is not None and charge != frequencies[0]
        if len(frequencies) > 1 and charge is not None and charge not in frequencies:
            option_errors["charge_interval_frequency"] = [
                "must be one of order_interval_frequency_options when there are several (prepaid needs one)"]
        elif len(frequencies) > 1 and charge is not None:
            # The default is the first plan (``derive``): the one the charge frequency names
            # comes first, the rest in the order sent (found by an audit: the value was taken,
            # and the first option's read back).
            frequencies.remove(charge)
            frequencies.insert(0, charge)
        try:
            amount, kind = rules.discount(amount, kind, currency)
        except ValidationFailed as exc:
            errors.update(exc.errors)  # type: ignore[arg-type]
        for index, frequency in enumerate(frequencies or [1]):
            plan_type = "prepaid" if prepaid else "subscription"
            given = {"interval_unit": unit, "order_interval_frequency": frequency,
                     "charge_interval_frequency": charge if prepaid else frequency,
                     "apply_cutoff_date_to_checkout": options.get("apply_cutoff_date_to_checkout"),
                     **{name: options.get(name) for name in DAY_AND_LIMIT_FIELDS}}
            try:
                prefs = rules.preferences(plan_type, given)
            except ValidationFailed as exc:
                found = _option_errors(exc)
                if charge is None:  # the plan's charge frequency is the option itself: one error says it
                    found.pop("charge_interval_frequency", None)
                for name, messages in found.items():
                    option_errors.setdefault(name, messages)
                continue
            assert prefs is not None
            title = f"Every {_frequency_label(frequency, prefs['interval_unit'])}"
            if prepaid:
                title += f", prepaid for {_frequency_label(charge, prefs['interval_unit'])}"
            specs.append({"title": title, "type": plan_type, "subscription_preferences": prefs,
                          "discount_amount": amount, "discount_type": kind, "sort_order": index})
    elif amount is not None:
        errors["discount_amount"] = ["applies to subscriptions, and the product has no subscription option"]
    if storefront in ("subscription_and_onetime", "onetime"):
        specs.append({"title": "One-time purchase", "type": "onetime", "subscription_preferences": None,
                      "discount_amount": None, "discount_type": None, "sort_order": len(specs)})
    if option_errors:
        errors["subscription_defaults"] = option_errors
    if errors:
        raise ValidationFailed(errors)
    return specs


def _unit_of(plan: Plan) -> str | None:
    return (plan.subscription_preferences or {}).get("interval_unit")


def _frequency_of(plan: Plan) -> Any:
    return (plan.subscription_preferences or {}).get("order_interval_frequency")


def _match(candidates: list[Plan], spec: dict[str, Any], kept: set[int]) -> Plan | None:
    """The stored plan a spec keeps: a onetime plan for the onetime spec; for a recurring one,
    the plan of the same unit and order frequency."""
    free = [p for p in candidates if p.id not in kept]
    if spec["type"] == "onetime":
        return next((p for p in free if not p.is_subscription), None)
    prefs = spec["subscription_preferences"]
    return next((p for p in free if p.is_subscription and _frequency_of(p) == prefs["order_interval_frequency"]
                 and _unit_of(p) == prefs["interval_unit"]), None)


def _reconcile(unit: Unit, product: Product, specs: list[dict[str, Any]]) -> bool:
    """Make the product's plans say what ``specs`` say: a stored plan of the same kind, unit and
    order frequency is kept (its id, title, channels and variants too) and updated, else one the
    view shows of that frequency (the write changes its unit); the missing ones are created.
    Returns whether anything changed.

    A plan goes only when the write takes its option away: its kind (no recurring option, no
    one-time option), or its order frequency or unit, for a plan of the unit the view shows. The
    view shows one interval unit and collapses plans of one frequency; the others, made through
    2021-11, are not the write's to delete (found by an audit: a flag changed in 2021-01 deleted
    a monthly plan beside the weekly one shown)."""
    shown_unit = derive(product.plans).options.order_interval_unit
    recurring_asked = any(spec["type"] != "onetime" for spec in specs)
    onetime_asked = any(spec["type"] == "onetime" for spec in specs)
    asked = {(spec["subscription_preferences"]["interval_unit"], spec["subscription_preferences"][
        "order_interval_frequency"]) for spec in specs if spec["type"] != "onetime"}

    def taken_away(plan: Plan) -> bool:
        if not plan.is_subscription:
            return not onetime_asked
        return not recurring_asked or (_unit_of(plan) == shown_unit and (shown_unit, _frequency_of(plan)) not in asked)

    shown = [p for p in product.plans if not p.is_subscription or _unit_of(p) == shown_unit]
    kept: set[int] = set()
    matches: list[Plan | None] = []
    for spec in specs:
        match = _match(product.plans, spec, kept)
        if match is None and spec["type"] != "onetime":
            # The same frequency in another unit: the write changes the plan's unit.
            match = next((p for p in shown if p.id not in kept and p.is_subscription
                          and _frequency_of(p) == spec["subscription_preferences"]["order_interval_frequency"]), None)
        if match is not None:
            kept.add(match.id)
        matches.append(match)
    gone = [p.id for p in product.plans if p.id not in kept and taken_away(p)]
    orders = _orders(matches, specs, [p for p in product.plans
                                      if p.is_subscription and p.id not in kept and p.id not in gone])
    changed = False
    for spec, match, order in zip(specs, matches, orders):
        if match is None:
            plans.insert_plan(unit, {
                **spec, "sort_order": order, "product_id": product.id,
                "external_product_id": product.external_product_id,
                "channel_settings": rules.default_channels(), "external_variant_ids": []})
            changed = True
            continue
        update: dict[str, Any] = {"sort_order": order}
        if spec["type"] != "onetime":
            update.update({k: spec[k] for k in ("type", "subscription_preferences", "discount_amount",
                                                "discount_type")})
        changed = plans.write_changes(unit, match, update) or changed
    for plan_id in repository.delete_plans(unit.conn, unit.store_id, gone):
        unit.record("plan/deleted", plan_id, {"id": plan_id})
        changed = True
    return changed


def _orders(matches: list[Plan | None], specs: list[dict[str, Any]], others: list[Plan]) -> list[int]:
    """The sort order of each written plan: a kept plan keeps its own, a new one takes its
    place in the specs. The view reads its defaults from the first recurring plan (sort
    order, then id), so when a recurring plan the write leaves alone (``others``) would come
    first, the written plans move ahead of it, in the specs' order: the product reads back as
    written."""
    orders = [spec["sort_order"] if match is None else match.sort_order for spec, match in zip(specs, matches)]
    recurring = [(order, match.id if match else 1 << 62)
                 for order, match, spec in zip(orders, matches, specs) if spec["type"] != "onetime"]
    # The first recurring spec is the default the view shows: when its plan (kept, or new with
    # its place in the specs) would sort after another written one, it moves ahead of them.
    if len(recurring) > 1 and min(recurring[1:]) < recurring[0]:
        first = next(i for i, spec in enumerate(specs) if spec["type"] != "onetime")
        orders[first] = max(min(order for order, _id in recurring[1:]) - 1, -rules.MAX_INT32)
        recurring[0] = (orders[first], recurring[0][1])
    if not others or not recurring or min(recurring) < min((p.sort_order, p.id) for p in others):
        return orders
    # Within the 32-bit column (rules.MAX_INT32): at its very bottom, ties go by id.
    base = max(min(p.sort_order for p in others) - len(specs), -rules.MAX_INT32)
    return [base + index for index in range(len(specs))]


def _product_fields(command: LegacyProductWrite) -> dict[str, Any]:
    return {name: getattr(command, name) for name in ("title", "handle", "images")
            if getattr(command, name) is not UNSET}


def _options(given: PurchaseOptions | None | Any) -> dict[str, Any]:
    if given is UNSET or given is None:
        return {}
    return {f: getattr(given, f) for f in given.__struct_fields__ if getattr(given, f) is not UNSET}


def create(unit: Unit, command: LegacyProductWrite) -> Product:
    """Puts the product in the catalog when it is missing and derives its plans; a product
    that already has plans answers 422 (decisions §5.16: update it with PUT)."""
    assert isinstance(command.external_product_id, str)
    product = repository.product_by_external_id(unit.conn, unit.store_id, command.external_product_id,
                                                lock="update")
    errors: dict[str, Any] = {}
    if product is not None and repository.plans_of_products(unit.conn, unit.store_id, [product.id])[product.id]:
        errors["external_product_id"] = [f"the product already has plans; update it with PUT /products/{product.id}"]
    if product is None and command.title is UNSET:
        errors["title"] = ["is required"]
    specs: list[dict[str, Any]] = []
    sent = command.subscription_defaults is not UNSET and command.subscription_defaults is not None
    amount = command.discount_amount if command.discount_amount is not UNSET else None
    kind = command.discount_type if command.discount_type is not UNSET else None
    try:
        if sent:
            specs = _plan_specs(_options(command.subscription_defaults), amount, kind, unit.store.currency)
        elif amount:
            raise ValidationFailed.field("discount_amount", "applies to subscriptions; send subscription_defaults")
    except ValidationFailed as exc:
        errors.update(exc.errors)  # type: ignore[arg-type]
    if errors:
        raise ValidationFailed(errors)
    if product is None:
        product = get_product_by_id(unit, insert_product(unit, {"external_product_id": command.external_product_id,
                                                                **_product_fields(command)}))
        _reconcile(unit, product, specs)
    else:
        _reconcile(unit, product, specs)
        change_product(unit, product, _product_fields(command), shown=_shown_changes(unit, product))
    return get_product_by_id(unit, product.id)


def _shown_changes(unit: Unit, before: Product) -> tuple[str, ...]:
    """What the plan writes made of the 2021-01 product ``before`` showed (derived.py)."""
    after = get_product_by_id(unit, before.id)
    return changes_between(derive(before.plans) if before.plans else None, derive(after.plans)) \
        if before.plans or after.plans else ()


def update(unit: Unit, product_id: int, command: LegacyProductWrite) -> Product:
    """Updates the product and the plans its purchase options give: the sent options and
    discount merge into those its plans show. The product's update lock comes first, as every
    plan writer takes it: its plans read after it are those the writers before left (found by an
    audit on PostgreSQL: one PUT sent twice at once made the missing plan twice)."""
    if not repository.lock_product(unit.conn, unit.store_id, product_id):
        raise NotFound()
    product = get_product_by_id(unit, product_id)
    if command.subscription_defaults is not UNSET:
        sent = _options(command.subscription_defaults)
        shown: dict[str, Any] | None = None
        if product.plans:
            current = derive(product.plans)
            shown = _options(current.options)
            options = {**shown, **sent}
            amount, kind = current.discount_amount, current.discount_type
            if options.get("storefront_purchase_options") == "onetime" and command.discount_amount is UNSET:
                # The stored discount was the subscription plans', which go (found by an audit:
                # a switch to one-time was refused over a discount the client did not send).
                amount = kind = None
        else:
            options, amount, kind = sent, None, None
        if command.discount_amount is not UNSET:
            amount = command.discount_amount
        if command.discount_type is not UNSET:
            kind = command.discount_type
        # What it shows sent back is no change (found by an audit: the echo re-derived the plans
        # and deleted those 2021-11 had made, the plan of an active subscription among them).
        if shown is None or options != shown or _discount_of(amount, kind) != _discount_of(
                current.discount_amount, current.discount_type):
            _reconcile(unit, product, _plan_specs(options, amount, kind, unit.store.currency))
    elif command.discount_amount is not UNSET or command.discount_type is not UNSET:
        _discount_recurring(unit, product, command)
    change_product(unit, product, _product_fields(command), shown=_shown_changes(unit, product))
    return get_product_by_id(unit, product.id)


def _discount_of(amount: Decimal | None, kind: str | None) -> tuple[Decimal | None, str | None]:
    """A discount as it compares: 0 is none (a 2021-01 product shows 0 for none), and no
    amount has no type."""
    return (None, None) if not amount else (amount, kind)


def _discount_recurring(unit: Unit, product: Product, command: LegacyProductWrite) -> bool:
    """A discount sent alone goes to every recurring plan of the product, leaving the plans
    otherwise as they are (they may have been set up through the 2021-11 plan endpoints)."""
    recurring = [p for p in product.plans if p.is_subscription]
    first = recurring[0] if recurring else None
    amount = command.discount_amount if command.discount_amount is not UNSET else (first and first.discount_amount)
    kind = command.discount_type if command.discount_type is not UNSET else (first and first.discount_type)
    if amount is not None and amount == 0:
        amount = None
    if not recurring:
        if amount is not None:
            raise ValidationFailed.field("discount_amount", "applies to subscriptions; send subscription_defaults")
        return False
    amount, kind = rules.discount(amount, kind, unit.store.currency)
    changed = False
    for plan in recurring:
        changed = plans.write_changes(unit, plan, {"discount_amount": amount, "discount_type": kind}) or changed
    return changed
