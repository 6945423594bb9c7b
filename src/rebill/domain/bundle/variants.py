"""Bundle variant use cases (a Rebill extension, decisions §7.7 item 7; docs/api-choices.md,
Bundles): which catalog variant is a bundle, the collections its contents may come from with a
quantity range each, the range of a selection's total quantity, and whether its price is fixed or
dynamic. Field names are the head (2021-11) names.

Changes record `bundle_variant/created|updated|deleted`, event log only (no webhook topic in
spec 01/02).

Locks (PostgreSQL; SQLite serializes writers): a create or update takes key share locks on the
collections it names; a collection delete takes the collection's update lock before it asks
which bundles name it (``collection_in_use``); so neither misses the other. An update or delete
takes the variant's update lock; a selection being made takes its key share lock."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from rebill.errors import NotFound, ValidationFailed

from ..catalog import repository as catalog
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..unit import Unit
from . import repository
from .model import BundleVariant, BundleVariantCreate, BundleVariantUpdate, CollectionRange

RANGES = "collections"


def get(unit: Unit, variant_id: int) -> BundleVariant:
    found = repository.variant(unit.conn, unit.store_id, variant_id)
    if found is None:
        raise NotFound()
    return found


def list_page(unit: Unit, query: ListQuery) -> PageResult:
    return repository.variant_page(unit.conn, unit.store_id, query)


def _bounds_problem(low: int | None, high: int | None) -> str | None:
    if low is not None and high is not None and high < low:
        return f"must be at least min_quantity ({low})"
    return None


def _catalog_problems(unit: Unit, external_product_id: str, external_variant_id: str) -> dict[str, list[str]]:
    """NOTE: decisions §7.7 item 7, the bundle is a variant of the catalog (422 naming the field)."""
    product = catalog.product_by_external_id(unit.conn, unit.store_id, external_product_id)
    if product is None:
        return {"external_product_id": [f"product {external_product_id} is not in the catalog"]}
    if all(v.external_variant_id != external_variant_id for v in product.variants):
        return {"external_variant_id": [f"variant {external_variant_id} is not a variant of product "
                                        f"{external_product_id} in the catalog"]}
    taken = repository.variant_taken(unit.conn, unit.store_id, external_product_id, external_variant_id)
    if taken is not None:
        return {"external_variant_id": [f"is already a bundle (bundle variant {taken})"]}
    return {}


def _ranges(unit: Unit, given: list[CollectionRange]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The collections as stored, and the problems of each by its index: an unknown collection
    (or another store's), one given twice, a range whose maximum is below its minimum."""
    found = repository.lock_collections(unit.conn, unit.store_id, [r.collection_id for r in given])
    errors: dict[str, Any] = {}
    seen: dict[int, int] = {}
    for index, r in enumerate(given):
        problems: dict[str, list[str]] = {}
        if r.collection_id not in found:
            problems["collection_id"] = [f"collection {r.collection_id} not found"]
        elif r.collection_id in seen:
            problems["collection_id"] = [f"is already given at index {seen[r.collection_id]}"]
        seen.setdefault(r.collection_id, index)
        if problem := _bounds_problem(r.min_quantity, r.max_quantity):
            problems["max_quantity"] = [problem]
        if problems:
            errors[str(index)] = problems
    rows = [{"collection_id": r.collection_id, "min_quantity": r.min_quantity, "max_quantity": r.max_quantity}
            for r in given]
    return rows, ({RANGES: errors} if errors else {})


def _taken(exc: IntegrityError) -> Exception:
    """A concurrent create won the unique (store, variant) race after our check passed."""
    if "uq_bundle_variants_store_variant" in str(exc.orig) or "bundle_variants.external" in str(exc.orig):
        return ValidationFailed.field("external_variant_id", "is already a bundle")
    return exc


def create(unit: Unit, command: BundleVariantCreate) -> BundleVariant:
    errors: dict[str, Any] = _catalog_problems(unit, command.external_product_id, command.external_variant_id)
    rows, problems = _ranges(unit, command.collections)
    errors.update(problems)
    if problem := _bounds_problem(command.min_quantity, command.max_quantity):
        errors["max_quantity"] = [problem]
    if errors:
        raise ValidationFailed(errors)
    values = {"store_id": unit.store_id, "external_product_id": command.external_product_id,
              "external_variant_id": command.external_variant_id, "price_rule": command.price_rule,
              "min_quantity": command.min_quantity, "max_quantity": command.max_quantity,
              "created_at": unit.now, "updated_at": unit.now}
    try:
        variant_id = repository.insert_variant(unit.conn, values)
    except IntegrityError as exc:
        raise _taken(exc) from None
    repository.set_ranges(unit.conn, unit.store_id, variant_id, rows)
    unit.record("bundle_variant/created", variant_id)
    return get(unit, variant_id)


def _stored(variant: BundleVariant) -> list[dict[str, Any]]:
    return [{"collection_id": r.collection_id, "min_quantity": r.min_quantity, "max_quantity": r.max_quantity}
            for r in variant.collections]


def update(unit: Unit, variant_id: int, command: BundleVariantUpdate) -> BundleVariant:
    current = repository.variant(unit.conn, unit.store_id, variant_id, lock=True)
    if current is None:
        raise NotFound()
    changes = command.changes()
    errors: dict[str, Any] = {}
    for key in ("external_product_id", "external_variant_id"):
        if key in changes and changes.pop(key) != getattr(current, key):
            # The variant is the bundle's key: its selections were made for it.
            errors[key] = ["cannot be changed; delete the bundle variant and create another"]
    rows = None
    if "collections" in changes:
        rows, problems = _ranges(unit, changes.pop("collections"))
        errors.update(problems)
    low, high = changes.get("min_quantity", current.min_quantity), changes.get("max_quantity", current.max_quantity)
    if problem := _bounds_problem(low, high):
        errors["max_quantity"] = [problem]
    if errors:
        raise ValidationFailed(errors)
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    changed = list(changes)
    if rows is not None and rows != _stored(current):
        repository.set_ranges(unit.conn, unit.store_id, variant_id, rows)
        changed.append(RANGES)
    if not changed:
        return current
    repository.update_variant(unit.conn, unit.store_id, variant_id, {**changes, "updated_at": unit.now})
    unit.record("bundle_variant/updated", variant_id, changed=attributes.names(changed))
    return get(unit, variant_id)


def delete(unit: Unit, variant_id: int) -> None:
    """A bundle whose selections still exist cannot go (422): the billing run copies their
    contents onto the orders of their items (docs/api-choices.md, Bundles)."""
    if repository.variant(unit.conn, unit.store_id, variant_id, lock=True) is None:
        raise NotFound()
    held = repository.selections_of_variant(unit.conn, unit.store_id, variant_id)
    if held:
        raise ValidationFailed({"bundle_selections": [
            f"Bundle variant has {len(held)} bundle selection(s); delete them first"]})
    repository.delete_variant(unit.conn, unit.store_id, variant_id)
    unit.record("bundle_variant/deleted", variant_id, {"id": variant_id})


def collection_in_use(unit: Unit, collection_id: int) -> None:
    """A collection a bundle's contents may come from cannot be deleted (422 naming the
    bundles): take it out of them first (docs/api-choices.md, Bundles). The caller holds the
    collection's update lock."""
    naming = repository.variants_naming(unit.conn, unit.store_id, collection_id)
    if naming:
        raise ValidationFailed({"bundle_variants": [
            f"Collection is in bundle variant(s) {', '.join(map(str, naming))}; take it out of them first"]})
