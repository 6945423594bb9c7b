"""The discount inputs of a plan, read for a batch of addresses in at most four queries (none
beyond the first when no address of the batch has a discount; one more when a code is for a
collection): the address's code, the codes applied to single charges, and how many more new
queued charges an address's code may reach (decisions §7.5: uses so far, and charges being
paid or retried that carry it)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import Connection

from ..address.model import Address
from ..charge.model import ERROR, QUEUED, Charge
from ..collection import repository as collections
from . import repository
from .model import COLLECTION
from .terms import AddressDiscounts, Terms, allowed_uses


def collection_of(row: Any) -> int | None:
    """The collection a code is for, as the API shows its id (a string of digits is stored),
    or None for any other code or an id that names no collection of ours."""
    text = (row.applies_to_id or "").strip() if row.applies_to_resource == COLLECTION else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def collection_products(conn: Connection, store_id: int, rows: Any) -> dict[int, frozenset[str]]:
    """discount id -> the external ids of the products in its collection, for the codes of
    ``rows`` that are for a collection: one statement for all of them, none without such a code."""
    wanted = {row.id: collection_of(row) for row in rows if row.applies_to_resource == COLLECTION}
    found = collections.external_product_ids_of(conn, store_id, {c for c in wanted.values() if c is not None})
    return {discount_id: found.get(c, frozenset()) if c is not None else frozenset()
            for discount_id, c in wanted.items()}


def load(conn: Connection, store_id: int, found: dict[int, Address],
         open_charges: list[Charge], now: datetime) -> dict[int, AddressDiscounts]:
    with_basis = repository.charge_inputs(conn, list(found), with_basis=True)
    by_date = {a: {when: d for when, (d, _) in dates.items()} for a, dates in with_basis.items()}
    wanted = {a.discount_id for a in found.values() if a.discount_id is not None}
    wanted |= {d for dates in by_date.values() for d in dates.values()}
    if not wanted:
        return {}
    # NOTE: decisions §7.5, `usage_limit` refuses new applications only (domain/discount/rules.py):
    # a code already applied keeps going on its charges, whatever its `times_used`.
    rows = repository.many(conn, store_id, wanted)
    products = collection_products(conn, store_id, rows.values())
    limited = [(a.id, a.discount_id) for a in found.values()
               if a.discount_id in rows and allowed_uses(rows[a.discount_id]) is not None]
    uses = repository.address_uses(conn, limited)  # type: ignore[arg-type]
    # A charge in retry or being paid that carries the address's code may still use it.
    flying: dict[tuple[int, int], int] = {}
    for charge in open_charges:
        if charge.discount_id is not None and (charge.status == ERROR or charge.claimed_by is not None):
            key = (charge.address_id, charge.discount_id)
            flying[key] = flying.get(key, 0) + 1
    # NOTE: decisions §7.5, so may an authorized charge (a use once captured); and a code applied
    # to it alone stays recorded until then, so that its capture counts it as the charge's use.
    holders = sorted({a for a, _ in limited} | set(by_date))
    pending: dict[int, set[date]] = {}
    for address_id, when, discount_id in repository.pending_codes(conn, store_id, holders, now):
        pending.setdefault(address_id, set()).add(when)
        if by_date.get(address_id, {}).get(when) != discount_id:
            key = (address_id, discount_id)
            flying[key] = flying.get(key, 0) + 1
    offers: dict[int, AddressDiscounts] = {}
    for address in found.values():
        currency = address.presentment_currency
        entry = AddressDiscounts(by_date={when: Terms.of(rows[d], currency, products.get(d))
                                          for when, d in by_date.get(address.id, {}).items() if d in rows},
                                 bases={when: b for when, (_, b) in with_basis.get(address.id, {}).items()},
                                 pending=pending.get(address.id, set()))
        row = rows.get(address.discount_id) if address.discount_id is not None else None
        if row is not None:
            entry.address = Terms.of(row, currency, products.get(row.id))
            allowed = allowed_uses(row)
            if allowed is not None:
                key = (address.id, row.id)
                entry.remaining = max(allowed - uses.get(key, 0) - flying.get(key, 0), 0)
        if entry.address is not None or entry.by_date:
            offers[address.id] = entry
    return offers


def stale(offers: dict[int, AddressDiscounts], planned_keys: set[Any],
          open_charges: list[Charge]) -> list[tuple[int, date]]:
    """Codes applied to a charge whose date no longer has a queued charge (nor one being paid,
    retried or waiting for its capture): spec 02 Charges rule 2, they go with their charge."""
    kept = {(c.address_id, c.scheduled_at) for c in open_charges if c.status == ERROR or c.claimed_by is not None}
    return [(address_id, when) for address_id, entry in offers.items() for when in entry.by_date
            if ((address_id, when, QUEUED) not in planned_keys or when in entry.dropped)
            and (address_id, when) not in kept and when not in entry.pending]
