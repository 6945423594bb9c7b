"""Catalog reads for the rest of the domain, and the product use cases (decisions §5.7, §5.16).

Plans live in ``plans.py``, the deprecated 2021-01 product writes in ``purchase_options.py``.
Field names are the head (2021-11) names; no version logic here.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from sqlalchemy.exc import IntegrityError

from rebill.errors import NotFound, ValidationFailed

from ..collection import service as collections
from ..event import attributes
from ..listing import ListQuery, PageResult
from ..money import minor_digits, quantize
from ..unit import Unit
from . import repository
from .model import IMAGE_SIZES, Plan, Product, ProductCreate, ProductUpdate, Variant, VariantDefaults, VariantInput

# What subscriptions and one-time items read -----------------------------------------------


def variant_defaults(unit: Unit, external_product_id: str, external_variant_id: str | None) -> VariantDefaults | None:
    """The catalog's defaults for a subscription or one-time item of this product and variant (the first variant when
    external_variant_id is None), or None when the product (or that variant) is not in the store's catalog."""
    product = repository.product_by_external_id(unit.conn, unit.store_id, external_product_id)
    if product is None:
        return None
    if external_variant_id is None:
        variant = product.variants[0] if product.variants else None
    else:
        variant = next((v for v in product.variants if v.external_variant_id == external_variant_id), None)
        if variant is None:
            return None
    if variant is None:
        # A product without variants (made by the 2021-01 endpoints): the product's own defaults.
        return VariantDefaults(external_product_id=product.external_product_id, external_variant_id=None,
                               product_title=product.title, variant_title=None, price=None, sku=None, grams=None,
                               taxable=product.taxable, requires_shipping=product.requires_shipping,
                               images=product.images)
    images = {size: variant.image for size in IMAGE_SIZES} if variant.image else product.images
    return VariantDefaults(external_product_id=product.external_product_id,
                           external_variant_id=variant.external_variant_id, product_title=product.title,
                           variant_title=variant.title, price=variant.price, sku=variant.sku, grams=variant.grams,
                           taxable=variant.taxable, requires_shipping=variant.requires_shipping, images=images)


def get_plan(unit: Unit, plan_id: int) -> Plan:
    """The store's plan; NotFound for an unknown plan or another store's (decisions §1.1)."""
    found = repository.plan(unit.conn, unit.store_id, plan_id)
    if found is None:
        raise NotFound()
    return found


# Products --------------------------------------------------------------------------------


def _with_plans(unit: Unit, items: list[Product]) -> list[Product]:
    """Products carry their plans (the 2021-01 view derives from them): one query for all."""
    by_product = repository.plans_of_products(unit.conn, unit.store_id, [p.id for p in items])
    for product in items:
        product.plans = by_product[product.id]
    return items


def get_product(unit: Unit, external_product_id: str) -> Product:
    product = repository.product_by_external_id(unit.conn, unit.store_id, external_product_id)
    if product is None:
        raise NotFound()
    return _with_plans(unit, [product])[0]


def get_product_by_id(unit: Unit, product_id: int) -> Product:
    product = repository.product_by_id(unit.conn, unit.store_id, product_id)
    if product is None:
        raise NotFound()
    return _with_plans(unit, [product])[0]


def list_products(unit: Unit, query: ListQuery) -> PageResult:
    result = repository.product_page(unit.conn, unit.store_id, query)
    _with_plans(unit, result.rows)
    return result


def _price(unit: Unit, amount: Decimal | None) -> tuple[Decimal | None, str | None]:
    """NOTE: decisions §2.7, catalog prices are in the store currency, with at most its minor
    digits; stored with exactly those digits, so they are shown as stored."""
    if amount is None:
        return None, None
    currency = unit.store.currency
    if amount != quantize(amount, currency):
        return None, f"has too many decimal places (at most {minor_digits(currency)})"
    return quantize(amount, currency), None


def _variants(unit: Unit, given: list[VariantInput], *, requires_shipping: bool, taxable: bool) -> list[Variant]:
    """Variants as stored: unique external ids, prices in the store currency; a variant that
    does not say whether it ships or is taxed takes the product's answer."""
    errors: dict[str, Any] = {}
    seen: set[str] = set()
    made = []
    for index, v in enumerate(given):
        price, problem = _price(unit, v.price)
        if problem:
            errors[str(index)] = {"price": [problem]}
        if v.external_variant_id in seen:
            errors.setdefault(str(index), {})["external_variant_id"] = ["is duplicated in this product"]
        seen.add(v.external_variant_id)
        made.append(Variant(
            external_variant_id=v.external_variant_id, title=v.title, price=price, sku=v.sku, grams=v.grams,
            requires_shipping=requires_shipping if v.requires_shipping is None else v.requires_shipping,
            taxable=taxable if v.taxable is None else v.taxable, image=v.image))
    if errors:
        raise ValidationFailed({"variants": errors})
    return made


def _external_id_taken(exc: IntegrityError) -> Exception:
    """A concurrent create won the unique (store, external id) race after our check passed."""
    message = str(exc.orig)
    if "uq_products_store_external_id" in message or "products.external_product_id" in message:
        return ValidationFailed.field("external_product_id", "has already been taken")
    return exc


def insert_product(unit: Unit, values: dict[str, Any]) -> int:
    """Insert a product of the store (no plans); checks the external id is free; records the event."""
    if repository.external_id_taken(unit.conn, unit.store_id, values["external_product_id"]):
        raise ValidationFailed.field("external_product_id", "has already been taken")
    values = {"handle": None, "product_type": None, "vendor": None, "description": None, "images": None,
              "requires_shipping": True, "taxable": True, "variants": [], **values,
              "store_id": unit.store_id, "created_at": unit.now, "updated_at": unit.now}
    try:
        product_id = repository.insert_product(unit.conn, values)
    except IntegrityError as exc:
        raise _external_id_taken(exc) from None
    unit.record("product/created", product_id, {"external_product_id": values["external_product_id"]})
    return product_id


def create_product(unit: Unit, command: ProductCreate) -> Product:
    variants = _variants(unit, command.variants, requires_shipping=command.requires_shipping,
                         taxable=command.taxable)
    product_id = insert_product(unit, {
        "external_product_id": command.external_product_id, "title": command.title, "handle": command.handle,
        "product_type": command.product_type, "vendor": command.vendor, "description": command.description,
        "images": command.images, "requires_shipping": command.requires_shipping, "taxable": command.taxable,
        "variants": repository.stored_variants(variants)})
    return get_product_by_id(unit, product_id)


def change_product(unit: Unit, current: Product, changes: dict[str, Any], *, shown: Iterable[str] = ()) -> bool:
    """Write the changed product fields; records ``product/updated`` when something changed,
    or when ``shown`` names fields of the 2021-01 view its plans changed (derived.py)."""
    changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
    shown = tuple(shown)
    if not changes and not shown:
        return False
    if "variants" in changes:
        changes["variants"] = repository.stored_variants(changes["variants"])
    changes["updated_at"] = unit.now
    repository.update_product(unit.conn, unit.store_id, current.id, changes)
    # The product's fields are named as the head (2021-11) product names them, those its plans
    # give as the 2021-01 product does (`discount_amount`, `subscription_defaults`).
    unit.record("product/updated", current.id, {"external_product_id": current.external_product_id},
                changed=(*attributes.names(changes), *shown))
    return True


def update_product(unit: Unit, product: Product, command: ProductUpdate) -> Product:
    """Compared with the product read again under its update lock, which every writer of it
    and its plans takes: two updates at once each compared with the product as it was before
    the other and both recorded a change (found by an audit on PostgreSQL)."""
    if not repository.lock_product(unit.conn, unit.store_id, product.id):
        raise NotFound()
    product = get_product_by_id(unit, product.id)
    changes = command.changes()
    if "variants" in changes:
        changes["variants"] = _variants(
            unit, changes["variants"], requires_shipping=changes.get("requires_shipping", product.requires_shipping),
            taxable=changes.get("taxable", product.taxable))
    change_product(unit, product, changes)
    return get_product_by_id(unit, product.id)


def delete_product(unit: Unit, product: Product) -> None:
    """The product's plans go with it, each with its event, deleted explicitly rather than by
    the foreign-key cascade so the events name exactly the rows removed; so does its place in
    collections (each collection's `collection/updated`)."""
    # Lock first, so no plan can be added between deleting the plans and the product.
    if not repository.lock_product(unit.conn, unit.store_id, product.id):
        raise NotFound()
    for plan_id in repository.delete_plans_of_product(unit.conn, unit.store_id, product.id):
        unit.record("plan/deleted", plan_id, {"id": plan_id})
    collections.forget_product(unit, product.id)
    repository.delete_product(unit.conn, unit.store_id, product.id)
    unit.record("product/deleted", product.id, {"id": product.id, "external_product_id": product.external_product_id})
