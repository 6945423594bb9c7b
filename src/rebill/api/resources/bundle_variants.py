"""Bundle variants (a Rebill extension, decisions §7.7 item 7; docs/api-choices.md, Bundles): which
catalog variant is a bundle and what its contents may be. Both versions, each with its own create
and delete answers (decisions §2.10)."""

from __future__ import annotations

from rebill.domain.bundle import variants as service
from rebill.domain.bundle.model import BundleVariantCreate, BundleVariantUpdate

from ..call import Call, Reply
from ..declared import created, deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
# NOTE: spec 01 lists no bundle scope: a bundle variant is a catalog variant's settings, so it
# uses the products' scopes (docs/scopes.md).
READ, WRITE = "read_products", "write_products"


@endpoints.get("/bundle_variants", scope=READ, reply=page("bundle_variants"), extension=True)
def list_bundle_variants(call: Call) -> Reply:
    query = call.list_query("bundle_variants")
    with call.read() as unit:
        return call.page("bundle_variants", service.list_page(unit, query), unit, query)


@endpoints.post("/bundle_variants", scope=WRITE, body="bundle_variant.create", reply=created("bundle_variant"),
                extension=True)
def create_bundle_variant(call: Call) -> Reply:
    command = call.command("bundle_variant.create", BundleVariantCreate)
    with call.write() as unit:
        return call.created("bundle_variant", service.create(unit, command))


@endpoints.get("/bundle_variants/{bundle_variant_id:id}", scope=READ, reply=one("bundle_variant"), extension=True)
def get_bundle_variant(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("bundle_variant", service.get(unit, call.path["bundle_variant_id"]))


@endpoints.put("/bundle_variants/{bundle_variant_id:id}", scope=WRITE, body=update("bundle_variant.update"),
               reply=one("bundle_variant"), extension=True)
def update_bundle_variant(call: Call) -> Reply:
    command = call.command("bundle_variant.update", BundleVariantUpdate, partial=True)
    with call.write() as unit:
        return call.one("bundle_variant", service.update(unit, call.path["bundle_variant_id"], command))


@endpoints.delete("/bundle_variants/{bundle_variant_id:id}", scope=WRITE, reply=deleted(), extension=True)
def delete_bundle_variant(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["bundle_variant_id"])
    return call.deleted()
