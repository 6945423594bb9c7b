"""Collections, 2021-11 as the real service has them and 2021-01 list and get (issue 15;
docs/api-choices.md, Collections): a store's named groups of catalog products, and the bulk
endpoints that put products in a collection and take them out."""

from __future__ import annotations

from rebill.domain.collection import service
from rebill.domain.collection.model import CollectionCreate, CollectionProductsBulk, CollectionUpdate

from ..call import Call, Reply
from ..declared import CREATED, created, deleted, listed, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
# NOTE: spec 01 lists no collection scope: collections group catalog products, so they use the
# products' scopes (docs/scopes.md).
READ, WRITE = "read_products", "write_products"
HEAD = ("2021-11",)


@endpoints.get("/collections", scope=READ, reply=page("collections"))
def list_collections(call: Call) -> Reply:
    query = call.list_query("collections")
    with call.read() as unit:
        return call.page("collections", service.list_page(unit, query), unit, query)


@endpoints.post("/collections", scope=WRITE, versions=HEAD, body="collection.create", reply=created("collection"))
def create_collection(call: Call) -> Reply:
    command = call.command("collection.create", CollectionCreate)
    with call.write() as unit:
        return call.created("collection", service.create(unit, command))


@endpoints.get("/collections/{collection_id:id}", scope=READ, reply=one("collection"))
def get_collection(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("collection", service.get(unit, call.path["collection_id"]))


@endpoints.put("/collections/{collection_id:id}", scope=WRITE, versions=HEAD, body=update("collection.update"),
               reply=one("collection"))
def update_collection(call: Call) -> Reply:
    command = call.command("collection.update", CollectionUpdate, partial=True)
    with call.write() as unit:
        return call.one("collection", service.update(unit, call.path["collection_id"], command))


@endpoints.delete("/collections/{collection_id:id}", scope=WRITE, versions=HEAD, reply=deleted())
def delete_collection(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["collection_id"])
    return call.deleted()


@endpoints.get("/collection_products", scope=READ, versions=HEAD, reply=page("collection_products"))
def list_collection_products(call: Call) -> Reply:
    query = call.list_query("collection_products")
    with call.read() as unit:
        return call.page("collection_products", service.list_products(unit, query), unit, query)


def _external_ids(call: Call) -> list[str]:
    command = call.command("collection_product.bulk", CollectionProductsBulk)
    return [ref.external_product_id for ref in command.collection_products]


@endpoints.post("/collections/{collection_id:id}/collection_products-bulk", scope=WRITE, versions=HEAD,
                body="collection_product.bulk",
                reply=listed("collection_products", "collection_product", status=CREATED))
def add_collection_products(call: Call) -> Reply:
    external_ids = _external_ids(call)
    with call.write() as unit:
        added = service.add_products(unit, call.path["collection_id"], external_ids)
    return Reply({"collection_products": call.render("collection_product", added)}, call.version.created_status)


@endpoints.delete("/collections/{collection_id:id}/collection_products-bulk", scope=WRITE, versions=HEAD,
                  body="collection_product.bulk", reply=deleted())
def remove_collection_products(call: Call) -> Reply:
    external_ids = _external_ids(call)
    with call.write() as unit:
        service.remove_products(unit, call.path["collection_id"], external_ids)
    return call.deleted()
