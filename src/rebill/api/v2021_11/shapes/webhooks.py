"""Head (2021-11) shapes of `webhook` (decisions §8.2; 03-real-fields "webhook (2021-01)" names
`id`, `address`, `topic`, the rest is Rebill's own), `webhook_delivery` (Rebill's delivery log,
with its attempts), `event` (03-real-fields "event (2021-11)", issue 14) and the reply of
`POST /webhook_deliveries/replay`: what ``v2021_11/webhooks.py`` and ``resources/webhooks.py``
render. 2021-01 derives its webhook and delivery through ``v2021_01/webhooks.py``; the event log
is 2021-11's alone."""

from __future__ import annotations

from rebill.api.shapes import (
    any_object,
    array,
    boolean,
    datetime_offset,
    enum,
    integer,
    null,
    nullable,
    obj,
    string,
)
from rebill.domain.event.model import ORIGINS
from rebill.domain.store.model import API_VERSIONS
from rebill.domain.webhook.model import STATUSES

webhook = obj({
    "id": integer(),
    "address": string(),
    "topic": string(),
    "included_objects": array(string()),
    # The version its payloads use: the one the webhook was created in.
    "api_version": enum(*API_VERSIONS),
    "status": enum("enabled", "disabled"),
    "disabled_at": nullable(datetime_offset()),
    "created_at": datetime_offset(),
    "updated_at": datetime_offset(),
})

attempt = obj({
    "number": integer(minimum=1),
    "replay": boolean(),
    "started_at": datetime_offset(),
    # Null when no answer came (a timeout, a refused connection: `error` says which).
    "status_code": nullable(integer()),
    "latency_ms": integer(minimum=0),
    "response": nullable(string()),
    "error": nullable(string()),
})

webhook_delivery = obj({
    "id": integer(),
    "webhook_id": integer(),
    # Null for a test delivery (`POST /webhooks/{id}/test`), which no event made.
    "event_id": nullable(integer()),
    # The Standard Webhooks `webhook-id` of every attempt (`msg_<id>`).
    "message_id": string(pattern=r"^msg_[0-9]+$"),
    "topic": string(),
    "object_type": string(),
    "object_id": integer(),
    "test": boolean(),
    "status": enum(*STATUSES),
    "attempt_count": integer(minimum=0),
    "next_attempt_at": nullable(datetime_offset()),
    "last_attempt_at": nullable(datetime_offset()),
    "last_status_code": nullable(integer()),
    "last_error": nullable(string()),
    "succeeded_at": nullable(datetime_offset()),
    "created_at": datetime_offset(),
    "updated_at": datetime_offset(),
    "attempts": array(attempt),
}, {
    # `GET /webhook_deliveries/{id}` alone: the body sent, as JSON (null if it is not JSON).
    "payload": nullable(any_object()),
})

event = obj({
    "id": integer(),
    # NOTE: decisions §2.4 (03-real-fields saw it naive; its preamble defers to §2.4).
    "created_at": datetime_offset(),
    # NOTE: 03-real-fields, an array; Rebill records none.
    "custom_attributes": array(),
    # Null for a change of no customer's (a product, a webhook, the store).
    "customer_id": nullable(integer()),
    "description": string(),
    "object_id": integer(),
    "object_type": string(),
    "source": obj({
        "account_email": null(),
        "account_id": null(),
        "api_token_id": nullable(integer()),
        "api_token_name": nullable(string()),
        "origin": enum(*ORIGINS, None),
        "user_type": enum("api_token", None),
    }),
    "updated_attributes": array(string()),
    "verb": string(),
})

SHAPES = {
    "webhook": webhook,
    "webhook_delivery": webhook_delivery,
    "event": event,
    # `POST /webhook_deliveries/replay` (202): the ids of the deliveries sent again.
    "webhook_delivery_replay": obj({"webhook_delivery_ids": array(integer())}),
}
