"""What the rate limit shared through Redis costs a request (issue 18): `GET /customers/{id}`
driven straight through the ASGI app in this process, with the per-process buckets and with
the Redis ones (http/ratelimit_redis.py), in one run.

    .venv/bin/python -m bench.shared_limit [--database postgresql://...] [--redis redis://127.0.0.1:6379/0]

Three figures per case, the best of the rounds (the least disturbed): wall time per request one
at a time (what a client waits: the Redis round trip included), CPU time per request (what the
process spends), and requests per second with 32 in flight on one event loop (round trips to
Redis overlap, as under a server's load). A limit that never refuses (10^9 deep), so every
request is a 200 that still takes from its bucket. Keys under a prefix of the run's own,
deleted at the end. Figures go to docs/performance.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
import uuid
from typing import Any

import redis

from bench import run
from rebill.app import create_app
from rebill.settings import RateLimit, Settings


def measure(url: str, redis_url: str, rounds: int, requests: int) -> dict[str, dict[str, float]]:
    token, customer_id, _ = run.seed(url)
    prefix = f"rebill-bench:{uuid.uuid4().hex}:"
    base = Settings(database_url=url, rate_limit=RateLimit(burst=10**9, per_second=1e6), regenerate_every=0,
                    bill_every=0, purge_every=0, deliver_webhooks=False, batch_every=0, redis_prefix=prefix)
    apps = {"per process": create_app(base), "redis": create_app(base.with_(redis_url=redis_url))}
    path = f"/customers/{customer_id}"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
             "headers": [(b"x-service-access-token", token.encode()), (b"x-service-version", b"2021-11"),
                         (b"host", b"127.0.0.1")]}
    statuses: list[int] = []
    outages: list[logging.LogRecord] = []  # a fallback would time the per-process buckets twice
    handler = logging.Handler()
    handler.emit = outages.append  # type: ignore[method-assign]
    logging.getLogger("rebill.redis").addHandler(handler)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])  # type: ignore[arg-type]

    async def one_by_one(app: Any, n: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            await app(dict(scope), receive, send)
        return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6

    async def in_flight(app: Any, n: int, width: int = 32) -> float:
        async def lane() -> None:
            for _ in range(n // width):
                await app(dict(scope), receive, send)
        began = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(width)))
        return (n // width * width) / (time.perf_counter() - began)

    import uvloop  # the loop `rebill serve` runs on (uvicorn[standard])

    loop = uvloop.new_event_loop()
    figures: dict[str, dict[str, list[float]]] = {name: {"wall_us": [], "cpu_us": [], "rps_32": []} for name in apps}
    for app in apps.values():  # warm-up
        loop.run_until_complete(one_by_one(app, 200))
    for _ in range(rounds):
        for name, app in apps.items():
            wall, cpu = loop.run_until_complete(one_by_one(app, requests))
            figures[name]["wall_us"].append(wall)
            figures[name]["cpu_us"].append(cpu)
            figures[name]["rps_32"].append(loop.run_until_complete(in_flight(app, requests)))
    assert set(statuses) == {200}, set(statuses)
    assert not outages, f"Redis did not answer: {outages}"
    server = redis.Redis.from_url(redis_url)
    keys = list(server.scan_iter(match=f"{prefix}*"))
    assert keys, "no bucket in Redis: the run did not use it"
    server.delete(*keys)
    return {name: {"wall_us": min(f["wall_us"]), "cpu_us": min(f["cpu_us"]), "rps_32": max(f["rps_32"])}
            for name, f in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    url, drop = run.fresh_database(args.database)
    try:
        print(json.dumps(measure(url, args.redis, args.rounds, args.requests), indent=1))
    finally:
        drop()


if __name__ == "__main__":
    main()
