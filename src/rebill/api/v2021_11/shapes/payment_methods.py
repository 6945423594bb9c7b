"""Head (2021-11) shapes of `payment_method`, `payment_source`
(``v2021_11/payment_methods.py``; docs/openapi.md, "Declaring a shape")."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
# Not declared yet: the document shows them as objects marked undeclared.
PENDING: tuple[str, ...] = ("payment_method", "payment_source")
