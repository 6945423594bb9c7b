"""The head (2021-11) response shapes (``api/shapes.py``, docs/openapi.md), one module per
family of resources, so that families are declared independently: each module holds

- ``SHAPES``: kind (what a serializer of ``SERIALIZERS`` renders) or reply shape (a whole body a
  route names with ``whole(...)``) -> its JSON Schema. Every one is declared
  (tests/unit/test_openapi_shapes.py): the document of a kind without a shape cannot be made.

A family adds its shapes to its own module; this one only merges them.
"""

from __future__ import annotations

from rebill.api.shapes import Shape

from . import (
    batches,
    bundles,
    catalog,
    charges,
    checkouts,
    collections,
    customers,
    discounts,
    metafields,
    orders,
    payment_methods,
    purchases,
    store,
    webhooks,
)

MODULES = (store, customers, catalog, purchases, charges, payment_methods, orders, metafields, discounts, webhooks,
           collections, batches, checkouts, bundles)


def _merged() -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    for module in MODULES:
        for name, shape in module.SHAPES.items():
            if name in shapes:
                raise ValueError(f"the shape {name!r} is declared twice ({module.__name__})")
            shapes[name] = shape
    return shapes


SHAPES = _merged()
