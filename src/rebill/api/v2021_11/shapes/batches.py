"""Head (2021-11) shapes of the batches family: `async_batch`, `async_batch_task`, as
``v2021_11/batches.py`` renders them (docs/openapi.md, "Declaring a shape"). A kind listed in
``PENDING`` has no declared shape yet: the document shows it as an open object marked
``x-rebill-shape: undeclared``. Declaring one means adding it to ``SHAPES`` with the builders of
``api/shapes.py``, removing it from ``PENDING``, and giving each 2021-01 change of the kind
(``v2021_01/batches.py``) its ``response_shape``."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
PENDING: tuple[str, ...] = ('async_batch', 'async_batch_task')
