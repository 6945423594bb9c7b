"""Plans, 2021-11 only (spec 01 Plans, decisions §5.8): create, get, update, delete, list, and
the bulk create and update (all or nothing, at most 20 per request)."""

from __future__ import annotations

from typing import Any, TypeVar

from rebill.api.fields import Field, Schema
from rebill.domain.catalog import plans as service
from rebill.domain.catalog.model import PlanCreate, PlanUpdate
from rebill.domain.catalog.plans import BULK_LIMIT
from rebill.errors import ValidationFailed

from ..call import Call, Reply, convert
from ..declared import CREATED, bulk, created, deleted, listed, one, page, update
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_plans", "write_plans"
HEAD = ("2021-11",)
T = TypeVar("T")
_ID_ONLY = Schema(Field("id", "int", required=True, nullable=False))


def _bulk_items(call: Call, schema_name: str | Schema, cls: type[T], *, partial: bool,
                required: tuple[str, ...] = ()) -> list[T]:
    """The body's `plans`, each item parsed alone: errors keyed by the item's index
    (`{"plans": {"3": {"title": ["is required"]}}}`), every bad item at once."""
    items = call.body.get("plans")
    if items is None:
        raise ValidationFailed.field("plans", "is required")
    if not isinstance(items, list):
        raise ValidationFailed.field("plans", "must be an array")
    if not items:
        raise ValidationFailed.field("plans", "cannot be empty")
    if len(items) > BULK_LIMIT:
        raise ValidationFailed.field("plans", f"has too many items (at most {BULK_LIMIT})")
    schema = call.version.schemas[schema_name] if isinstance(schema_name, str) else schema_name
    errors: dict[str, Any] = {}
    clean: list[T] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors[str(index)] = ["must be an object"]
            continue
        problems: dict[str, Any] = {name: ["is required"] for name in required if item.get(name) is None}
        try:
            # Converted here too: a null the command cannot take is this item's error, named.
            clean.append(convert(schema.parse(item, partial=partial), cls))
        except ValidationFailed as exc:
            problems.update(exc.errors)  # type: ignore[arg-type]
        if problems:
            errors[str(index)] = problems
    if errors:
        raise ValidationFailed({"plans": errors})
    return clean


@endpoints.get("/plans", scope=READ, versions=HEAD, reply=page("plans"))
def list_plans(call: Call) -> Reply:
    query = call.list_query("plans")
    with call.read() as unit:
        return call.page("plans", service.list_page(unit, query), unit, query)


@endpoints.post("/plans", scope=WRITE, versions=HEAD, body="plan.create", reply=created("plan"))
def create_plan(call: Call) -> Reply:
    command = call.command("plan.create", PlanCreate)
    with call.write() as unit:
        return call.created("plan", service.create(unit, command))


@endpoints.post("/plans/bulk_create", scope=WRITE, versions=HEAD, reply=listed("plans", "plan", status=CREATED),
                body=bulk("plans", "plan.create", max_items=BULK_LIMIT))
def bulk_create_plans(call: Call) -> Reply:
    commands = _bulk_items(call, "plan.create", PlanCreate, partial=False)
    with call.write() as unit:
        made = service.bulk_create(unit, commands)
    return Reply({"plans": call.render("plan", made)}, call.version.created_status)


@endpoints.put("/plans/bulk_update", scope=WRITE, versions=HEAD, reply=listed("plans", "plan"),
               body=bulk("plans", "plan.bulk_update", max_items=BULK_LIMIT, partial=True, item_required=("id",)))
def bulk_update_plans(call: Call) -> Reply:
    commands = _bulk_items(call, "plan.bulk_update", PlanUpdate, partial=True, required=("id",))
    with call.write() as unit:
        changed = service.bulk_update(unit, commands)
    return Reply({"plans": call.render("plan", changed)})


def bulk_delete_plans(call: Call) -> Reply:
    """The `bulk_plans_delete` task of an async batch (api/tasks.py): ``{"plans": [{"id": n}]}``,
    at most 20, all or nothing, answered as a delete. Not routed: the specification has no bulk
    delete endpoint (docs/api-choices.md, Async batches)."""
    ids = [item["id"] for item in _bulk_items(call, _ID_ONLY, dict, partial=False)]
    with call.write() as unit:
        service.bulk_delete(unit, ids)
    return call.deleted()


@endpoints.get("/plans/{plan_id:id}", scope=READ, versions=HEAD, reply=one("plan"))
def get_plan(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("plan", service.get_plan(unit, call.path["plan_id"]))


@endpoints.put("/plans/{plan_id:id}", scope=WRITE, versions=HEAD, body=update("plan.update"), reply=one("plan"))
def update_plan(call: Call) -> Reply:
    command = call.command("plan.update", PlanUpdate, partial=True)
    with call.write() as unit:
        return call.one("plan", service.update(unit, call.path["plan_id"], command))


@endpoints.delete("/plans/{plan_id:id}", scope=WRITE, versions=HEAD, reply=deleted())
def delete_plan(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["plan_id"])
    return call.deleted()
