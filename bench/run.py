"""Measure Rebill against a bare endpoint on the same server process, in one run.

    make bench                      # SQLite (the default deployment)
    .venv/bin/python -m bench.run --database postgresql://root@127.0.0.1/postgres --seconds 10

Seeds a store, starts one uvicorn process, drives it with wrk (a C load generator from
Debian's packages) and prints requests per second and the ratio to the bare endpoint.
The endpoints take turns, round after round, and each round's ratio is taken against the
bare endpoint of the same round: the machine's speed drifts by a quarter from minute to
minute (a shared virtual machine), a drift that would otherwise land in the ratios.
Figures go to docs/performance.md by hand; results/ keeps the raw output (not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path
from statistics import median
from typing import Any
from urllib.request import Request, urlopen

import psycopg
from sqlalchemy import func, select

from bench import batches, billing, floor, schedule, webhooks, workers
from rebill.api.listing import cursor_key, encode_cursor
from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.address import service as address_service
from rebill.domain.address.model import AddressCreate
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.domain.customer import service as customer_service
from rebill.domain.customer.model import CustomerCreate
from rebill.domain.discount.repository import insert_discount
from rebill.domain.listing import Position
from rebill.domain.store import service as store_service
from rebill.domain.unit import Unit
from rebill.models import addresses, charges

HERE = Path(__file__).parent
FIRST_PAGE = "GET /charges?limit=250"
DEEP_PAGE = "GET /charges 100,000 deep"
PORT = 8765
BARE = "bare endpoint (same stack)"
OUTBOX = "POST /customers, 5 webhooks"


def seed(url: str) -> tuple[str, int, int]:
    upgrade(url)
    db = Database.from_url(url)
    now = SystemClock().now()
    with db.write() as conn:
        store = store_service.create_store(conn, now, name=f"bench-{uuid.uuid4().hex[:8]}", ships_to=["US"])
        token = store_service.create_token(conn, now, store=store, name="bench")
        unit = Unit(conn, store, now)
        customer = customer_service.create(unit, CustomerCreate(email="bench@example.com", first_name="Bench",
                                                                last_name="Mark"))
        for n in range(300):
            address_service.create(unit, OfflineZipVerifier(), AddressCreate(
                customer_id=customer.id, address1=f"{n} Market St", city="San Francisco", country_code="US",
                province="CA", zip="94105", first_name="Bench", last_name="Mark", phone=""))
        # Issue 9: a full page of discounts for `GET /discounts?limit=250`.
        for n in range(250):
            insert_discount(conn, {
                "store_id": store.id, "code": f"BENCH{n}", "discount_type": "percentage", "value": Decimal(10),
                "status": "enabled", "duration": "forever", "duration_usage_limit": None, "usage_limit": None,
                "times_used": 0, "once_per_customer": False, "applies_to_id": None, "applies_to_resource": None,
                "applies_to_product_type": "ALL", "channel_settings": {}, "first_time_customer_restriction": None,
                "prerequisite_subtotal_min": None, "starts_at": None, "ends_at": None, "created_at": now,
                "updated_at": now})
    db.dispose()
    return token, customer.id, store.id


def schedule_positions(url: str, store: Any) -> tuple[str, tuple[int, int]]:
    """A cursor that resumes after the 100,000th charge of the schedule store (as a client
    walking the list would hold), and the range of its address ids."""
    db = Database.from_url(url)
    with db.read() as conn:
        ids = select(charges.c.id).where(charges.c.store_id == store.id).order_by(charges.c.id)
        boundary = conn.execute(ids.offset(99_999).limit(1)).scalar() or conn.execute(
            ids.order_by(None).order_by(charges.c.id.desc()).limit(1)).scalar()
        low, high = conn.execute(select(func.min(addresses.c.id), func.max(addresses.c.id))
                                 .where(addresses.c.store_id == store.id)).one()
    db.dispose()
    key = cursor_key("charges", "2021-11", "/charges")
    return encode_cursor(key, {}, Position(boundary, boundary, False)), (low, high)


def fresh_database(url: str | None) -> tuple[str, callable]:
    if url is None or url.startswith("sqlite"):
        folder = tempfile.mkdtemp(prefix="rebill-bench-")
        return f"sqlite:///{folder}/bench.db", lambda: shutil.rmtree(folder, ignore_errors=True)
    name = f"rebill_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return url.rsplit("/", 1)[0] + "/" + name, drop


def wrk(path: str, token: str, seconds: int, connections: int, script: Path | None = None,
        script_args: list[str] | None = None, port: int = PORT) -> dict[str, float]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
               "-H", f"X-Service-Access-Token: {token}", "-H", "X-Service-Version: 2021-11",
               "-H", "Content-Type: application/json"]
    if script:
        command += ["-s", str(script)]
    command.append(f"http://127.0.0.1:{port}{path}")
    if script:
        # The script's own arguments: by default a tag unique to this run.
        command += ["--", *(script_args or [uuid.uuid4().hex])]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", output)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return {"rps": rps, "non_2xx": int(errors.group(1)) if errors else 0,
            "p50_ms": float(p50.group(1)) * scale[p50.group(2)] if p50 else float("nan")}


def wait_until_up(token: str) -> None:
    for _ in range(100):
        try:
            urlopen(Request(f"http://127.0.0.1:{PORT}/", headers={"X-Service-Access-Token": token}), timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", help="PostgreSQL admin URL; default: a fresh SQLite file")
    parser.add_argument("--seconds", type=int, default=3, help="per endpoint and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--addresses", type=int, default=50_000, help="addresses of the schedule benchmark")
    parser.add_argument("--charges", type=int, default=100_000, help="due charges of the billing day")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: run `make bench` (it installs wrk from Debian's packages)")

    url, cleanup = fresh_database(args.database)
    print("seeding the request benchmark: one store, one customer, 300 addresses", flush=True)
    token, customer_id, store_id = seed(url)
    sched = schedule.run(url, args.addresses)
    day = billing.run(url, args.charges)
    # Issue 18: on PostgreSQL, the billing day with one `rebill worker` and with two.
    on_postgres = bool(args.database) and not args.database.startswith("sqlite")
    split = workers.run(url, args.charges) if on_postgres else None
    deep_cursor, address_range = schedule_positions(url, sched["store"])
    hooks = webhooks.deliveries(url)
    batch = batches.run(url)  # issue 15: a server of its own, run to its end before the rounds
    hooks_token, hooks_store_id = webhooks.outbox_store(url)
    # Deliveries off: the outbox case measures what the deliveries cost a create's transaction,
    # not the sending (measured above, without the server).
    env = {**os.environ, "REBILL_DATABASE_URL": url, "REBILL_RATE_LIMIT": "off", "REBILL_BILL_EVERY": "0",
           "REBILL_DELIVER_WEBHOOKS": "0"}
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench.app:app", "--port", str(PORT),
                              "--log-level", "warning", "--no-access-log"], env=env, cwd=HERE.parent)
    try:
        wait_until_up(token)
        wrk("/__bare", token, 2, args.connections)  # warm-up
        wrk(f"/customers/{customer_id}", token, 2, args.connections)
        sched_token = sched["token"]
        cases = [
            (BARE, "/__bare", None, token, None),
            ("GET /customers/{id}", f"/customers/{customer_id}", None, token, None),
            ("GET /addresses?limit=250", "/addresses?limit=250", None, token, None),
            ("GET /discounts?limit=250", "/discounts?limit=250", None, token, None),
            ("POST /customers", "/customers", HERE / "post_customer.lua", token, None),
            (OUTBOX, "/customers", HERE / "post_customer.lua", hooks_token, None),
            (FIRST_PAGE, "/charges?limit=250", None, sched_token, None),
            (DEEP_PAGE, f"/charges?limit=250&cursor={deep_cursor}", None, sched_token, None),
            ("POST /subscriptions", "/subscriptions", HERE / "post_subscription.lua", sched_token,
             [str(address_range[0]), str(address_range[1]), "2031-01-15"]),
        ]
        rounds = []
        for number in range(args.rounds):
            print(f"round {number + 1} of {args.rounds}: {', '.join(c[0] for c in cases)}", flush=True)
            rounds.append({name: wrk(path, case_token, args.seconds, args.connections, script, script_args)
                           for name, path, script, case_token, script_args in cases})
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)
        print("floor: the statements of each create, straight on the driver, no server (bench/floor.py)",
              flush=True)
        floors = {"POST /customers": floor.customer_floor(url, store_id),
                  "POST /subscriptions": floor.subscription_floor(url, sched["store"].id, address_range, "2031-01-15")}
        # What five webhooks' deliveries add to a create's statements, on the store the
        # outbox case wrote to (its rows are the templates).
        outbox_store_id = hooks_store_id
        outbox_floor = (floor.customer_floor(url, outbox_store_id, outbox=True)
                        - floor.customer_floor(url, outbox_store_id))
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=10)
        cleanup()

    backend = "PostgreSQL" if args.database and not args.database.startswith("sqlite") else "SQLite"
    print(f"\nRebill benchmark: {backend}, 1 server process, wrk -t1 -c{args.connections}, "
          f"{args.rounds} rounds of {args.seconds}s per endpoint")
    print(f"{'endpoint':28} {'req/s (median)':>14} {'ratio (median)':>15} {'ratio per round':>24} {'non-2xx':>8}")
    summary = {}
    for name, *_ in cases:
        rps = [r[name]["rps"] for r in rounds]
        ratios = [r[name]["rps"] / r[BARE]["rps"] for r in rounds]
        errors = sum(r[name]["non_2xx"] for r in rounds)
        summary[name] = {"rps": rps, "ratios": ratios, "non_2xx": errors}
        per_round = " / ".join(f"{x:.2f}" for x in ratios)
        print(f"{name:28} {median(rps):>14.0f} {median(ratios):>15.2f} {per_round:>24} {errors:>8}")
    # Issue 2's target: a single-record read at least half the bare endpoint's rate.
    read = median(summary["GET /customers/{id}"]["ratios"])
    print(f"\nsingle-record read target (>= 0.50 of the bare endpoint): {'met' if read >= 0.5 else 'NOT met'} "
          f"({read:.2f})")
    # Per round, like every ratio here: the machine's speed drifts between rounds.
    deep = median(r[FIRST_PAGE]["rps"] / r[DEEP_PAGE]["rps"] for r in rounds)
    print(f"deep page target (a page 100,000 rows deep at most 1.2x the first page's time): "
          f"{'met' if deep <= 1.2 else 'NOT met'} ({deep:.2f}x)")
    writes = {n: median(summary[n]["ratios"]) for n in ("POST /customers", "POST /subscriptions")}
    print("write target (at least 0.3x the bare endpoint): "
          + ", ".join(f"{n} {'met' if r >= 0.3 else 'NOT met'} ({r:.2f})" for n, r in writes.items()))
    # What no application code could beat: the bare endpoint's time plus the create's own
    # statements (bench/floor.py).
    bare_rps = median(summary[BARE]["rps"])
    for name, floor_us in floors.items():
        summary[name]["floor_us"] = floor_us
        if backend == "SQLite":
            # SQLite's writes are serial, on the server's one core: time adds up.
            best = summary[name]["ceiling_ratio"] = floor.ceiling(bare_rps, floor_us)
            print(f"  {name}: its statements alone take {floor_us:.0f} µs; with the bare endpoint's "
                  f"{1e6 / bare_rps:.0f} µs per request the best reachable ratio is {best:.2f}")
        else:
            # On PostgreSQL the floor is mostly round trips on one connection, which the server
            # overlaps across requests: it is no ceiling.
            print(f"  {name}: its statements alone take {floor_us:.0f} µs on one connection (round trips)")
    print(f"regeneration target (at most 10x a raw bulk insert): {'met' if sched['ratio'] <= 10 else 'NOT met'} "
          f"({sched['ratio']:.1f}x: {sched['regenerate_s']:.1f} s against {sched['raw_insert_s']:.1f} s for "
          f"{sched['rows']['charges']:,} charges)")
    summary["regeneration"] = {k: v for k, v in sched.items() if k not in ("store", "token")}
    print(f"billing day target (at least 2,000 charges/s on SQLite): "
          f"{'met' if day['per_second'] >= 2000 else 'NOT met'} ({day['per_second']:,.0f} charges/s: "
          f"{day['charges']:,} charges in {day['seconds']:.1f} s, {day['ratio']:.1f}x a raw insert of the rows "
          f"it wrote)")
    discounted = day["discount_day"]
    print(f"discounted billing day target (half the charges with a code, at most 1.2x the plain day per charge): "
          f"{'met' if discounted['ratio'] <= 1.2 else 'NOT met'} ({discounted['ratio']:.2f}x)")
    summary["billing_day"] = day
    if split is not None:
        print(f"two workers target (a billing day on PostgreSQL at least 1.6x one worker's): "
              f"{'met' if split['ratio'] >= 1.6 else 'NOT met'} ({split['ratio']:.2f}x: "
              f"{split['two_per_second']:,.0f} against {split['one_per_second']:,.0f} charges/s)")
        summary["workers"] = split
    print(f"webhook deliveries target (at least 1,000 a second to one local receiver): "
          f"{'met' if hooks['per_second'] >= 1000 else 'NOT met'} ({hooks['per_second']:,.0f}/s: "
          f"{hooks['succeeded']:,} of {hooks['events']:,} events in {hooks['seconds']:.1f} s, "
          f"{hooks['concurrency']} in flight; the same bodies posted straight, no database: "
          f"{hooks['floor_per_second']:,.0f}/s)")
    # Per round: the create with five webhooks against the plain create of the same round.
    outbox = median(r["POST /customers"]["rps"] / r[OUTBOX]["rps"] for r in rounds)
    print(f"outbox target (POST /customers with 5 webhooks at most 1.15x the time without): "
          f"{'met' if outbox <= 1.15 else 'NOT met'} ({outbox:.2f}x)")
    # The outbox's statements alone, added to the plain create's time per request: no code
    # could write five deliveries for less on this machine.
    plain_us = 1e6 / median(summary["POST /customers"]["rps"])
    print(f"  the outbox's statements alone take {outbox_floor:.0f} µs a create; with the plain create's "
          f"{plain_us:.0f} µs per request the best reachable is {(plain_us + outbox_floor) / plain_us:.2f}x")
    summary["webhooks"] = {**hooks, "outbox_ratio": outbox, "outbox_floor_us": outbox_floor}
    print(batches.report(batch))
    summary["async_batch"] = batch
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"latest-{backend.lower()}.json").write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
