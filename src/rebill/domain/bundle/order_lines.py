"""What a new order carries of its bundles (spec 01 Bundle selection: "a new order of the
subscription takes the current contents of the selection"; docs/api-choices.md, Bundles).

An order copies its charge's lines (domain/billing/outcome.py). The line of a purchase item that
holds a bundle selection keeps its price, quantity and totals (the order's money is the charge's)
and takes the selection's contents as it stands when the order is made, in its `properties`
after the item's own:

- `_bundle_selection_id`: the selection's id;
- `_bundle_items`: the items as JSON text, a list of `{collection_id, external_product_id,
  external_variant_id, quantity, price}` (as `GET /bundle_selections/{id}` shows them).

A property the item itself set under one of these names is replaced. One statement for the
selections of a whole billing batch (and one for their items)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from sqlalchemy import Connection

from . import repository
from .model import BundleSelection

SELECTION_PROPERTY = "_bundle_selection_id"
ITEMS_PROPERTY = "_bundle_items"
_NAMES = (SELECTION_PROPERTY, ITEMS_PROPERTY)


def _properties(selection: BundleSelection) -> list[dict[str, str]]:
    items = [{"collection_id": str(i.collection_id), "external_product_id": i.external_product_id,
              "external_variant_id": i.external_variant_id, "quantity": i.quantity, "price": str(i.price)}
             for i in selection.items]
    return [{"name": SELECTION_PROPERTY, "value": str(selection.id)},
            {"name": ITEMS_PROPERTY, "value": msgspec.json.encode(items).decode()}]


def with_contents(conn: Connection, store_id: int, lines_of: Iterable[tuple[int, list[dict[str, Any]]]]
                  ) -> dict[int, list[dict[str, Any]]]:
    """key -> the lines as an order carries them, for each (key, lines) given: a line of a
    purchase item with a bundle selection takes its contents; the others stay as they are."""
    given = list(lines_of)
    found = repository.selections_of_items(
        conn, store_id, [line["purchase_item_id"] for _, lines in given for line in lines
                         if line.get("purchase_item_id") is not None])
    if not found:
        return {key: lines for key, lines in given}
    made: dict[int, list[dict[str, Any]]] = {}
    for key, lines in given:
        made[key] = []
        for line in lines:
            selection = found.get(line.get("purchase_item_id"))  # type: ignore[arg-type]
            if selection is not None:
                own = [p for p in line.get("properties") or [] if p.get("name") not in _NAMES]
                line = {**line, "properties": own + _properties(selection)}
            made[key].append(line)
    return made
