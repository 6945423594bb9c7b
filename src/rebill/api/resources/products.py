"""Products, both versions (decisions §5.7, §5.16).

2021-11 keys a product by its `external_product_id` (a string, in the path too); 2021-01's
deprecated product endpoints use the catalog's integer id and answer with `Deprecation` and
`Sunset` headers (spec 01 and 02 Versioning: deprecated by 2025-06-30; the plan endpoints
replace them). One path serves both, since a path can be registered once per method:
``{product_key}`` is read as the external id or as the integer id by the caller's version.
"""

from __future__ import annotations

import re

from rebill.domain.catalog import purchase_options, service
from rebill.domain.catalog.model import LegacyProductWrite, Product, ProductCreate, ProductUpdate
from rebill.domain.unit import Unit
from rebill.errors import NotFound

from ..call import Call, Reply
from ..declared import Body, created, deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_products", "write_products"
LEGACY = "2021-01"
# NOTE: spec 01 Versioning 5 and spec 02 Versioning 2: deprecated, to be retired by 2025-06-30.
SUNSET = "Mon, 30 Jun 2025 00:00:00 GMT"
_ID = re.compile(r"[0-9]{1,18}", re.ASCII)
MAX_EXTERNAL_ID = 64  # the column's length


def _legacy(call: Call) -> bool:
    return call.version.name == LEGACY


def _product(call: Call, unit: Unit) -> Product:
    key: str = call.path["product_key"]
    if not _legacy(call):
        if len(key) > MAX_EXTERNAL_ID or "\x00" in key:
            raise NotFound()  # no external id of ours (PostgreSQL cannot even compare a NUL)
        return service.get_product(unit, key)
    if not _ID.fullmatch(key):
        raise NotFound()
    return service.get_product_by_id(unit, int(key))


@endpoints.get("/products", scope=READ, deprecated_in=(LEGACY,), sunset=SUNSET, reply=page("products"))
def list_products(call: Call) -> Reply:
    query = call.list_query("products")
    with call.read() as unit:
        reply = call.page("products", service.list_products(unit, query), unit, query)
    # NOTE: spec 02 Cursor paging, lists filtered by ids or platform_product_ids carry no Link
    # header (a title sort has one: its cursors hold the title, as a collection's do).
    if _legacy(call) and "external_product_ids" in query.filters:  # `ids`: Call.page
        reply.headers = None
    return reply


@endpoints.post("/products", scope=WRITE, deprecated_in=(LEGACY,), sunset=SUNSET, reply=created("product"),
                body=Body({LEGACY: "product_v1.create", "2021-11": "product.create"}))
def create_product(call: Call) -> Reply:
    if _legacy(call):
        legacy = call.command("product_v1.create", LegacyProductWrite)
        with call.write() as unit:
            return call.created("product", purchase_options.create(unit, legacy))
    command = call.command("product.create", ProductCreate)
    with call.write() as unit:
        return call.created("product", service.create_product(unit, command))


@endpoints.get("/products/{product_key}", scope=READ, deprecated_in=(LEGACY,), sunset=SUNSET,
               reply=one("product", include="products"))
def get_product(call: Call) -> Reply:
    # NOTE: spec 02 include table, a 2021-01 product takes `include=collections` (2021-11
    # products list no include values: any is 422, as on the list).
    include = call.include("products")
    with call.read() as unit:
        return call.one("product", _product(call, unit), unit, include=include)


@endpoints.put("/products/{product_key}", scope=WRITE, deprecated_in=(LEGACY,), sunset=SUNSET, reply=one("product"),
               body=update({LEGACY: "product_v1.update", "2021-11": "product.update"}))
def update_product(call: Call) -> Reply:
    if _legacy(call):
        legacy = call.command("product_v1.update", LegacyProductWrite, partial=True)
        with call.write() as unit:
            return call.one("product", purchase_options.update(unit, _product(call, unit).id, legacy))
    command = call.command("product.update", ProductUpdate, partial=True)
    with call.write() as unit:
        return call.one("product", service.update_product(unit, _product(call, unit), command))


@endpoints.delete("/products/{product_key}", scope=WRITE, deprecated_in=(LEGACY,), sunset=SUNSET, reply=deleted())
def delete_product(call: Call) -> Reply:
    with call.write() as unit:
        service.delete_product(unit, _product(call, unit))
    return call.deleted()
