"""SQLite writes against their floor (issue 18): what a create costs in the application itself.

    .venv/bin/python -m bench.writes [--addresses 50000] [--creates 2000] [--rounds 7]
    .venv/bin/python -m bench.writes --instructions [--creates 1000]     # valgrind, repeatable
    .venv/bin/python -m bench.writes --profile out.prof [--creates 3000]  # cProfile of the creates

Seeds the schedule store of `make bench` (bench/schedule.py: N addresses with two monthly
subscriptions each, their charges planned) and the request store of bench/run.py, then drives
`POST /subscriptions` (a monthly subscription on a random address, on 2031-01-15, as
bench/post_subscription.lua does) and `POST /customers` (bench/post_customer.lua) straight
through the ASGI app in this process: 16 requests in flight on uvloop, as wrk's 16 connections
keep the server, so that the loop writer commits them in groups as it does under wrk. Then it
runs the floor of each create (bench/floor.py: the same statements on the driver, one COMMIT per
8 creates). Rounds alternate create, floor, create, floor..., each timed in CPU time of this
process (user and kernel; the kernel's part, SQLite's file I/O, is also shown alone); the
figures are medians of the rounds. `--seeded DIR` keeps the seeded database for the next runs.

    the application's own time per create = time per create in process - its floor

The in-process time has no HTTP server in it (uvicorn's parsing and socket writes are the bare
endpoint's cost in `make bench`), so the figure is what Rebill's code adds to the statements.

With ``--instructions`` the same creates run under ``valgrind --tool=callgrind`` twice, with a
short and a long run after the same warm-up, from a copy of one seeded database; the difference
divided by the extra creates is the instructions of one create, which repeat from run to run
whatever else the machine does (the floor likewise). They count this process's own code only:
the kernel's work for it (WAL writes, temporary files, page reads) is in the timings alone.
Figures go to docs/performance.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from statistics import median
from typing import Any

from bench import UNFROZEN, callgrind, compile_sources, floor, run, schedule
from rebill import heap

WHEN = "2031-01-15"  # after every seeded date: the first create on an address inserts its charge
LANES = 16  # requests in flight, as wrk -c16


def seed(url: str, n_addresses: int) -> dict[str, Any]:
    """Both stores, as `make bench` seeds them (the schedule store's charges planned)."""
    token, _customer_id, store_id = run.seed(url)
    store, sched_token, address_ids = schedule.seed(url, n_addresses, 2)
    schedule.regenerate(url, store, address_ids)
    return {"token": token, "store_id": store_id, "sched_token": sched_token, "sched_store_id": store.id,
            "first": min(address_ids), "last": max(address_ids)}


def _scope(path: str, token: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
            "headers": [(b"x-service-access-token", token.encode()), (b"x-service-version", b"2021-11"),
                        (b"content-type", b"application/json"), (b"host", b"127.0.0.1")]}


class Driver:
    """The app and the bodies of both creates; ``creates`` runs n of one kind, 16 in flight."""

    def __init__(self, url: str, seeded: dict[str, Any], rng_seed: int = 18) -> None:
        import uvloop  # the loop `rebill serve` runs on (uvicorn[standard])

        from rebill.app import create_app
        from rebill.settings import RateLimit, Settings

        self.seeded = seeded
        # Tokens cached for the whole run: a look-up every 5 s of wall time would land in the
        # instruction counts as often as valgrind's slowness makes 5 s pass.
        self.app = create_app(Settings(database_url=url, rate_limit=RateLimit(enabled=False), regenerate_every=0,
                                       bill_every=0, purge_every=0, deliver_webhooks=False, batch_every=0,
                                       token_cache_seconds=1e9))
        if not os.environ.get(UNFROZEN):
            heap.freeze()  # as rebill.asgi does in each API process (rebill/heap.py)
        self.loop = uvloop.new_event_loop()
        self.random = random.Random(rng_seed)
        self.tag = uuid.uuid4().hex[:8]
        self.counter = 0
        self.statuses: dict[int, int] = {}
        self.system_us: list[float] = []  # of each ``creates``
        self.failures: list[bytes] = []

    def _subscription(self) -> tuple[dict[str, Any], bytes]:
        address_id = self.random.randint(self.seeded["first"], self.seeded["last"])
        body = (f'{{"address_id":{address_id},"product_title":"Tea","price":"9.90","quantity":1,'
                f'"charge_interval_frequency":1,"order_interval_frequency":1,"order_interval_unit":"month",'
                f'"next_charge_scheduled_at":"{WHEN}"}}')
        return _scope("/subscriptions", self.seeded["sched_token"]), body.encode()

    def _customer(self) -> tuple[dict[str, Any], bytes]:
        self.counter += 1
        body = f'{{"email":"bench-{self.tag}-{self.counter}@example.com","first_name":"Bench","last_name":"Mark"}}'
        return _scope("/customers", self.seeded["token"]), body.encode()

    async def _one(self, scope: dict[str, Any], body: bytes) -> None:
        status = 0

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif status >= 300 and len(self.failures) < 5:
                self.failures.append(message.get("body", b""))

        await self.app(scope, receive, send)
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def creates(self, kind: str, n: int) -> float:
        """CPU µs per create over n creates of ``kind`` ("subscription" or "customer")."""
        make = self._subscription if kind == "subscription" else self._customer
        requests = [make() for _ in range(n)]

        async def lane(mine: list[tuple[dict[str, Any], bytes]]) -> None:
            for scope, body in mine:
                await self._one(scope, body)

        async def lanes() -> None:
            await asyncio.gather(*(lane(requests[i::LANES]) for i in range(LANES)))

        began = os.times()
        self.loop.run_until_complete(lanes())
        ended = os.times()
        # The kernel's part apart too: SQLite's writes of the WAL and of temporary files.
        self.system_us.append((ended.system - began.system) / n * 1e6)
        return (ended.user + ended.system - began.user - began.system) / n * 1e6

    def check(self) -> None:
        if set(self.statuses) != {201}:
            raise SystemExit(f"not every create answered 201: {self.statuses} {self.failures}")


def floor_of(url: str, seeded: dict[str, Any], kind: str, n: int) -> float:
    """bench/floor.py's floor in CPU µs per create, as the creates are timed."""
    if kind == "subscription":
        return floor.subscription_floor(url, seeded["sched_store_id"], (seeded["first"], seeded["last"]), WHEN, n,
                                        clock=time.process_time)
    return floor.customer_floor(url, seeded["store_id"], n, clock=time.process_time)


def _backup(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (its WAL included)."""
    import sqlite3

    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def twin(url: str) -> str:
    """A copy of the database for the floor's rounds. The floor's rows are no valid schedule
    (a subscription linked to a charge whose lines do not name it): on the database the creates
    run on, the next replan of such an address would trip over them. Both copies get as many
    creates per round, so their indexes grow alike."""
    path = Path(url.removeprefix("sqlite:///"))
    copy = path.with_name("floor.db")
    _backup(path, copy)
    return f"sqlite:///{copy}"


def timed(url: str, seeded: dict[str, Any], creates: int, rounds: int, kinds: list[str]) -> dict[str, Any]:
    driver = Driver(url, seeded)
    for kind in kinds:  # warm-up: statements compiled, caches filled, the rows the floor copies
        driver.creates(kind, 200)
    floor_url = twin(url)
    figures: dict[str, dict[str, list[float]]] = {k: {"create_us": [], "system_us": [], "floor_us": []} for k in kinds}
    for number in range(rounds):
        for kind in kinds:
            figures[kind]["create_us"].append(driver.creates(kind, creates))
            figures[kind]["system_us"].append(driver.system_us[-1])
            figures[kind]["floor_us"].append(floor_of(floor_url, seeded, kind, creates))
        print(f"round {number + 1} of {rounds}: " + ", ".join(
            f"{k} {figures[k]['create_us'][-1]:.0f} µs (floor {figures[k]['floor_us'][-1]:.0f})" for k in kinds),
            flush=True)
    driver.check()
    out: dict[str, Any] = {}
    for kind, f in figures.items():
        own = [c - fl for c, fl in zip(f["create_us"], f["floor_us"])]
        out[kind] = {"create_us": median(f["create_us"]), "system_us": median(f["system_us"]),
                     "floor_us": median(f["floor_us"]), "own_us": median(own), "rounds": f}
    return out


def profile(url: str, seeded: dict[str, Any], creates: int, path: str, kind: str) -> None:
    driver = Driver(url, seeded)
    driver.creates(kind, 200)
    profiler = cProfile.Profile()
    profiler.enable()
    driver.creates(kind, creates)
    profiler.disable()
    driver.check()
    profiler.dump_stats(path)
    print(f"cProfile of {creates} {kind} creates in {path}")


# Instruction counts -------------------------------------------------------------------------

def _count(database: Path, seeded: dict[str, Any], kind: str, what: str, n: int, warm: int) -> int:
    """Instructions of a child process that warms up, then runs n creates (or n floor creates)
    on a fresh copy of the seeded database, under callgrind."""
    folder = Path(tempfile.mkdtemp(prefix="rebill-bench-writes-"))
    try:
        _backup(database, folder / "bench.db")
        url = f"sqlite:///{folder}/bench.db"
        code = (f"from bench.writes import _child; _child({url!r}, {json.dumps(seeded)!r}, {kind!r}, {what!r}, "
                f"{n}, {warm})")
        return callgrind(code, folder / "callgrind.out")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _child(url: str, seeded_json: str, kind: str, what: str, n: int, warm: int) -> None:
    seeded = json.loads(seeded_json)
    random.seed(18)  # the floor's addresses: the same in every run
    driver = Driver(url, seeded)
    driver.creates(kind, warm)  # the floor copies its rows from these
    if what == "create":
        driver.creates(kind, n)
        driver.check()
    else:
        floor_of(url, seeded, kind, n)


def instructions(database: Path, seeded: dict[str, Any], kinds: list[str], creates: int) -> dict[str, Any]:
    """Instructions per create and per floor create: (run of 2n - run of n) / n. Two runs of
    the same n differ by 10-25 million instructions (start-up and warm-up): at n = 200, 1-3 %
    of a subscription create; the floor, ten times cheaper, runs ten times as many creates."""
    warm = 100
    compile_sources()
    out: dict[str, Any] = {}
    for kind in kinds:
        figures = {}
        for what in ("create", "floor"):
            n = creates if what == "create" else 10 * creates
            short = _count(database, seeded, kind, what, n, warm)
            long = _count(database, seeded, kind, what, 2 * n, warm)
            figures[what] = (long - short) / n
        figures["own"] = figures["create"] - figures["floor"]
        print(f"{kind}: {figures['create']:,.0f} instructions per create, floor {figures['floor']:,.0f}, "
              f"the application's own {figures['own']:,.0f}", flush=True)
        out[kind] = figures
    return out


def seeded_copy(folder: Path | None, n_addresses: int, into: Path) -> dict[str, Any]:
    """Seed into ``folder`` once (its bench.db and seeded.json are kept for the next runs), or
    into ``into`` when no folder is given; the run works on ``into``/bench.db either way."""
    if folder is not None and (folder / "seeded.json").exists():
        seeded = json.loads((folder / "seeded.json").read_text())
        if seeded["addresses"] != n_addresses:
            raise SystemExit(f"{folder} holds {seeded['addresses']:,} addresses, not {n_addresses:,}")
        _backup(folder / "bench.db", into / "bench.db")
        return seeded  # type: ignore[no-any-return]
    print(f"seeding: the request store, and {n_addresses:,} addresses with two subscriptions each, "
          "their charges planned (not measured)", flush=True)
    target = folder or into
    target.mkdir(parents=True, exist_ok=True)
    seeded = {**seed(f"sqlite:///{target}/bench.db", n_addresses), "addresses": n_addresses}
    if folder is not None:
        (folder / "seeded.json").write_text(json.dumps(seeded))
        _backup(folder / "bench.db", into / "bench.db")
    return seeded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addresses", type=int, default=50_000, help="addresses of the schedule store")
    parser.add_argument("--creates", type=int, default=2000, help="creates per round (instructions: n and 2n)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=("subscription", "customer"), help="one create instead of both")
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind instead")
    parser.add_argument("--unfrozen", action="store_true", help="leave the heap unfrozen (rebill/heap.py), to compare")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the creates (of --only, else subscriptions)")
    parser.add_argument("--seeded", type=Path, metavar="DIR",
                        help="keep the seeded database in DIR and start from a copy of it on the next runs")
    args = parser.parse_args()
    kinds = [args.only] if args.only else ["subscription", "customer"]
    if args.unfrozen:
        os.environ[UNFROZEN] = "1"
    work = Path(tempfile.mkdtemp(prefix="rebill-bench-writes-"))
    try:
        seeded = seeded_copy(args.seeded, args.addresses, work)
        url = f"sqlite:///{work}/bench.db"
        if args.instructions:
            result: dict[str, Any] = instructions(work / "bench.db", seeded, kinds, args.creates)
        elif args.profile:
            profile(url, seeded, args.creates, args.profile, args.only or "subscription")
            return
        else:
            result = timed(url, seeded, args.creates, args.rounds, kinds)
            for kind, f in result.items():
                print(f"{kind}: {f['create_us']:.0f} µs per create in process ({f['system_us']:.0f} of them in "
                      f"the kernel), floor {f['floor_us']:.0f} µs, the application's own {f['own_us']:.0f} µs "
                      f"(medians of {args.rounds} rounds)")
        print(json.dumps({k: {n: v for n, v in f.items() if n != "rounds"} for k, f in result.items()}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
