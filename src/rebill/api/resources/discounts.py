"""Discounts, both versions (spec 02 Discounts, decisions §7.1, §7.5), and the discount
application endpoints of addresses and charges (spec 02 Discount application endpoints,
Charges)."""

from __future__ import annotations

from typing import Any

from rebill.domain.discount import apply, service
from rebill.domain.discount.model import DiscountCreate, DiscountUpdate
from rebill.errors import ValidationFailed

from ..call import Call, Reply
from ..declared import NO_FIELDS, count, created, deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_discounts", "write_discounts"


@endpoints.get("/discounts", scope=READ, reply=page("discounts"))
def list_discounts(call: Call) -> Reply:
    query = call.list_query("discounts")
    with call.read() as unit:
        return call.page("discounts", service.list_page(unit, query), unit, query)


@endpoints.get("/discounts/count", scope=READ, versions=("2021-01",), reply=count("discounts"))
def count_discounts(call: Call) -> Reply:
    filters = call.count_filters("discounts")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.post("/discounts", scope=WRITE, body="discount.create", reply=created("discount"))
def create_discount(call: Call) -> Reply:
    command = call.command("discount.create", DiscountCreate)
    with call.write() as unit:
        return call.created("discount", service.create(unit, command))


@endpoints.get("/discounts/{discount_id:id}", scope=READ, reply=one("discount"))
def get_discount(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("discount", service.get(unit, call.path["discount_id"]))


@endpoints.put("/discounts/{discount_id:id}", scope=WRITE, body=update("discount.update"), reply=one("discount"))
def update_discount(call: Call) -> Reply:
    command = call.command("discount.update", DiscountUpdate, partial=True)
    with call.write() as unit:
        return call.one("discount", service.update(unit, call.path["discount_id"], command, fixed=_fixed(call)))


def _fixed(call: Call) -> dict[str, tuple[str, Any]]:
    """The fields of a create that an update does not change (`code`, `value`, its type, what it
    applies to...) that the body sent, each as the create reads it with the name it was sent
    under: the domain refuses one that differs from the discount's (service.update)."""
    made, changed = call.version.schemas["discount.create"], call.version.schemas["discount.update"]
    body = call.body if isinstance(call.body, dict) else {}
    return {target: (name, value) for name, sent in body.items() if name in made and name not in changed
            for target, value in made.parse({name: sent}, partial=True).items()}


@endpoints.delete("/discounts/{discount_id:id}", scope=WRITE, reply=deleted())
def delete_discount(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["discount_id"])
    return call.deleted()


def _chosen(call: Call) -> tuple[int | None, str | None]:
    """NOTE: spec 02, `discount_code` or `discount_id`; when both, `discount_id` wins."""
    body = call.version.schemas["discount.apply"].parse(call.body)
    discount_id = body.get("discount_id")
    return discount_id, None if discount_id is not None else body.get("discount_code")


@endpoints.post("/addresses/{address_id:id}/apply_discount", scope=WRITE, body="discount.apply", reply=one("address"))
def apply_to_address(call: Call) -> Reply:
    discount_id, code = _chosen(call)
    with call.write() as unit:
        return call.one("address", apply.apply_to_address(unit, call.path["address_id"], discount_id, code))


@endpoints.post("/addresses/{address_id:id}/remove_discount", scope=WRITE, body=NO_FIELDS, reply=one("address"))
def remove_from_address(call: Call) -> Reply:
    with call.write() as unit:
        return call.one("address", apply.remove_from_address(unit, call.path["address_id"]))


@endpoints.post("/charges/{charge_id:id}/apply_discount", scope=WRITE, body="discount.apply", reply=one("charge"))
def apply_to_charge(call: Call) -> Reply:
    discount_id, code = _chosen(call)
    with call.write() as unit:
        return call.one("charge", apply.apply_to_charge(unit, call.path["charge_id"], discount_id, code))


@endpoints.post("/charges/{charge_id:id}/remove_discount", scope=WRITE, body="discount.remove", reply=one("charge"))
def remove_from_charge(call: Call) -> Reply:
    """NOTE: spec 02, `address_id` or `charge_id`; with both, the address's code is removed.
    A `charge_id` must be the path's charge, as an `address_id` must be its address."""
    body = call.version.schemas["discount.remove"].parse(call.body)
    if body.get("charge_id") is not None and body["charge_id"] != call.path["charge_id"]:
        raise ValidationFailed.field("charge_id", "is not the charge of this path")
    with call.write() as unit:
        return call.one("charge", apply.remove_from_charge(unit, call.path["charge_id"], body.get("address_id")))
