"""Webhook payloads (decisions §8.2, issue 14): what a GET of the resource answers in the
webhook's version, `{"<resource>": {...}}`, with its `included_objects` under `include` as a
GET with `include` embeds them. Installed into the outbox (domain/webhook/fanout.py) when this
module is imported: by the app, the command line and the workers.

The related objects a webhook may ask for are those of spec 01/02's Events tables; most are a
GET's include values too (``includes.LOADERS``: a 2021-01 product's `collections` among them).
The rest: an address's metafields (2021-01), and a product's metafields (2021-01), which Rebill
does not hold (products take no metafields, decisions §7.2): those render empty."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import Connection

from rebill.domain.address import repository as addresses
from rebill.domain.catalog import service as catalog
from rebill.domain.charge import repository as charges
from rebill.domain.customer import repository as customers
from rebill.domain.order import repository as orders
from rebill.domain.subscription import repository as purchase_items
from rebill.domain.unit import Unit
from rebill.domain.webhook import fanout
from rebill.errors import NotFound

from . import includes
from .versions import VERSIONS

_encode = msgspec.json.Encoder(decimal_format="string").encode
Many = Callable[[Unit, list[int]], dict[int, Any]]


def _reader(get: Callable[[Unit, int], Any], many: Many | None = None) -> Many:
    """The records of ``ids``: one by ``get`` (a prepared statement: most flushes render one),
    several with ``many``'s one query when the resource has one."""
    def read(unit: Unit, ids: list[int]) -> dict[int, Any]:
        if many is not None and len(ids) > 1:
            return many(unit, ids)
        found = {}
        for resource_id in ids:
            record = get(unit, resource_id)
            if record is not None:
                found[resource_id] = record
        return found
    return read


def _product(unit: Unit, product_id: int) -> Any:
    try:
        return catalog.get_product_by_id(unit, product_id)
    except NotFound:
        return None


# resource -> its records by id, as its GET reads them.
READERS: dict[str, Many] = {
    "customer": _reader(lambda unit, i: customers.get(unit.conn, unit.store_id, i),
                        lambda unit, ids: customers.many(unit.conn, unit.store_id, ids)),
    "address": _reader(lambda unit, i: addresses.get(unit.conn, unit.store_id, i),
                       lambda unit, ids: addresses.many(unit.conn, unit.store_id, ids)),
    "subscription": _reader(lambda unit, i: purchase_items.get(unit.conn, unit.store_id, "subscription", i),
                            lambda unit, ids: purchase_items.many(unit.conn, unit.store_id, ids, kind="subscription")),
    "onetime": _reader(lambda unit, i: purchase_items.get(unit.conn, unit.store_id, "onetime", i),
                       lambda unit, ids: purchase_items.many(unit.conn, unit.store_id, ids, kind="onetime")),
    # Whatever its age, as several at once are read (found by an audit: a refund made in
    # Stripe's Dashboard of a charge older than 90 days was delivered as the id alone).
    "charge": _reader(lambda unit, i: charges.get(unit.conn, unit.store_id, i, None),
                      lambda unit, ids: charges.many(unit.conn, unit.store_id, ids, shown=True)),
    "order": _reader(lambda unit, i: orders.get(unit.conn, unit.store_id, i)),
    "product": _reader(_product),
}


def _nothing(unit: Unit, items: list[Any]) -> dict[int, Any]:
    return {item.id: [] for item in items}


# NOTE: spec 01 and 02 Events tables: the included_objects a GET's include does not have.
LOADERS = {**includes.LOADERS}
LOADERS["address"] = {**LOADERS["address"], "metafields": ("metafield", includes.metafields_of("address"))}
LOADERS["product"] = {**LOADERS["product"], "metafields": ("metafield", _nothing)}


def render(conn: Connection, store: Any, now: datetime, version: str, resource: str, ids: list[int],
           included: tuple[str, ...]) -> dict[int, bytes]:
    """The payload of each of ``ids`` that still exists, as bytes."""
    unit = Unit(conn, store, now)
    found = READERS[resource](unit, ids)
    items = [found[i] for i in ids if i in found]
    records = includes.embed(VERSIONS[version].serialize, unit, resource, items, included, LOADERS)
    return {item.id: _encode({resource: record}) for item, record in zip(items, records)}


fanout.install(render)
