"""Customer use cases. Field names are the head (2021-11) names; no version logic here."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from sqlalchemy.exc import IntegrityError

from rebill.errors import NotFound, ValidationFailed

from .. import analytics
from ..address import repository as addresses
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..metafield import service as metafields
from ..payment_method import service as payment_methods
from ..subscription import repository as items
from ..text_keys import text_key
from ..unit import Unit
from . import repository
from .model import BILLING_FIELDS, BILLING_REQUIRED, Customer, CustomerCreate, CustomerUpdate

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
EMAIL_LENGTH = 255  # the column's, and its case-insensitive key's (models/customer.py)
# NOTE: spec 03 customer, `analytics_data.utm_params[]` objects with these string fields.
UTM_FIELDS = ("utm_campaign", "utm_content", "utm_data_source", "utm_medium", "utm_source", "utm_term",
              "utm_timestamp")


def _analytics_problems(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """Why ``analytics_data`` would not render in the shape of spec 03 (`utm_params` an array
    of objects whose `utm_*` values are strings), keyed like any nested error; None when fine.
    Other keys are the client's own and kept as sent."""
    params = (data or {}).get("utm_params")
    if params is None:
        return None
    if not isinstance(params, list):
        return {"utm_params": ["must be an array"]}
    problems: dict[str, Any] = {}
    for index, item in enumerate(params):
        if not isinstance(item, dict):
            problems[str(index)] = ["must be an object"]
            continue
        bad = {name: ["must be a string"] for name in UTM_FIELDS
               if item.get(name) is not None and not isinstance(item[name], str)}
        if bad:
            problems[str(index)] = bad
    return {"utm_params": problems} if problems else None


def check_analytics(data: dict[str, Any] | None) -> None:
    problems = _analytics_problems(data)
    if problems:
        raise ValidationFailed({"analytics_data": problems})


# The stored fields of a customer after its id, up to its derived ones.
_WRITTEN = Customer.__struct_fields__[1:Customer.__struct_fields__.index("updated_at") + 1]


def email_problem(email: str) -> str | None:
    """Why ``email`` cannot be a customer's e-mail, or None. Checkouts ask it too: the customer
    their payment makes is given the checkout's e-mail (domain/checkout)."""
    if not EMAIL.match(email.strip()):
        return "is invalid"
    # Invisible characters (zero-width spaces, direction marks, controls: Unicode's "Other" and
    # "Separator" categories, which str.isprintable refuses): an address that looks like a taken
    # one would pass the uniqueness check (found by an audit).
    if not email.strip().isprintable():
        return "is invalid"
    # The case-insensitive key is the lower-cased e-mail, which may be longer than what was
    # sent ('İ' lower-cases to two characters): PostgreSQL would refuse it in its column.
    if len(text_key(email)) > EMAIL_LENGTH:
        return f"is too long (at most {EMAIL_LENGTH} characters)"
    return None


def _check_email(unit: Unit, email: str, *, other_than: int | None = None) -> None:
    # The API checks the format too, to report it with the other bad fields; the rule lives
    # here so it holds for every caller.
    problem = email_problem(email)
    if problem:
        raise ValidationFailed.field("email", problem)
    # NOTE: spec 02 Customers, email is unique per store.
    if repository.email_taken(unit.conn, unit.store_id, email, other_than=other_than):
        raise ValidationFailed.field("email", "has already been taken")


def _email_race(exc: IntegrityError) -> Exception:
    """A concurrent write won the unique (store, email) race after our check passed; any
    other integrity failure is a bug and stays one."""
    message = str(exc.orig)
    if "uq_customers_store_email" in message or "customers.email_key" in message:
        return ValidationFailed.field("email", "has already been taken")
    return exc


def _pop_billing(values: dict[str, Any]) -> dict[str, str | None]:
    """The ``billing_*`` fields of a command, taken out of ``values``, by their short names."""
    return {name: values.pop(f"billing_{name}") for name in BILLING_FIELDS if f"billing_{name}" in values}


def _billing_address(current: dict[str, str | None] | None,
                     changes: dict[str, str | None]) -> dict[str, str | None] | None:
    """The stored document: every field present, or None when none has a value."""
    merged = {**dict.fromkeys(BILLING_FIELDS), **(current or {}), **changes}
    return merged if any(value is not None for value in merged.values()) else None


def get(unit: Unit, customer_id: int) -> Customer:
    customer = repository.get(unit.conn, unit.store_id, customer_id)
    if customer is None:
        raise NotFound()
    return customer


def create(unit: Unit, command: CustomerCreate, *, tokens: Mapping[str, str] | None = None,
           authorize: Callable[[], None] | None = None) -> Customer:
    """``tokens``: processor -> customer token, what the deprecated 2021-01 token fields give
    (spec 02 Customers), kept on the customer's payment methods in the same transaction
    (domain/payment_method/service.py ``put_customer_tokens``); ``authorize`` runs before they
    write anything, and only when they do, and raises to refuse (the request's scope check)."""
    check_analytics(command.analytics_data)
    _check_email(unit, command.email)
    values = msgspec.structs.asdict(command)
    values["billing_address"] = _billing_address(None, _pop_billing(values))
    values.update(
        email=command.email.strip(),
        store_id=unit.store_id,
        hash=secrets.token_hex(12),
        status="inactive",
        first_charge_processed_at=None,
        created_at=unit.now,
        updated_at=unit.now,
    )
    # No savepoint: a failed insert ends the request, and the unit rolls back with it.
    try:
        customer_id = repository.insert_customer(unit.conn, values)
    except IntegrityError as exc:
        raise _email_race(exc) from None
    unit.record("customer/created", customer_id)
    if tokens and payment_methods.put_customer_tokens(unit, customer_id, tokens, authorize=authorize):
        # A token made the customer's first payment method, its default: the payment fields
        # derive from it, so this answer is read back.
        return get(unit, customer_id)
    # The answer is what was written, not a re-read: a new customer has no payment method,
    # subscription, charge or order yet, so every derived field keeps its default (issue 18;
    # tests/api/test_customers_created.py checks it against a GET).
    return Customer(customer_id, **{name: values[name] for name in _WRITTEN})


def update(unit: Unit, customer_id: int, command: CustomerUpdate, *, tokens: Mapping[str, str] | None = None,
           authorize: Callable[[], None] | None = None) -> Customer:
    """``tokens`` and ``authorize``: as ``create``'s, after the customer's own fields. Read
    under the customer's lock: two updates at once each merged their billing fields into the
    address as it was before the other, and one was lost; each recorded an event for a change
    the other had already made (found by an audit on PostgreSQL)."""
    current = repository.locked(unit.conn, unit.store_id, customer_id)
    if current is None:
        raise NotFound()
    changes = command.changes()
    if "analytics_data" in changes:
        check_analytics(changes["analytics_data"])
    billing = _pop_billing(changes)
    if billing:
        # NOTE: spec 02 Customers, a required part of a billing address cannot be taken away;
        # a null where the customer has no value is no change.
        had = current.billing_address or {}
        removed = [name for name in BILLING_REQUIRED if name in billing and billing[name] is None and had.get(name)]
        if removed:
            raise ValidationFailed({f"billing_{name}": ["cannot be null"] for name in removed})
        merged = _billing_address(current.billing_address, billing)
        # Nor can one be given in pieces: a customer without one that is sent a part gets every
        # required part at once (found by an audit: `billing_address1` alone made a fragment,
        # which every queued charge then billed to instead of the shipping address).
        missing = [] if merged is None or merged == current.billing_address else \
            [name for name in BILLING_REQUIRED if not merged.get(name)]
        if missing:
            raise ValidationFailed({f"billing_{name}": ["is required"] for name in missing})
        changes["billing_address"] = merged
    if "email" in changes:
        changes["email"] = changes["email"].strip()
        if text_key(changes["email"]) != text_key(current.email):
            _check_email(unit, changes["email"], other_than=customer_id)
    # Sending what is already stored changes nothing: no event, same updated_at. Nor does sending
    # what it shows: the default of an analytics_data never given, and (2021-01) the processor
    # type derived from the default method when the customer was given none.
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v
               and not (k == "analytics_data" and analytics.same(current.analytics_data, v))
               and not (k == "processor_type" and current.processor_type is None
                        and v == current.default_method_processor)}
    if changes:
        changes["updated_at"] = unit.now
        try:
            repository.update_customer(unit.conn, unit.store_id, customer_id, changes)
        except IntegrityError as exc:
            raise _email_race(exc) from None
        # The head names are the column names (`billing_address`: the 2021-01 `billing_*`
        # fields, one document, with no 2021-11 field of its own).
        unit.record("customer/updated", customer_id, changed=attributes.names(changes))
        if "billing_address" in changes:
            # The customer's billing address is the billing address of its queued charges, and
            # of its charges in retry, which the retry bills as they then are (found by a review).
            from ..charge import errored
            errored.follow(unit, addresses.ids_of_customer(unit.conn, unit.store_id, customer_id))
    if tokens:
        payment_methods.put_customer_tokens(unit, customer_id, tokens, authorize=authorize)
    return get(unit, customer_id)


def delete(unit: Unit, customer_id: int) -> None:
    # Lock first, so no address can be added between deleting the addresses and the customer.
    if not repository.exists_in_store(unit.conn, unit.store_id, customer_id, lock="update"):
        raise NotFound()
    # Then its addresses, as an address delete locks its own: every write that plans an
    # address's charges holds that lock, so none plans a charge the delete would not see (found
    # by an audit on PostgreSQL: a one-time item moved meanwhile left a queued charge of a
    # deleted customer, retried for ever).
    address_ids = addresses.lock(unit.conn, unit.store_id, addresses.ids_of_customer(unit.conn, unit.store_id,
                                                                                        customer_id))
    # NOTE: decisions §4.7 applies through the customer's addresses: no active subscriptions.
    if items.active_count(unit.conn, unit.store_id, customer_id=customer_id):
        raise ValidationFailed({"subscriptions": ["Customer has active subscriptions"]})
    # The addresses go with the customer, each with its event: deleted explicitly rather
    # than by the foreign-key cascade, so the events name exactly the rows removed.
    from ..address.service import forget
    forget(unit, address_ids, customer_id)
    for address_id in addresses.delete_of_customer(unit.conn, unit.store_id, customer_id):
        unit.record("address/deleted", address_id, {"id": address_id}, customer_id=customer_id)
    repository.delete_customer(unit.conn, unit.store_id, customer_id)
    unit.record("customer/deleted", customer_id, {"id": customer_id})
    metafields.forget(unit, customer=[customer_id])


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def count(unit: Unit, filters: dict[str, object]) -> int:
    return repository.count_where(unit.conn, unit.store_id, filters)
