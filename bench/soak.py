"""The soak test of issue 18: minutes of mixed load on the deployment (2 API processes, 2
workers, PostgreSQL, Redis when it answers), then the proof that nothing was lost, doubled or
leaked.

    .venv/bin/python -m bench.soak --minutes 10 [--database postgresql://root@127.0.0.1/postgres]

(`make soak`; tests/scenarios/test_soak.py runs the same code for about 40 s.) On a new
PostgreSQL database (dropped at the end): one sandbox store and a token of every scope
(tests/served.py ``prepare``), four webhooks in both versions to a receiver on loopback
(tests/receiver.py), `rebill serve --workers 2 --jobs off` and two `rebill worker` processes
(tests/scenarios/test_workers.py ``Day`` starts and stops them). Then, for the run's length:

- a few client tasks at a paced request rate: reads (a customer, lists, an address, a
  subscription, a 2021-01 read), writes (a new subscriber: customer with an `Idempotency-Key`
  that is now and then sent twice, payment method, address, subscription; a second subscription;
  PUTs of customers, addresses, subscriptions; a declined card replaced; a cancellation);
- an async batch of one-time items every few seconds, a few of its tasks naming no address;
- the store's test clock, one day every few seconds: straight in the database, as bench/workers.py
  moves its days (no billing run on the way, so the workers' runs find the day's charges due, as
  a real day coming would), and one move in four through `POST /store/clock/advance`, whose own
  billing run then races the workers' for the same charges. Payment tokens: most pay, some are
  declined, short of funds or meet a processor error, and go through the store's dunning retries;
- with `--steady N`, at most N paying subscribers: a new one first retires the oldest of them
  (every subscription of it cancelled), and a failing card's subscriptions end with the
  dunning's last retry, so that the store's active subscriptions, and each day's billing run,
  stop growing once N is reached;
- the RSS of every API and worker process, every few seconds (/proc/<pid>/status).

Then it quiesces (no load, no clock move; waits until no work of the store is due, no charge is
claimed, every batch is completed and no delivery is pending) and checks, with SQL and the
receiver's count: no 5xx and no failed request; every charge that fell due was paid or failed,
one ledger entry per attempt and at most one capture, no more attempts than the dunning allows,
one order per paid charge and none for another, order numbers without a gap; every event of a
subscribed topic made one delivery per webhook, each succeeded and reached the receiver once;
every batch completed with each task run once; each customer and subscription the clients were
answered exists once; each process's RSS grew less than 10% from the end of the warm-up (the
first 20% of the run) to the end of the load. It prints a summary and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import func, select, true, update
from tests.receiver import Receiver
from tests.scenarios.test_workers import Day
from tests.served import TOKEN_HEADER, free_port, prepare
from tests.served import request as served_request

from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.domain.billing import due
from rebill.domain.store import repository as store_repo
from rebill.domain.store.clock import offset as store_offset
from rebill.domain.unit import Unit, zone
from rebill.models import (
    async_batch_tasks,
    async_batches,
    charges,
    customers,
    events,
    orders,
    pending_regenerations,
    purchase_items,
    sandbox_payments,
    stores,
    webhook_deliveries,
    webhooks,
)

V11, V01 = "2021-11", "2021-01"
DAY = 86_400
# The webhooks (version, path, topics): two versions' renderers, a topic on two webhooks.
WEBHOOKS = ((V11, "a", ("customer/created", "charge/paid", "order/created", "subscription/cancelled")),
            (V01, "b", ("customer/created", "charge/failed", "subscription/created", "charge/max_retries_reached")))
# Sandbox payment tokens (docs/api-choices.md, "Sandbox tokens") and how often each is given.
TOKENS = (("pm_ok", 80), ("pm_declined", 10), ("pm_insufficient_funds", 5), ("pm_processor_error", 5))
# What a client task does next, by weight; a subscriber is four requests.
ACTIONS = (("read_customer", 16), ("list_customers", 6), ("list_subscriptions", 8), ("list_charges", 8),
           ("list_orders", 4), ("read_address", 6), ("read_subscription", 6), ("read_customer_2021_01", 4),
           ("subscribe", 12), ("second_subscription", 3), ("update_customer", 8), ("update_address", 6),
           ("update_subscription", 8), ("fix_card", 1), ("cancel", 2))
# A write that meets a charge being paid answers 409 "try again in a moment" (docs/api-choices.md):
# the client does, as a real one would. Each 409 is counted; only the last answer must be a success.
RETRY_409 = 5
BATCH_TASKS, BATCH_BAD = 100, 4  # tasks of each async batch, of which these name no address
NOT_FOUND = {"status_code": 422, "output": {"errors": {"address_id": ["address not found"]}}}
WORKER_ENV = {  # the workers run every job as in production; billing every second (a day lasts seconds)
    "REBILL_BILL_EVERY": "1", "REBILL_BATCH_EVERY": "0.5", "REBILL_DELIVER_WEBHOOKS": "1",
    "REBILL_REGENERATE_EVERY": "1", "REBILL_PURGE_EVERY": "3600", "REBILL_LOG_REQUESTS": "off"}
RSS_LIMIT = 0.10  # issue 18: RSS growth under 10% after warm-up
# `make soak`'s cap on subscribers: reached within the warm-up (the first 2 of 10 minutes make
# about 400), so the RSS measured after it is that of a store whose billing days keep one size.
STEADY_SUBSCRIBERS = 400
# The store's dunning (decisions §6.4), shorter than the default (8 attempts over 37 days) so that
# a short run too sees declined charges go through every retry to the last one and its cancellation.
DUNNING = {"first_retry_days": 1, "retry_every_days": 3, "max_attempts": 4, "on_max_retries": "cancel_subscriptions"}


@dataclass
class Options:
    seconds: float = 600.0
    rate: float = 40.0  # requests per second the clients aim at (all of them together)
    clients: int = 6
    day_seconds: float = 3.0  # real seconds per day of the store's test clock
    batch_every: float = 10.0
    warmup: float = 0.2  # the share of the run before RSS counts
    sample_every: float = 2.0
    quiesce_seconds: float = 180.0
    redis_url: str | None = None
    seed: int = 18
    # With a cap, a new subscriber first retires the oldest paying one (its subscriptions cancelled), so
    # that the billing day stops growing with the run: memory that follows the data levels off,
    # memory that follows the requests does not (docs/performance.md, "Soak").
    steady_subscribers: int | None = None


@dataclass
class Report:
    options: Options
    failures: list[str] = field(default_factory=list)
    statuses: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    startup_seconds: float = 0.0
    load_seconds: float = 0.0
    quiesce_seconds: float = 0.0
    days_moved: int = 0
    figures: dict[str, Any] = field(default_factory=dict)
    answers: dict[tuple[str, int], bytes] = field(default_factory=dict)  # the first body of each non-2xx
    rss: dict[str, dict[str, float]] = field(default_factory=dict)  # process -> warm-up, end, max, growth (kB, share)

    @property
    def requests(self) -> int:
        return sum(sum(c.values()) for c in self.statuses.values())

    def summary(self) -> str:
        lines = [f"soak: started in {self.startup_seconds:.1f} s, {self.load_seconds:.0f} s of load, {self.requests:,} requests "
                 f"({self.requests / max(self.load_seconds, 1e-9):.1f}/s), {self.days_moved} days of the store's clock, "
                 f"quiesced in {self.quiesce_seconds:.1f} s"]
        every = Counter[str]()
        for kind in sorted(self.statuses):
            every.update(self.statuses[kind])
            took = sorted(self.latencies[kind]) or [0.0]
            lines.append(f"  {kind:<44} {sum(self.statuses[kind].values()):>7,}  "
                         f"p50 {_quantile(took, 0.5) * 1000:6.1f} ms  p99 {_quantile(took, 0.99) * 1000:7.1f} ms  "
                         + " ".join(f"{s}:{n}" for s, n in sorted(self.statuses[kind].items())))
        lines.append("  statuses: " + ", ".join(f"{s}: {n:,}" for s, n in sorted(every.items())))
        lines += [f"  first {status} of {kind}: {body.decode(errors='replace')}"
                  for (kind, status), body in sorted(self.answers.items())]
        for name, value in self.figures.items():
            lines.append(f"  {name}: {value:,}" if isinstance(value, int) else f"  {name}: {value}")
        for name, rss in self.rss.items():
            lines.append(f"  RSS {name:<14} warm-up {rss['warm'] / 1024:6.1f} MB, end {rss['end'] / 1024:6.1f} MB "
                         f"({rss['growth']:+.1%}), peak {rss['max'] / 1024:6.1f} MB")
        lines.append("soak: " + ("PASSED" if not self.failures else f"FAILED ({len(self.failures)})"))
        lines += [f"  - {failure}" for failure in self.failures]
        return "\n".join(lines)


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------------------------
# The deployment


def redis_answering(url: str = "redis://127.0.0.1:6379/0") -> str | None:
    """``url`` when a Redis answers there (the deployment of issue 18 shares its rate limit
    through it), else None: the soak then runs with per-process buckets and says so."""
    import redis
    try:
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
        client.ping()
        client.close()
        return url
    except redis.RedisError:
        return None


class Deployment:
    """The processes and the receiver of one soak, on ``url`` (migrated, with a store)."""

    def __init__(self, url: str, logs: Path, options: Options) -> None:
        self.url = url
        self.db = Database.from_url(url)
        self.store_id, self.token = prepare(url, name="soak")
        with self.db.write() as conn:
            conn.execute(update(stores).where(stores.c.id == self.store_id).values(dunning=DUNNING))
        self.logs = logs
        self.options = options
        self.day = Day(url, self.db, self.store_id, [], logs)
        self.receiver = Receiver()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server: Any = None
        self.workers: list[Any] = []
        self.api_pids: set[int] = set()

    def start(self) -> None:
        self.receiver.start()
        env = {"REBILL_BACKGROUND_JOBS": "off", "REBILL_LOG_REQUESTS": "off"}
        # Deep and fast enough never to refuse the load, so every request still runs the shared
        # bucket's script in Redis (the round trip a soak should keep running).
        limit = "off"
        if self.options.redis_url:
            env |= {"REBILL_REDIS_URL": self.options.redis_url, "REBILL_REDIS_PREFIX": f"rebill-soak-{uuid.uuid4().hex[:8]}:"}
            limit = "5000/2500"
        self.server = self.day.start("serve", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "2",
                                     "--jobs", "off", "--rate-limit", limit, name="serve", env=env)
        self.workers = [self.day.worker(env=dict(WORKER_ENV)) for _ in range(2)]
        deadline = time.monotonic() + 90
        while True:
            for process in self.day.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args} exited with {process.returncode}\n{self.day.all_output()}")
            started = all(f"process {w.pid} runs them (worker" in self.day.output(w) for w in self.workers)
            self.api_pids = api_children(self.server.pid)
            if started and len(self.api_pids) == 2 and self._answers():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the deployment did not start within 90 s\n{self.day.all_output()}")
            time.sleep(0.2)

    def request(self, method: str, path: str, body: Any = None, *, version: str = V11) -> tuple[int, Any]:
        """One request outside the load (setting up), with the token."""
        return served_request(self.base, self.token, method, path, body, version=version)

    def _answers(self) -> bool:
        try:
            return self.request("GET", "/store")[0] == 200
        except OSError:
            return False

    def processes(self) -> dict[str, int]:
        """The processes whose RSS is watched: the API server's supervisor and its two API
        processes, and the two workers."""
        found = {"serve": self.server.pid}
        for n, pid in enumerate(sorted(self.api_pids)):
            found[f"api-{n + 1}"] = pid
        for n, worker in enumerate(self.workers):
            found[f"worker-{n + 1}"] = worker.pid
        return found

    def stop(self) -> dict[str, int | None]:
        """Stops every process with SIGTERM (Day.stop_all) and the receiver; their exit codes."""
        self.day.stop_all()
        self.receiver.stop()
        return {f"{p.args[3]} {p.pid}": p.returncode for p in self.day.processes}

    def close(self) -> None:
        self.day.stop_all()
        self.receiver.stop()
        self.db.dispose()


def api_children(pid: int) -> set[int]:
    """The API processes uvicorn's supervisor ``pid`` spawned (not multiprocessing's resource
    tracker)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"spawn_main" in cmdline:
            found.add(int(entry))
    return found


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# ---------------------------------------------------------------------------------------------
# The load


@dataclass
class Subscriber:
    customer_id: int
    payment_method_id: int
    token: str
    address_ids: list[int] = field(default_factory=list)
    subscription_ids: list[int] = field(default_factory=list)

    @property
    def paying(self) -> bool:
        """A card that pays: the sandbox's paying token, or a declined card since replaced."""
        return self.token == "pm_ok" or self.token.startswith("pm_fixed_")


class Load:
    """The client tasks, the batches, the clock and the RSS samples, on one event loop."""

    def __init__(self, deployment: Deployment, report: Report) -> None:
        self.d = deployment
        self.report = report
        self.options = report.options
        self.random = random.Random(self.options.seed)
        self.subscribers: list[Subscriber] = []
        self.created_customers: set[int] = set()
        self.created_subscriptions: set[int] = set()
        self.batches: list[int] = []
        self.cancelled: set[int] = set()
        self.names = itertools.count(1)
        self.stop = asyncio.Event()
        self.next_slot = 0.0
        self.today = date.min  # the store's today, as the clock task last moved it
        self.samples: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.started = 0.0
        self.received: Counter[str] = Counter()  # webhook-id -> times received
        self.received_topics: Counter[str] = Counter()
        self.session: aiohttp.ClientSession | None = None

    # -- requests ------------------------------------------------------------------------------

    async def _pace(self) -> None:
        now = time.monotonic()
        slot = max(now, self.next_slot)
        self.next_slot = slot + 1.0 / self.options.rate
        if slot > now:
            await asyncio.sleep(slot - now)

    async def call(self, method: str, path: str, kind: str, body: Any = None, *, version: str = V11,
                   headers: dict[str, str] | None = None, paced: bool = True,
                   expected: tuple[int, ...] = ()) -> tuple[int, Any]:
        """One request; its status (or the transport error's name) counted under ``kind``.
        A 409 is asked again after a pause, up to RETRY_409 times; a 4xx in ``expected`` is no failure."""
        assert self.session is not None
        sent = {TOKEN_HEADER: self.d.token, "X-Service-Version": version, **(headers or {})}
        for attempt in range(RETRY_409 + 1):
            if paced:
                await self._pace()
            began = time.perf_counter()
            try:
                async with self.session.request(method, self.d.base + path, json=body, headers=sent) as answer:
                    raw = await answer.read()
                    status = answer.status
            except (aiohttp.ClientError, asyncio.TimeoutError) as failed:
                self.report.statuses[kind][type(failed).__name__] += 1
                self._failed(f"{kind}: {type(failed).__name__} {failed}")
                return 0, None
            self.report.latencies[kind].append(time.perf_counter() - began)
            self.report.statuses[kind][str(status)] += 1
            decoded = json.loads(raw) if raw else None
            if status >= 300:
                self.report.answers.setdefault((kind, status), raw[:300])
            if status == 409 and attempt < RETRY_409:
                await asyncio.sleep(0.2 * (attempt + 1))
                continue
            if status >= 500:
                self._failed(f"{kind}: {status} {raw[:300]!r}")
            elif status >= 400 and status not in expected:
                self._failed(f"{kind}: unexpected {status} {raw[:300]!r}")
            return status, decoded
        raise AssertionError("the last attempt returns")

    def _failed(self, what: str) -> None:
        # Every failure is counted in the statuses; the first few of each kind are kept to read.
        kind = what.split(":", 1)[0]
        if sum(f.startswith(kind + ":") for f in self.report.failures) < 3:
            self.report.failures.append(what)

    def _due_date(self, low: int, high: int) -> str:
        return (self.today + timedelta(days=self.random.randint(low, high))).isoformat()

    # -- what the clients do -------------------------------------------------------------------

    def _pick(self) -> Subscriber | None:
        return self.random.choice(self.subscribers) if self.subscribers else None

    async def retire(self, leaving: Subscriber) -> None:
        """A paying subscriber leaves: each of its subscriptions not cancelled yet is cancelled
        (a replaced card's charge may still be in retry, and is deleted with it; a cancel the
        client made before answers 422, expected)."""
        self.subscribers.remove(leaving)
        for subscription_id in leaving.subscription_ids:
            if subscription_id not in self.cancelled:
                self.cancelled.add(subscription_id)
                await self.call("POST", f"/subscriptions/{subscription_id}/cancel", "POST /subscriptions/{id}/cancel",
                                {"cancellation_reason": "soak: retired"}, expected=(422,))

    async def subscribe(self) -> None:
        # The cap counts paying subscribers and retires the oldest of them: a failing card's
        # subscriber stays until its dunning's last retry cancels its subscriptions, so that
        # every run still sees charges go through every retry to the last one.
        cap = self.options.steady_subscribers
        if cap is not None:
            paying = [s for s in self.subscribers if s.paying]
            if len(paying) >= cap:
                await self.retire(paying[0])
        n = next(self.names)
        body = {"email": f"soak{n}-{uuid.uuid4().hex[:6]}@example.com", "first_name": "Soak", "last_name": f"Test{n}"}
        key = {"Idempotency-Key": uuid.uuid4().hex}
        status, made = await self.call("POST", "/customers", "POST /customers", body, headers=key)
        if status != 201:
            return
        customer_id = made["customer"]["id"]
        self.created_customers.add(customer_id)
        if n % 10 == 0:  # the same request again (a client that lost the answer): the same customer
            again, replayed = await self.call("POST", "/customers", "POST /customers (replayed key)", body, headers=key)
            if again == 201 and replayed["customer"]["id"] != customer_id:
                self._failed(f"POST /customers (replayed key): another customer {replayed['customer']['id']} "
                             f"than {customer_id}")
        token = self.random.choices([t for t, _ in TOKENS], [w for _, w in TOKENS])[0]
        status, method = await self.call("POST", "/payment_methods", "POST /payment_methods", {
            "customer_id": customer_id, "payment_type": "CREDIT_CARD", "processor_name": "stripe", "default": True,
            "processor_customer_token": f"cus_soak_{n}", "processor_payment_method_token": token,
            "payment_details": {"brand": "visa", "exp_month": 12, "exp_year": 2035, "last4": "4242"}})
        if status != 201:
            return
        status, address = await self.call("POST", "/addresses", "POST /addresses", {
            "customer_id": customer_id, "address1": f"{n} Market St", "city": "San Francisco", "country_code": "US",
            "province": "CA", "zip": "94105", "first_name": "Soak", "last_name": f"Test{n}", "phone": "+14155550100"})
        if status != 201:
            return
        subscriber = Subscriber(customer_id, method["payment_method"]["id"], token, [address["address"]["id"]])
        if await self._subscription(subscriber, subscriber.address_ids[0]):
            self.subscribers.append(subscriber)

    async def _subscription(self, subscriber: Subscriber, address_id: int) -> bool:
        unit = self.random.choice(("week", "month"))
        status, made = await self.call("POST", "/subscriptions", "POST /subscriptions", {
            "address_id": address_id, "product_title": "Soak tea", "price": self.random.choice(("9.90", "12.50")),
            "quantity": self.random.randint(1, 3), "charge_interval_frequency": 1, "order_interval_frequency": 1,
            "order_interval_unit": unit, "next_charge_scheduled_at": self._due_date(2, 8)})
        if status != 201:
            return False
        self.created_subscriptions.add(made["subscription"]["id"])
        subscriber.subscription_ids.append(made["subscription"]["id"])
        return True

    async def act(self, action: str) -> None:
        chosen = self._pick()
        if action == "subscribe" or chosen is None:
            await self.subscribe()
        elif action == "read_customer":
            await self.call("GET", f"/customers/{chosen.customer_id}", "GET /customers/{id}")
        elif action == "read_customer_2021_01":
            await self.call("GET", f"/customers/{chosen.customer_id}", "GET /customers/{id} (2021-01)", version=V01)
        elif action == "list_customers":
            await self.call("GET", "/customers?limit=25", "GET /customers")
        elif action == "list_subscriptions":
            await self.call("GET", f"/subscriptions?address_id={chosen.address_ids[0]}", "GET /subscriptions")
        elif action == "list_charges":
            await self.call("GET", f"/charges?customer_id={chosen.customer_id}&limit=10", "GET /charges")
        elif action == "list_orders":
            await self.call("GET", "/orders?limit=10", "GET /orders")
        elif action == "read_address":
            await self.call("GET", f"/addresses/{chosen.address_ids[0]}", "GET /addresses/{id}")
        elif action == "read_subscription":
            await self.call("GET", f"/subscriptions/{self.random.choice(chosen.subscription_ids)}",
                            "GET /subscriptions/{id}")
        elif action == "second_subscription":
            await self._subscription(chosen, chosen.address_ids[0])
        elif action == "update_customer":
            await self.call("PUT", f"/customers/{chosen.customer_id}", "PUT /customers/{id}",
                            {"first_name": f"Soak{self.random.randint(1, 999)}"})
        elif action == "update_address":
            await self.call("PUT", f"/addresses/{chosen.address_ids[0]}", "PUT /addresses/{id}",
                            {"address2": f"Apt {self.random.randint(1, 999)}"})
        elif action == "update_subscription":
            await self.call("PUT", f"/subscriptions/{self.random.choice(chosen.subscription_ids)}",
                            "PUT /subscriptions/{id}", {"quantity": self.random.randint(1, 4)})
        elif action == "fix_card":
            # Half the declined cards are replaced, late or soon: the others run to the last retry.
            failing = [s for s in self.subscribers[-200:] if s.token == "pm_declined" and s.customer_id % 2 == 0]
            if failing:
                mended = self.random.choice(failing)
                mended.token = f"pm_fixed_{mended.customer_id}"
                await self.call("PUT", f"/payment_methods/{mended.payment_method_id}", "PUT /payment_methods/{id}",
                                {"processor_payment_method_token": mended.token})
        elif action == "cancel":
            # A paying customer's (a failing card's subscription may have been cancelled by the
            # dunning's last retry: cancelling it again is a 422), never one cancelled already.
            if chosen.token == "pm_ok" and (active := [i for i in chosen.subscription_ids if i not in self.cancelled]):
                cancelled = self.random.choice(active)
                self.cancelled.add(cancelled)
                await self.call("POST", f"/subscriptions/{cancelled}/cancel", "POST /subscriptions/{id}/cancel",
                                {"cancellation_reason": "soak"})

    async def client(self) -> None:
        names, weights = [a for a, _ in ACTIONS], [w for _, w in ACTIONS]
        while not self.stop.is_set():
            await self.act(self.random.choices(names, weights)[0])

    async def batches_task(self) -> None:
        """An async batch of one-time items now and then (the first at once: its code paths
        warm up with the rest)."""
        while not self.stop.is_set():
            if self.subscribers:
                await self.batch()
            try:
                await asyncio.wait_for(self.stop.wait(), self.options.batch_every)
            except asyncio.TimeoutError:
                pass

    async def batch(self) -> None:
        """Its items are dated weeks ahead: a batch runs after the batches before it, its tasks
        wait for the addresses the billing holds, and the store's clock moves a day every few
        seconds meanwhile (an item dated in the store's past is a 422)."""
        status, made = await self.call("POST", "/async_batches", "POST /async_batches", {"batch_type": "onetime_create"})
        if status != 201:
            return
        batch_id = made["async_batch"]["id"]
        step = BATCH_TASKS // BATCH_BAD
        tasks = [{"body": {"address_id": 999_999_999 if n % step == step - 1 else
                           self.random.choice(self.random.choice(self.subscribers).address_ids),
                           "product_title": f"Soak biscuits {n}", "price": "3.10", "quantity": 1,
                           "next_charge_scheduled_at": self._due_date(45, 60)}} for n in range(BATCH_TASKS)]
        status, _ = await self.call("POST", f"/async_batches/{batch_id}/tasks", "POST /async_batches/{id}/tasks",
                                    {"tasks": tasks})
        if status != 201:
            return
        status, _ = await self.call("POST", f"/async_batches/{batch_id}/process", "POST /async_batches/{id}/process")
        if status == 202:
            self.batches.append(batch_id)

    async def clock_task(self) -> None:
        """One day of the store's clock every ``day_seconds``: three moves in four straight in
        the database (the workers bill the day), the fourth through the API (its billing run
        races theirs)."""
        for n in itertools.count(1):
            try:
                await asyncio.wait_for(self.stop.wait(), self.options.day_seconds)
                return
            except asyncio.TimeoutError:
                pass
            if n % 4 == 2:
                status, _ = await self.call("POST", "/store/clock/advance", "POST /store/clock/advance",
                                                {"days": 1}, paced=False)
                if status != 200:
                    return
            else:
                await asyncio.to_thread(self._move_a_day)
            self.report.days_moved += 1
            self.today = await asyncio.to_thread(self._store_today)

    def _move_a_day(self) -> None:
        with self.d.db.write() as conn:
            conn.execute(update(stores).where(stores.c.id == self.d.store_id)
                         .values(clock_offset_seconds=stores.c.clock_offset_seconds + DAY))

    def _store_today(self) -> date:
        store, now = store_now(self.d.db, self.d.store_id)
        return now.astimezone(zone(store.timezone)).date()

    async def sampler(self) -> None:
        """The RSS of each process, and the receiver's requests counted (and let go: a soak's
        receiver must not be what grows)."""
        processes = self.d.processes()
        while True:
            at = time.monotonic() - self.started
            for name, pid in processes.items():
                if (kb := rss_kb(pid)) is not None:
                    self.samples[name].append((at, kb))
            self.drain_receiver()
            if self.stop.is_set():
                return
            try:
                await asyncio.wait_for(self.stop.wait(), self.options.sample_every)
            except asyncio.TimeoutError:
                pass

    def drain_receiver(self) -> None:
        receiver = self.d.receiver
        with receiver._lock:
            got, receiver.received = receiver.received, []
        for request in got:
            self.received[request.headers["webhook-id"]] += 1
            self.received_topics[request.headers["x-service-topic"]] += 1

    async def run(self) -> None:
        self.today = await asyncio.to_thread(self._store_today)
        timeout = aiohttp.ClientTimeout(total=120)
        # A connection per request, as from many clients: the two API processes share one listening
        # socket, and a few kept-alive connections would stay with whichever process accepted them
        # (one process then serves the whole load while the other idles).
        connector = aiohttp.TCPConnector(limit=32, force_close=True)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            self.session = session
            self.started = self.next_slot = time.monotonic()
            # A first subscriber before anything else, so that every action has one to act on.
            await self.subscribe()
            tasks = [asyncio.create_task(self.client()) for _ in range(self.options.clients)]
            tasks += [asyncio.create_task(self.batches_task()), asyncio.create_task(self.clock_task()),
                      asyncio.create_task(self.sampler())]
            await asyncio.sleep(max(0.0, self.options.seconds - (time.monotonic() - self.started)))
            self.stop.set()
            await asyncio.gather(*tasks)
            self.report.load_seconds = time.monotonic() - self.started
            self.session = None


def store_now(db: Database, store_id: int) -> tuple[Any, datetime]:
    """The store and its "now" on its test clock, read from the database."""
    with db.read() as conn:
        store = store_repo.get(conn, store_id)
    assert store is not None
    return store, SystemClock().now() + store_offset(store)


# ---------------------------------------------------------------------------------------------
# Quiescing and the checks


def busy(db: Database, store_id: int) -> list[str]:
    """What of the store is still to do: work due on its clock (domain/billing/due.py, the
    sources a clock advance waits for), claimed charges, deferred regenerations, batches not
    completed, pending deliveries. Empty once quiet."""
    store, now = store_now(db, store_id)
    left = []
    with db.read() as conn:
        when = due.next_due(Unit(conn, store, now))
        if when is not None and when <= now:
            left.append(f"work due since {when.isoformat()}")
        for name, table, where in (
                ("claimed charges", charges, charges.c.claimed_by.is_not(None)),
                ("deferred regenerations", pending_regenerations, true()),
                ("batches not completed", async_batches, async_batches.c.status != "completed"),
                ("pending deliveries", webhook_deliveries, webhook_deliveries.c.status == "pending")):
            count = conn.execute(select(func.count()).select_from(table)
                                 .where(table.c.store_id == store_id, where)).scalar_one()
            if count:
                left.append(f"{count} {name}")
    return left


def quiesce(deployment: Deployment, load: Load, seconds: float) -> list[str]:
    """Waits until the store is quiet twice in a row a second apart (a billing run's events make
    deliveries after it); what was left if it never was."""
    deadline = time.monotonic() + seconds
    quiet_once = False
    while time.monotonic() < deadline:
        left = busy(deployment.db, deployment.store_id)
        if not left and quiet_once:
            time.sleep(0.5)  # the last answers the receiver sent may still be on their way in
            load.drain_receiver()
            return []
        quiet_once = not left
        time.sleep(0.5 if left else 1.0)
    return busy(deployment.db, deployment.store_id)


def check_money(db: Database, store_id: int, report: Report) -> None:
    """Every charge that fell due was paid or failed, each attempt once in the ledger."""
    fail = report.failures.append
    store, now = store_now(db, store_id)
    today = now.astimezone(zone(store.timezone)).date()
    most = store.dunning["max_attempts"]
    c, o, p = charges, orders, sandbox_payments
    with db.read() as conn:
        rows = conn.execute(select(c.c.id, c.c.status, c.c.charge_attempts, c.c.scheduled_at, c.c.retry_date,
                                   c.c.error_type).where(c.c.store_id == store_id)).all()
        ledger = defaultdict(list)
        for reference, key, outcome in conn.execute(select(p.c.reference, p.c.idempotency_key, p.c.outcome).where(
                p.c.store_id == store_id, p.c.operation == "charge")):
            ledger[int(reference.split()[1])].append((key, outcome))
        order_rows = conn.execute(select(o.c.charge_id, o.c.number).where(o.c.store_id == store_id)).all()
        deleted = set(conn.execute(select(events.c.resource_id).where(
            events.c.store_id == store_id, events.c.topic == "charge/deleted")).scalars())
    statuses = Counter(row.status for row in rows)
    late = [r.id for r in rows if r.status == "queued" and r.scheduled_at <= today]
    unretried = [r.id for r in rows if r.status == "error" and r.retry_date is not None and r.retry_date <= today]
    if late or unretried:
        fail(f"charges left due: {len(late)} queued ({late[:5]}), {len(unretried)} retries ({unretried[:5]})")
    by_id = {r.id: r for r in rows}
    # A charge in retry whose subscriptions were all cancelled is deleted (docs/api-choices.md,
    # "Cancelling"): its failed attempts stay in the ledger. Anything else of no charge is lost money.
    gone = set(ledger) - set(by_id)
    lost = sorted(i for i in gone if i not in deleted or any(outcome == "captured" for _, outcome in ledger[i]))
    if lost:
        fail(f"ledger payments of no charge of the store: {lost[:5]}")
    wrong = []
    for row in rows:
        paid = ledger.get(row.id, [])
        keys = sorted(key for key, _ in paid)
        captured = sum(outcome == "captured" for _, outcome in paid)
        expected = sorted(f"rebill-charge-{row.id}-attempt-{n}" for n in range(1, row.charge_attempts + 1))
        if (keys != expected or row.charge_attempts > most or captured != (row.status == "success")
                or (row.status == "error" and row.error_type == "CLOSED_MAX_RETRIES_REACHED"
                    and row.charge_attempts != most)):
            wrong.append((row.id, row.status, row.charge_attempts, keys, captured))
    if wrong:
        fail(f"{len(wrong)} charges whose ledger is not one payment per attempt, at most one captured and "
             f"within the {most} attempts of the dunning: {wrong[:5]}")
    per_charge = Counter(charge_id for charge_id, _ in order_rows)
    paid_ids = {r.id for r in rows if r.status == "success"}
    if set(per_charge) != paid_ids or set(per_charge.values()) - {1}:
        fail(f"orders are not one per paid charge: {len(paid_ids)} paid, {len(per_charge)} with orders, "
             f"doubled {[i for i, n in per_charge.items() if n > 1][:5]}, "
             f"missing {sorted(paid_ids - set(per_charge))[:5]}, of no paid charge {sorted(set(per_charge) - paid_ids)[:5]}")
    numbers = sorted(number for _, number in order_rows)
    if numbers != list(range(1, len(numbers) + 1)):
        fail(f"order numbers are not 1..{len(numbers)} without a gap or a repeat")
    outcomes = Counter(outcome for paid in ledger.values() for _, outcome in paid)
    report.figures |= {
        "charges by status": dict(sorted(statuses.items())),
        "charges paid": statuses["success"],
        "payment attempts": sum(outcomes.values()),
        "failed attempts": outcomes["failed"],
        "charges retried (more than one attempt)": sum(r.charge_attempts > 1 for r in rows),
        "charges paid on a retry": sum(r.charge_attempts > 1 and r.status == "success" for r in rows),
        "charges closed after max retries": sum(r.error_type == "CLOSED_MAX_RETRIES_REACHED" for r in rows),
        "charges in retry deleted with their last subscription": len(gone),
        "orders": len(order_rows)}


def check_deliveries(db: Database, store_id: int, load: Load, report: Report) -> None:
    """Every event of a subscribed topic made one delivery per webhook, which succeeded and
    reached the receiver exactly once."""
    fail = report.failures.append
    e, w, d = events, webhooks, webhook_deliveries
    with db.read() as conn:
        hooks = conn.execute(select(w.c.id, w.c.topic).where(w.c.store_id == store_id)).all()
        topics = {topic for _, topic in hooks}
        made = conn.execute(select(e.c.id, e.c.topic).where(e.c.store_id == store_id, e.c.topic.in_(topics))).all()
        rows = conn.execute(select(d.c.id, d.c.event_id, d.c.webhook_id, d.c.status).where(d.c.store_id == store_id)).all()
    expected = Counter((event_id, hook_id) for event_id, topic in made for hook_id, wanted in hooks if wanted == topic)
    delivered = Counter((row.event_id, row.webhook_id) for row in rows)
    if expected != delivered:
        fail(f"deliveries are not one per event and webhook: {len(expected)} expected, {len(delivered)} made; "
             f"missing {list(expected - delivered)[:5]}, extra {list(delivered - expected)[:5]}")
    statuses = Counter(row.status for row in rows)
    if set(statuses) - {"succeeded"}:
        fail(f"deliveries not succeeded: {dict(statuses)}")
    ids = Counter({f"msg_{row.id}": 1 for row in rows})
    if set(load.received) != set(ids):
        fail(f"the receiver got {len(load.received)} webhook-ids, the deliveries are {len(ids)}: "
             f"lost {sorted(set(ids) - set(load.received))[:5]}, unknown {sorted(set(load.received) - set(ids))[:5]}")
    doubled = [i for i, n in load.received.items() if n > 1]
    if doubled:
        fail(f"{len(doubled)} deliveries reached the receiver more than once: {doubled[:5]}")
    report.figures |= {"events of subscribed topics": len(made), "webhook deliveries": len(rows),
                       "received by topic": dict(sorted(load.received_topics.items()))}


def check_batches(db: Database, store_id: int, load: Load, report: Report) -> None:
    """Every batch completed, its bad tasks failed with 422 and the others made one item each."""
    fail = report.failures.append
    t, b = async_batch_tasks, async_batches
    with db.read() as conn:
        batches = conn.execute(select(b.c.id, b.c.status).where(b.c.store_id == store_id)).all()
        results = conn.execute(select(t.c.batch_id, t.c.status, t.c.result).where(
            t.c.batch_id.in_([batch.id for batch in batches]))).all()
        onetimes = set(conn.execute(select(purchase_items.c.id).where(
            purchase_items.c.store_id == store_id, purchase_items.c.kind == "onetime")).scalars())
        told = conn.execute(select(func.count()).where(events.c.store_id == store_id,
                                                       events.c.topic == "onetime/created")).scalar_one()
    if {batch.id for batch in batches} != set(load.batches) or {batch.status for batch in batches} - {"completed"}:
        fail(f"batches: {len(load.batches)} submitted, in the store {Counter(batch.status for batch in batches)}")
    codes = Counter((status, (result or {}).get("status_code")) for _, status, result in results)
    if set(codes) - {("success", 201), ("failed", 422)} or codes[("failed", 422)] != BATCH_BAD * len(batches):
        other = Counter(json.dumps(result.get("output"), sort_keys=True) for _, status, result in results
                        if status != "success" and result != NOT_FOUND)
        fail(f"batch tasks: {dict(codes)} ({BATCH_BAD} of each batch's {BATCH_TASKS} should fail with 422, "
             f"naming no address); other failures: {dict(other.most_common(5))}")
    named = [result["output"]["onetime"]["id"] for _, status, result in results if status == "success"]
    if len(named) != len(set(named)) or set(named) != onetimes or told != len(named):
        fail(f"one-time items: {len(named)} named by tasks ({len(set(named))} distinct), {len(onetimes)} in the "
             f"store, {told} onetime/created events")
    report.figures |= {"async batches": len(batches), "batch tasks": len(results),
                       "batch tasks by outcome": {f"{s} {c}": n for (s, c), n in sorted(codes.items())}}


def check_writes(db: Database, store_id: int, load: Load, report: Report) -> None:
    """The customers and subscriptions the clients were answered are the store's, each once."""
    with db.read() as conn:
        stored = list(conn.execute(select(customers.c.id).where(customers.c.store_id == store_id)).scalars())
        items = list(conn.execute(select(purchase_items.c.id).where(
            purchase_items.c.store_id == store_id, purchase_items.c.kind == "subscription")).scalars())
    if sorted(stored) != sorted(load.created_customers):
        report.failures.append(f"customers: {len(load.created_customers)} answered 201, {len(stored)} stored")
    if sorted(items) != sorted(load.created_subscriptions):
        report.failures.append(f"subscriptions: {len(load.created_subscriptions)} answered 201, {len(items)} stored")
    report.figures |= {"customers created": len(stored), "subscriptions created": len(items)}


def check_rss(load: Load, report: Report) -> None:
    """Each process's RSS at the end of the load against the end of the warm-up: the median of
    the samples in the first 5% of the run after the warm-up, and in its last 5% (at least
    three samples each), so that one sample taken mid-batch decides nothing."""
    seconds = report.load_seconds
    warm_end = report.options.warmup * seconds
    window = max(0.05 * seconds, 3 * report.options.sample_every)
    for name, samples in load.samples.items():
        warm = [kb for at, kb in samples if warm_end <= at <= warm_end + window]
        end = [kb for at, kb in samples if at >= seconds - window]
        if not warm or not end:
            report.failures.append(f"RSS of {name}: too few samples ({len(samples)})")
            continue
        first, last = statistics.median(warm), statistics.median(end)
        growth = last / first - 1
        report.rss[name] = {"warm": first, "end": last, "max": max(kb for _, kb in samples), "growth": growth}
        if growth >= RSS_LIMIT:
            report.failures.append(f"RSS of {name} grew {growth:.1%} after the warm-up ({first / 1024:.1f} MB to "
                                   f"{last / 1024:.1f} MB; limit {RSS_LIMIT:.0%})")


def log_sizes(deployment: Deployment) -> dict[int, int]:
    return {process.pid: len(deployment.day.output(process)) for process in deployment.day.processes}


def check_logs(deployment: Deployment, before_stop: dict[int, int], report: Report) -> None:
    """No process logged a traceback while it served (an error the clients may never have
    seen). What they log while they stop is shown, not failed on: a job cut short by the stop."""
    for process in deployment.day.processes:
        text = deployment.day.output(process)
        served, stopping = text[:before_stop[process.pid]], text[before_stop[process.pid]:]
        if "Traceback" in served:
            at = served.index("Traceback")
            report.failures.append(f"{process.args[3]} {process.pid} logged a traceback: {served[at:at + 1500]}")
        if "Traceback" in stopping:
            last = stopping[stopping.index("Traceback"):].split("\n")
            report.figures[f"traceback while {process.args[3]} {process.pid} stopped"] = next(
                (line for line in last[1:] if line and not line.startswith(" ")), last[-1])


# ---------------------------------------------------------------------------------------------


def run(url: str, options: Options, logs: Path | None = None) -> Report:
    """The soak on ``url``, a new PostgreSQL database; the report says what failed."""
    report = Report(options)
    began = time.monotonic()
    folder = logs or Path(tempfile.mkdtemp(prefix="rebill-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    deployment = Deployment(url, folder, options)
    try:
        deployment.start()
        for version, path, topics in WEBHOOKS:
            for topic in topics:
                status, _ = deployment.request("POST", "/webhooks", {"address": f"{deployment.receiver.url}/{path}",
                                                                     "topic": topic}, version=version)
                if status not in (200, 201):
                    raise RuntimeError(f"POST /webhooks answered {status}")
        print(f"soak: serve (2 API processes) and 2 workers on {url.rsplit('/', 1)[1]}, "
              f"{'Redis at ' + options.redis_url if options.redis_url else 'no Redis (per-process limits)'}; "
              f"{options.seconds:.0f} s of load at {options.rate:g} requests/s from {options.clients} clients, "
              f"a day of the store's clock every {options.day_seconds:g} s; logs in {folder}", flush=True)
        report.startup_seconds = time.monotonic() - began
        load = Load(deployment, report)
        asyncio.run(load.run())
        with (folder / "rss.csv").open("w") as out:  # seconds into the load, process, VmRSS in kB
            out.writelines(f"{at:.1f},{name},{kb}\n" for name, samples in load.samples.items() for at, kb in samples)
        alive = [name for name, pid in deployment.processes().items() if rss_kb(pid) is None]
        if alive:
            report.failures.append(f"processes gone during the load: {alive}")
        if api_children(deployment.server.pid) != deployment.api_pids:
            report.failures.append(f"the API processes were replaced: {deployment.api_pids} then "
                                   f"{api_children(deployment.server.pid)}")
        began = time.monotonic()
        left = quiesce(deployment, load, options.quiesce_seconds)
        report.quiesce_seconds = time.monotonic() - began
        if left:
            report.failures.append(f"not quiet {options.quiesce_seconds:.0f} s after the load: {left}")
        check_money(deployment.db, deployment.store_id, report)
        check_deliveries(deployment.db, deployment.store_id, load, report)
        check_batches(deployment.db, deployment.store_id, load, report)
        check_writes(deployment.db, deployment.store_id, load, report)
        check_rss(load, report)
        before_stop = log_sizes(deployment)
        codes = deployment.stop()
        if set(codes.values()) != {0}:
            report.failures.append(f"processes did not stop cleanly on SIGTERM: {codes}")
        check_logs(deployment, before_stop, report)
    finally:
        deployment.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--database", default="postgresql://root@127.0.0.1:5432/postgres",
                        help="PostgreSQL admin URL (a database is made and dropped)")
    parser.add_argument("--rate", type=float, default=Options.rate, help="requests per second, all clients together")
    parser.add_argument("--clients", type=int, default=Options.clients)
    parser.add_argument("--day-seconds", type=float, default=Options.day_seconds,
                        help="real seconds per day of the store's test clock")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0",
                        help="Redis shared by the API processes, used when it answers ('off': none)")
    parser.add_argument("--steady", type=int, metavar="N", default=STEADY_SUBSCRIBERS,
                        help="at most N paying subscribers: a new one retires the oldest (a store of constant size "
                             "once N is reached, about 2 minutes into the default load); 0: no cap, the store "
                             f"grows all along (default {STEADY_SUBSCRIBERS})")
    parser.add_argument("--logs", type=Path, help="where the processes' logs go (default: a temporary folder)")
    parser.add_argument("--keep-failed", action="store_true", help="keep the database of a failed soak to look into")
    args = parser.parse_args()
    if not args.database.startswith("postgres"):
        raise SystemExit("the soak runs on PostgreSQL (the deployment of issue 18)")
    from bench.run import fresh_database
    options = Options(seconds=args.minutes * 60, rate=args.rate, clients=args.clients, day_seconds=args.day_seconds,
                      steady_subscribers=args.steady or None, redis_url=None if args.redis == "off" else redis_answering(args.redis))
    url, cleanup = fresh_database(args.database)
    report = None
    try:
        report = run(url, options, args.logs)
    finally:
        if report is not None and report.failures and args.keep_failed:
            print(f"soak: the database is kept: {url}", flush=True)
        else:
            cleanup()
    print(report.summary(), flush=True)
    sys.exit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
