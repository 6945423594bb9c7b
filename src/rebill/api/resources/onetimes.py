"""One-time items, both versions (decisions §5.6). 2021-01 creates them under their address."""

from __future__ import annotations

from rebill.domain.address import service as addresses
from rebill.domain.subscription import onetimes, service
from rebill.domain.subscription.model import ONETIME, OnetimeCreate, OnetimeUpdate

from ..call import Call, Reply
from ..declared import count, created, deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_subscriptions", "write_subscriptions"


@endpoints.get("/onetimes", scope=READ, reply=page("onetimes"))
def list_onetimes(call: Call) -> Reply:
    query = call.list_query("onetimes")
    with call.read() as unit:
        return call.page("onetimes", service.list_page(unit, query, ONETIME), unit, query)


@endpoints.get("/onetimes/count", scope=READ, versions=("2021-01",), reply=count("onetimes"))
def count_onetimes(call: Call) -> Reply:
    filters = call.count_filters("onetimes")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters, ONETIME)})


@endpoints.post("/onetimes", scope=WRITE, versions=("2021-11",), body="onetime.create", reply=created("onetime"))
def create_onetime(call: Call) -> Reply:
    command = call.command("onetime.create", OnetimeCreate)
    with call.write() as unit:
        return call.created("onetime", onetimes.create(unit, command))


@endpoints.post("/addresses/{address_id:id}/onetimes", scope=WRITE, versions=("2021-01",), body="onetime.create",
                reply=created("onetime"))
def create_address_onetime(call: Call) -> Reply:
    """NOTE: decisions §5.6, 2021-01 creates one-time items through their address."""
    with call.read() as unit:
        addresses.get(unit, call.path["address_id"])  # 404 before any body error: the path names the parent
    command = call.command("onetime.create", OnetimeCreate, address_id=call.path["address_id"])
    with call.write() as unit:
        return call.created("onetime", onetimes.create(unit, command))


@endpoints.get("/onetimes/{onetime_id:id}", scope=READ, reply=one("onetime"))
def get_onetime(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("onetime", service.get(unit, call.path["onetime_id"], ONETIME))


@endpoints.put("/onetimes/{onetime_id:id}", scope=WRITE, body=update("onetime.update"), reply=one("onetime"))
def update_onetime(call: Call) -> Reply:
    command = call.command("onetime.update", OnetimeUpdate, partial=True)
    with call.write() as unit:
        return call.one("onetime", onetimes.update(unit, call.path["onetime_id"], command))


@endpoints.delete("/onetimes/{onetime_id:id}", scope=WRITE, reply=deleted())
def delete_onetime(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["onetime_id"], ONETIME)
    return call.deleted()
