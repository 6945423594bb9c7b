"""Payment methods (2021-11, decisions §6.1, §6.12) and the deprecated 2021-01 payment sources
of a customer (spec 02 Customers, Versioning 3)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from rebill.domain.payment_method import service
from rebill.domain.payment_method.model import PaymentMethodCreate, PaymentMethodUpdate
from rebill.errors import ServiceError

from ..call import Call, Reply
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_payment_methods", "write_payment_methods"
HEAD = ("2021-11",)
# NOTE: spec 02 Versioning 3, the payment sources endpoint is deprecated (the payment methods
# endpoint replaces it). No retirement date is given, so, unlike the 2021-01 product endpoints
# (resources/products.py), no `Sunset` header.
DEPRECATION = {"Deprecation": "true"}


def deprecated(handler: Callable[[Call], Reply]) -> Callable[[Call], Reply]:
    """Every reply, errors included, says the endpoint is deprecated (as resources/products.py
    does for the 2021-01 product endpoints)."""
    @wraps(handler)
    def run(call: Call) -> Reply:
        try:
            reply = handler(call)
        except ServiceError as exc:
            exc.headers = {**exc.headers, **DEPRECATION}
            raise
        reply.headers = {**(reply.headers or {}), **DEPRECATION}
        return reply
    return run


@endpoints.get("/payment_methods", scope=READ, versions=HEAD)
def list_payment_methods(call: Call) -> Reply:
    query = call.list_query("payment_methods")
    with call.read() as unit:
        return call.page("payment_methods", service.list_page(unit, query), unit, query)


@endpoints.post("/payment_methods", scope=WRITE, versions=HEAD)
def create_payment_method(call: Call) -> Reply:
    command = call.command("payment_method.create", PaymentMethodCreate)
    with call.write() as unit:
        return call.created("payment_method", service.create(unit, command))


@endpoints.get("/payment_methods/{payment_method_id:id}", scope=READ, versions=HEAD)
def get_payment_method(call: Call) -> Reply:
    include = call.include("payment_methods")
    with call.read() as unit:
        return call.one("payment_method", service.get(unit, call.path["payment_method_id"]), unit, include=include)


@endpoints.put("/payment_methods/{payment_method_id:id}", scope=WRITE, versions=HEAD)
def update_payment_method(call: Call) -> Reply:
    command = call.command("payment_method.update", PaymentMethodUpdate, partial=True)
    with call.write() as unit:
        return call.one("payment_method", service.update(unit, call.path["payment_method_id"], command))


@endpoints.delete("/payment_methods/{payment_method_id:id}", scope=WRITE, versions=HEAD)
def delete_payment_method(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["payment_method_id"])
    return call.deleted()


@endpoints.get("/customers/{customer_id:id}/payment_sources", scope=READ, versions=("2021-01",))
@deprecated
def list_payment_sources(call: Call) -> Reply:
    """Spec 02 Customers; every source of the customer, the default first (no paging: spec 02
    lists it among neither the paged nor the filtered endpoints)."""
    with call.read() as unit:
        sources = service.sources(unit, call.path["customer_id"])
    return Reply({"payment_sources": [call.version.serialize("payment_source", s) for s in sources]})
