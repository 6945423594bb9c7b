"""The schedule benchmark of issue 7: regenerating the queued charges of 100,000
subscriptions on 50,000 addresses with one command, against a raw bulk insert of the same
rows on the same database.

    .venv/bin/python -m bench.schedule [--addresses 50000] [--database postgresql://...]

Seeds the purchase items with plain bulk inserts (what is measured is the regeneration),
runs ``replan`` over every address as ``rebill schedule regenerate`` does, then takes the
rows it wrote (charges, charge items, events), deletes them and inserts them again with
one ``executemany`` per table in one transaction: the floor for writing those rows."""

from __future__ import annotations

import argparse
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from rich.progress import Progress
from sqlalchemy import delete, insert, select

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.schedule.reconcile import BATCH, replan
from rebill.domain.store import service as store_service
from rebill.domain.unit import Unit
from rebill.models import addresses, charge_items, charges, customers, events, purchase_items

CHUNK = BATCH * 4  # addresses per transaction, as `rebill schedule regenerate` does


def _bulk(conn: Any, table: Any, rows: list[dict[str, Any]], size: int = 5000) -> None:
    for start in range(0, len(rows), size):
        conn.execute(insert(table), rows[start:start + size])


def seed(url: str, n_addresses: int, per_address: int) -> tuple[Any, str, list[int]]:
    """A store with n_addresses addresses (two per customer) and per_address monthly
    subscriptions on each, on different dates; one address in a hundred also has a one-time
    item. Returns the store, an API token and the address ids."""
    upgrade(url)
    db = Database.from_url(url)
    now = SystemClock().now()
    today = now.date()
    with db.write() as conn:
        store = store_service.create_store(conn, now, name=f"bench-{uuid.uuid4().hex[:8]}", ships_to=["US"])
        token = store_service.create_token(conn, now, store=store, name="bench")
        first_customer = conn.execute(select(customers.c.id).order_by(customers.c.id.desc())).scalar() or 0
        n_customers = (n_addresses + 1) // 2
        _bulk(conn, customers, [{
            "store_id": store.id, "email": f"c{i}@bench.test", "email_key": f"c{i}@bench.test", "first_name": "B",
            "last_name": f"M{i}", "phone": None, "external_customer_id": None, "hash": uuid.uuid4().hex[:24],
            "accepts_marketing": False, "tax_exempt": False, "analytics_data": None, "processor_type": None,
            "status": "active", "first_charge_processed_at": None, "billing_address": None,
            "created_at": now, "updated_at": now} for i in range(n_customers)])
        customer_ids = list(conn.execute(select(customers.c.id).where(customers.c.store_id == store.id,
                                                                      customers.c.id > first_customer)
                                         .order_by(customers.c.id)).scalars())
        _bulk(conn, addresses, [{
            "store_id": store.id, "customer_id": customer_ids[i // 2], "payment_method_id": None, "discount_id": None,
            "address1": f"{i} Market St", "address2": None, "city": "San Francisco", "company": None,
            "country_code": "US", "first_name": "B", "last_name": "M", "phone": "", "province": "California",
            "zip": "94105", "order_note": None, "order_attributes": [], "presentment_currency": "USD",
            "shipping_lines_override": None, "shipping_lines_conserved": [], "lock_version": 1,
            "created_at": now, "updated_at": now} for i in range(n_addresses)])
        address_rows = list(conn.execute(select(addresses.c.id, addresses.c.customer_id)
                                         .where(addresses.c.store_id == store.id).order_by(addresses.c.id)))
        items = []
        for index, (address_id, customer_id) in enumerate(address_rows):
            for k in range(per_address + (1 if index % 100 == 0 else 0)):
                onetime = k == per_address
                when = today + timedelta(days=1 + (index * per_address + k) % 56)
                items.append({
                    "store_id": store.id, "kind": "onetime" if onetime else "subscription",
                    "customer_id": customer_id, "address_id": address_id, "plan_id": None, "status": "active",
                    "external_product_id": "1001", "external_variant_id": f"{2001 + k}",
                    "product_title": "Coffee" if not onetime else "Mug", "variant_title": "1 lb", "sku": "COF-1",
                    "sku_override": False, "price": Decimal("12.50") + k, "quantity": 1 + k, "properties": [],
                    "grams": 450, "taxable": True, "requires_shipping": True, "images": None,
                    "presentment_currency": "USD", "next_charge_scheduled_at": when,
                    "charge_interval_frequency": None if onetime else 1,
                    "order_interval_frequency": None if onetime else 1,
                    "order_interval_unit": None if onetime else "month", "order_day_of_month": None,
                    "order_day_of_week": None, "cutoff_day_of_month": None, "cutoff_day_of_week": None,
                    "expire_after_specific_number_of_charges": None, "anchor_day": None if onetime else when.day,
                    "charges_count": 0, "last_charge_date": None, "cancelled_next_date": None,
                    "is_skippable": True, "is_swappable": True, "max_retries_reached": False,
                    "cancellation_reason": None, "cancellation_reason_comments": None, "cancelled_at": None,
                    "analytics_data": None, "lock_version": 1, "created_at": now, "updated_at": now})
        _bulk(conn, purchase_items, items)
    # A real database grows gradually and autovacuum keeps its statistics; a bulk seed must
    # refresh them itself, or PostgreSQL plans every look-up for empty tables.
    db.analyze("customers", "addresses", "purchase_items")
    db.dispose()
    return store, token, [row[0] for row in address_rows]


def regenerate(url: str, store: Any, address_ids: list[int]) -> float:
    db = Database.from_url(url)
    now = SystemClock().now()
    started = time.perf_counter()
    with Progress(transient=True) as progress:
        task = progress.add_task("regenerating", total=len(address_ids))
        for start in range(0, len(address_ids), CHUNK):
            with db.write() as conn:
                replan(Unit(conn, store, now), address_ids[start:start + CHUNK])
            progress.advance(task, len(address_ids[start:start + CHUNK]))
    elapsed = time.perf_counter() - started
    db.analyze("charges", "charge_items", "events")  # as `rebill schedule regenerate` does
    db.dispose()
    return elapsed


def raw_insert(url: str, store: Any) -> tuple[float, dict[str, int]]:
    """Take the rows the regeneration wrote, delete them, insert them again as fast as the
    database takes them (one executemany per table, one transaction)."""
    db = Database.from_url(url)
    with db.read() as conn:
        charge_rows = [dict(r._mapping) for r in conn.execute(select(charges).where(charges.c.store_id == store.id))]
        item_rows = [dict(r._mapping) for r in conn.execute(select(charge_items)
                                                            .where(charge_items.c.store_id == store.id))]
        event_rows = [dict(r._mapping) for r in conn.execute(select(events).where(events.c.store_id == store.id,
                                                                                  events.c.resource == "charge"))]
    with db.write() as conn:
        conn.execute(delete(charge_items).where(charge_items.c.store_id == store.id))
        conn.execute(delete(charges).where(charges.c.store_id == store.id))
        conn.execute(delete(events).where(events.c.store_id == store.id, events.c.resource == "charge"))
    started = time.perf_counter()
    with db.write() as conn:
        _bulk(conn, charges, charge_rows)
        _bulk(conn, charge_items, item_rows)
        _bulk(conn, events, event_rows)
    elapsed = time.perf_counter() - started
    db.analyze("charges", "charge_items", "events")
    db.dispose()
    return elapsed, {"charges": len(charge_rows), "charge_items": len(item_rows), "events": len(event_rows)}


def run(url: str, n_addresses: int, per_address: int = 2) -> dict[str, Any]:
    print(f"schedule: seeding {n_addresses:,} addresses with {per_address} subscriptions each "
          "(plain bulk inserts, not measured)", flush=True)
    store, token, address_ids = seed(url, n_addresses, per_address)
    print(f"schedule: regenerating the queued charges of every address ({len(address_ids):,}), "
          f"{CHUNK} addresses per transaction", flush=True)
    regen = regenerate(url, store, address_ids)
    print("schedule: raw bulk insert of the same rows (charges, charge items, events), one transaction",
          flush=True)
    raw, rows = raw_insert(url, store)
    print(f"schedule: regenerated {rows['charges']:,} charges ({rows['charge_items']:,} items, "
          f"{rows['events']:,} events) in {regen:.1f} s; raw insert {raw:.1f} s; ratio {regen / raw:.1f}x "
          f"(target: at most 10x)", flush=True)
    return {"store": store, "token": token, "regenerate_s": regen, "raw_insert_s": raw, "ratio": regen / raw,
            "rows": rows, "addresses": len(address_ids)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", help="a database URL; default: a fresh SQLite file")
    parser.add_argument("--addresses", type=int, default=50_000)
    args = parser.parse_args()
    from bench.run import fresh_database
    url, cleanup = fresh_database(args.database)
    try:
        run(url, args.addresses)
    finally:
        cleanup()


if __name__ == "__main__":
    main()
