"""Collection use cases (issue 15; docs/api-choices.md, Collections). Field names are the head
(2021-11) names; 2021-01 reads collections only.

Changes record `collection/created|updated|deleted`, event log only (no webhook topic in
spec 01/02). A change of a collection's products is a `collection/updated` whose changed
attribute is `collection_products`; it also plans again the queued charges of every address
holding a discount code for the collection (``discount.service.collections_changed``), since
such a code discounts the lines of the collection's products.

Locks (PostgreSQL; SQLite serializes writers): a change of a collection's products takes the
products' key share locks first, then the collection's update lock, then (through the replan)
addresses; a product delete takes the product's update lock, then the collections it leaves:
the same order, so neither waits for the other in a cycle."""

from __future__ import annotations

from typing import Any

import msgspec

from rebill.errors import NotFound, ValidationFailed

from ..bundle import variants as bundle_variants
from ..discount import service as discounts
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository
from .model import Collection, CollectionCreate, CollectionProduct, CollectionUpdate

PRODUCTS = "collection_products"


def get(unit: Unit, collection_id: int) -> Collection:
    found = repository.get(unit.conn, unit.store_id, collection_id)
    if found is None:
        raise NotFound()
    return found


def _locked(unit: Unit, collection_id: int) -> Collection:
    found = repository.get(unit.conn, unit.store_id, collection_id, lock=True)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.page(unit.conn, unit.store_id, query)


def create(unit: Unit, command: CollectionCreate) -> Collection:
    values = msgspec.structs.asdict(command)
    values.update(store_id=unit.store_id, description=command.description or "", created_at=unit.now,
                  updated_at=unit.now)
    collection_id = repository.insert_collection(unit.conn, values)
    unit.record("collection/created", collection_id)
    return get(unit, collection_id)


def update(unit: Unit, collection_id: int, command: CollectionUpdate) -> Collection:
    current = _locked(unit, collection_id)
    changes = command.changes()
    if "description" in changes:
        changes["description"] = changes["description"] or ""
    # Sending what is stored changes nothing: no event, same updated_at.
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    if not changes:
        return current
    changes["updated_at"] = unit.now
    repository.update_collection(unit.conn, unit.store_id, collection_id, changes)
    unit.record("collection/updated", collection_id, changed=attributes.names(changes))
    return get(unit, collection_id)


def delete(unit: Unit, collection_id: int) -> None:
    """Its products leave it with it; codes for it match no line any more. A collection a
    bundle variant names cannot go (422; docs/api-choices.md, Bundles)."""
    _locked(unit, collection_id)
    bundle_variants.collection_in_use(unit, collection_id)
    repository.delete_collection(unit.conn, unit.store_id, collection_id)
    unit.record("collection/deleted", collection_id, {"id": collection_id})
    discounts.collections_changed(unit, [collection_id])


# Products ---------------------------------------------------------------------------------

def list_products(unit: Unit, query: ListQuery) -> PageResult:
    # NOTE: decisions §7.7 item 13, the products of one collection (a cursor carries the filter).
    if "collection_id" not in query.filters:
        raise ValidationFailed.field("collection_id", "is required")
    return repository.member_page(unit.conn, unit.store_id, query)


def _sent(external_ids: list[str]) -> list[str]:
    """Each product once, in the order first sent."""
    return list(dict.fromkeys(external_ids))


def add_products(unit: Unit, collection_id: int, external_ids: list[str]) -> list[CollectionProduct]:
    """The rows of the products sent, in the order sent; a product already in the collection
    stays as it is (a repeated request changes nothing). Every product must be in the store's
    catalog: 422 naming each one that is not, and nothing is added."""
    get(unit, collection_id)
    wanted = _sent(external_ids)
    found = repository.catalog_products(unit.conn, unit.store_id, wanted)
    unknown = {str(index): {"external_product_id": [f"product {external_id} is not in the catalog"]}
               for index, external_id in enumerate(external_ids) if external_id not in found}
    if unknown:
        # NOTE: issue 15, a product must exist in the catalog to join a collection.
        raise ValidationFailed({PRODUCTS: unknown})
    _locked(unit, collection_id)
    present = repository.members(unit.conn, unit.store_id, collection_id, found.values())
    rows: list[dict[str, Any]] = [
        {"store_id": unit.store_id, "collection_id": collection_id, "product_id": found[external_id],
         "external_product_id": external_id, "created_at": unit.now, "updated_at": unit.now}
        for external_id in wanted if found[external_id] not in present]
    if rows:
        repository.add_members(unit.conn, rows)
        _products_changed(unit, [collection_id])
        present = repository.members(unit.conn, unit.store_id, collection_id, found.values())
    return [present[found[external_id]] for external_id in wanted]


def remove_products(unit: Unit, collection_id: int, external_ids: list[str]) -> None:
    """Products that are not in the collection (or not in the catalog) are passed over: the
    collection ends without every product sent, whatever it held before."""
    _locked(unit, collection_id)
    if repository.remove_members(unit.conn, unit.store_id, collection_id, _sent(external_ids)):
        _products_changed(unit, [collection_id])


def forget_product(unit: Unit, product_id: int) -> None:
    """A product leaving the catalog leaves every collection (its delete holds its lock)."""
    left = repository.remove_product(unit.conn, unit.store_id, product_id)
    if left:
        _products_changed(unit, left)


def _products_changed(unit: Unit, collection_ids: list[int]) -> None:
    repository.touch(unit.conn, unit.store_id, collection_ids, unit.now)
    unit.record_many("collection/updated", collection_ids, changed=dict.fromkeys(collection_ids, (PRODUCTS,)))
    discounts.collections_changed(unit, collection_ids)
