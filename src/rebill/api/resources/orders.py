"""Orders, both versions (decisions §6.10, §6.12; docs/api-choices.md, Orders)."""

from __future__ import annotations

from rebill.domain.order import dates, service
from rebill.domain.order.model import OrderUpdate

from ..call import Call, Reply
from ..declared import NO_FIELDS, count, created, deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_orders", "write_orders"


@endpoints.get("/orders", scope=READ, reply=page("orders"))
def list_orders(call: Call) -> Reply:
    query = call.list_query("orders")
    with call.read() as unit:
        return call.page("orders", service.list_page(unit, query), unit, query)


@endpoints.get("/orders/count", scope=READ, versions=("2021-01",), reply=count("orders"))
def count_orders(call: Call) -> Reply:
    filters = call.count_filters("orders")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.get("/orders/{order_id:id}", scope=READ, reply=one("order", include="orders"))
def get_order(call: Call) -> Reply:
    include = call.include("orders")
    with call.read() as unit:
        return call.one("order", service.get(unit, call.path["order_id"]), unit, include=include)


@endpoints.put("/orders/{order_id:id}", scope=WRITE, body=update("order.update"), reply=one("order"))
def update_order(call: Call) -> Reply:
    with call.write() as unit:
        # A read-only field sent back as a GET shows it is no change, not a refusal (found by an
        # audit: an order read and sent back whole, or with its note changed, answered 422).
        # Read under the lock the update takes anyway: what is compared is what is changed.
        shown = call.version.serialize("order", service.get(unit, call.path["order_id"], lock=True))
        read_only = call.version.schemas["order.update"].read_only  # type: ignore[attr-defined]
        call.body = {name: value for name, value in call.body.items()
                     if not (name in read_only and name in shown and shown[name] == value)}
        command = call.command("order.update", OrderUpdate, partial=True)
        return call.one("order", service.update(unit, call.services.verifier, call.path["order_id"], command))


@endpoints.delete("/orders/{order_id:id}", scope=WRITE, reply=deleted())
def delete_order(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["order_id"])
    return call.deleted()


@endpoints.post("/orders/{order_id:id}/delay", scope=WRITE, body=NO_FIELDS, reply=one("order"))
def delay_order(call: Call) -> Reply:
    """NOTE: decisions §6.12, a queued prepaid order and the later ones of its charge move one
    order interval; the body is ignored."""
    with call.write() as unit:
        return call.one("order", dates.delay(unit, call.path["order_id"]))


@endpoints.post("/orders/{order_id:id}/change_date", scope=WRITE, versions=("2021-01",), body="order.change_date",
                reply=one("order"))
def change_order_date(call: Call) -> Reply:
    body = call.version.schemas["order.change_date"].parse(call.body)
    with call.write() as unit:
        return call.one("order", dates.change_date(unit, call.path["order_id"], body["scheduled_at"]))


@endpoints.post("/orders/{order_id:id}/clone", scope=WRITE, versions=("2021-11",), body="order.clone",
                reply=created("order"))
def clone_order(call: Call) -> Reply:
    """NOTE: decisions §6.12, a queued copy on the given date; 201 with the new order."""
    body = call.version.schemas["order.clone"].parse(call.body)
    with call.write() as unit:
        return call.created("order", service.clone(unit, call.path["order_id"], body["scheduled_at"]))
