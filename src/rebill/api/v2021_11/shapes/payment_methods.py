"""Head (2021-11) shapes of the payment_methods family: `payment_method`, `payment_source`, as
``v2021_11/payment_methods.py`` renders them (docs/openapi.md, "Declaring a shape"). A kind
listed in ``PENDING`` has no declared shape yet: the document shows it as an open object marked
``x-rebill-shape: undeclared``. Declaring one means adding it to ``SHAPES`` with the builders of
``api/shapes.py``, removing it from ``PENDING``, and giving each 2021-01 change of the kind
(``v2021_01/payment_methods.py``) its ``response_shape``."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
PENDING: tuple[str, ...] = ('payment_method', 'payment_source')
