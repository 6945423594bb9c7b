"""Webhooks, both versions (decisions §8.2, issue 14), and Rebill's delivery log: every
delivery with its attempts, replays, a test delivery, enabling a disabled webhook
(docs/api-choices.md, Webhooks). Spec 01 lists no webhook scope: they use
`write_notifications`, reads included (docs/scopes.md)."""

from __future__ import annotations

from rebill.domain.webhook import log, service
from rebill.domain.webhook.model import WebhookCreate, WebhookUpdate

from ..call import Call, Reply
from ..declared import NO_FIELDS, created, deleted, one, page, update, whole
from ..routing import Endpoints
from ..v2021_11.webhooks import payload

endpoints = Endpoints()
SCOPE = "write_notifications"


@endpoints.get("/webhooks", scope=SCOPE, reply=page("webhooks"))
def list_webhooks(call: Call) -> Reply:
    query = call.list_query("webhooks")
    with call.read() as unit:
        return call.page("webhooks", service.list_page(unit, query), unit, query)


@endpoints.post("/webhooks", scope=SCOPE, body="webhook.create", reply=created("webhook"))
def create_webhook(call: Call) -> Reply:
    command = call.command("webhook.create", WebhookCreate)
    with call.write() as unit:
        return call.created("webhook", service.create(unit, command, call.version.name,
                                                        policy=call.services.webhook_private))


@endpoints.get("/webhooks/{webhook_id:id}", scope=SCOPE, reply=one("webhook"))
def get_webhook(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("webhook", service.get(unit, call.path["webhook_id"]))


@endpoints.put("/webhooks/{webhook_id:id}", scope=SCOPE, body=update("webhook.update"), reply=one("webhook"))
def update_webhook(call: Call) -> Reply:
    command = call.command("webhook.update", WebhookUpdate, partial=True)
    with call.write() as unit:
        return call.one("webhook", service.update(unit, call.path["webhook_id"], command,
                                                    policy=call.services.webhook_private))


@endpoints.delete("/webhooks/{webhook_id:id}", scope=SCOPE, reply=deleted())
def delete_webhook(call: Call) -> Reply:
    with call.write() as unit:
        service.delete_webhook(unit, call.path["webhook_id"])
    return call.deleted()


@endpoints.post("/webhooks/{webhook_id:id}/test", scope=SCOPE, body=NO_FIELDS,
                reply=one("webhook_delivery", status=202))
def test_webhook(call: Call) -> Reply:
    """NOTE: decisions §8.2; 202: the delivery is queued, the delivery job sends it."""
    with call.write() as unit:
        return call.one("webhook_delivery", log.test(unit, call.path["webhook_id"]), status=202)


@endpoints.post("/webhooks/{webhook_id:id}/enable", scope=SCOPE, body=NO_FIELDS, reply=one("webhook"), extension=True)
def enable_webhook(call: Call) -> Reply:
    with call.write() as unit:
        return call.one("webhook", service.enable(unit, call.path["webhook_id"]))


@endpoints.get("/webhook_deliveries", scope=SCOPE, reply=page("webhook_deliveries"), extension=True)
def list_deliveries(call: Call) -> Reply:
    query = call.list_query("webhook_deliveries")
    with call.read() as unit:
        return call.page("webhook_deliveries", log.list_page(unit, query), unit, query)


@endpoints.get("/webhook_deliveries/{delivery_id:id}", scope=SCOPE, reply=one("webhook_delivery"), extension=True)
def get_delivery(call: Call) -> Reply:
    with call.read() as unit:
        found = log.get(unit, call.path["delivery_id"])
        reply = call.one("webhook_delivery", found)
        reply.body["webhook_delivery"]["payload"] = payload(log.body_of(unit, found))
    return reply


@endpoints.post("/webhook_deliveries/{delivery_id:id}/replay", scope=SCOPE, body=NO_FIELDS,
                reply=one("webhook_delivery", status=202), extension=True)
def replay_delivery(call: Call) -> Reply:
    with call.write() as unit:
        return call.one("webhook_delivery", log.replay(unit, call.path["delivery_id"]), status=202)


@endpoints.post("/webhook_deliveries/replay", scope=SCOPE, body="webhook_delivery.replay",
                reply=whole("webhook_delivery_replay", status=202), extension=True)
def replay_failed(call: Call) -> Reply:
    """Every failed delivery created since `since` (of one webhook, `webhook_id`), again."""
    body = call.version.schemas["webhook_delivery.replay"].parse(call.body)
    with call.write() as unit:
        ids = log.replay_failed(unit, body["since"], body.get("webhook_id"))
    return Reply({"webhook_delivery_ids": ids}, 202)
