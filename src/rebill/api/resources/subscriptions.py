"""Subscriptions, both versions (decisions §5.1-§5.5, §5.16)."""

from __future__ import annotations

from typing import Any

from rebill.domain.subscription import bulk, lifecycle, service
from rebill.domain.subscription.model import SubscriptionCreate, SubscriptionUpdate
from rebill.errors import ValidationFailed

from .. import query as q
from ..call import Call, Reply, convert
from ..declared import NO_FIELDS, count, created, deleted, listed, one, page, update
from ..declared import bulk as bulk_body
from ..fields import Field, Schema
from ..routing import Endpoints

endpoints = Endpoints()
READ, WRITE = "read_subscriptions", "write_subscriptions"
V2021_01 = ("2021-01",)
# NOTE: decisions §5.2, 2021-01 bulk operations take 1 to 20 subscriptions.
BULK_MAX = 20
# The `id` of a bulk update or delete entry (`_bulk_id`), for the document.
BULK_ID = Field("id", "int", required=True, nullable=False)


@endpoints.get("/subscriptions", scope=READ, reply=page("subscriptions"))
def list_subscriptions(call: Call) -> Reply:
    query = call.list_query("subscriptions")
    with call.read() as unit:
        return call.page("subscriptions", service.list_page(unit, query), unit, query)


@endpoints.get("/subscriptions/count", scope=READ, versions=V2021_01, reply=count("subscriptions"))
def count_subscriptions(call: Call) -> Reply:
    filters = call.count_filters("subscriptions")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.post("/subscriptions", scope=WRITE, body="subscription.create", reply=created("subscription"))
def create_subscription(call: Call) -> Reply:
    command = call.command("subscription.create", SubscriptionCreate)
    with call.write() as unit:
        return call.created("subscription", service.create(unit, command))


@endpoints.get("/subscriptions/{subscription_id:id}", scope=READ, reply=one("subscription", include="subscriptions"))
def get_subscription(call: Call) -> Reply:
    include = call.include("subscriptions")
    with call.read() as unit:
        return call.one("subscription", service.get(unit, call.path["subscription_id"]), unit, include=include)


def _commit(call: Call) -> bool:
    """NOTE: decisions §5.3, 2021-11 `commit` in the query; 2021-01 `commit_update` in the
    body (its schema names it `commit`, which wins over the query)."""
    raw = call.params.get("commit")
    if raw is None:
        return True
    try:
        return q.boolean(raw)
    except ValueError as exc:
        raise ValidationFailed.field("commit", str(exc)) from None


@endpoints.put("/subscriptions/{subscription_id:id}", scope=WRITE, body=update("subscription.update"),
               reply=one("subscription"), query={"commit": q.boolean})
def update_subscription(call: Call) -> Reply:
    clean = call.version.schemas["subscription.update"].parse(call.body, partial=True)
    clean.setdefault("commit", _commit(call))
    command = convert(clean, SubscriptionUpdate)
    with call.write() as unit:
        return call.one("subscription", service.update(unit, call.path["subscription_id"], command))


@endpoints.delete("/subscriptions/{subscription_id:id}", scope=WRITE, reply=deleted())
def delete_subscription(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["subscription_id"])
    return call.deleted()


@endpoints.post("/subscriptions/{subscription_id:id}/cancel", scope=WRITE, body="subscription.cancel",
                reply=one("subscription"))
def cancel_subscription(call: Call) -> Reply:
    body = call.version.schemas["subscription.cancel"].parse(call.body)
    with call.write() as unit:
        found = lifecycle.cancel(unit, call.path["subscription_id"], body["cancellation_reason"],
                                 body.get("cancellation_reason_comments"))
        return call.one("subscription", found)


@endpoints.post("/subscriptions/{subscription_id:id}/activate", scope=WRITE, body=NO_FIELDS, reply=one("subscription"))
def activate_subscription(call: Call) -> Reply:
    with call.write() as unit:
        return call.one("subscription", lifecycle.activate(unit, call.path["subscription_id"]))


@endpoints.post("/subscriptions/{subscription_id:id}/set_next_charge_date", scope=WRITE,
                body="subscription.set_next_charge_date", reply=one("subscription"))
def set_next_charge_date(call: Call) -> Reply:
    body = call.version.schemas["subscription.set_next_charge_date"].parse(call.body)
    with call.write() as unit:
        return call.one("subscription", lifecycle.set_next_charge_date(unit, call.path["subscription_id"],
                                                                       body["date"]))


@endpoints.post("/subscriptions/{subscription_id:id}/change_address", scope=WRITE, body="subscription.change_address",
                reply=one("subscription"))
def change_address(call: Call) -> Reply:
    body = call.version.schemas["subscription.change_address"].parse(call.body)
    with call.write() as unit:
        found = lifecycle.change_address(unit, call.path["subscription_id"], body["address_id"],
                                         body.get("next_charge_scheduled_at"))
        return call.one("subscription", found)


# 2021-01 bulk ------------------------------------------------------------------------

def _bulk_items(call: Call) -> list[Any]:
    """NOTE: decisions §5.16, ``{"subscriptions": [...]}`` with 1 to 20 entries."""
    entries = call.body.get("subscriptions")
    if not isinstance(entries, list):
        raise ValidationFailed.field("subscriptions", "is required" if entries is None else "must be an array")
    if not 1 <= len(entries) <= BULK_MAX:
        raise ValidationFailed.field("subscriptions", f"must hold 1 to {BULK_MAX} subscriptions")
    return entries


def _each(call: Call, entries: list[Any], make: Any, key: Any = None) -> list[Any]:
    """Every entry parsed first, so that one bad entry changes nothing (all or nothing), and
    every bad one named (decisions §2.3). ``key``: the id an entry names, each once a request
    (an update or delete of one subscription twice is refused, as the plans' bulk does)."""
    parsed, errors, seen = [], {}, set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            errors[str(index)] = ["must be an object"]
            continue
        try:
            parsed.append(made := make(entry))
        except ValidationFailed as exc:
            errors[str(index)] = call.version.rename_errors(exc.errors, sent=entry)
            continue
        if key is not None:
            if key(made) in seen:
                errors[str(index)] = {"id": ["is duplicated in this request"]}
            seen.add(key(made))
    if errors:
        raise ValidationFailed({"subscriptions": errors})
    return parsed


def _bulk_id(entry: dict[str, Any]) -> int:
    """The `id` of a bulk update or delete entry (an integer or a numeric string)."""
    value = entry.get("id")
    if value is None:
        raise ValidationFailed.field("id", "is required")
    try:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(value)
        return q.integer(str(value))
    except ValueError:
        raise ValidationFailed.field("id", "must be an integer") from None


def _renamer(call: Call, entries: list[Any]) -> Any:
    """Domain errors of entry ``index`` in the caller's names, as it sent that entry."""
    return lambda index, errors: call.version.rename_errors(errors, sent=entries[index])


@endpoints.post("/addresses/{address_id:id}/subscriptions-bulk", scope=WRITE, versions=V2021_01,
                reply=listed("subscriptions", "subscription"),
                body=bulk_body("subscriptions", "subscription.bulk_create", max_items=BULK_MAX))
def bulk_create(call: Call) -> Reply:
    entries = _bulk_items(call)
    schema = call.version.schemas["subscription.bulk_create"]
    address_id = call.path["address_id"]
    commands = _each(call, entries, lambda e: convert({**schema.parse(e), "address_id": address_id},
                                                      SubscriptionCreate))
    with call.write() as unit:
        made = bulk.create(unit, address_id, commands, _renamer(call, entries))
        return Reply({"subscriptions": call.render("subscription", made)})


@endpoints.put("/addresses/{address_id:id}/subscriptions-bulk", scope=WRITE, versions=V2021_01,
               reply=listed("subscriptions", "subscription"),
               body=bulk_body("subscriptions", "subscription.update", max_items=BULK_MAX, partial=True,
                              item_fields=(BULK_ID,)))
def bulk_update(call: Call) -> Reply:
    entries = _bulk_items(call)
    schema = call.version.schemas["subscription.update"]
    pairs = _each(call, entries, lambda e: (_bulk_id(e), convert(schema.parse(e, partial=True), SubscriptionUpdate)),
                  key=lambda pair: pair[0])
    with call.write() as unit:
        changed = bulk.update(unit, call.path["address_id"], pairs, _renamer(call, entries))
        return Reply({"subscriptions": call.render("subscription", changed)})


@endpoints.delete("/addresses/{address_id:id}/subscriptions-bulk", scope=WRITE, versions=V2021_01, reply=deleted(),
                  body=bulk_body("subscriptions", Schema(BULK_ID), max_items=BULK_MAX))
def bulk_delete(call: Call) -> Reply:
    ids = _each(call, _bulk_items(call), _bulk_id, key=lambda found: found)
    with call.write() as unit:
        bulk.delete(unit, call.path["address_id"], ids)
    return Reply({})
