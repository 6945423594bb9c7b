"""Head (2021-11) shapes of `subscription`, `onetime`
(``v2021_11/purchases.py``; docs/openapi.md, "Declaring a shape")."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
# Not declared yet: the document shows them as objects marked undeclared.
PENDING: tuple[str, ...] = ("subscription", "onetime")
