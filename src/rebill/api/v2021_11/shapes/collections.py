"""Head (2021-11) shapes of `collection`, `collection_product`
(``v2021_11/collections.py``; docs/openapi.md, "Declaring a shape")."""

from __future__ import annotations

from rebill.api.shapes import Shape

SHAPES: dict[str, Shape] = {}
# Not declared yet: the document shows them as objects marked undeclared.
PENDING: tuple[str, ...] = ("collection", "collection_product")
