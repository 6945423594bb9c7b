"""Payment method use cases (decisions §6.1, §6.12). Field names are the head (2021-11) names.

Every write locks the customer's row first (PostgreSQL ``FOR UPDATE``; SQLite serializes
writers anyway), so the writes of one customer's methods run one after the other and the
customer keeps exactly one default method while it has any (also a unique index, 0005).
"""

from __future__ import annotations

import msgspec

from rebill.errors import NotFound, ValidationFailed

from ..customer import repository as customers
from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository
from .model import (
    DEFAULT_PROCESSOR,
    PROCESSOR_FIELDS,
    UNVALIDATED,
    PaymentMethod,
    PaymentMethodCreate,
    PaymentMethodUpdate,
    PaymentSource,
)

# NOTE: spec 01 and 02 Events, payment methods have no topics of their own; a change to one
# is the customer's `customer/payment_method_updated` (resource: the customer).
TOPIC = "customer/payment_method_updated"
SHOWN_ADDRESSES = 10  # address ids named in the "in use" error


def get(unit: Unit, payment_method_id: int) -> PaymentMethod:
    found = repository.get(unit.conn, unit.store_id, payment_method_id)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def sources(unit: Unit, customer_id: int) -> list[PaymentSource]:
    """The 2021-01 payment sources of a customer: its methods, the default first, then by age."""
    customer = customers.get(unit.conn, unit.store_id, customer_id)
    if customer is None:
        raise NotFound()
    methods = repository.of_customers(unit.conn, unit.store_id, [customer_id])
    methods.sort(key=lambda m: (not m.is_default, m.id))
    return [PaymentSource(m, customer.has_payment_method_in_dunning) for m in methods]


def _locked(unit: Unit, payment_method_id: int) -> PaymentMethod:
    """The method, read again under its customer's lock and its own (it may have gone)."""
    current = get(unit, payment_method_id)
    customers.exists_in_store(unit.conn, unit.store_id, current.customer_id, lock="update")
    locked = repository.get(unit.conn, unit.store_id, payment_method_id, lock="update")
    if locked is None:
        raise NotFound()
    return locked


def _check_tokens(token: str | None, customer_token: str | None) -> None:
    # NOTE: decisions §6.12, a charge uses the method token, else the customer token.
    if token is None and customer_token is None:
        raise ValidationFailed.field("processor_payment_method_token", "is required")


def create(unit: Unit, command: PaymentMethodCreate) -> PaymentMethod:
    if not customers.exists_in_store(unit.conn, unit.store_id, command.customer_id, lock="update"):
        raise ValidationFailed.field("customer_id", "customer not found")
    _check_tokens(command.processor_payment_method_token, command.processor_customer_token)
    values = msgspec.structs.asdict(command)
    wanted = values.pop("default")
    # NOTE: decisions §6.12, a customer's first method becomes its default, whatever was
    # asked; `default: true` on a later one moves the default to it.
    first = not repository.has_any(unit.conn, unit.store_id, command.customer_id)
    if wanted and not first:
        repository.clear_default(unit.conn, unit.store_id, command.customer_id, unit.now)
    values.update(
        store_id=unit.store_id,
        is_default=first or bool(wanted),
        processor_name=command.processor_name or DEFAULT_PROCESSOR,
        # NOTE: decisions §6.12, creating always succeeds: the outcome shows at charge time.
        status=UNVALIDATED,
        status_reason=None,
        created_at=unit.now,
        updated_at=unit.now,
    )
    payment_method_id = repository.insert_payment_method(unit.conn, values)
    unit.record(TOPIC, command.customer_id)
    return get(unit, payment_method_id)


def update(unit: Unit, payment_method_id: int, command: PaymentMethodUpdate) -> PaymentMethod:
    current = _locked(unit, payment_method_id)
    changes = command.changes()
    if "default" in changes:
        wanted = changes.pop("default")
        if wanted and not current.is_default:
            changes["is_default"] = True
        elif wanted is False and current.is_default:
            # A customer with methods always has one default: it moves, it is not dropped.
            raise ValidationFailed.field("default", "cannot be unset; make another payment method the default")
    if "processor_name" in changes and changes["processor_name"] is None:
        changes["processor_name"] = DEFAULT_PROCESSOR
    _check_tokens(changes.get("processor_payment_method_token", current.processor_payment_method_token),
                  changes.get("processor_customer_token", current.processor_customer_token))
    # Sending what is already stored changes nothing: no event, same updated_at.
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    if any(name in changes for name in PROCESSOR_FIELDS):
        # Another instrument: its outcome is unknown until it is charged (decisions §6.12).
        changes.update(status=UNVALIDATED, status_reason=None)
    if changes:
        if changes.get("is_default"):
            repository.clear_default(unit.conn, unit.store_id, current.customer_id, unit.now)
        changes["updated_at"] = unit.now
        repository.update_payment_method(unit.conn, unit.store_id, payment_method_id, changes)
        unit.record(TOPIC, current.customer_id)
    return get(unit, payment_method_id)


def _in_use(address_ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in address_ids[:SHOWN_ADDRESSES])
    more = len(address_ids) - SHOWN_ADDRESSES
    noun = "address" if len(address_ids) == 1 else "addresses"
    return f"Payment method is used by {noun} {shown}" + (f" and {more} more" if more > 0 else "")


def delete(unit: Unit, payment_method_id: int) -> None:
    current = _locked(unit, payment_method_id)
    # NOTE: decisions §6.1, §6.12: only an explicit address reference blocks a delete; the
    # addresses paid with the default through no reference of their own follow the new default.
    used = repository.addresses_using(unit.conn, unit.store_id, payment_method_id)
    if used:
        raise ValidationFailed({"addresses": [_in_use(used)]})
    repository.delete_payment_method(unit.conn, unit.store_id, payment_method_id)
    if current.is_default:
        # The customer keeps a default while it has a method: the oldest remaining one
        # (docs/api-choices.md, Payment methods).
        heir = repository.oldest_of_customer(unit.conn, unit.store_id, current.customer_id)
        if heir is not None:
            repository.update_payment_method(unit.conn, unit.store_id, heir, {"is_default": True,
                                                                             "updated_at": unit.now})
    unit.record(TOPIC, current.customer_id)

