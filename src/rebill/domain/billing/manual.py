"""Processing one charge on request (`POST /charges/{id}/process`, decisions §6.6, §6.12)."""

from __future__ import annotations

import uuid
from datetime import datetime

from rebill.db.engine import Database
from rebill.errors import Conflict, ServiceUnavailable, ValidationFailed

from ..charge import service as charge_service
from ..charge.model import ERROR, QUEUED, Charge
from ..payment.gateway import Gateway
from ..store.model import Store
from ..unit import Unit
from . import claim, run
from .access import TIER_A, require_tier, visible


def require_access(store: Store) -> None:
    """NOTE: decisions §6.6, plan tier A. The router asks it before the request's
    Idempotency-Key is taken (``store_check``), so that a 403 is not kept (found by an audit: a
    store moved to tier A kept getting the 403 replayed for 24 hours)."""
    require_tier(store, TIER_A, "Processing a charge")


def process(db: Database, gateway: Gateway, store: Store, charge_id: int, now: datetime) -> Charge:
    require_access(store)
    charge = visible(db, store, charge_id, now)
    if charge.status not in (QUEUED, ERROR):
        raise ValidationFailed.field("status", f"only a queued or error charge can be processed; this one is "
                                               f"{charge.status}")
    with db.read() as conn:  # before any money moves: a 422, never a 500 after the payment
        charge_service.check_next_dates(Unit(conn, store, now), charge_id)
    mine = uuid.uuid4().hex
    if not run.process(db, gateway, store, [charge_id], now, run=mine):
        now_is = visible(db, store, charge_id, now)
        if now_is.claimed_by in (mine, claim.unanswered(mine)):
            # Claimed by this call but unanswered: it stays claimed, and the next call or run
            # (once the claim is stale) asks again with the same key (decisions §6.5).
            raise ServiceUnavailable()
        if now_is.claimed_by is None and now_is.status not in (QUEUED, ERROR):
            # Not claimed, but changed meanwhile (skipped, paid by another): its status says why.
            raise ValidationFailed.field("status", f"only a queued or error charge can be processed; this one is "
                                                   f"{now_is.status}")
        raise Conflict("The charge is being processed by another request or billing run")
    return visible(db, store, charge_id, now)
