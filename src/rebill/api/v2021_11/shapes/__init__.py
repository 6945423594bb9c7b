"""The head (2021-11) response shapes (``api/shapes.py``, docs/openapi.md), one module per
family of resources, so that families are declared independently: each module holds

- ``SHAPES``: kind (what a serializer of ``SERIALIZERS`` renders) or reply shape (a whole body a
  route names with ``whole(...)``) -> its JSON Schema;
- ``PENDING``: the kinds and reply shapes of the family not declared yet; the document shows them
  as open objects marked ``x-rebill-shape: undeclared`` (tests/unit/test_openapi_shapes.py lists
  them).

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


def _merged() -> tuple[dict[str, Shape], tuple[str, ...]]:
    shapes: dict[str, Shape] = {}
    pending: list[str] = []
    for module in MODULES:
        for name, shape in module.SHAPES.items():
            if name in shapes:
                raise ValueError(f"the shape {name!r} is declared twice ({module.__name__})")
            shapes[name] = shape
        pending.extend(module.PENDING)
    return shapes, tuple(pending)


SHAPES, PENDING = _merged()
