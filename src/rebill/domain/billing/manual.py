"""Processing one charge on request (`POST /charges/{id}/process`, decisions §6.6, §6.12)."""

from __future__ import annotations

import uuid
from datetime import datetime

from rebill.db.engine import Database
from rebill.errors import Conflict, Forbidden, NotFound, ServiceUnavailable, ValidationFailed

from ..charge import repository as charge_repo
from ..charge import service as charge_service
from ..charge.model import ERROR, QUEUED, Charge
from ..payment.gateway import Gateway
from ..store.model import Store
from ..unit import Unit
from . import run

# NOTE: decisions §6.6, processing on request needs plan tier A (tier B includes it: docs).
TIER_A = ("premium_a", "premium_b")


def require_tier(store: Store, tiers: tuple[str, ...], what: str) -> None:
    if store.plan_tier not in tiers:
        raise Forbidden(f"{what} needs plan tier A (premium_a); this store's tier is {store.plan_tier}")


def process(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> Charge:
    require_tier(store, TIER_A, "Processing a charge")
    charge = visible(db, store, charge_id, now)
    if charge.status not in (QUEUED, ERROR):
        raise ValidationFailed.field("status", f"only a queued or error charge can be processed; this one is "
                                               f"{charge.status}")
    with db.read() as conn:  # before any money moves: a 422, never a 500 after the payment
        charge_service.check_next_dates(Unit(conn, store, now), charge_id)
    mine = uuid.uuid4().hex
    if not run.process(db, gateway, store, [charge_id], now, run=mine):
        if visible(db, store, charge_id, now).claimed_by == mine:
            # Claimed by this call but unanswered: it stays claimed, and the next call or run
            # (once the claim is stale) asks again with the same key (decisions §6.5).
            raise ServiceUnavailable()
        raise Conflict("The charge is being processed by another request or billing run")
    return visible(db, store, charge_id, now)


def visible(db: Database, store: Store, charge_id: int, now: datetime) -> Charge:
    with db.read() as conn:
        charge = charge_repo.get(conn, store.id, charge_id, now)
    if charge is None:
        raise NotFound()
    return charge
