"""Addresses, both versions (spec 01 Addresses, spec 02 Addresses, decisions §4), and the
2021-11 merge (decisions §5.14)."""

from collections.abc import Callable
from dataclasses import replace

from rebill.domain.address import merge, service
from rebill.domain.address.model import AddressCreate, AddressUpdate
from rebill.domain.customer import service as customers
from rebill.domain.geo import zip_problem
from rebill.errors import Forbidden

from ..call import Call, Reply
from ..declared import count, created, deleted, one, page, update, whole
from ..routing import Endpoints
from . import discounts

endpoints = Endpoints()
READ, WRITE = "read_customers", "write_customers"


@endpoints.get("/addresses", scope=READ, reply=page("addresses"))
def list_addresses(call: Call) -> Reply:
    query = call.list_query("addresses")
    with call.read() as unit:
        return call.page("addresses", service.list_page(unit, query), unit, query)


@endpoints.get("/customers/{customer_id:id}/addresses", scope=READ, versions=("2021-01",), reply=page("addresses"))
def list_customer_addresses(call: Call) -> Reply:
    query = call.list_query("addresses")
    query = replace(query, filters={**query.filters, "customer_id": call.path["customer_id"]})
    with call.read() as unit:
        customers.get(unit, call.path["customer_id"])  # 404 for an unknown or foreign customer
        return call.page("addresses", service.list_page(unit, query), unit, query)


@endpoints.get("/addresses/count", scope=READ, versions=("2021-01",), reply=count("addresses"))
def count_addresses(call: Call) -> Reply:
    filters = call.count_filters("addresses")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.post("/addresses", scope=WRITE, versions=("2021-11",), body="address.create", reply=created("address"))
def create_address(call: Call) -> Reply:
    command = call.command("address.create", AddressCreate)
    with call.write() as unit:
        return call.created("address", service.create(unit, call.services.verifier, command,
                                                      authorize_discount=_discount_scope_check(call)))


def _discount_scope_check(call: Call) -> Callable[[], None]:
    """An address's discount set through its 2021-11 body (`discounts`) needs what the apply and
    remove endpoints need (docs/scopes.md; found by an audit: a `write_customers` token put a
    50 % code on an address and found out which codes exist). The domain asks before it looks
    any code up, and only when the discount would change; the 403 writes nothing."""
    def check() -> None:
        if not call.token.allows(discounts.WRITE):
            raise Forbidden(f"This token lacks the scope changing an address's discount needs: {discounts.WRITE}")
    return check


@endpoints.post("/customers/{customer_id:id}/addresses", scope=WRITE, versions=("2021-01",), body="address.create",
                reply=created("address"))
def create_customer_address(call: Call) -> Reply:
    customer_id = call.path["customer_id"]
    with call.read() as unit:
        customers.get(unit, customer_id)  # 404 before any body error: the path names the parent
    command = call.command("address.create", AddressCreate, customer_id=customer_id)
    with call.write() as unit:
        return call.created("address", service.create(unit, call.services.verifier, command))


@endpoints.get("/addresses/{address_id:id}", scope=READ, reply=one("address", include="addresses"))
def get_address(call: Call) -> Reply:
    include = call.include("addresses")
    with call.read() as unit:
        return call.one("address", service.get(unit, call.path["address_id"]), unit, include=include)


@endpoints.put("/addresses/{address_id:id}", scope=WRITE, body=update("address.update"), reply=one("address"))
def update_address(call: Call) -> Reply:
    command = call.command("address.update", AddressUpdate, partial=True)
    with call.write() as unit:
        return call.one("address", service.update(unit, call.services.verifier, call.path["address_id"], command,
                                                  authorize_discount=_discount_scope_check(call)))


@endpoints.delete("/addresses/{address_id:id}", scope=WRITE, reply=deleted())
def delete_address(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["address_id"])
    return call.deleted()


@endpoints.post("/addresses/validate", scope=READ, versions=("2021-01",), body="address_validation.verify",
                reply=whole("address_validation"))
def validate_address(call: Call) -> Reply:
    """NOTE: spec 02 Addresses, USA only; decisions §4.4 offline verifier. The endpoint speaks
    `state`/`zipcode` where addresses say `province`/`zip`."""
    body = call.version.schemas["address_validation.verify"].parse(call.body)
    verdict = call.services.verifier.verify(address1=body["address1"], city=body["city"],
                                            province=body["state"], zip=body["zipcode"])
    names = {"province": "state", "zip": "zipcode"}
    errors = {names.get(k, k): v for k, v in verdict.errors.items()}
    # The rules an address create applies besides the verifier's (which reads the first five
    # digits): what this endpoint approves, a create takes (spec 02, decisions §4.3).
    if problem := zip_problem("US", body["zipcode"]):
        errors["zipcode"] = [problem]
    for name in ("address1", "city"):
        if not body[name].strip():
            errors[name] = ["cannot be blank"]
    return Reply({"city": verdict.city, "errors": errors, "state": verdict.province_code,
                  "state_name": verdict.province_name, "zipcode": verdict.zip})


@endpoints.post("/addresses/merge", scope=WRITE, versions=("2021-11",), body="address.merge", reply=one("address"))
def merge_addresses(call: Call) -> Reply:
    """NOTE: decisions §5.14, §5.16; all or nothing, 200 with the target address."""
    body = call.version.schemas["address.merge"].parse(call.body)
    command = merge.AddressMerge(target_id=body["target_address"]["id"],
                                 source_ids=[source["id"] for source in body["source_addresses"]],
                                 delete_sources=bool(body.get("delete_source_addresses")),
                                 next_charge_date=body.get("next_charge_date"))
    with call.write() as unit:
        return call.one("address", merge.merge(unit, command))
