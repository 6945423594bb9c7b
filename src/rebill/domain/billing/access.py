"""What a request may do with one charge: the plan tier a paid feature needs, and the charge
as the store sees it. Shared by manual processing and by captures and refunds, which build on
the billing run: here, apart from both, so neither imports the other (an acyclic package)."""

from __future__ import annotations

from datetime import datetime

from rebill.db.engine import Database
from rebill.errors import Forbidden, NotFound

from ..charge import repository as charge_repo
from ..charge.model import Charge
from ..store.model import Store

# NOTE: decisions §6.6, processing on request needs plan tier A (tier B includes it: docs).
TIER_A = ("premium_a", "premium_b")
# NOTE: decisions §6.6, bundle selections need plan tier B.
TIER_B = ("premium_b",)
_NAMES = {TIER_A: "A (premium_a)", TIER_B: "B (premium_b)"}


def require_tier(store: Store, tiers: tuple[str, ...], what: str) -> None:
    if store.plan_tier not in tiers:
        raise Forbidden(f"{what} needs plan tier {_NAMES[tiers]}; this store's tier is {store.plan_tier}")


def visible(db: Database, store: Store, charge_id: int, now: datetime) -> Charge:
    with db.read() as conn:
        charge = charge_repo.get(conn, store.id, charge_id, now)
    if charge is None:
        raise NotFound()
    return charge
