"""Head (2021-11) shapes of `product`, `plan` (``v2021_11/catalog.py``; docs/openapi.md, "Declaring a shape")."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
# Not declared yet: the document shows them as objects marked undeclared.
PENDING: tuple[str, ...] = ("product", "plan")
