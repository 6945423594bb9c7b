"""A checkout's lines: each one a catalog variant at its catalog price (decisions §7.7.1), a
subscription line when it has a cadence, else a one-time line (§7.7.2), and the date a
subscription made from it is first charged again (§7.7.3)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from rebill.errors import ValidationFailed

from ..catalog import repository as catalog
from ..catalog import service as catalog_service
from ..subscription import intervals
from ..subscription.service import MAX_QUANTITY
from ..unit import Unit
from .model import CADENCE, ONETIME, SUBSCRIPTION, LineInput

MAX_LINES = 100
# NOTE: spec 02 line `first_recurring_charge_delay`, days (decisions §7.7.3); 0 is no delay.
MAX_DELAY_DAYS = 3650


def _kind(line: LineInput) -> str:
    """NOTE: decisions §7.7.2, a line with an order unit and frequency is a subscription line:
    one that has them, whatever their values, which are then checked as a subscription's (found
    by an audit: a frequency of 0 made a one-time line, and the buyer had no subscription)."""
    return SUBSCRIPTION if line.order_interval_unit is not None and line.order_interval_frequency is not None \
        else ONETIME


def _problems(unit: Unit, line: LineInput) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the line as stored, its problems keyed by field)."""
    problems: dict[str, Any] = {}
    if not 1 <= line.quantity <= MAX_QUANTITY:
        problems["quantity"] = [f"must be from 1 to {MAX_QUANTITY}"]
    stored: dict[str, Any] = {"product_id": line.product_id, "variant_id": line.variant_id,
                              "quantity": line.quantity, "properties": line.properties, "subscription_id": None}
    # NOTE: decisions §7.7.1, the line's product and variant name a catalog variant.
    product = catalog.product_by_external_id(unit.conn, unit.store_id, line.product_id)
    defaults = catalog_service.variant_defaults(unit, line.product_id, line.variant_id) if product else None
    if product is None:
        problems["product_id"] = ["not found in the catalog"]
    elif defaults is None:
        problems["variant_id"] = ["not found in the catalog"]
    elif defaults.price is None:
        problems["variant_id"] = ["has no price in the catalog"]
    else:
        stored.update(title=defaults.product_title, variant_title=defaults.variant_title, sku=defaults.sku,
                      price=str(defaults.price), grams=defaults.grams, taxable=defaults.taxable,
                      requires_shipping=defaults.requires_shipping, images=defaults.images,
                      handle=product.handle, product_type=product.product_type, vendor=product.vendor)
    kind = _kind(line)
    stored["type"] = kind
    cadence = {name: getattr(line, name) for name in CADENCE} if kind == SUBSCRIPTION else dict.fromkeys(CADENCE)
    delay = line.first_recurring_charge_delay if kind == SUBSCRIPTION else None
    if kind == SUBSCRIPTION:
        if cadence["charge_interval_frequency"] is None:
            cadence["charge_interval_frequency"] = cadence["order_interval_frequency"]
        try:
            cadence = intervals.check(cadence)
        except ValidationFailed as exc:
            assert isinstance(exc.errors, dict)
            problems.update(exc.errors)
            if line.charge_interval_frequency is None and "order_interval_frequency" in problems:
                problems.pop("charge_interval_frequency", None)  # not sent: the order frequency's copy
        if delay is not None and not 0 <= delay <= MAX_DELAY_DAYS:
            problems["first_recurring_charge_delay"] = [f"must be from 0 to {MAX_DELAY_DAYS} (days)"]
    stored.update(cadence, first_recurring_charge_delay=delay)
    return stored, problems


def resolve(unit: Unit, lines: list[LineInput]) -> list[dict[str, Any]]:
    """The lines as a checkout keeps them; 422 naming every bad field of every line."""
    if len(lines) > MAX_LINES:
        raise ValidationFailed.field("line_items", f"has too many items (at most {MAX_LINES})")
    resolved, errors = [], {}
    for index, line in enumerate(lines):
        stored, problems = _problems(unit, line)
        if problems:
            errors[str(index)] = problems
        resolved.append(stored)
    if errors:
        raise ValidationFailed({"line_items": errors})
    return resolved


def first_recurring_date(line: dict[str, Any], today: date) -> date:
    """NOTE: decisions §7.7.3, `first_recurring_charge_delay` days after the day the checkout
    is charged, else one charge interval after it (on the order day, as a new subscription)."""
    delay = line.get("first_recurring_charge_delay")
    if delay:
        return today + timedelta(days=delay)
    return intervals.first_date(line, today)


def check_before_payment(lines: list[dict[str, Any]], today: date) -> None:
    """Before any money moves, each subscription line as the subscription it becomes would ask:
    its cadence by today's rules (a line kept before a rule, a weekly line's day of the month,
    refused here rather than after the payment; found by a review), and a date after its next
    one (docs/api-choices.md, Hardening)."""
    errors: dict[str, Any] = {}
    for index, line in enumerate(lines):
        if line["type"] != SUBSCRIPTION:
            continue
        try:
            intervals.check({name: line.get(name) for name in CADENCE})
        except ValidationFailed as exc:
            errors[str(index)] = exc.errors
            continue
        when = first_recurring_date(line, today)
        anchor = intervals.anchor_for(line["order_interval_unit"], when, line.get("order_day_of_month"),
                                      line.get("order_day_of_week"))
        if not intervals.has_room(when, line["order_interval_unit"], line["charge_interval_frequency"], anchor):
            errors[str(index)] = {"first_recurring_charge_delay": [intervals.LATE]}
    if errors:
        raise ValidationFailed({"line_items": errors})

