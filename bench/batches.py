"""The async batch benchmark of issue 15: a 10,000-task `onetime_create` batch run by the batch
job of a running server, in tasks per second, against 10,000 `POST /onetimes` through HTTP to
the same server (target: the batch at least 3x faster).

    .venv/bin/python -m bench.batches [--tasks 10000] [--database postgresql://...]

Seeds one store with twice as many addresses as tasks (plain bulk inserts, not measured): the
requests create one one-time item on each address of the first half, the batch one on each of
the second, with the same bodies, so each side plans as many new charges. The server is
`bench.app` (Rebill in one uvicorn process, its job runner included). The requests go first,
from 16 concurrent connections of one aiohttp client; then the batch's tasks are added through
the API (1,000 a call) and it is submitted, and a progress bar follows its counters until it is
completed. Its rate is the tasks over the time from the submit to the completed batch; the
upload is timed too, apart.

    .venv/bin/python -m bench.batches --instructions [--tasks 1000]     # valgrind, repeatable

counts one task's instructions instead, which repeat from run to run whatever else the machine
does (a task's time through the server moves by a fifth from hour to hour): the same store with
a submitted batch of N tasks and one of 2N, each run by a child process under callgrind that
only runs the batch (`BatchRunner.run_due`, chunks of 200 with no time limit: under valgrind's
slowdown the 0.2 s limit would cut them to a few tasks); (2N - N) / N is one task
(docs/performance.md, the eighteenth session)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import aiohttp
import msgspec
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import delete

from bench import callgrind, compile_sources, schedule
from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.models import purchase_items

HERE = Path(__file__).parent
PORT = 8767
BASE = f"http://127.0.0.1:{PORT}"
CONCURRENCY = 16


def _seed(url: str, tasks: int) -> tuple[str, list[int]]:
    """A store with 2 x ``tasks`` addresses and nothing on them; its token and address ids."""
    store, token, address_ids = schedule.seed(url, 2 * tasks, 0)
    db = Database.from_url(url)
    with db.write() as conn:  # schedule.seed puts a one-time item on every hundredth address
        conn.execute(delete(purchase_items).where(purchase_items.c.store_id == store.id))
    db.dispose()
    return token, address_ids


def _body(address_id: int, day: str) -> dict[str, Any]:
    return {"address_id": address_id, "product_title": "Tea", "price": "9.90", "quantity": 1,
            "next_charge_scheduled_at": day}


def _call(token: str, method: str, path: str, body: Any = None) -> Any:
    data = msgspec.json.encode(body) if body is not None else None
    sent = Request(BASE + path, data=data, method=method, headers={
        "X-Service-Access-Token": token, "X-Service-Version": "2021-11", "Content-Type": "application/json"})
    with urlopen(sent, timeout=60) as answer:
        return msgspec.json.decode(answer.read())


async def _post_all(token: str, bodies: list[dict[str, Any]]) -> tuple[float, int]:
    """Every body as `POST /onetimes`, 16 at a time; (seconds, answers that were not 201)."""
    headers = {"X-Service-Access-Token": token, "X-Service-Version": "2021-11", "Content-Type": "application/json"}
    queue = [msgspec.json.encode(b) for b in reversed(bodies)]
    refused = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:
        async def worker() -> None:
            nonlocal refused
            while queue:
                payload = queue.pop()
                async with session.post(BASE + "/onetimes", data=payload, headers=headers) as answer:
                    await answer.read()
                    refused += answer.status != 201
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - began, refused


def _settings(url: str) -> dict[str, str]:
    """Rebill on ``url`` with no job but the batches' and no rate limit."""
    return {"REBILL_DATABASE_URL": url, "REBILL_RATE_LIMIT": "off", "REBILL_BILL_EVERY": "0",
            "REBILL_DELIVER_WEBHOOKS": "0", "REBILL_REGENERATE_EVERY": "0", "REBILL_PURGE_EVERY": "0"}


def _server(url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, **_settings(url)}
    env.pop("REBILL_BATCH_EVERY", None)
    return subprocess.Popen([sys.executable, "-m", "uvicorn", "bench.app:app", "--port", str(PORT),
                             "--log-level", "warning", "--no-access-log"], env=env, cwd=HERE.parent)


def _wait_until_up(token: str) -> None:
    for _ in range(100):
        try:
            _call(token, "GET", "/async_batches?limit=1")
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def _run_batch(token: str, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    batch_id = _call(token, "POST", "/async_batches", {"batch_type": "onetime_create"})["async_batch"]["id"]
    began = time.perf_counter()
    for start in range(0, len(bodies), 1000):
        _call(token, "POST", f"/async_batches/{batch_id}/tasks",
              {"tasks": [{"body": b} for b in bodies[start:start + 1000]]})
    upload = time.perf_counter() - began
    columns = (TextColumn("batch {task.fields[state]}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]} tasks/s, {task.fields[failed]} failed"), TimeElapsedColumn())
    with Progress(*columns) as progress:
        shown = progress.add_task("batch", total=len(bodies), state="submitted", rate="-", failed=0)
        began = time.perf_counter()
        _call(token, "POST", f"/async_batches/{batch_id}/process")
        while True:
            batch = _call(token, "GET", f"/async_batches/{batch_id}")["async_batch"]
            done = batch["success_task_count"] + batch["fail_task_count"]
            elapsed = time.perf_counter() - began
            progress.update(shown, completed=done, state=batch["status"], failed=batch["fail_task_count"],
                            rate=f"{done / elapsed:,.0f}")
            if batch["status"] in ("completed", "failed"):
                break
            time.sleep(0.05)
    seconds = time.perf_counter() - began
    return {"batch_id": batch_id, "status": batch["status"], "succeeded": batch["success_task_count"],
            "failed": batch["fail_task_count"], "seconds": seconds, "upload_seconds": upload,
            "per_second": len(bodies) / seconds}


def run(url: str, tasks: int = 10_000) -> dict[str, Any]:
    print(f"async batches: seeding {2 * tasks:,} addresses", flush=True)
    token, address_ids = _seed(url, tasks)
    day = (SystemClock().now().date() + timedelta(days=30)).isoformat()
    by_http = [_body(a, day) for a in address_ids[:tasks]]
    by_batch = [_body(a, day) for a in address_ids[tasks:]]
    server = _server(url)
    try:
        _wait_until_up(token)
        print(f"async batches: {tasks:,} POST /onetimes, {CONCURRENCY} at a time", flush=True)
        http_seconds, refused = asyncio.run(_post_all(token, by_http))
        print(f"async batches: a {tasks:,}-task onetime_create batch", flush=True)
        batch = _run_batch(token, by_batch)
    finally:
        server.terminate()
        server.wait(timeout=30)
    http_rate = tasks / http_seconds
    return {**batch, "tasks": tasks, "http_seconds": http_seconds, "http_per_second": http_rate,
            "http_refused": refused, "ratio": batch["per_second"] / http_rate}


def report(result: dict[str, Any]) -> str:
    met = "met" if result["ratio"] >= 3 else "NOT met"
    return (f"async batch target (a {result['tasks']:,}-task onetime_create batch at least 3x as fast as "
            f"{result['tasks']:,} POST /onetimes through HTTP): {met} ({result['ratio']:.1f}x: "
            f"{result['per_second']:,.0f} tasks/s, "
            f"{result['succeeded']:,} succeeded and {result['failed']:,} failed in {result['seconds']:.1f} s, "
            f"added in {result['upload_seconds']:.1f} s; {result['http_per_second']:,.0f} requests/s over HTTP, "
            f"{result['http_refused']} not 201)")


def _submitted(url: str, token: str, bodies: list[dict[str, Any]]) -> None:
    """A submitted `onetime_create` batch of ``bodies`` in the database at ``url``, through the
    app in this process (no server, no job runner)."""
    from starlette.testclient import TestClient

    from rebill.app import create_app
    from rebill.settings import Settings
    app = create_app(Settings.from_env({**_settings(url), "REBILL_BATCH_EVERY": "0"}))  # no job runner
    headers = {"X-Service-Access-Token": token, "X-Service-Version": "2021-11"}
    with TestClient(app) as client:
        batch_id = client.post("/async_batches", json={"batch_type": "onetime_create"},
                               headers=headers).json()["async_batch"]["id"]
        for start in range(0, len(bodies), 1000):
            added = client.post(f"/async_batches/{batch_id}/tasks", headers=headers,
                                json={"tasks": [{"body": b} for b in bodies[start:start + 1000]]})
            assert added.status_code < 300, added.text
        assert client.post(f"/async_batches/{batch_id}/process", headers=headers).status_code < 300
    app.services.db.dispose()


def _child(url: str) -> None:
    """Runs the submitted batch, as a worker's job would, and nothing else."""
    from rebill import heap
    from rebill.app import create_app
    from rebill.jobs.batches import BatchRunner
    from rebill.settings import Settings
    app = create_app(Settings.from_env({**_settings(url), "REBILL_BATCH_EVERY": "0"}))  # it runs the batch itself
    heap.freeze()
    assert BatchRunner(app.services, chunk_seconds=1e9).run_due() > 0


def instructions(tasks: int) -> int:
    """One `onetime_create` task's instructions: (a batch of 2 x ``tasks`` - one of ``tasks``) / ``tasks``."""
    compile_sources()
    folder = Path(tempfile.mkdtemp(prefix="rebill-bench-batches-"))
    try:
        seeded = folder / "seeded.db"
        token, address_ids = _seed(f"sqlite:///{seeded}", tasks)  # 2 x tasks addresses
        day = (SystemClock().now().date() + timedelta(days=30)).isoformat()
        counts = []
        for n in (tasks, 2 * tasks):
            copy = folder / f"batch-{n}.db"
            shutil.copy(seeded, copy)
            _submitted(f"sqlite:///{copy}", token, [_body(a, day) for a in address_ids[:n]])
            print(f"async batches: counting the instructions of a {n:,}-task batch (valgrind)", flush=True)
            counts.append(callgrind(f"from bench.batches import _child; _child({f'sqlite:///{copy}'!r})",
                                    folder / f"callgrind-{n}.out"))
        return (counts[1] - counts[0]) // tasks
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--database", help="PostgreSQL admin URL; default: a fresh SQLite file")
    parser.add_argument("--instructions", action="store_true",
                        help="count one task's instructions with valgrind instead (SQLite; default 1,000 tasks)")
    args = parser.parse_args()
    if args.instructions:
        tasks = 1000 if args.tasks == 10_000 else args.tasks
        print(f"async batches: {instructions(tasks):,} instructions a task (batches of {tasks:,} and {2 * tasks:,})")
        return
    from bench.run import fresh_database
    url, cleanup = fresh_database(args.database)
    try:
        print(report(run(url, args.tasks)))
    finally:
        cleanup()


if __name__ == "__main__":
    main()
