"""Plan use cases (spec 01 Plans, decisions §5.8): create, update, delete, list, and the bulk
create and update, all or nothing. Field names are the head (2021-11) names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from rebill.errors import Conflict, NotFound, ValidationFailed

from ..event import attributes
from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository
from .derived import Derived, changes_between, derive
from .model import Plan, PlanCreate, PlanUpdate, Product
from .rules import checked_plan, merge_channels
from .service import get_plan

# NOTE: decisions §5.8 (choice), at most 20 plans per bulk request.
BULK_LIMIT = 20
STORED = ("title", "type", "discount_amount", "discount_type", "channel_settings", "sort_order",
          "subscription_preferences", "external_variant_ids")


class _Products:
    """The products plans of one request point at, read once each and locked for update, so
    none is deleted before the plans written for it commit, and their `updated_at` can be
    written at the end (two writers upgrading a shared lock on one product would deadlock)."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.found: dict[str, Product | None] = {}

    def hold(self, external_product_id: str) -> Product | None:
        if external_product_id not in self.found:
            self.found[external_product_id] = repository.product_by_external_id(
                self.unit.conn, self.unit.store_id, external_product_id, lock="update")
        return self.found[external_product_id]

    def get(self, external_product_id: str) -> Product:
        product = self.hold(external_product_id)
        if product is None:
            raise ValidationFailed.field("external_product_id", "product not found")
        return product


def _held_plans(unit: Unit, products_: _Products, plan_ids: list[int]) -> dict[int, Plan]:
    """The plans an update changes, read once their products are locked: every plan writer
    locks the product first, so what is read then is what the writers before left (found by an
    audit on PostgreSQL: two updates of one plan, each checked against the plan as it was
    before the other, made a prepaid plan of frequencies 2 and 2 that no write could pass).
    Products in the order of their external ids, so that two bulk updates do not lock them
    crosswise. A plan moved to another product meanwhile answers 409."""
    before = repository.plans_by_id(unit.conn, unit.store_id, plan_ids)
    for external_product_id in sorted({plan.external_product_id for plan in before.values()}):
        products_.hold(external_product_id)
    after = repository.plans_by_id(unit.conn, unit.store_id, plan_ids)
    if any(plan.product_id != before[plan_id].product_id for plan_id, plan in after.items()):
        raise Conflict("A plan moved to another product meanwhile; try again")
    return after


def _checked(unit: Unit, products_: _Products, values: dict[str, Any], current: Plan | None = None) -> dict[str, Any]:
    """The stored row of a complete plan; errors of the product and of the plan together.
    ``current``: the plan an update changes. The variants it is restricted to stay valid while
    it stays on its product, even those a product update has removed since: they are the plan's
    own record (they restrict it to no variant now), and an update that does not touch them, or
    sends them back unchanged, is not refused for them."""
    try:
        product: Product | None = products_.get(values["external_product_id"])
    except ValidationFailed as exc:
        missing: dict[str, Any] = exc.errors  # type: ignore[assignment]
        product = None
    else:
        missing = {}
    try:
        kept = (current.external_variant_ids
                if current is not None and product is not None and product.id == current.product_id else ())
        clean = checked_plan(values, product, unit.store.currency, kept=kept)
    except ValidationFailed as exc:
        raise ValidationFailed({**exc.errors, **missing}) from None  # type: ignore[dict-item]
    if product is None:
        raise ValidationFailed(missing)
    clean["product_id"] = product.id
    clean["external_product_id"] = product.external_product_id
    return clean


def insert_plan(unit: Unit, values: dict[str, Any]) -> int:
    plan_id = repository.insert_plan(unit.conn, {**values, "store_id": unit.store_id,
                                                 "created_at": unit.now, "updated_at": unit.now})
    unit.record("plan/created", plan_id)
    return plan_id


# The plan's columns the head (2021-11) plan does not show: its product is shown by
# `external_product_id`, which changes with it.
API_NAMES: dict[str, str | None] = {"product_id": None}


def write_changes(unit: Unit, current: Plan, values: dict[str, Any]) -> bool:
    """Store what differs from ``current``; records ``plan/updated`` when something did."""
    changes = {k: v for k, v in values.items() if getattr(current, k) != v}
    if not changes:
        return False
    changes["updated_at"] = unit.now
    repository.update_plan(unit.conn, unit.store_id, current.id, changes)
    unit.record("plan/updated", current.id, changed=attributes.names(changes, API_NAMES))
    return True


def _create_values(command: PlanCreate) -> dict[str, Any]:
    return msgspec.structs.asdict(command)


def _merged(current: Plan, changes: dict[str, Any]) -> dict[str, Any]:
    """The plan after ``changes``: preferences and channels merge key by key; a plan that
    becomes onetime drops the preferences it had, unless new ones are sent (and refused)."""
    merged = {name: getattr(current, name) for name in (*STORED, "external_product_id")}
    merged.update({k: v for k, v in changes.items() if k not in ("id", "subscription_preferences",
                                                                 "channel_settings")})
    if "subscription_preferences" in changes:
        given = changes["subscription_preferences"]
        merged["subscription_preferences"] = None if given is None else {**(current.subscription_preferences or {}),
                                                                           **given}
    elif (merged["type"] or "").lower() == "onetime":
        merged["subscription_preferences"] = None
    if "channel_settings" in changes:
        given = changes["channel_settings"]
        # null puts every channel back to its default (shown).
        merged["channel_settings"] = merge_channels(None if given is None else current.channel_settings, given)
    if merged.get("external_variant_ids") is None:
        merged["external_variant_ids"] = []
    return merged


def _shown(unit: Unit, product_ids: Iterable[int]) -> dict[int, Derived]:
    """What each product shows of its plans in 2021-01 (derived.py ``derive``)."""
    found = repository.plans_of_products(unit.conn, unit.store_id, sorted(set(product_ids)))
    return {product_id: derive(product_plans) for product_id, product_plans in found.items()}


def _products_changed(unit: Unit, products: Iterable[tuple[int, str]], before: dict[int, Derived]) -> None:
    """NOTE: spec 02 Events, `product/updated`: a 2021-01 product shows its plans (its
    `subscription_defaults` and discount, api/v2021_01/catalog.py), so a plan written through
    the 2021-11 plan endpoints changes it, as the 2021-01 product endpoints' plan writes do, and
    its `updated_at` moves (found by an audit: an `updated_at_min` sync of 2021-01 products
    missed the change). ``before``: what each showed before the write (``_shown``); a product
    whose view the write changed records the event naming the fields that changed (found by an
    audit: it named none), one whose view stayed the same none. The plan writers hold their
    products locked for update (_Products)."""
    names = dict(sorted(set(products)))
    after = _shown(unit, names)
    changed = {product_id: changes_between(before.get(product_id), view) for product_id, view in after.items()}
    changed = {product_id: fields for product_id, fields in changed.items() if fields}
    repository.touch_products(unit.conn, unit.store_id, sorted(changed), unit.now)
    for product_id, fields in sorted(changed.items()):
        unit.record("product/updated", product_id, {"external_product_id": names[product_id]}, changed=fields)


def create(unit: Unit, command: PlanCreate) -> Plan:
    clean = _checked(unit, _Products(unit), _create_values(command))
    before = _shown(unit, [clean["product_id"]])
    plan_id = insert_plan(unit, clean)
    _products_changed(unit, [(clean["product_id"], clean["external_product_id"])], before)
    return get_plan(unit, plan_id)


def update(unit: Unit, plan_id: int, command: PlanUpdate) -> Plan:
    products_ = _Products(unit)
    current = _held_plans(unit, products_, [plan_id]).get(plan_id)
    if current is None:
        raise NotFound()
    clean = _checked(unit, products_, _merged(current, command.changes()), current)
    before = _shown(unit, [current.product_id, clean["product_id"]])
    if write_changes(unit, current, clean):
        _products_changed(unit, [(current.product_id, current.external_product_id),
                                 (clean["product_id"], clean["external_product_id"])], before)
    return get_plan(unit, plan_id)


def delete(unit: Unit, plan_id: int) -> None:
    # NOTE: decisions §5.16, deleting a plan removes it (404 afterwards).
    current = repository.plan(unit.conn, unit.store_id, plan_id)
    before = _shown(unit, [current.product_id]) if current is not None else {}
    if current is None or not repository.delete_plans(unit.conn, unit.store_id, [plan_id]):
        raise NotFound()  # unknown, another store's, or deleted by a concurrent request
    unit.record("plan/deleted", plan_id, {"id": plan_id})
    _products_changed(unit, [(current.product_id, current.external_product_id)], before)


def _bulk_size(count: int) -> None:
    if count == 0:
        raise ValidationFailed.field("plans", "cannot be empty")
    if count > BULK_LIMIT:
        raise ValidationFailed.field("plans", f"has too many items (at most {BULK_LIMIT})")


def bulk_create(unit: Unit, commands: list[PlanCreate]) -> list[Plan]:
    """All or nothing: every item is checked first, errors keyed by the item's index."""
    _bulk_size(len(commands))
    found = _Products(unit)
    rows: list[dict[str, Any]] = []
    errors: dict[str, Any] = {}
    for index, command in enumerate(commands):
        try:
            rows.append(_checked(unit, found, _create_values(command)))
        except ValidationFailed as exc:
            errors[str(index)] = exc.errors
    if errors:
        raise ValidationFailed({"plans": errors})
    before = _shown(unit, [row["product_id"] for row in rows])
    ids = [insert_plan(unit, row) for row in rows]
    _products_changed(unit, [(row["product_id"], row["external_product_id"]) for row in rows], before)
    made = repository.plans_by_id(unit.conn, unit.store_id, ids)
    return [made[plan_id] for plan_id in ids]


def bulk_update(unit: Unit, commands: list[PlanUpdate]) -> list[Plan]:
    """All or nothing; each item names its plan by ``id`` (once per request)."""
    _bulk_size(len(commands))
    wanted = [c.id for c in commands if isinstance(c.id, int)]
    found = _Products(unit)
    current = _held_plans(unit, found, wanted)
    checked: list[tuple[Plan, dict[str, Any]]] = []
    errors: dict[str, Any] = {}
    seen: set[int] = set()
    for index, command in enumerate(commands):
        plan = current.get(command.id) if isinstance(command.id, int) else None
        if not isinstance(command.id, int):
            errors[str(index)] = {"id": ["is required"]}
        elif plan is None:
            errors[str(index)] = {"id": ["plan not found"]}
        elif command.id in seen:
            errors[str(index)] = {"id": ["is duplicated in this request"]}
        else:
            seen.add(command.id)
            try:
                checked.append((plan, _checked(unit, found, _merged(plan, command.changes()), plan)))
            except ValidationFailed as exc:
                errors[str(index)] = exc.errors
    if errors:
        raise ValidationFailed({"plans": errors})
    before = _shown(unit, [i for plan, values in checked for i in (plan.product_id, values["product_id"])])
    changed = [(plan, values) for plan, values in checked if write_changes(unit, plan, values)]
    _products_changed(unit, [pair for plan, values in changed for pair in (
        (plan.product_id, plan.external_product_id), (values["product_id"], values["external_product_id"]))], before)
    after = repository.plans_by_id(unit.conn, unit.store_id, [plan.id for plan, _ in checked])
    # A plan deleted by a concurrent request since it was read: the whole request is refused and
    # rolled back, as for a plan unknown from the start (found by an audit: a KeyError, a 500).
    # Nothing failed the checks above, so the i-th plan checked is the i-th of the request.
    gone = {str(index): {"id": ["plan not found"]} for index, (plan, _) in enumerate(checked) if plan.id not in after}
    if gone:
        raise ValidationFailed({"plans": gone})
    return [after[plan.id] for plan, _ in checked]


def bulk_delete(unit: Unit, plan_ids: list[int | None]) -> None:
    """All or nothing; each item names its plan by ``id`` (once per request). The bulk delete
    of an async batch (`bulk_plans_delete`); there is no such endpoint (docs/api-choices.md)."""
    _bulk_size(len(plan_ids))
    found = repository.plans_by_id(unit.conn, unit.store_id, [i for i in plan_ids if isinstance(i, int)])
    errors: dict[str, Any] = {}
    wanted: list[int] = []
    for index, plan_id in enumerate(plan_ids):
        if not isinstance(plan_id, int):
            errors[str(index)] = {"id": ["is required"]}
        elif plan_id not in found:
            errors[str(index)] = {"id": ["plan not found"]}
        elif plan_id in wanted:
            errors[str(index)] = {"id": ["is duplicated in this request"]}
        else:
            wanted.append(plan_id)
    if errors:
        raise ValidationFailed({"plans": errors})
    before = _shown(unit, [found[i].product_id for i in wanted])
    if len(repository.delete_plans(unit.conn, unit.store_id, wanted)) != len(wanted):
        raise NotFound()  # deleted by a concurrent request meanwhile
    for plan_id in wanted:
        unit.record("plan/deleted", plan_id, {"id": plan_id})
    _products_changed(unit, [(found[i].product_id, found[i].external_product_id) for i in wanted], before)


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.plan_page(unit.conn, unit.store_id, query)
