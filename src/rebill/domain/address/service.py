"""Address use cases (spec 01 Addresses, spec 02 Addresses, decisions §4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from rebill.errors import Conflict, NotFound, ValidationFailed

from ..charge import errored
from ..charge import repository as charges
from ..charge.model import OPEN
from ..customer import repository as customers
from ..discount import apply as discount_apply
from ..discount import repository as discounts
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..metafield import service as metafields
from ..money import format_amount
from ..payment_method import repository as payment_methods
from ..subscription import repository as items
from ..text_keys import text_key
from ..unit import Unit
from . import repository
from .model import Address, AddressCreate, AddressUpdate
from .rules import check_location, check_presentment_currency, check_zip_follows_country
from .verifier import AddressVerifier

LOCATION = ("address1", "city", "country_code", "province", "zip")
# Columns the head (2021-11) address names otherwise (the `updated_attributes` of its events).
API_NAMES = {"discount_id": "discounts"}


def get(unit: Unit, address_id: int) -> Address:
    address = repository.get(unit.conn, unit.store_id, address_id)
    if address is None:
        raise NotFound()
    return address


def _discount_id(unit: Unit, entries: list[dict[str, Any]], address: Address | None, customer_id: int,
                 currency: str) -> int | None:
    """NOTE: spec 01 Address ``discounts``, only the first entry applies; [] removes it. A new
    code obeys every rule of applying one (domain/discount/apply.py)."""
    if not entries:
        return None
    first = entries[0]
    if first.get("id") is None and not first.get("code"):
        raise ValidationFailed({"discounts": ["each discount needs an id or a code"]})
    # The array sets the address's discount: a new code replaces the current one.
    return discount_apply.address_discount(unit, address, customer_id, currency, "discounts", first.get("id"),
                                           first.get("code"), replacing=True)


def _authorized_discount(unit: Unit, entries: list[dict[str, Any]], address: Address | None,
                         authorize: Callable[[], None] | None) -> None:
    """The token's right to change the address's discount through its body, asked before any
    code is looked up (a 422 for an unknown code would tell a token without the discount scopes
    which codes exist). Sent as a GET shows it, the array changes nothing and needs no right."""
    if authorize is None:
        return
    current = address.discount_id if address is not None else None
    if not entries:
        same = current is None
    elif current is None:
        same = False
    elif entries[0].get("id") is not None:
        same = entries[0]["id"] == current
    else:
        row = discounts.get(unit.conn, unit.store_id, current)
        same = row is not None and text_key(str(entries[0].get("code") or "")) == text_key(row.code)
    if not same:
        authorize()


def _check_payment_method(unit: Unit, customer_id: int, payment_method_id: int | None) -> None:
    """NOTE: decisions §6.12, an address may only point at its own customer's methods. The
    method stays locked against deletion until the reference is written (a delete that came
    first is waited for, and then the method is not found: 422, never a foreign-key error)."""
    if payment_method_id is None:
        return
    row = payment_methods.get(unit.conn, unit.store_id, payment_method_id, lock="reference")
    if row is None or row.customer_id != customer_id:
        raise ValidationFailed.field("payment_method_id", "payment method not found for this customer")


def _normalize_shipping_lines(lines: list[dict[str, Any]] | None, currency: str) -> list[dict[str, Any]] | None:
    if lines is None:
        return None
    return [{"code": line.get("code"), "price": format_amount(line["price"], currency), "title": line.get("title")}
            for line in lines]


def create(unit: Unit, verifier: AddressVerifier, command: AddressCreate, *,
           authorize_discount: Callable[[], None] | None = None) -> Address:
    """``authorize_discount`` raises when the token may not set the address's discount
    (docs/scopes.md: `write_discounts`, as the apply endpoints need)."""
    if not customers.exists_in_store(unit.conn, unit.store_id, command.customer_id, lock="share"):
        raise ValidationFailed.field("customer_id", "customer not found")
    values = msgspec.structs.asdict(command)
    entries = values.pop("discounts")
    if entries is not msgspec.UNSET:
        _authorized_discount(unit, entries, None, authorize_discount)
    # Every bad field at once (decisions §2.3; found by an audit: the zip, then the currency,
    # then the payment method, one request each).
    errors: dict[str, Any] = {}
    located = ValidationFailed.collect(errors, check_location, unit.store, verifier, values)
    currency = ValidationFailed.collect(errors, check_presentment_currency, unit.store, command.presentment_currency)
    ValidationFailed.collect(errors, _check_payment_method, unit, command.customer_id, command.payment_method_id)
    # A code's rules depend on the currency (a fixed amount is in the store's): once it is known.
    discount_id = ValidationFailed.collect(errors, _discount_id, unit, entries, None, command.customer_id, currency) \
        if entries is not msgspec.UNSET and currency is not None else None
    if errors:
        raise ValidationFailed(errors)
    values = located
    values["presentment_currency"] = currency
    values.update(
        store_id=unit.store_id,
        discount_id=discount_id,
        shipping_lines_override=_normalize_shipping_lines(command.shipping_lines_override,
                                                          values["presentment_currency"]),
        shipping_lines_conserved=[],
        lock_version=1,
        created_at=unit.now,
        updated_at=unit.now,
    )
    address_id = repository.insert_address(unit.conn, values)
    unit.record("address/created", address_id)
    return get(unit, address_id)


def update(unit: Unit, verifier: AddressVerifier, address_id: int, command: AddressUpdate, *,
           authorize_discount: Callable[[], None] | None = None) -> Address:
    current = get(unit, address_id)
    changes = command.changes()
    if "discounts" in changes:
        _authorized_discount(unit, changes["discounts"], current, authorize_discount)
    # Every bad field at once, as a create names them (decisions §2.3; found by an audit: the
    # zip, then the payment method, then the code, one request each).
    errors: dict[str, Any] = {}
    if changes.pop("presentment_currency", current.presentment_currency).upper() != current.presentment_currency:
        # Its charges, prices and applied codes are in that currency: a new one is a new address.
        errors["presentment_currency"] = ["cannot be changed once the address is created"]
    if changes.pop("customer_id", current.customer_id) != current.customer_id:
        # An address is its customer's for good (found by an audit: another customer's id
        # answered 200 and the address stayed where it was).
        errors["customer_id"] = ["cannot be changed once the address is created"]
    if "country_code" in changes and changes["country_code"].upper() != current.country_code:
        ValidationFailed.collect(errors, check_zip_follows_country, current.country_code, current.zip, changes)
        # The old country's province means nothing in the new one.
        changes.setdefault("province", None)
    if any(field in changes for field in LOCATION):
        merged = {field: changes.get(field, getattr(current, field)) for field in LOCATION}
        changes.update(ValidationFailed.collect(errors, check_location, unit.store, verifier, merged) or {})
    if "payment_method_id" in changes:
        ValidationFailed.collect(errors, _check_payment_method, unit, current.customer_id,
                                 changes["payment_method_id"])
    if "discounts" in changes:
        # The code's rules only read (and lock) what an apply reads: named with the rest.
        changes["discount_id"] = ValidationFailed.collect(
            errors, _discount_id, unit, changes.pop("discounts"), current, current.customer_id,
            current.presentment_currency)
    if errors:
        raise ValidationFailed(errors)
    if "shipping_lines_override" in changes:
        new = _normalize_shipping_lines(changes["shipping_lines_override"], current.presentment_currency)
        changes["shipping_lines_override"] = new
        if current.shipping_lines_override and new != current.shipping_lines_override:
            # Overridden rates that stop applying are kept as conserved (spec 01 Address).
            changes["shipping_lines_conserved"] = current.shipping_lines_override
    changes = {k: v for k, v in changes.items() if getattr(current, k, object()) != v}
    if changes:
        changes["updated_at"] = unit.now
        if not repository.update_address(unit.conn, unit.store_id, address_id, current.lock_version, changes):
            raise Conflict()
        unit.record("address/updated", address_id, changed=attributes.names(changes, API_NAMES))
        # The charges show the address, its shipping and its discount: they follow it, a charge
        # in retry too, which its retry bills as it then is (found by an audit: a retry shipped
        # to the old address, its money computed for the new one at the next item change).
        errored.follow(unit, [address_id])
    return get(unit, address_id)


def delete(unit: Unit, address_id: int) -> None:
    current = get(unit, address_id)
    repository.lock(unit.conn, unit.store_id, [address_id])
    # NOTE: decisions §4.7, an address with active subscriptions cannot be deleted.
    if items.active_count(unit.conn, unit.store_id, address_id=address_id):
        raise ValidationFailed({"subscriptions": ["Address has active subscriptions"]})
    forget(unit, [address_id], current.customer_id)
    if not repository.delete_address(unit.conn, unit.store_id, address_id, current.lock_version):
        raise Conflict()
    # The row is gone when the event is written: its customer is named here.
    unit.record("address/deleted", address_id, {"id": address_id}, customer_id=current.customer_id)


def forget(unit: Unit, address_ids: list[int], customer_id: int) -> None:
    """What goes with deleted addresses (all of ``customer_id``), each with its event: their
    purchase items and their charges not paid, queued, skipped and in error (processed charges
    stay: money history is kept; a pending one is authorized money its capture decides). A
    charge in error went too late: it was retried and billed for a deleted address and deleted
    items (found by an audit)."""
    subscription_ids: list[int] = []
    for kind in ("subscription", "onetime"):
        for item in items.of(unit.conn, unit.store_id, kind, address_ids=address_ids):
            unit.record(f"{kind}/deleted", item.id, {"id": item.id}, customer_id=customer_id)
            if kind == "subscription":
                subscription_ids.append(item.id)
    open_charges = charges.of_addresses(unit.conn, unit.store_id, address_ids, OPEN)
    if any(c.claimed_by is not None for c in open_charges):
        # A billing run is paying one of them: deleting it would leave the payment with no
        # charge to record it on (domain/billing/claim.py). The run ends in moments.
        raise Conflict("A charge of this address is being paid; try again in a moment")
    gone = [c.id for c in open_charges]
    charges.delete_many(unit.conn, unit.store_id, gone)
    for charge_id in gone:
        unit.record("charge/deleted", charge_id, {"id": charge_id}, customer_id=customer_id)
    # NOTE: decisions §7.6, the metafields of the addresses and of what goes with them.
    metafields.forget(unit, customer_id, address=address_ids, subscription=subscription_ids, charge=gone)


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def count(unit: Unit, filters: dict[str, Any]) -> int:
    return repository.count_where(unit.conn, unit.store_id, filters)
