"""What a request answers when a row it read is deleted by a concurrent request before it writes
(found by the PostgreSQL race audit of the twelfth session). The interleaving is made here by
deleting the row at the point where the concurrent delete committed in the audit's runs, in the
same transaction, so that both databases see it at once."""

from __future__ import annotations

from typing import Any

from rebill.domain.catalog import plans as plans_service
from rebill.domain.catalog import repository as catalog_repository
from rebill.domain.subscription import service as subscriptions
from rebill.errors import NotFound
from tests.api.test_bundle_selections import bapi, item, world  # noqa: F401 - fixtures
from tests.api.test_plans import coffee, create  # noqa: F401 - fixtures
from tests.builders import events_of


def test_a_bulk_update_naming_a_plan_deleted_meanwhile_is_refused_whole(api, coffee, monkeypatch):  # noqa: F811
    """Before: a KeyError on the re-read, a 500 (the audit: 10 of 45 bulk updates racing a delete)."""
    kept, doomed = create(api, title="kept"), create(api, title="doomed")
    write = plans_service.write_changes

    def deleted_meanwhile(unit: Any, plan: Any, values: Any) -> bool:
        if plan.id == doomed["id"]:
            catalog_repository.delete_plans(unit.conn, unit.store_id, [plan.id])
        return write(unit, plan, values)

    monkeypatch.setattr(plans_service, "write_changes", deleted_meanwhile)
    before = events_of(api)
    response = api.put("/plans/bulk_update", json={"plans": [
        {"id": kept["id"], "title": "changed"}, {"id": doomed["id"], "title": "gone"}]})
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {"plans": {"1": {"id": ["plan not found"]}}}
    assert api.get(f"/plans/{kept['id']}").json()["plan"]["title"] == "kept"  # all or nothing
    assert events_of(api) == before


def test_a_bundle_selection_for_an_item_deleted_meanwhile_is_a_422_as_after_the_delete(bapi, world, monkeypatch):  # noqa: F811
    """Before: the item's lock re-read it, found it gone and answered 404, as for an unknown path."""
    def deleted_meanwhile(*args: Any, **kwargs: Any) -> Any:
        raise NotFound()

    monkeypatch.setattr(subscriptions, "locked", deleted_meanwhile)
    response = bapi.post("/bundle_selections", json={"purchase_item_id": world["box"].id,
                                                     "items": [item("p-1", 2), item("p-3")]})
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {"purchase_item_id": ["purchase item not found"]}
