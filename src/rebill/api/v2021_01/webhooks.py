"""How 2021-01 differs from the head for webhooks and their delivery log (03-real-fields
"webhook (2021-01)"): naive datetimes, and Link-header paging. The event log is 2021-11's
alone. Merged by ``contract.py``."""

from __future__ import annotations

from typing import Any

from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema
from rebill.api.v2021_11 import webhooks as head

from .changes import NaiveDatetimes


class WebhookNaiveDatetimes(NaiveDatetimes):
    """Webhook and delivery datetimes render naive in UTC (decisions §2.4), those of each
    attempt too."""

    kinds = ("webhook", "webhook_delivery")
    fields = ("created_at", "updated_at", "disabled_at", "next_attempt_at", "last_attempt_at", "succeeded_at")

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data = super().response(data, obj)
        for attempt in data.get("attempts", ()):
            if attempt["started_at"] is not None:
                attempt["started_at"] = attempt["started_at"].removesuffix("+00:00")
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        shape = super().response_shape(shape)
        attempts = shape["properties"].get("attempts")
        if attempts is not None:
            sh.naive_datetimes(attempts["items"], ("started_at",))
        return shape


CHANGES: tuple[Change, ...] = (WebhookNaiveDatetimes(),)
LISTS: dict[str, ListContract] = {name: head.LISTS[name] for name in ("webhooks", "webhook_deliveries")}
SCHEMAS: dict[str, Schema] = {"webhook.create": Schema(*head.topic_fields("2021-01"))}
