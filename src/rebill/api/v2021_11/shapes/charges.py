"""Head (2021-11) shapes of `charge` (``v2021_11/charges.py``; docs/openapi.md, "Declaring a shape")."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
# Not declared yet: the document shows them as objects marked undeclared.
PENDING: tuple[str, ...] = ("charge",)
