"""Bundle selection use cases (spec 01 Bundle selections, decisions §6.6, §7.4, §7.7 item 8;
docs/api-choices.md, Bundles): the contents one purchase item (a subscription or a one-time
item) holds, which its next orders take. Field names are the head (2021-11) names.

- The bundle is found from the purchase item's own variant (422 when that is no bundle), on
  every write: a selection follows its item.
- A purchase item has one selection (422 for a second).
- In a dynamic bundle the item's price becomes what its contents cost (each item's price times
  its quantity), through the item's own update: `subscription/updated` (or `onetime/updated`)
  and its queued charges planned again.
- Changes record `bundle_selection/created|updated|deleted` (event log only), with the purchase
  item's customer.

Locks: every write takes the purchase item's address lock first (as every change of an item
does, ``subscription.service.locked``), so two writes for one item queue, and the bundle variant's
key share lock, so the bundle cannot be deleted under a new selection."""

from __future__ import annotations

from typing import Any

from rebill.errors import Conflict, NotFound, ValidationFailed

from ..billing.access import TIER_B, require_tier
from ..catalog import repository as catalog
from ..charge import repository as charges
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..store.model import Store
from ..subscription import onetimes
from ..subscription import repository as purchase_items
from ..subscription import service as subscriptions
from ..subscription.model import ACTIVE, SUBSCRIPTION, OnetimeUpdate, PurchaseItem, SubscriptionUpdate
from ..unit import Unit
from . import authorized, contents, repository
from .model import DYNAMIC, BundleSelection, BundleSelectionCreate, BundleSelectionUpdate, BundleVariant, ItemInput

ITEM = "purchase_item_id"


def require_access(store: Store) -> None:
    """NOTE: spec 01 and decisions §6.6, bundle selections need plan tier B (403 naming it)."""
    require_tier(store, TIER_B, "The bundle selections API")


def get(unit: Unit, selection_id: int) -> BundleSelection:
    found = repository.selection(unit.conn, unit.store_id, selection_id)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.selection_page(unit.conn, unit.store_id, query)


def _purchase_item(unit: Unit, item_id: int) -> PurchaseItem:
    """NOTE: decisions §1.1, another store's item is not found (a 422: the id is in the body)."""
    found = purchase_items.many(unit.conn, unit.store_id, [item_id]).get(item_id)
    if found is None:
        raise ValidationFailed.field(ITEM, "purchase item not found")
    return found


def _bundle_of(unit: Unit, item: PurchaseItem) -> BundleVariant:
    """NOTE: issue 15, the bundle is the one the item's variant is (422 when it is none)."""
    found = repository.variant_of(unit.conn, unit.store_id, item.external_product_id, item.external_variant_id,
                                  lock=True)
    if found is None:
        raise ValidationFailed.field(ITEM, f"the purchase item's variant {item.external_variant_id} is not a bundle")
    return found


def _check_open(item: PurchaseItem) -> None:
    """A one-time item charged is done (decisions §5.6): its order carries the contents it had,
    and none is to come, so its selection is not written again, whatever the bundle's price
    rule (found by an audit: a fixed bundle's selection of a processed item took new contents no
    order would carry; a dynamic one was refused through its price)."""
    if item.kind != SUBSCRIPTION and item.status != ACTIVE:
        raise ValidationFailed.field(ITEM, f"the one-time item is {item.status}: it was charged and is done")


def _free(unit: Unit, item_id: int) -> None:
    taken = repository.selection_of_item(unit.conn, unit.store_id, item_id)
    if taken is not None:
        raise ValidationFailed.field(ITEM, f"already has a bundle selection ({taken}); update that one")


def _current_plan(unit: Unit, selection: BundleSelection, variant: BundleVariant) -> Any:
    """The plan the selection was priced with, if it still applies to its bundle's variant."""
    if selection.plan_id is None:
        return None
    return contents.fitting_plan(catalog.plan(unit.conn, unit.store_id, selection.plan_id), variant)


def _priced(unit: Unit, item: PurchaseItem, variant: BundleVariant, rows: list[dict[str, Any]]) -> None:
    """NOTE: decisions §7.7 item 8, a dynamic bundle costs what its contents cost."""
    if variant.price_rule != DYNAMIC:
        return
    price = contents.total(rows)
    waiting = charges.authorized_holding(unit.conn, unit.store_id, item.id) if price != item.price else None
    if waiting is not None:
        # The capture makes the charge's order, with the contents the selection then holds, for
        # the money authorized: new contents at another price would be delivered for the old
        # one (found by an audit). A fixed bundle's price does not move with its contents.
        raise ValidationFailed.field(ITEM, f"its charge {waiting} is authorized for the contents' present price "
                                           "and waits for its capture: change the contents once it is captured")
    try:
        if item.kind == SUBSCRIPTION:
            subscriptions.update(unit, item.id, SubscriptionUpdate(price=price))
        else:
            onetimes.update(unit, item.id, OnetimeUpdate(price=price))
    except ValidationFailed as exc:
        # The item refuses a new price (a one-time item already charged, one whose charge waits
        # for its retry): named by the field the caller sent, not the `price` it did not
        # (found by an audit).
        said = exc.errors.values() if isinstance(exc.errors, dict) else [exc.errors]
        raise ValidationFailed({ITEM: [m for v in said for m in (v if isinstance(v, list) else [str(v)])]}) from exc


def _record(unit: Unit, topic: str, selection_id: int, item: PurchaseItem, **kw: Any) -> None:
    unit.record(topic, selection_id, customer_id=item.customer_id, **kw)


def create(unit: Unit, command: BundleSelectionCreate) -> BundleSelection:
    item = _purchase_item(unit, command.purchase_item_id)
    try:
        item = subscriptions.locked(unit, item.id, item.kind)
    except NotFound:
        # Deleted by a concurrent request since it was read: what a body naming it then gets
        # (found by an audit: a 404, as if the path were unknown).
        raise ValidationFailed.field(ITEM, "purchase item not found") from None
    _check_open(item)
    _free(unit, item.id)
    variant = _bundle_of(unit, item)
    plan = contents.plan_for(unit, variant, command.plan_id)
    rows = contents.checked(unit, variant, command.items, plan, item.presentment_currency)
    selection_id = repository.insert_selection(unit.conn, {
        "store_id": unit.store_id, "purchase_item_id": item.id, "bundle_variant_id": variant.id,
        "external_product_id": variant.external_product_id, "external_variant_id": variant.external_variant_id,
        "plan_id": command.plan_id, "created_at": unit.now, "updated_at": unit.now})
    repository.insert_items(unit.conn, [_item_row(unit, selection_id, row) for row in rows])
    _record(unit, "bundle_selection/created", selection_id, item)
    _priced(unit, item, variant, rows)
    return get(unit, selection_id)


def _item_row(unit: Unit, selection_id: int, row: dict[str, Any]) -> dict[str, Any]:
    return {"store_id": unit.store_id, "bundle_selection_id": selection_id, **row, "created_at": unit.now,
            "updated_at": unit.now}


def _as_input(selection: BundleSelection) -> list[ItemInput]:
    return [ItemInput(collection_id=i.collection_id, collection_source=i.collection_source,
                      external_product_id=i.external_product_id, external_variant_id=i.external_variant_id,
                      quantity=i.quantity) for i in selection.items]


def _replace_items(unit: Unit, selection: BundleSelection, rows: list[dict[str, Any]]) -> bool:
    """The selection's items become ``rows``: an item chosen again (same collection, product and
    variant) keeps its id and `created_at`; returns whether anything changed."""
    stored = {(i.collection_id, i.external_product_id, i.external_variant_id): i for i in selection.items}
    fresh, changed = [], False
    for row in rows:
        current = stored.pop((row["collection_id"], row["external_product_id"], row["external_variant_id"]), None)
        if current is None:
            fresh.append(_item_row(unit, selection.id, row))
            continue
        values = {k: v for k, v in row.items() if getattr(current, k) != v}
        if values:
            repository.update_item(unit.conn, current.id, {**values, "updated_at": unit.now})
            changed = True
    repository.delete_items(unit.conn, unit.store_id, [i.id for i in stored.values()])
    repository.insert_items(unit.conn, fresh)
    return changed or bool(fresh) or bool(stored)


def _holder(unit: Unit, selection: BundleSelection) -> PurchaseItem:
    """The purchase item a selection belongs to (a selection goes with its item)."""
    found = purchase_items.many(unit.conn, unit.store_id, [selection.purchase_item_id]).get(selection.purchase_item_id)
    if found is None:
        raise NotFound()
    return found


def _relocked(unit: Unit, selection_id: int, item_id: int) -> BundleSelection:
    """The selection read again under its row lock, once its item's address is locked; one
    moved to another item meanwhile answers 409 (the lock taken was not its item's)."""
    found = repository.selection(unit.conn, unit.store_id, selection_id, lock=True)
    if found is None:
        raise NotFound()
    if found.purchase_item_id != item_id:
        raise Conflict("The bundle selection moved to another purchase item meanwhile; try again")
    return found


def update(unit: Unit, selection_id: int, command: BundleSelectionUpdate) -> BundleSelection:
    changes = command.changes()
    current = get(unit, selection_id)
    target = _purchase_item(unit, changes.get(ITEM, current.purchase_item_id))
    held = _holder(unit, current)
    # Both items' addresses, in id order (a selection moving to another item changes both).
    subscriptions.locked(unit, held.id, held.kind, also=target.address_id)
    target = _purchase_item(unit, target.id)
    current = _relocked(unit, selection_id, held.id)
    _check_open(held)
    _check_open(target)
    if target.id != current.purchase_item_id:
        _free(unit, target.id)
        authorized.keep_contents(unit, held.id, ITEM, "move the contents")
    variant = _bundle_of(unit, target)
    plan = contents.plan_for(unit, variant, changes["plan_id"]) if "plan_id" in changes else \
        _current_plan(unit, current, variant)
    given = changes["items"] if "items" in changes else _as_input(current)
    rows = contents.checked(unit, variant, given, plan, target.presentment_currency)
    values = {"purchase_item_id": target.id, "bundle_variant_id": variant.id,
              "external_product_id": variant.external_product_id, "external_variant_id": variant.external_variant_id,
              "plan_id": plan.id if plan is not None else None}
    values = {k: v for k, v in values.items() if getattr(current, k) != v}
    changed = list(values)
    if _replace_items(unit, current, rows):
        changed.append("items")
    if changed:
        repository.update_selection(unit.conn, unit.store_id, selection_id, {**values, "updated_at": unit.now})
        _record(unit, "bundle_selection/updated", selection_id, target, changed=attributes.names(changed))
    _priced(unit, target, variant, rows)
    return get(unit, selection_id)


def delete(unit: Unit, selection_id: int) -> None:
    """The item keeps its price; its next orders carry no contents."""
    held = _holder(unit, get(unit, selection_id))
    subscriptions.locked(unit, held.id, held.kind)
    _relocked(unit, selection_id, held.id)
    authorized.keep_contents(unit, held.id, ITEM, "delete the bundle selection")
    repository.delete_selection(unit.conn, unit.store_id, selection_id)
    _record(unit, "bundle_selection/deleted", selection_id, held, data={"id": selection_id})
