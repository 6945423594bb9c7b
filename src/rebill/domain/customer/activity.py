"""A customer's status follows its subscriptions (decisions §5.16): `active` while it has at
least one active subscription, `inactive` otherwise, with `customer/activated` and
`customer/deactivated` when it turns."""

from __future__ import annotations

from sqlalchemy import bindparam, update

from rebill.db.prepared import Prepared
from rebill.models import customers

from ..subscription import repository as items
from ..unit import Unit
from . import repository

_turn = Prepared(
    update(customers)
    .where(customers.c.id == bindparam("id"), customers.c.store_id == bindparam("store_id"),
           customers.c.status != bindparam("wanted"))
    .values(status=bindparam("status"), updated_at=bindparam("updated_at")))


def refresh(unit: Unit, customer_id: int, *, has_active: bool | None = None) -> None:
    """``has_active``: what the caller knows (it has just made an active subscription), so
    that the subscriptions need not be counted."""
    if has_active is None:
        # Counted under the customer's lock: two writes of its subscriptions at once (on two
        # addresses, which lock nothing of each other) each counted without the other's change
        # and left it `active` with none, or `inactive` with one (found by an audit).
        repository.exists_in_store(unit.conn, unit.store_id, customer_id, lock="change")
        has_active = items.active_count(unit.conn, unit.store_id, customer_id=customer_id) > 0
    wanted = "active" if has_active else "inactive"
    changed = _turn.run(unit.conn, id=customer_id, store_id=unit.store_id, wanted=wanted, status=wanted,
                        updated_at=unit.now)
    if changed:
        unit.record("customer/activated" if wanted == "active" else "customer/deactivated", customer_id)
