"""Discount use cases (spec 02 Discounts and Discount status, decisions §7.1, §7.5). Field
names are the stored (2021-01) names; the 2021-11 contract maps its nested ones onto them."""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import msgspec
from sqlalchemy.exc import IntegrityError

from rebill.errors import NotFound, ValidationFailed, add_error

from ..address import repository as addresses
from ..charge import errored
from ..charge.model import ERROR, QUEUED
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..money import PERCENT_PLACES, decimal_places, places_problem
from ..schedule.reconcile import replan
from ..unit import Unit
from . import repository
from .inputs import collection_of
from .model import (
    APPLIES_TO_ID_LENGTH,
    CODE_LENGTH,
    DISABLED,
    DURATIONS,
    ENABLED,
    FIRST_TIME,
    FULLY_DISABLED,
    PRODUCT_TYPES,
    RESOURCES,
    TYPES,
    USAGE_LIMIT,
    Discount,
    DiscountCreate,
    DiscountUpdate,
    channels,
    code_key,
    ended,
)

# Stored columns the head (2021-11) discount names otherwise (its nested `usage_limits`): the
# names of an update's `updated_attributes`.
API_NAMES = {"usage_limit": "usage_limits"}

# NOTE: spec 02 Discount status table: the transitions an update may make.
TRANSITIONS = {ENABLED: {DISABLED, FULLY_DISABLED}, DISABLED: {ENABLED, FULLY_DISABLED}, FULLY_DISABLED: {ENABLED}}


def _shown(unit: Unit, row: Any) -> Discount:
    return Discount.from_row(row, unit.store.currency, unit.now)


def get(unit: Unit, discount_id: int) -> Discount:
    row = repository.get(unit.conn, unit.store_id, discount_id)
    if row is None:
        raise NotFound()
    return _shown(unit, row)


def _filters(unit: Unit, filters: dict[str, Any]) -> dict[str, Any]:
    if "status" in filters:
        return {**filters, "status": (filters["status"], unit.now)}
    return filters


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    query = replace(query, filters=_filters(unit, query.filters))
    names = repository.COLUMNS
    return repository.page(unit.conn, unit.store_id, query,
                           lambda *row: _shown(unit, SimpleNamespace(**dict(zip(names, row)))))


def count(unit: Unit, filters: dict[str, Any]) -> int:
    return repository.count_where(unit.conn, unit.store_id, _filters(unit, filters))


# The integer columns are 32-bit: a larger count would fail in the database (a 500), not a 422.
MAX_COUNT = 2**31 - 1


def _check_count(errors: dict[str, list[str]], name: str, value: int | None) -> None:
    if value is None:
        return
    if value < 1:
        add_error(errors, name, "must be at least 1")
    elif value > MAX_COUNT:
        add_error(errors, name, f"must be at most {MAX_COUNT}")


def _check(unit: Unit, values: dict[str, Any], errors: dict[str, list[str]] | None = None) -> None:
    """Every problem at once (decisions §2.3), with those the caller found already."""
    errors = {} if errors is None else errors
    kind, value = values["discount_type"], values["value"]
    if kind not in TYPES:
        add_error(errors, "discount_type", f"must be one of: {', '.join(TYPES)}")
    elif kind == "fixed_amount":
        # NOTE: decisions §7.5, a fixed amount is in the store's currency, > 0, its minor digits.
        problem = places_problem(value, unit.store.currency)
        if value <= 0:
            add_error(errors, "value", "must be greater than 0")
        elif problem:
            add_error(errors, "value", problem)
    elif not 0 < value <= 100:
        add_error(errors, "value", "must be greater than 0 and at most 100 for a percentage")
    elif decimal_places(value) > PERCENT_PLACES:
        # As a plan's discount (decisions §5.8); found by an audit: 45 digits overflowed the
        # column on PostgreSQL (a 500) and `0.0000001` came back as `1E-7`.
        add_error(errors, "value", f"has too many decimal places (at most {PERCENT_PLACES})")
    if values["duration"] not in DURATIONS:
        add_error(errors, "duration", f"must be one of: {', '.join(DURATIONS)}")
    elif values["duration"] == USAGE_LIMIT:
        if values["duration_usage_limit"] is None:
            add_error(errors, "duration_usage_limit", "is required when duration is usage_limit")
        _check_count(errors, "duration_usage_limit", values["duration_usage_limit"])
    elif values["duration_usage_limit"] is not None:
        add_error(errors, "duration_usage_limit", "applies only when duration is usage_limit")
    _check_count(errors, "usage_limit", values["usage_limit"])
    if values["applies_to_id"] is not None and len(values["applies_to_id"]) > APPLIES_TO_ID_LENGTH:
        add_error(errors, "applies_to_id", f"is too long (at most {APPLIES_TO_ID_LENGTH} characters)")
    if values["applies_to_product_type"] not in PRODUCT_TYPES:
        add_error(errors, "applies_to_product_type", f"must be one of: {', '.join(PRODUCT_TYPES)}")
    if values["applies_to_resource"] is not None and values["applies_to_resource"] not in RESOURCES:
        add_error(errors, "applies_to_resource", f"must be one of: {', '.join(RESOURCES)}")
    if values["applies_to_resource"] is not None and values["applies_to_id"] is None:
        add_error(errors, "applies_to_id", "is required with applies_to_resource")
    if values["first_time_customer_restriction"] not in (None, FIRST_TIME):
        add_error(errors, "first_time_customer_restriction", f"must be null or {FIRST_TIME}")
    minimum = values["prerequisite_subtotal_min"]
    if minimum is not None and minimum < 0:
        add_error(errors, "prerequisite_subtotal_min", "must not be negative")
    elif minimum is not None and (problem := places_problem(minimum, unit.store.currency)):
        # An amount of the store's currency (decisions §7.5, §2.7; found by an audit: 30.555
        # was kept).
        add_error(errors, "prerequisite_subtotal_min", problem)
    _check_window(values, errors)
    if errors:
        raise ValidationFailed(errors)


def _check_window(values: dict[str, Any], errors: dict[str, list[str]]) -> None:
    starts, ends = values.get("starts_at"), values.get("ends_at")
    if starts is not None and ends is not None and ends <= starts:
        add_error(errors, "ends_at", "must be after starts_at")


def _check_code(unit: Unit, code: str, errors: dict[str, list[str]]) -> str:
    code = unicodedata.normalize("NFC", code.strip())  # one form of each code (model.code_key)
    if not code:
        add_error(errors, "code", "cannot be blank")
    elif not code.isprintable():
        # Invisible characters (zero-width spaces, direction marks, controls): a code that looks
        # like another would be another (found by an audit), as e-mails refuse them.
        add_error(errors, "code", "must not contain invisible characters")
    elif len(code_key(code)) > CODE_LENGTH:
        # The case-insensitive key is the lower-cased code, which may be longer ('İ' -> 2).
        add_error(errors, "code", f"is too long (at most {CODE_LENGTH} characters)")
    elif repository.find(unit.conn, unit.store_id, code=code) is not None:
        # NOTE: decisions §7.5, unique per store, case-insensitively.
        add_error(errors, "code", "has already been taken")
    return code


def create(unit: Unit, command: DiscountCreate) -> Discount:
    values = msgspec.structs.asdict(command)
    errors: dict[str, list[str]] = {}
    values["code"] = _check_code(unit, command.code, errors)
    values["channel_settings"] = channels(values["channel_settings"])
    if values["applies_to_id"] is not None and values["applies_to_resource"] is None:
        values["applies_to_resource"] = "platform_product"
    if values["status"] not in (ENABLED, DISABLED):
        # NOTE: decisions §7.5, a discount may be created disabled (not fully disabled).
        add_error(errors, "status", "must be enabled or disabled")
    _check(unit, values, errors)
    values.update(store_id=unit.store_id, times_used=0, created_at=unit.now, updated_at=unit.now)
    try:
        discount_id = repository.insert_discount(unit.conn, values)
    except IntegrityError as exc:
        # A concurrent create of the same code (any case) won after our check passed; the
        # request ends here and its unit rolls back. Any other integrity failure stays a bug.
        if "uq_discounts_store_code_key" in str(exc.orig) or "discounts.code_key" in str(exc.orig):
            raise ValidationFailed.field("code", "has already been taken") from None
        raise
    unit.record("discount/created", discount_id)
    return get(unit, discount_id)


# A create's fields that an update does not change, by the name the create reads each under and
# the Discount attribute that shows it (spec 02 Discounts: PUT takes `channel_settings`,
# `ends_at`, `starts_at`, `status`, `usage_limit`).
_FIXED = {"code": "code", "discount_type": "value_type", "value": "value", "duration": "duration",
          "duration_usage_limit": "duration_usage_limit", "once_per_customer": "once_per_customer",
          "applies_to_id": "applies_to_id", "applies_to_resource": "applies_to_resource",
          "applies_to_product_type": "applies_to_product_type",
          "first_time_customer_restriction": "first_time_customer_restriction",
          "prerequisite_subtotal_min": "prerequisite_subtotal_min"}


def _same(name: str, sent: Any, shown: Any) -> bool:
    if name == "code":
        return isinstance(sent, str) and code_key(sent) == code_key(shown)
    if name in ("value", "prerequisite_subtotal_min"):
        return (sent is None) == (shown is None) and (sent is None or Decimal(str(sent)) == Decimal(str(shown)))
    return bool(sent == shown)


def _kept(current: Discount, fixed: dict[str, tuple[str, Any]], errors: dict[str, list[str]]) -> None:
    """What an update sent of the fields it does not change (by the create's name: the name it
    was sent under, the value): the discount's own (a GET body sent back) passes; another is
    refused (found by an audit: `{"value": "50"}` answered 200 and the code kept taking 10 %,
    the caller believing every holder's discount had changed)."""
    for name, (sent_as, value) in fixed.items():
        shown = _FIXED.get(name)
        if shown is not None and not _same(name, value, getattr(current, shown)):
            add_error(errors, sent_as, "cannot be changed once the discount is created")


def update(unit: Unit, discount_id: int, command: DiscountUpdate, *,
           fixed: dict[str, tuple[str, Any]] | None = None) -> Discount:
    if command.changes().get("status") == FULLY_DISABLED:
        # The addresses it will clear and replan first, then the discount's row: the order an
        # apply and the billing run take them in (PostgreSQL; else they deadlock).
        addresses.lock(unit.conn, unit.store_id, sorted(_touched(unit, discount_id)[1]))
    current = repository.get(unit.conn, unit.store_id, discount_id, lock=True)
    if current is None:
        raise NotFound()
    changes = command.changes()
    if "channel_settings" in changes:
        # Channels not sent keep their setting.
        changes["channel_settings"] = channels({**channels(current.channel_settings), **changes["channel_settings"]})
    errors: dict[str, list[str]] = {}
    _kept(_shown(unit, current), fixed or {}, errors)
    if "status" in changes and changes["status"] != current.status:
        if changes["status"] not in TRANSITIONS.get(current.status, set()):
            add_error(errors, "status", f"cannot change from {current.status} to {changes['status']}")
    ends_at = changes.get("ends_at", current.ends_at)
    if changes.get("status") == ENABLED and ended(SimpleNamespace(ends_at=ends_at), unit.now):
        # Stored `enabled`, shown `disabled` since its end passed (spec 02 Discount status): the
        # transition asked cannot happen while the end stays passed (found by an audit: a 200
        # that answered `disabled` and changed nothing).
        add_error(errors, "status", f"the discount ended at {ends_at.isoformat()}: send a later ends_at, or "
                                    "null, to enable it")
    _check_count(errors, "usage_limit", changes.get("usage_limit"))
    _check_window({"starts_at": changes.get("starts_at", current.starts_at), "ends_at": ends_at}, errors)
    if errors:
        raise ValidationFailed(errors)
    # Sending what is stored changes nothing: no event, same updated_at (decisions §7.5).
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    if not changes:
        return _shown(unit, current)
    changes["updated_at"] = unit.now
    repository.update_discount(unit.conn, unit.store_id, discount_id, changes)
    unit.record("discount/updated", discount_id, changed=attributes.names(changes, API_NAMES))
    if changes.get("status") == FULLY_DISABLED:
        fully_disable(unit, discount_id)
    return get(unit, discount_id)


def fully_disable(unit: Unit, discount_id: int) -> None:
    """NOTE: spec 02 Discount status, removed from every queued charge for good: from the
    addresses holding it, the charges it was applied to, and charges in retry (never from
    processed ones). Re-enabling later gives nothing back."""
    address_ids, touched = _touched(unit, discount_id)
    repository.clear_addresses(unit.conn, unit.store_id, discount_id, unit.now)
    unit.record_many("address/updated", address_ids, changed=dict.fromkeys(address_ids, ("discounts",)))
    repository.remove_charge_inputs_of(unit.conn, unit.store_id, discount_id)
    replan(unit, sorted(touched))
    # Cleared from the addresses and charge inputs above: the charges in retry are computed
    # again without it.
    errored.recompute(unit, repository.charges_holding(unit.conn, unit.store_id, discount_id, (ERROR,)))


def collections_changed(unit: Unit, collection_ids: list[int]) -> None:
    """The products of these collections changed (or the collections are gone): a code for one
    of them discounts other lines now (docs/api-choices.md, Discounts), so every address the
    code reaches is planned again, as a full disable would replan it."""
    changed = set(collection_ids)
    touched: set[int] = set()
    retrying: set[int] = set()
    for row in repository.for_collections(unit.conn, unit.store_id):
        if collection_of(row) in changed:
            touched |= _touched(unit, row.id)[1]
            retrying |= set(repository.charges_holding(unit.conn, unit.store_id, row.id, (ERROR,)))
    # Charges in retry with the code discount other lines now too.
    errored.follow(unit, touched, also=retrying)


def _touched(unit: Unit, discount_id: int) -> tuple[list[int], set[int]]:
    """The addresses holding the code, and every address a full disable replans."""
    address_ids = repository.addresses_holding(unit.conn, unit.store_id, discount_id)
    touched = set(address_ids) | set(repository.charge_inputs_holding(unit.conn, unit.store_id, discount_id))
    touched |= set(repository.addresses_of_charges(unit.conn, unit.store_id, discount_id, (QUEUED,)))
    return address_ids, touched


def delete(unit: Unit, discount_id: int) -> None:
    current = repository.get(unit.conn, unit.store_id, discount_id, lock=True)
    if current is None:
        raise NotFound()
    if current.status != FULLY_DISABLED:
        # NOTE: spec 02 Discounts, the status must first be set to fully_disabled.
        raise ValidationFailed.field("status", "must be fully_disabled before the discount is deleted")
    repository.delete_discount(unit.conn, unit.store_id, discount_id, code_key(current.code))
    unit.record("discount/deleted", discount_id, {"id": discount_id})
