"""The contents an authorized charge was paid for stay until its capture (docs/api-choices.md,
"Bundles"): the capture makes the charge's order with the contents the item's selection then
holds, for the money authorized. So while a charge holding the item is `pending`, a dynamic
bundle's contents keep their price (bundle/selections.py) and no bundle's contents leave the
item: not by deleting the selection, moving it to another item, nor deleting the item (found by
an audit: each answered 2xx, and the capture charged for an order that carried no contents)."""

from __future__ import annotations

from rebill.errors import ValidationFailed

from ..charge import repository as charges
from ..unit import Unit
from . import repository


def keep_contents(unit: Unit, item_id: int, field: str, then: str) -> None:
    """422 on ``field`` when the item has a bundle selection and a charge holding it waits for
    its capture; ``then``: what the caller may do once it is captured."""
    if repository.selection_of_item(unit.conn, unit.store_id, item_id) is None:
        return
    waiting = charges.authorized_holding(unit.conn, unit.store_id, item_id)
    if waiting is not None:
        raise ValidationFailed.field(field, f"its charge {waiting} is authorized for its bundle's contents and "
                                            f"waits for its capture: {then} once it is captured")
