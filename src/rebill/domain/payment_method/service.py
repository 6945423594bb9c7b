"""Payment method use cases (decisions §6.1, §6.12). Field names are the head (2021-11) names.

Every write locks the customer's row first (PostgreSQL ``FOR UPDATE``; SQLite serializes
writers anyway), so the writes of one customer's methods run one after the other and the
customer keeps exactly one default method while it has any (also a unique index, 0005).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from rebill.errors import NotFound, ValidationFailed, add_error

from ..customer import repository as customers
from ..listing import ListQuery, PageResult
from ..payment import processors
from ..unit import Unit
from . import repository
from .model import (
    CUSTOMER_TOKEN_TYPES,
    DEFAULT_PROCESSOR,
    PROCESSOR_FIELDS,
    UNVALIDATED,
    PaymentMethod,
    PaymentMethodCreate,
    PaymentMethodUpdate,
    PaymentSource,
    card_data_problem,
)

# NOTE: spec 01 and 02 Events, payment methods have no topics of their own; a change to one
# is the customer's `customer/payment_method_updated` (resource: the customer).
TOPIC = "customer/payment_method_updated"
SHOWN_ADDRESSES = 10  # address ids named in the "in use" error
STRIPE_STORE = ("cannot be set on the customer of a store whose payments go through Stripe: add a payment "
                "method with its Stripe customer and payment method (POST /payment_methods, 2021-11)")


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
    payment_method_id = _insert(unit, command)
    unit.record(TOPIC, command.customer_id)
    return get(unit, payment_method_id)


# The documents of a method whose fields all may be null: a field sent null is the field not
# given, as a GET shows every field of them, null when not given (api/v2021_11/payment_methods).
DOCUMENTS = ("billing_address", "payment_details")


def _compact(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """A document as stored: its fields with a value, or None when it has none. So a method
    sent back as shown is no change (found by a check of this session's audits: the shown
    nulls of `billing_address` and `payment_details` recorded an update)."""
    kept = {k: v for k, v in (document or {}).items() if v is not None}
    return kept or None


def _insert(unit: Unit, command: PaymentMethodCreate) -> int:
    """The new method's row, under its customer's lock (taken by the caller)."""
    values = msgspec.structs.asdict(command)
    for name in DOCUMENTS:
        values[name] = _compact(values[name])
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
    return repository.insert_payment_method(unit.conn, values)


def update(unit: Unit, payment_method_id: int, command: PaymentMethodUpdate) -> PaymentMethod:
    current = _locked(unit, payment_method_id)
    if _change(unit, current, command):
        unit.record(TOPIC, current.customer_id)
    return get(unit, payment_method_id)


def _change(unit: Unit, current: PaymentMethod, command: PaymentMethodUpdate) -> bool:
    """Writes what ``command`` changes of ``current`` (read under its customer's lock); whether
    anything changed."""
    changes = command.changes()
    for name in DOCUMENTS:
        if name in changes:
            changes[name] = _compact(changes[name])
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
    changes = {k: v for k, v in changes.items()
               if (_compact(getattr(current, k)) if k in DOCUMENTS else getattr(current, k)) != v}
    if any(name in changes for name in PROCESSOR_FIELDS):
        # Another instrument: its outcome is unknown until it is charged (decisions §6.12).
        changes.update(status=UNVALIDATED, status_reason=None)
    if not changes:
        return False
    if changes.get("is_default"):
        repository.clear_default(unit.conn, unit.store_id, current.customer_id, unit.now)
    changes["updated_at"] = unit.now
    repository.update_payment_method(unit.conn, unit.store_id, current.id, changes)
    return True


def _of_processor(methods: list[PaymentMethod], processor: str) -> PaymentMethod | None:
    """The method that holds ``processor``'s customer token: the default when it is that
    processor's (the one the 2021-01 customer shows), else the oldest of that processor."""
    mine = [m for m in methods if m.processor_name.lower() == processor]
    if not mine:
        return None
    return next((m for m in mine if m.is_default), None) or min(mine, key=lambda m: (m.created_at, m.id))


def put_customer_tokens(unit: Unit, customer_id: int, tokens: Mapping[str, str], *,
                        authorize: Callable[[], None] | None = None) -> bool:
    """NOTE: spec 02 Customers, the deprecated 2021-01 customer token fields; ``tokens`` maps a
    processor of ``CUSTOMER_TOKEN_TYPES`` to its customer token (docs/api-choices.md, Customers).

    Processor tokens live on payment methods (decisions §6.1): each token is kept on the
    customer's method of that processor (``_of_processor``), changed as `PUT /payment_methods/{id}`
    with that `processor_customer_token` changes it (`unvalidated` again, its other fields kept);
    without one, a new `unvalidated` method of that processor with the token alone, which is the
    default when it is the customer's first (decisions §6.12). A token the method already holds
    changes nothing. ``authorize`` runs before the first write and may refuse it: spec 02 asks a
    write permission on payments "only when payment token data is created or changed". A store
    whose payments go through Stripe takes methods only with Stripe's check (issue 16), so there a
    token that would be written answers 422. Several are written in the order of
    ``CUSTOMER_TOKEN_TYPES`` (on a customer without methods the first is the default), with one
    `customer/payment_method_updated` for the call. Returns whether anything was written."""
    unknown = set(tokens) - set(CUSTOMER_TOKEN_TYPES)
    if unknown:
        raise ValueError(f"no customer token field for {', '.join(sorted(unknown))}")
    tokens = {processor: tokens[processor] for processor in CUSTOMER_TOKEN_TYPES if processor in tokens}
    errors: dict[str, Any] = {}
    for processor, token in tokens.items():
        problem = "cannot be blank" if not token.strip() else card_data_problem(token)
        if problem:
            add_error(errors, f"{processor}_customer_token", problem)
    if errors:
        raise ValidationFailed(errors)
    if not customers.exists_in_store(unit.conn, unit.store_id, customer_id, lock="update"):
        raise NotFound()
    methods = repository.of_customers(unit.conn, unit.store_id, [customer_id])
    writes = [(processor, token, _of_processor(methods, processor)) for processor, token in tokens.items()]
    writes = [(p, token, method) for p, token, method in writes
              if method is None or method.processor_customer_token != token]
    if not writes:
        return False
    if authorize is not None:
        authorize()
    if processors.processor_of(unit.conn, unit.store_id) == processors.STRIPE:
        raise ValidationFailed({f"{p}_customer_token": [STRIPE_STORE] for p, _, _ in writes})
    for processor, token, method in writes:
        if method is None:
            _insert(unit, PaymentMethodCreate(customer_id=customer_id, payment_type=CUSTOMER_TOKEN_TYPES[processor],
                                              processor_name=processor, processor_customer_token=token))
        else:
            _change(unit, method, PaymentMethodUpdate(processor_customer_token=token))
    unit.record(TOPIC, customer_id)
    return True


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

