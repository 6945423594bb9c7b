"""An event as `GET /events` reads it (03-real-fields "event (2021-11)", issue 14)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

# Who makes changes (the `source.origin` of an event): a token through the API, the operator's
# command line, the billing run (in `rebill serve`, `rebill bill` or a test clock's advance),
# the deferred regeneration, the webhook delivery job (`webhook/disabled`), checkouts, async
# batches, and a payment processor's own webhook events (`processor`: a payment finished, a
# refund made in Stripe's Dashboard, a payment method detached; issue 16).
ORIGINS = ("api", "cli", "billing_run", "regeneration", "webhook", "checkout", "batch", "processor", "system")


class Event(msgspec.Struct):
    """Positional, so a row builds it in field order (db/rows.py); ``token_name`` comes from a join."""

    id: int
    store_id: int
    topic: str
    resource: str
    resource_id: int
    customer_id: int | None
    data: dict[str, Any] | None
    origin: str | None
    token_id: int | None
    updated_attributes: list[str] | None
    created_at: datetime
    token_name: str | None

    @property
    def verb(self) -> str:
        return self.topic.split("/", 1)[1]

    @property
    def description(self) -> str:
        """A line for people: "subscription 12 cancelled", "customer 4 payment method updated";
        a disabled webhook names the delivery that failed its last attempt and its topic."""
        line = f"{self.resource} {self.resource_id} {self.verb.replace('_', ' ')}"
        if self.topic == "webhook/disabled" and self.data and self.data.get("delivery_id") is not None:
            line += f" after delivery {self.data['delivery_id']} ({self.data.get('topic')}) failed every attempt"
        return line
