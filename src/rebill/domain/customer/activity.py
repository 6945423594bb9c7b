"""A customer's status follows its subscriptions (decisions §5.16): `active` while it has at
least one active subscription, `inactive` otherwise, with `customer/activated` and
`customer/deactivated` when it turns."""

from __future__ import annotations

from sqlalchemy import update

from rebill.models import customers

from ..subscription import repository as items
from ..unit import Unit


def refresh(unit: Unit, customer_id: int) -> None:
    wanted = "active" if items.active_count(unit.conn, unit.store_id, customer_id=customer_id) else "inactive"
    changed = unit.conn.execute(
        update(customers)
        .where(customers.c.id == customer_id, customers.c.store_id == unit.store_id, customers.c.status != wanted)
        .values(status=wanted, updated_at=unit.now)).rowcount
    if changed:
        unit.record("customer/activated" if wanted == "active" else "customer/deactivated", customer_id)
