"""Head (2021-11) shapes of the webhooks family: `webhook`, `webhook_delivery`, `event`, as
``v2021_11/webhooks.py`` renders them (docs/openapi.md, "Declaring a shape"). A kind listed in
``PENDING`` has no declared shape yet: the document shows it as an open object marked
``x-rebill-shape: undeclared``. Declaring one means adding it to ``SHAPES`` with the builders of
``api/shapes.py``, removing it from ``PENDING``, and giving each 2021-01 change of the kind
(``v2021_01/webhooks.py``) its ``response_shape``."""

from __future__ import annotations

from rebill.api.shapes import Shape, array, integer, obj

SHAPES: dict[str, Shape] = {
    # `POST /webhook_deliveries/replay` (202): the ids of the deliveries sent again.
    "webhook_delivery_replay": obj({"webhook_delivery_ids": array(integer())}),
}
PENDING: tuple[str, ...] = ('webhook', 'webhook_delivery', 'event')
