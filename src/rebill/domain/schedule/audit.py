"""Compare the stored queued and skipped charges with a plan made from scratch: the
property the whole schedule rests on (design guide: "a property test can compare the stored
schedule with a from-scratch plan"). Used by tests and by ``rebill schedule check``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from rebill.models import charge_items

from ..charge import repository as charges
from ..unit import Unit
from .reconcile import PLANNED, held, plan_of


def differences(unit: Unit, address_ids: list[int]) -> list[str]:
    """Every way the stored charges of these addresses differ from their plan (empty: none).
    Addresses with a deferred regeneration (decisions §5.3) are expected to differ."""
    free, held_items = held(charges.open_of(unit.conn, unit.store_id, address_ids), unit.today)
    planned = {p.key: p for p in plan_of(unit, address_ids, held_items)}
    stored: dict[Any, Any] = {}
    found: list[str] = []
    for charge in free:
        key = (charge.address_id, charge.scheduled_at, charge.status)
        if key in stored:
            found.append(f"two charges for {key}: {stored[key].id} and {charge.id}")
        stored[key] = charge
    for key in sorted(set(planned) | set(stored)):
        plan, charge = planned.get(key), stored.get(key)
        if charge is None:
            found.append(f"missing charge for {key}")
        elif plan is None:
            found.append(f"charge {charge.id} for {key} should not exist")
        else:
            for name in PLANNED:
                if getattr(charge, name) != plan.values[name]:
                    found.append(f"charge {charge.id} {name}: stored {getattr(charge, name)!r}, "
                                 f"planned {plan.values[name]!r}")
            if charge.purchase_item_ids != plan.item_ids:
                found.append(f"charge {charge.id} items: stored {charge.purchase_item_ids}, planned {plan.item_ids}")
    # The item index the list filters use must say the same as the line items.
    indexed: dict[int, set[int]] = {}
    ids = [c.id for c in stored.values()]
    if ids:
        for charge_id, item_id in unit.conn.execute(select(charge_items.c.charge_id, charge_items.c.purchase_item_id)
                                                    .where(charge_items.c.charge_id.in_(ids))):
            indexed.setdefault(charge_id, set()).add(item_id)
    for charge in stored.values():
        if indexed.get(charge.id, set()) != set(charge.purchase_item_ids):
            found.append(f"charge {charge.id} item index: {sorted(indexed.get(charge.id, set()))}, "
                         f"line items {charge.purchase_item_ids}")
    return found
