"""The billing-day benchmark of issue 8: N due charges paid by one billing run, in charges per
second end to end and as a ratio to a raw bulk insert of the rows the run wrote.

    .venv/bin/python -m bench.billing [--charges 100000] [--database postgresql://...]

Seeds N addresses (two per customer, each customer with a default sandbox payment method)
with one monthly subscription each, all due today, and plans their charges (plain bulk
inserts and `replan`, not measured). Then runs the billing run of the store as `rebill bill`
does, with a progress bar. The floor: the rows the run inserted (orders and their items,
events, the gateway's ledger, the next queued charges and their items) are read back,
deleted and inserted again with one ``executemany`` per table in one transaction. The run
also updates every charge and subscription it touches; those updates are not in the floor."""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

from rich.progress import Progress
from sqlalchemy import delete, func, select, update

from bench import UNFROZEN, schedule
from bench.schedule import _bulk
from rebill import heap
from rebill.clock import FrozenClock, SystemClock
from rebill.db.engine import Database
from rebill.domain.billing import run as billing
from rebill.domain.discount.repository import insert_discount
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.domain.schedule.reconcile import replan
from rebill.domain.unit import Unit
from rebill.models import (
    addresses,
    charge_items,
    charges,
    customers,
    discounts,
    events,
    order_items,
    orders,
    payment_methods,
    purchase_items,
    sandbox_payments,
)

TABLES = (("orders", orders, orders.c.id), ("order_items", order_items, order_items.c.order_id),
          ("events", events, events.c.id), ("sandbox_payments", sandbox_payments, sandbox_payments.c.id),
          ("charges", charges, charges.c.id), ("charge_items", charge_items, charge_items.c.charge_id))


def seed(url: str, n: int) -> tuple[Any, list[int]]:
    store, _token, address_ids = schedule.seed(url, n, 1)
    db = Database.from_url(url)
    now = SystemClock().now()
    today = now.date()
    with db.write() as conn:
        conn.execute(update(purchase_items).where(purchase_items.c.store_id == store.id)
                     .values(next_charge_scheduled_at=today, anchor_day=today.day))
        customer_ids = list(conn.execute(select(customers.c.id).where(customers.c.store_id == store.id)).scalars())
        _bulk(conn, payment_methods, [{
            "store_id": store.id, "customer_id": c, "billing_address": None, "is_default": True,
            "payment_type": "CREDIT_CARD", "payment_details": {"brand": "visa", "last4": "4242"},
            "processor_name": "sandbox", "processor_customer_token": f"cus_{c}",
            "processor_payment_method_token": "pm_ok", "status": "valid", "status_reason": None,
            "created_at": now, "updated_at": now} for c in customer_ids])
    with Progress(transient=True) as progress:
        task = progress.add_task("planning the due charges", total=len(address_ids))
        for start in range(0, len(address_ids), schedule.CHUNK):
            with db.write() as conn:
                replan(Unit(conn, store, now), address_ids[start:start + schedule.CHUNK])
            progress.advance(task, len(address_ids[start:start + schedule.CHUNK]))
    db.analyze("charges", "charge_items", "events", "payment_methods", "purchase_items")
    db.dispose()
    return store, address_ids


def _marks(conn: Any) -> dict[str, int]:
    return {name: conn.execute(select(func.coalesce(func.max(column), 0))).scalar() for name, _, column in TABLES}


def run(url: str, n: int) -> dict[str, Any]:
    print(f"billing: seeding {n:,} addresses with a subscription due today and a payment method each "
          "(not measured)", flush=True)
    store, _ = seed(url, n)
    db = Database.from_url(url)
    clock = SystemClock()
    due = billing.count_due(db, store, clock.now())
    with db.read() as conn:
        before = _marks(conn)
    if not os.environ.get(UNFROZEN):
        heap.freeze()  # as `rebill bill` and `rebill worker` do before their runs (rebill/heap.py)
    print(f"billing: one billing run over {due:,} due charges, {billing.BATCH} per batch", flush=True)
    started = time.perf_counter()
    with Progress(transient=True) as progress:
        task = progress.add_task("billing", total=due)
        summary = billing.run_store(db, SandboxGateway(db, clock.now), store, clock.now,
                                    progress=lambda k: progress.advance(task, k))
    elapsed = time.perf_counter() - started
    raw, written = _raw_insert(db, before)
    db.dispose()
    rate = summary.processed / elapsed if elapsed else 0.0
    print(f"billing: paid {summary.paid:,} of {summary.processed:,} in {elapsed:.1f} s ({rate:,.0f} charges/s; "
          f"target at least 2,000 on SQLite); raw insert of its {sum(written.values()):,} rows {raw:.1f} s; "
          f"ratio {elapsed / raw:.1f}x", flush=True)
    discounted = discount_day(url, store)
    return {"charges": summary.processed, "paid": summary.paid, "seconds": elapsed, "per_second": rate,
            "raw_insert_s": raw, "ratio": elapsed / raw, "rows": written, "discount_day": discounted}


def _day(db: Database, store: Any, clock: Any) -> tuple[int, float]:
    due = billing.count_due(db, store, clock.now())
    started = time.perf_counter()
    with Progress(transient=True) as progress:
        task = progress.add_task("billing", total=due)
        summary = billing.run_store(db, SandboxGateway(db, clock.now), store, clock.now,
                                    progress=lambda k: progress.advance(task, k))
    return summary.paid, time.perf_counter() - started


def discount_day(url: str, store: Any) -> dict[str, Any]:
    """Issue 9: three more billing days, one, two and three months on; during the second, half
    the addresses carry a 10% code (a plan input: applied, then replanned, and removed again
    after it; not measured). Every day runs on tables a month larger than the day before, so the
    discounted day is compared with the mean of the plain days on either side of it. Prints its
    time per charge over theirs (target at most 1.2x)."""
    db = Database.from_url(url)
    now = SystemClock().now()
    plain_paid, plain = _day(db, store, FrozenClock(now + timedelta(days=32)))
    with db.write() as conn:
        code = insert_discount(conn, {
            "store_id": store.id, "code": "BENCH10", "discount_type": "percentage", "value": Decimal(10),
            "status": "enabled", "duration": "forever", "duration_usage_limit": None, "usage_limit": None,
            "times_used": 0, "once_per_customer": False, "applies_to_id": None, "applies_to_resource": None,
            "applies_to_product_type": "ALL", "channel_settings": {}, "first_time_customer_restriction": None,
            "prerequisite_subtotal_min": None, "starts_at": None, "ends_at": None, "created_at": now,
            "updated_at": now})
        ids = list(conn.execute(select(addresses.c.id).where(addresses.c.store_id == store.id)
                                .order_by(addresses.c.id)).scalars())[::2]
        conn.execute(update(addresses).where(addresses.c.id.in_(ids)).values(discount_id=code))
    _replan(db, store, now, ids)
    discounted_paid, discounted = _day(db, store, FrozenClock(now + timedelta(days=63)))
    with db.write() as conn:
        conn.execute(update(addresses).where(addresses.c.id.in_(ids)).values(discount_id=None))
    _replan(db, store, now, ids)
    after_paid, after = _day(db, store, FrozenClock(now + timedelta(days=94)))
    with db.read() as conn:
        used = conn.execute(select(discounts.c.times_used).where(discounts.c.id == code)).scalar()
    db.dispose()
    plain, plain_paid = (plain + after) / 2, (plain_paid + after_paid) / 2
    ratio = (discounted / max(discounted_paid, 1)) / (plain / max(plain_paid, 1)) if plain else 0.0
    print(f"billing: a day with half the charges discounted: {discounted_paid:,} paid in {discounted:.1f} s, "
          f"the plain days around it {plain_paid:,.0f} in {plain:.1f} s on average; ratio per charge {ratio:.2f}x "
          f"(target at most 1.2x); "
          f"times_used {used:,}", flush=True)
    return {"plain_s": plain, "plain_paid": plain_paid, "discounted_s": discounted,
            "discounted_paid": discounted_paid, "ratio": ratio, "times_used": used}


def _replan(db: Database, store: Any, now: Any, ids: list[int]) -> None:
    for start in range(0, len(ids), schedule.CHUNK):
        with db.write() as conn:
            replan(Unit(conn, store, now), ids[start:start + schedule.CHUNK])


def _raw_insert(db: Database, before: dict[str, int]) -> tuple[float, dict[str, int]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    with db.read() as conn:
        for name, table, column in TABLES:
            rows[name] = [dict(r._mapping) for r in conn.execute(select(table).where(column > before[name]))]
    with db.write() as conn:
        for name, table, column in reversed(TABLES):
            conn.execute(delete(table).where(column > before[name]))
    started = time.perf_counter()
    with db.write() as conn:
        for name, table, _ in TABLES:
            _bulk(conn, table, rows[name])
    return time.perf_counter() - started, {name: len(r) for name, r in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--charges", type=int, default=100_000)
    parser.add_argument("--database", help="PostgreSQL admin URL; default: a fresh SQLite file")
    args = parser.parse_args()
    from bench.run import fresh_database
    url, cleanup = fresh_database(args.database)
    try:
        run(url, args.charges)
    finally:
        cleanup()


if __name__ == "__main__":
    main()
