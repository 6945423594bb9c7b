"""Metafields, both versions (spec 02 Metafields, decisions §7.2, §7.6; docs/api-choices.md,
Metafields). Spec 01 shows no 2021-11 endpoints: 2021-11 serves spec 02's with its own
conventions (201 on create, 204 on delete, cursors in the body, no count)."""

from __future__ import annotations

from rebill.domain.metafield import service
from rebill.domain.metafield.model import MetafieldCreate, MetafieldUpdate

from ..call import Call, Reply
from ..declared import count, created, deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
# NOTE: spec 01 Authentication lists no metafield scope: metafields use the customers'
# (docs/scopes.md).
READ, WRITE = "read_customers", "write_customers"


@endpoints.get("/metafields", scope=READ, reply=page("metafields"))
def list_metafields(call: Call) -> Reply:
    query = call.list_query("metafields")
    with call.read() as unit:
        return call.page("metafields", service.list_page(unit, query), unit, query)


@endpoints.get("/metafields/count", scope=READ, versions=("2021-01",), reply=count("metafields"))
def count_metafields(call: Call) -> Reply:
    filters = call.count_filters("metafields")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.post("/metafields", scope=WRITE, body="metafield.create", reply=created("metafield"))
def create_metafield(call: Call) -> Reply:
    command = call.command("metafield.create", MetafieldCreate)
    with call.write() as unit:
        return call.created("metafield", service.create(unit, command))


@endpoints.get("/metafields/{metafield_id:id}", scope=READ, reply=one("metafield"))
def get_metafield(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("metafield", service.get(unit, call.path["metafield_id"]))


@endpoints.put("/metafields/{metafield_id:id}", scope=WRITE, body=update("metafield.update"), reply=one("metafield"))
def update_metafield(call: Call) -> Reply:
    command = call.command("metafield.update", MetafieldUpdate, partial=True)
    with call.write() as unit:
        return call.one("metafield", service.update(unit, call.path["metafield_id"], command))


@endpoints.delete("/metafields/{metafield_id:id}", scope=WRITE, reply=deleted())
def delete_metafield(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["metafield_id"])
    return call.deleted()
