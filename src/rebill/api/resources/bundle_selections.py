"""Bundle selections (spec 01 Bundle selections, premium tier B; 2021-11 only, decisions §2.1):
the contents one subscription or one-time item holds (docs/api-choices.md, Bundles). The tier is
checked right after the scope, before the body or the query is read."""

from __future__ import annotations

from rebill.domain.bundle import selections as service
from rebill.domain.bundle.model import BundleSelectionCreate, BundleSelectionUpdate

from ..call import Call, Reply
from ..declared import deleted, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
# NOTE: spec 01 lists no bundle scope: a selection is what a subscription delivers, so it uses
# the subscriptions' scopes, as the real service's storefront clients do (docs/scopes.md).
READ, WRITE = "read_subscriptions", "write_subscriptions"
HEAD = ("2021-11",)
TIER = service.require_access  # checked by the router before the body or the query is read


@endpoints.get("/bundle_selections", scope=READ, versions=HEAD, store_check=TIER, reply=page("bundle_selections"))
def list_bundle_selections(call: Call) -> Reply:
    query = call.list_query("bundle_selections")
    with call.read() as unit:
        return call.page("bundle_selections", service.list_page(unit, query), unit, query)


@endpoints.post("/bundle_selections", scope=WRITE, versions=HEAD, store_check=TIER, body="bundle_selection.create",
                reply=one("bundle_selection"))
def create_bundle_selection(call: Call) -> Reply:
    command = call.command("bundle_selection.create", BundleSelectionCreate)
    with call.write() as unit:
        # NOTE: spec 01 Bundle selections, a create answers 200 (not 201).
        return call.one("bundle_selection", service.create(unit, command))


@endpoints.get("/bundle_selections/{bundle_selection_id:id}", scope=READ, versions=HEAD, store_check=TIER, reply=one("bundle_selection"))
def get_bundle_selection(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("bundle_selection", service.get(unit, call.path["bundle_selection_id"]))


@endpoints.put("/bundle_selections/{bundle_selection_id:id}", scope=WRITE, versions=HEAD, store_check=TIER,
               body=update("bundle_selection.update"), reply=one("bundle_selection"))
def update_bundle_selection(call: Call) -> Reply:
    command = call.command("bundle_selection.update", BundleSelectionUpdate, partial=True)
    with call.write() as unit:
        return call.one("bundle_selection", service.update(unit, call.path["bundle_selection_id"], command))


@endpoints.delete("/bundle_selections/{bundle_selection_id:id}", scope=WRITE, versions=HEAD, store_check=TIER, reply=deleted())
def delete_bundle_selection(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["bundle_selection_id"])
    return call.deleted()
