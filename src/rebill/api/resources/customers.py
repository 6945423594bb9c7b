"""Customers, both versions (spec 02 Customers; 2021-11 per the public contract)."""

from rebill.domain.customer import service
from rebill.domain.customer.model import CustomerCreate, CustomerUpdate

from ..call import Call, Reply
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_customers", "write_customers"


@endpoints.get("/customers", scope=READ)
def list_customers(call: Call) -> Reply:
    query = call.list_query("customers")
    with call.read() as unit:
        return call.page("customers", service.list_page(unit, query), unit, query)


@endpoints.get("/customers/count", scope=READ, versions=("2021-01",))
def count_customers(call: Call) -> Reply:
    filters = call.count_filters("customers")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.post("/customers", scope=WRITE)
def create_customer(call: Call) -> Reply:
    command = call.command("customer.create", CustomerCreate)
    with call.write() as unit:
        return call.created("customer", service.create(unit, command))


@endpoints.get("/customers/{customer_id:id}", scope=READ)
def get_customer(call: Call) -> Reply:
    include = call.include("customers")
    with call.read() as unit:
        return call.one("customer", service.get(unit, call.path["customer_id"]), unit, include=include)


@endpoints.put("/customers/{customer_id:id}", scope=WRITE)
def update_customer(call: Call) -> Reply:
    command = call.command("customer.update", CustomerUpdate, partial=True)
    with call.write() as unit:
        return call.one("customer", service.update(unit, call.path["customer_id"], command))


@endpoints.delete("/customers/{customer_id:id}", scope=WRITE)
def delete_customer(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["customer_id"])
    return call.deleted()
