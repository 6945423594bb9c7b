"""A fully disabled code leaves the charges in retry too (decisions §7.5: "clears it from
queued and errored charges, never from processed ones"). A charge in retry is held out of the
plan (its items wait for the retry), so the reconciler never rewrites it: its money is
computed again here by the same function the plan uses, without the code, from its own items,
address and date."""

from __future__ import annotations

from ..address import repository as addresses
from ..charge import repository as charges
from ..charge.model import ERROR
from ..customer import repository as customers
from ..schedule.plan import build_charge
from ..schedule.reconcile import billing_of
from ..store import repository as stores
from ..subscription import repository as items
from ..unit import Unit

# The money a code changes; the rest of an errored charge (status, attempts, dates) stays.
MONEY = ("line_items", "tax_lines", "discounts", "discount_id", "subtotal_price", "total_discounts",
         "total_line_items_price", "total_tax", "total_shipping", "total_price")


def strip_errored(unit: Unit, charge_ids: list[int]) -> None:
    found = [c for c in charges.many(unit.conn, unit.store_id, charge_ids).values()
             if c.status == ERROR and c.claimed_by is None]
    if not found:
        return
    store = stores.get(unit.conn, unit.store_id) or unit.store
    places = addresses.many(unit.conn, unit.store_id, [c.address_id for c in found])
    billing = customers.billing_addresses(unit.conn, unit.store_id, [c.customer_id for c in found])
    rows = []
    for charge in found:
        address = places.get(charge.address_id)
        lines = items.many(unit.conn, unit.store_id, charge.purchase_item_ids)
        if address is None or not lines:
            continue
        planned = build_charge(store, address, billing_of(billing.get(charge.customer_id)), charge.scheduled_at,
                               ERROR, list(lines.values()), None)
        rows.append({**{name: planned.values[name] for name in MONEY}, "charge_id": charge.id,
                     "updated_at": unit.now})
    charges.update_many(unit.conn, (*MONEY, "updated_at"), rows)
    unit.record_many("charge/updated", [row["charge_id"] for row in rows])
