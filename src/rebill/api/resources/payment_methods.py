"""Payment methods (2021-11, decisions §6.1, §6.12) and the deprecated 2021-01 payment sources
of a customer (spec 02 Customers, Versioning 3)."""

from __future__ import annotations

from rebill.domain.payment_method import processor_check, service
from rebill.domain.payment_method.model import PaymentMethodCreate, PaymentMethodUpdate

from ..call import Call, Reply
from ..declared import created, deleted, listed, one, page, update
from ..routing import Endpoints
from ..v2021_01.payment_methods import SOURCE_FILTERS, select_sources

endpoints = Endpoints()
READ, WRITE = "read_payment_methods", "write_payment_methods"
HEAD = ("2021-11",)


@endpoints.get("/payment_methods", scope=READ, versions=HEAD, reply=page("payment_methods"))
def list_payment_methods(call: Call) -> Reply:
    query = call.list_query("payment_methods")
    with call.read() as unit:
        return call.page("payment_methods", service.list_page(unit, query), unit, query)


# NOTE: issue 16, a Stripe store's method is checked with Stripe before it is saved: the
# handler calls out (a worker thread, its own transactions, the call outside any of them). The
# check only reads there, so a request that lost a race runs again, its check included.
@endpoints.post("/payment_methods", scope=WRITE, versions=HEAD, calls_out=True, runs_again=True,
                body="payment_method.create",
                reply=created("payment_method"))
def create_payment_method(call: Call) -> Reply:
    command = call.command("payment_method.create", PaymentMethodCreate)
    command = processor_check.checked_create(call.services.gateway, call.store.id, command)
    with call.write() as unit:
        return call.created("payment_method", service.create(unit, command))


@endpoints.get("/payment_methods/{payment_method_id:id}", scope=READ, versions=HEAD,
               reply=one("payment_method", include="payment_methods"))
def get_payment_method(call: Call) -> Reply:
    include = call.include("payment_methods")
    with call.read() as unit:
        return call.one("payment_method", service.get(unit, call.path["payment_method_id"]), unit, include=include)


@endpoints.put("/payment_methods/{payment_method_id:id}", scope=WRITE, versions=HEAD, calls_out=True, runs_again=True,
               body=update("payment_method.update"), reply=one("payment_method"))
def update_payment_method(call: Call) -> Reply:
    command = call.command("payment_method.update", PaymentMethodUpdate, partial=True)
    if processor_check.touches_processor(command):
        with call.read() as unit:
            current = service.get(unit, call.path["payment_method_id"])
        command = processor_check.checked_update(call.services.gateway, call.store.id, current, command)
    with call.write() as unit:
        return call.one("payment_method", service.update(unit, call.path["payment_method_id"], command))


@endpoints.delete("/payment_methods/{payment_method_id:id}", scope=WRITE, versions=HEAD, reply=deleted())
def delete_payment_method(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["payment_method_id"])
    return call.deleted()


@endpoints.get("/customers/{customer_id:id}/payment_sources", scope=READ, versions=("2021-01",),
               deprecated_in=("2021-01",), reply=listed("payment_sources", "payment_source"),
               query=SOURCE_FILTERS)  # NOTE: spec 02 Versioning 3; no retirement date: no Sunset
def list_payment_sources(call: Call) -> Reply:
    """Spec 02 Customers; the sources of the customer, the default first, that its filters
    select (no paging: spec 02 lists it among neither the paged nor the cursor endpoints)."""
    with call.read() as unit:
        sources = service.sources(unit, call.path["customer_id"])
    records = [call.version.serialize("payment_source", s) for s in sources]
    return Reply({"payment_sources": select_sources(records, call.params)})
