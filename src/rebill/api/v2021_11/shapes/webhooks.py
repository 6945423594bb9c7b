"""Head (2021-11) shapes of `webhook`, `webhook_delivery`, `event`
(``v2021_11/webhooks.py``; docs/openapi.md, "Declaring a shape")."""

from __future__ import annotations

from rebill.api.shapes import Shape, array, integer, obj

SHAPES: dict[str, Shape] = {
    # `POST /webhook_deliveries/replay` (202): the ids of the deliveries sent again.
    "webhook_delivery_replay": obj({"webhook_delivery_ids": array(integer())}),
}
# Not declared yet: the document shows them as objects marked undeclared.
PENDING: tuple[str, ...] = ("webhook", "webhook_delivery", "event")
