"""Webhook benchmarks (issue 14):

- deliveries per second to one local receiver: 10,000 events (customers created through the
  service, each fanned out to one webhook in its transaction), then the delivery job drains
  them (claim, sign, send, record) against a receiver in a process of its own; beside it the
  floor, the same bodies posted straight with the same client and concurrency (no database,
  no signing), which no delivery job can beat on this machine;
- the store whose `POST /customers` feeds the outbox: five webhooks on `customer/created`
  (bench/run.py runs the server with deliveries off, so the figure is the outbox's own cost:
  five delivery rows and one rendered payload in each create's transaction).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import aiohttp
from sqlalchemy import func, select

from rebill.api import payloads  # noqa: F401 - the payload renderer the outbox needs
from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.domain.customer import service as customer_service
from rebill.domain.customer.model import CustomerCreate
from rebill.domain.store import service as store_service
from rebill.domain.unit import Unit
from rebill.domain.webhook import service as webhook_service
from rebill.domain.webhook.model import WebhookCreate
from rebill.jobs.deliver import DeliveryRunner
from rebill.models import webhook_deliveries, webhook_payloads

HERE = Path(__file__).parent
RECEIVER_PORT = 8766
RECEIVER = f"http://127.0.0.1:{RECEIVER_PORT}/hooks"
OUTBOX_WEBHOOKS = 5


def _store(db: Database, now: Any, webhooks: int, *, topic: str = "customer/created") -> tuple[Any, str]:
    with db.write() as conn:
        store = store_service.create_store(conn, now, name=f"bench-hooks-{uuid.uuid4().hex[:8]}", ships_to=["US"])
        token = store_service.create_token(conn, now, store=store, name="bench")
        unit = Unit(conn, store, now)
        for n in range(webhooks):
            webhook_service.create(unit, WebhookCreate(address=f"{RECEIVER}/{n}", topic=topic), "2021-11")
    return store, token


def outbox_store(url: str) -> tuple[str, int]:
    """A store with five webhooks on `customer/created`; returns its token and id."""
    db = Database.from_url(url)
    try:
        store, token = _store(db, SystemClock().now(), OUTBOX_WEBHOOKS)
        return token, store.id
    finally:
        db.dispose()


def _receiver() -> subprocess.Popen[bytes]:
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench.receiver:app", "--port", str(RECEIVER_PORT),
                               "--log-level", "warning", "--no-access-log"], cwd=HERE.parent)
    for _ in range(100):
        try:
            urlopen(f"http://127.0.0.1:{RECEIVER_PORT}/", data=b"{}", timeout=1)
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the webhook receiver did not start")


async def _post_all(bodies: list[bytes], concurrency: int) -> float:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        queue = list(reversed(bodies))

        async def worker() -> None:
            while queue:
                body = queue.pop()
                async with session.post(RECEIVER, data=body, headers={"Content-Type": "application/json"}) as answer:
                    await answer.read()
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - began


def deliveries(url: str, events: int = 10_000) -> dict[str, Any]:
    db = Database.from_url(url)
    clock = SystemClock()
    store, _ = _store(db, clock.now(), 1)
    print(f"webhooks: {events:,} customers created, each told to one webhook", flush=True)
    began = time.perf_counter()
    for start in range(0, events, 1000):
        with db.write() as conn:
            unit = Unit(conn, store, clock.now())
            for n in range(start, min(start + 1000, events)):
                customer_service.create(unit, CustomerCreate(email=f"hook-{n}@example.com", first_name="Web",
                                                             last_name="Hook"))
    created = time.perf_counter() - began
    with db.read() as conn:
        queued = conn.execute(select(func.count()).select_from(webhook_deliveries).where(
            webhook_deliveries.c.store_id == store.id)).scalar()
        bodies = [bytes(b) for b in conn.execute(select(webhook_payloads.c.body).where(
            webhook_payloads.c.store_id == store.id)).scalars()]
    receiver = _receiver()
    try:
        runner = DeliveryRunner(db, clock.now)
        floor_s = asyncio.run(_post_all(bodies, runner.per_receiver))
        print(f"webhooks: draining {queued:,} deliveries", flush=True)
        began = time.perf_counter()
        sent = asyncio.run(runner.drain(store_id=store.id))
        seconds = time.perf_counter() - began
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    with db.read() as conn:
        done = conn.execute(select(func.count()).select_from(webhook_deliveries).where(
            webhook_deliveries.c.store_id == store.id, webhook_deliveries.c.status == "succeeded")).scalar()
    db.dispose()
    return {"events": events, "deliveries": queued, "attempts": sent, "succeeded": done, "seconds": seconds,
            "per_second": done / seconds, "floor_per_second": len(bodies) / floor_s, "create_seconds": created,
            "concurrency": runner.per_receiver}
