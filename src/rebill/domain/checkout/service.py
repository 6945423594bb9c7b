"""Checkout use cases: create, read, update and the shipping rates (spec 02 Checkouts,
decisions §7.3, §7.7). Charging is ``charge.py``. Field names are the head (2021-11) names."""

from __future__ import annotations

import secrets
from decimal import Decimal
from typing import Any

from rebill.errors import Conflict, Forbidden, NotFound, ValidationFailed

from .. import analytics
from ..address.rules import check_location
from ..address.verifier import AddressVerifier
from ..customer import repository as customers
from ..customer.service import check_analytics, email_problem
from ..discount import rules
from ..event import attributes
from ..geo import country, zip_problem
from ..money import format_amount
from ..unit import Unit
from . import lines as checkout_lines
from . import pricing, repository
from .model import ADDRESS_FIELDS, COMPLETE, PARTIAL, PLATFORM_S, Checkout, CheckoutWrite

SOON = "is required before the checkout is charged"
# Columns a write may change, and how the head names them (the event's `updated_attributes`).
WRITTEN = ("email", "phone", "note", "note_attributes", "buyer_accepts_marketing", "currency", "discount_code",
           "discount_id", "analytics_data", "billing_address", "shipping_address", "external_checkout_id",
           "external_checkout_source", "external_customer_id", "line_items", "pricing", "taxes_included",
           *pricing.TOTALS)
API_NAMES: dict[str, str | None] = {"discount_id": None, "total_shipping": "shipping_line",
                                    "total_discounts": "applied_discount",
                                    # The head (2021-11) name: events are read in 2021-11 only.
                                    "note_attributes": "order_attributes"}
PRICING_NAMES = {"line_items": "line_items", "shipping_lines": "shipping_line", "tax_lines": "tax_lines",
                 "applied_discount": "applied_discount", "requires_shipping": "requires_shipping",
                 "shipping_address_validations": "shipping_address_validations"}


def require_platform(store: Any) -> None:
    """NOTE: decisions §7.3, spec 02 Checkouts: platform B and custom stores only."""
    if store.checkout_platform in PLATFORM_S:
        raise Forbidden(f"Checkouts are not available for this store: its checkout platform "
                        f"({store.checkout_platform}) takes checkouts itself")


def get(unit: Unit, token: str) -> Checkout:
    found = repository.get(unit.conn, unit.store_id, token)
    if found is None:
        raise NotFound()
    return found


def held(checkout: Checkout) -> bool:
    """Whether a payment of the checkout is in flight, or was and never answered (its claim
    stays until a charge request or the billing run finishes it: charge.py)."""
    return checkout.claimed_by is not None


def _merged(current: dict[str, Any] | None, sent: dict[str, Any] | None) -> dict[str, Any] | None:
    """An address sent on an update completes the stored one field by field; a new country
    drops the old province unless one is sent (it means nothing there). Null clears it."""
    if sent is None:
        return None
    merged = {**dict.fromkeys(ADDRESS_FIELDS), **(current or {}), **sent}
    if current and sent.get("country_code") not in (None, current.get("country_code")) and "province" not in sent:
        merged["province"] = None
    return merged


def check_shipping(unit: Unit, verifier: AddressVerifier, address: dict[str, Any], *,
                   partial: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The shipping address checked (decisions §7.7.4: complete unless ``partial``; a complete
    one obeys the address rules of decisions §4) and its `shipping_address_validations`."""
    needed = PARTIAL if partial else COMPLETE
    errors = {name: ["is required"] for name in needed if not (address.get(name) or "").strip()}
    code = (address.get("country_code") or "").upper()
    if partial:
        if code and country(code) is None:
            errors["country_code"] = ["is not a valid country code"]
        elif code and (problem := zip_problem(code, address.get("zip"))):
            errors["zip"] = [problem]
        if errors:
            raise ValidationFailed({"shipping_address": errors})
        # NOTE: spec 02 Checkout `shipping_address_validations`, told, not refused, until the charge.
        return {**address, "country_code": code}, {"country_is_supported": code in unit.store.ships_to, "ups": False}
    if errors:
        raise ValidationFailed({"shipping_address": errors})
    try:
        checked = check_location(unit.store, verifier, address)
    except ValidationFailed as exc:
        raise ValidationFailed({"shipping_address": exc.errors}) from None
    return ({name: checked.get(name) for name in ADDRESS_FIELDS},
            {"country_is_supported": True, "ups": checked["country_code"] == "US"})


def check_currency(unit: Unit, currency: str | None) -> str:
    """NOTE: spec 02 Checkout `currency`, one of the store's presentment currencies."""
    if currency is None:
        return unit.store.currency
    if currency.upper() not in unit.store.currencies:
        raise ValidationFailed.field("currency", "is not a currency enabled for the store")
    return currency.upper()


def _discount(unit: Unit, code: str | None) -> tuple[str | None, int | None]:
    """NOTE: decisions §7.7.15, an unknown code is 422; a known one is kept whether it applies."""
    if code is None or not code.strip():
        return None, None
    row = rules.resolve(unit, "discount_code", None, code.strip())
    return row.code, int(row.id)


def customer_of(unit: Unit, email: str | None) -> int | None:
    return customers.id_by_email(unit.conn, unit.store_id, email) if email else None


def priced(unit: Unit, state: dict[str, Any], validations: dict[str, Any] | None) -> dict[str, Any]:
    """The pricing columns of a checkout in ``state`` (its columns as they will be)."""
    discount = pricing.applied(unit, state["discount_id"], state["line_items"], state["currency"],
                               customer_of(unit, state["email"]))
    found = pricing.price(unit.store, unit.today, unit.now, lines=state["line_items"], currency=state["currency"],
                          shipping=state["shipping_address"], billing=state["billing_address"], note=state["note"],
                          attributes=state["note_attributes"], discount=discount)
    return {"pricing": {**found.pricing, "shipping_address_validations": validations},
            "taxes_included": found.taxes_included, **found.totals}


def _state(unit: Unit, verifier: AddressVerifier, current: dict[str, Any], command: CheckoutWrite) -> dict[str, Any]:
    """``current`` with the sent fields applied and checked, priced again."""
    changes = command.changes()
    state = dict(current)
    errors: dict[str, Any] = {}
    if isinstance(changes.get("email"), str):
        # Kept as the customer its payment makes keeps it (customer/service.py; found by an audit).
        changes["email"] = changes["email"].strip()
    for name in ("email", "phone", "note", "external_checkout_id", "external_checkout_source", "external_customer_id"):
        if name in changes:
            state[name] = changes[name]
    if changes.get("email") is not None and (problem := email_problem(changes["email"])):
        errors["email"] = [problem]  # the e-mail its payment gives a customer
    if "analytics_data" in changes:
        ValidationFailed.collect(errors, check_analytics, changes["analytics_data"])
        # What a GET shows of none sent back is no change (found by an audit: a new checkout
        # sent back whole recorded `checkout/updated` for its analytics_data).
        if not analytics.same(state["analytics_data"], changes["analytics_data"]):
            state["analytics_data"] = changes["analytics_data"]
    if "note_attributes" in changes:
        state["note_attributes"] = changes["note_attributes"] or []
    if "buyer_accepts_marketing" in changes:
        state["buyer_accepts_marketing"] = bool(changes["buyer_accepts_marketing"])
    if "currency" in changes:
        state["currency"] = ValidationFailed.collect(errors, check_currency, unit, changes["currency"]) or state["currency"]
    if "discount_code" in changes:
        found = ValidationFailed.collect(errors, _discount, unit, changes["discount_code"])
        if found is not None:
            state["discount_code"], state["discount_id"] = found
    if "line_items" in changes:
        resolved = ValidationFailed.collect(errors, checkout_lines.resolve, unit, changes["line_items"])
        state["line_items"] = resolved if resolved is not None else state["line_items"]
    validations = (current.get("pricing") or {}).get("shipping_address_validations")
    if "shipping_address" in changes:
        address = _merged(current.get("shipping_address"), changes["shipping_address"])
        validations = None
        if address is not None:
            checked = ValidationFailed.collect(errors, check_shipping, unit, verifier, address, partial=bool(command.partial_shipping))
            if checked is not None:
                address, validations = checked
        state["shipping_address"] = address
    if "billing_address" in changes:
        state["billing_address"] = _merged(current.get("billing_address"), changes["billing_address"])
    if errors:
        raise ValidationFailed(errors)
    state.update(priced(unit, state, validations))
    return state


def create(unit: Unit, verifier: AddressVerifier, command: CheckoutWrite) -> Checkout:
    empty: dict[str, Any] = {
        "email": None, "phone": None, "note": None, "note_attributes": [], "buyer_accepts_marketing": False,
        "currency": unit.store.currency, "discount_code": None, "discount_id": None, "analytics_data": None,
        "billing_address": None, "shipping_address": None, "external_checkout_id": None,
        "external_checkout_source": None, "external_customer_id": None, "line_items": [], "pricing": {},
    }
    state = _state(unit, verifier, empty, command)
    values = {
        **state, "store_id": unit.store_id, "token": secrets.token_hex(16),
        "payment_processor": None, "payment_type": None, "payment_token": None,
        "payment_processor_customer_id": None, "payment_processor_transaction_id": None, "customer_id": None,
        "charge_id": None, "completed_at": None, "charge_attempts": 0, "claimed_by": None, "claimed_at": None,
        "payment": None, "created_at": unit.now, "updated_at": unit.now,
    }
    checkout_id = repository.insert(unit.conn, values)
    unit.record("checkout/created", checkout_id)
    return get(unit, values["token"])


def writable(unit: Unit, token: str) -> Checkout:
    """The checkout, locked, that a write may change: not completed (422, decisions §7.3) and
    with no payment in flight (409)."""
    current = repository.get(unit.conn, unit.store_id, token, lock=True)
    if current is None:
        raise NotFound()
    if current.completed_at is not None:
        raise ValidationFailed.field("completed_at", "the checkout is completed and can no longer be changed")
    if held(current):
        raise Conflict("A payment of this checkout has not answered yet; try again in a moment")
    return current


def update(unit: Unit, verifier: AddressVerifier, token: str, command: CheckoutWrite) -> Checkout:
    current = writable(unit, token)
    before = {name: getattr(current, name) for name in WRITTEN}
    state = _state(unit, verifier, before, command)
    changes = {name: state[name] for name in WRITTEN if state[name] != before[name]}
    if changes:
        changes["updated_at"] = unit.now
        repository.save(unit.conn, unit.store_id, current.id, changes)
        unit.record("checkout/updated", current.id, changed=changed_names(before, changes))
    return get(unit, token)


def changed_names(before: dict[str, Any], changes: dict[str, Any]) -> tuple[str, ...]:
    names = set(attributes.names(changes, API_NAMES))
    if "pricing" in changes:
        names.discard("pricing")
        old, new = before["pricing"] or {}, changes["pricing"]
        names.update(shown for key, shown in PRICING_NAMES.items() if old.get(key) != new.get(key))
    return tuple(sorted(names))


def shipping_rates(unit: Unit, token: str) -> list[dict[str, Any]]:
    """NOTE: spec 02 Checkouts shipping rates, decisions §7.7.5: the store's rates for the
    shipping address's country (the first is the checkout's), each with the totals it gives."""
    checkout = get(unit, token)
    code = (checkout.shipping_address or {}).get("country_code")
    if not code:
        raise ValidationFailed.field("shipping_address", "is required to list shipping rates")
    if not pricing.requires_shipping(checkout.line_items):
        return []
    discount = pricing.applied(unit, checkout.discount_id, checkout.line_items, checkout.currency,
                               customer_of(unit, checkout.email))
    found = []
    for rate in pricing.shipping_rates(unit.store, code, checkout.currency):
        totals = pricing.price(unit.store, unit.today, unit.now, lines=checkout.line_items, currency=checkout.currency,
                               shipping=checkout.shipping_address, billing=checkout.billing_address,
                               note=checkout.note, attributes=checkout.note_attributes, discount=discount,
                               rate=rate).totals
        found.append({"rate": rate, "price": format_amount(Decimal(str(rate["price"])), checkout.currency),
                      "currency": checkout.currency, **totals})
    return found
