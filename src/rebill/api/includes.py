"""Related objects for ``include`` (decisions §3.8): one query per include value for a
whole page, never one per row."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from rebill.domain.address import repository as addresses
from rebill.domain.bundle import repository as bundles
from rebill.domain.collection import repository as collections
from rebill.domain.customer import repository as customers
from rebill.domain.discount import repository as discounts
from rebill.domain.discount.model import Discount
from rebill.domain.metafield import repository as metafields
from rebill.domain.payment_method import repository as payment_methods
from rebill.domain.subscription import repository as purchase_items
from rebill.domain.unit import Unit
from rebill.errors import ValidationFailed

# item kind -> include name -> (related kind, loader(unit, items) -> {item id: obj or [objs]})
Loader = Callable[[Unit, list[Any]], dict[int, Any]]


def _grouped(rows: list[Any], key: str) -> dict[int, list[Any]]:
    grouped: dict[int, list[Any]] = defaultdict(list)
    for row in rows:
        grouped[getattr(row, key)].append(row)
    return grouped


def _customer_addresses(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = _grouped(addresses.of_customers(unit.conn, unit.store_id, [c.id for c in items]), "customer_id")
    return {c.id: found.get(c.id, []) for c in items}


def _customer_payment_methods(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = _grouped(payment_methods.of_customers(unit.conn, unit.store_id, [c.id for c in items]), "customer_id")
    return {c.id: found.get(c.id, []) for c in items}


def _address_customer(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = customers.many(unit.conn, unit.store_id, [a.customer_id for a in items])
    return {a.id: found.get(a.customer_id) for a in items}


def _address_discount(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = discounts.many(unit.conn, unit.store_id, [a.discount_id for a in items if a.discount_id])
    return {a.id: Discount.from_row(found[a.discount_id], a.presentment_currency, unit.now)
            if a.discount_id in found else None for a in items}


def _address_payment_methods(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = payment_methods.many(unit.conn, unit.store_id, [a.payment_method_id for a in items if a.payment_method_id])
    return {a.id: [found[a.payment_method_id]] if a.payment_method_id in found else [] for a in items}


def _payment_method_addresses(unit: Unit, items: list[Any]) -> dict[int, Any]:
    """The addresses that name the method: the inverse of an address's `payment_methods`."""
    found = _grouped(addresses.of_payment_methods(unit.conn, unit.store_id, [m.id for m in items]),
                     "payment_method_id")
    return {m.id: found.get(m.id, []) for m in items}


def _subscriptions_by(key: str) -> Loader:
    def load(unit: Unit, items: list[Any]) -> dict[int, Any]:
        ids = [item.id for item in items]
        found = purchase_items.of(unit.conn, unit.store_id, "subscription",
                                  **{"customer_ids" if key == "customer_id" else "address_ids": ids})
        grouped = _grouped(found, key)
        return {item.id: grouped.get(item.id, []) for item in items}
    return load


def _customer_of(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = customers.many(unit.conn, unit.store_id, [i.customer_id for i in items])
    return {i.id: found.get(i.customer_id) for i in items}


def _subscription_address(unit: Unit, items: list[Any]) -> dict[int, Any]:
    found = addresses.many(unit.conn, unit.store_id, [s.address_id for s in items])
    return {s.id: found.get(s.address_id) for s in items}


def _order_subscriptions(unit: Unit, items: list[Any]) -> dict[int, Any]:
    """The subscriptions an order delivers, named by its lines (one statement for the page)."""
    found = purchase_items.many(unit.conn, unit.store_id, [i for o in items for i in o.purchase_item_ids],
                                kind="subscription")
    return {o.id: [found[i] for i in dict.fromkeys(o.purchase_item_ids) if i in found] for o in items}


def _charge_payment_methods(unit: Unit, items: list[Any]) -> dict[int, Any]:
    """A charge's `payment_methods`: the method its payment was taken (or last tried) with, and
    for a charge not tried yet the one that will be (decisions §6.12: its address's, else the
    customer's default), as an address's include shows its own; a list of none or one. Found
    by an audit: it listed every method of the customer, those made after the payment too."""
    found, chosen = payment_methods.of_customers_named_by(
        unit.conn, unit.store_id, [c.customer_id for c in items],
        [c.address_id for c in items if c.payment_method_id is None])
    methods = {m.id: m for m in found}
    default = {m.customer_id: m for m in found if m.is_default}
    out = {}
    for c in items:
        if c.payment_method_id is not None:
            method = methods.get(c.payment_method_id)  # none once deleted
        else:
            method = methods.get(chosen.get(c.address_id)) or default.get(c.customer_id)
        out[c.id] = [method] if method is not None else []
    return out


def _product_collections(unit: Unit, items: list[Any]) -> dict[int, Any]:
    """NOTE: spec 02 include table, a 2021-01 product's `collections`: the collections it is in."""
    return collections.collections_of_products(unit.conn, unit.store_id, [p.id for p in items])


def _subscription_bundle_selections(unit: Unit, items: list[Any]) -> dict[int, Any]:
    """NOTE: spec 01 include table, a subscription's `bundle_selections`: its selection (a list of
    none or one), with its items, one statement each for the page."""
    found = bundles.selections_of_items(unit.conn, unit.store_id, [s.id for s in items])
    return {s.id: [found[s.id]] if s.id in found else [] for s in items}


def _subscription_bundle_product(unit: Unit, items: list[Any]) -> dict[int, Any]:
    """NOTE: spec 01 include table, a subscription's `bundle_product`: the bundle variant its
    variant is (null when it is none; docs/api-choices.md, Bundles)."""
    found = bundles.variants_of_items(unit.conn, unit.store_id,
                                      [(s.external_product_id, s.external_variant_id) for s in items])
    return {s.id: found.get((s.external_product_id, s.external_variant_id)) for s in items}


def metafields_of(owner_resource: str) -> Loader:
    """NOTE: spec 01 and 02 include tables, `metafields`: the records' own, one statement for
    the page."""
    def load(unit: Unit, items: list[Any]) -> dict[int, Any]:
        grouped = _grouped(metafields.of_owners(unit.conn, unit.store_id, owner_resource, [i.id for i in items]),
                           "owner_id")
        return {item.id: grouped.get(item.id, []) for item in items}
    return load


LOADERS: dict[str, dict[str, tuple[str, Loader]]] = {
    "customer": {
        "addresses": ("address", _customer_addresses),
        "metafields": ("metafield", metafields_of("customer")),
        "payment_methods": ("payment_method", _customer_payment_methods),
        "subscriptions": ("subscription", _subscriptions_by("customer_id")),
    },
    "address": {
        "customer": ("customer", _address_customer),
        "discount": ("discount", _address_discount),
        "payment_methods": ("payment_method", _address_payment_methods),
        "subscriptions": ("subscription", _subscriptions_by("address_id")),
    },
    "subscription": {
        "address": ("address", _subscription_address),
        "customer": ("customer", _customer_of),
        "metafields": ("metafield", metafields_of("subscription")),
        "bundle_selections": ("bundle_selection", _subscription_bundle_selections),
        "bundle_product": ("bundle_variant", _subscription_bundle_product),
    },
    "payment_method": {
        "addresses": ("address", _payment_method_addresses),
    },
    "charge": {
        "customer": ("customer", _customer_of),
        "metafields": ("metafield", metafields_of("charge")),
        "payment_methods": ("payment_method", _charge_payment_methods),
    },
    "order": {
        "customer": ("customer", _customer_of),
        "metafields": ("metafield", metafields_of("order")),
        "subscriptions": ("subscription", _order_subscriptions),
    },
    "product": {
        "collections": ("collection", _product_collections),
    },
}


def check_available(kind: str, names: tuple[str, ...]) -> None:
    """Values the spec lists whose resource this build does not have yet answer 422."""
    missing = [n for n in names if n not in LOADERS.get(kind, {})]
    if missing:
        raise ValidationFailed({"include": [f"{n} is not available yet" for n in missing]})


def load(unit: Unit, kind: str, items: list[Any], names: tuple[str, ...],
         loaders: dict[str, dict[str, tuple[str, Loader]]] = LOADERS) -> dict[str, tuple[str, dict[int, Any]]]:
    return {name: (loaders[kind][name][0], loaders[kind][name][1](unit, items)) for name in names}


def embed(serialize: Callable[[str, Any], dict[str, Any]], unit: Unit | None, kind: str, items: list[Any],
          names: tuple[str, ...], loaders: dict[str, dict[str, tuple[str, Loader]]] = LOADERS) -> list[dict[str, Any]]:
    """The records of ``items``, each with its related objects under `include` (decisions §3.8):
    what a GET with ``include`` answers, and a webhook's payload with its `included_objects`."""
    records = [serialize(kind, item) for item in items]
    if names and items:
        assert unit is not None
        related = load(unit, kind, items, names, loaders)
        for record, item in zip(records, items):
            embedded = {}
            for name, (related_kind, by_id) in related.items():
                value = by_id.get(item.id)
                if isinstance(value, list):
                    embedded[name] = [serialize(related_kind, v) for v in value]
                else:
                    embedded[name] = serialize(related_kind, value) if value is not None else None
            record["include"] = embedded
    return records
