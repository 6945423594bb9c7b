"""The PostgreSQL part of `make bench` (issue 18's targets), in one run:

    .venv/bin/python -m bench.postgres --database postgresql://root@127.0.0.1/postgres

- `GET /customers/{id}` against the bare endpoint of the same single server process (target:
  at least 0.25x), round after round like bench/run.py;
- `POST /subscriptions` on `rebill serve` with one API process and with two (target: two at
  least 1.6x one). Both servers run side by side on ports of their own and take turns under
  wrk, so each round compares them on the same machine minute;
- the billing day with one `rebill worker` and with two (bench/workers.py; target 1.6x).

Every server runs with its background jobs off and no rate limit. wrk, PostgreSQL's backends
and the servers share the machine's cores, which is what bounds the two-process figure: with
two cores, two API processes can at best take the core that one leaves to PostgreSQL and wrk
(docs/performance.md says what was measured beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import asyncpg
import psycopg
import uvloop

from bench import schedule, workers
from bench.floor import ceiling
from bench.run import BARE, HERE, PORT, fresh_database, seed, wait_until_up, wrk
from rebill.db.engine import Database
from rebill.domain.customer.repository import _by_id

SERVE_PORTS = {1: PORT + 1, 2: PORT + 2}
QUIET = {"REBILL_RATE_LIMIT": "off", "REBILL_BACKGROUND_JOBS": "off", "REBILL_BILL_EVERY": "0",
         "REBILL_DELIVER_WEBHOOKS": "0", "REBILL_REGENERATE_EVERY": "0", "REBILL_PURGE_EVERY": "0",
         "REBILL_BATCH_EVERY": "0", "REBILL_LOG_REQUESTS": "off"}


def _up(port: int, token: str, process: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(600):
        if process.poll() is not None:
            break
        try:
            urlopen(Request(f"http://127.0.0.1:{port}/store", headers={"X-Service-Access-Token": token,
                                                                     "X-Service-Version": "2021-11"}), timeout=1)
            return
        except HTTPError as refused:
            raise SystemExit(f"rebill serve on port {port} answered {refused.code}: {refused.read()[:300]!r}") from None
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"rebill serve on port {port} did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _serve(url: str, processes: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **QUIET, "REBILL_DATABASE_URL": url}
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "rebill.cli", "serve", "--port", str(SERVE_PORTS[processes]),
                                 "--workers", str(processes), "--rate-limit", "off", "--jobs", "off"],
                                env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=HERE.parent)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def reads(url: str, token: str, customer_id: int, rounds: int, seconds: int, connections: int) -> dict[str, Any]:
    """The single-record read against the bare endpoint, one uvicorn process (bench/app.py)."""
    env = {**os.environ, **QUIET, "REBILL_DATABASE_URL": url}
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench.app:app", "--port", str(PORT),
                               "--log-level", "warning", "--no-access-log"], env=env, cwd=HERE.parent)
    path = f"/customers/{customer_id}"
    try:
        wait_until_up(token)
        wrk("/__bare", token, 2, connections)
        wrk(path, token, 2, connections)
        out = []
        for number in range(rounds):
            bare = wrk("/__bare", token, seconds, connections)
            read = wrk(path, token, seconds, connections)
            out.append({"bare": bare["rps"], "read": read["rps"], "ratio": read["rps"] / bare["rps"],
                        "non_2xx": read["non_2xx"]})
            print(f"  reads round {number + 1}: bare {bare['rps']:,.0f} req/s, GET /customers/{{id}} "
                  f"{read['rps']:,.0f} req/s ({out[-1]['ratio']:.2f})", flush=True)
    finally:
        _stop(server)
    return {"rounds": out, "ratio": median(r["ratio"] for r in out)}


def read_floor(url: str, store_id: int, customer_id: int, connections: int, count: int = 20_000) -> float:
    """What no server could beat: the read's statement (the customer by id, as
    domain/customer/repository.py compiles it for the reads' driver) on asyncpg connections,
    ``connections`` at once, from one process and one event loop, no HTTP and no application
    code: µs of this process's time per read. Added to the bare endpoint's time per request, it
    bounds the ratio the endpoint can reach (bench/floor.py ``ceiling``)."""
    db = Database.from_url(url)
    lanes = db.async_reads
    assert lanes is not None
    compiled = _by_id._compile(lanes.engine.dialect)
    db.dispose()
    params = compiled.arguments({"id": customer_id, "store_id": store_id})
    driver_url = url.replace("postgresql+psycopg://", "postgresql://")

    async def main() -> float:
        conns = [await asyncpg.connect(driver_url) for _ in range(connections)]

        async def reads(conn: Any, n: int) -> None:
            for _ in range(n):
                await conn.fetchrow(compiled.sql, *params)
        await asyncio.gather(*(reads(c, 200) for c in conns))  # prepared on each connection, warm
        started = time.process_time()
        await asyncio.gather(*(reads(c, count // connections) for c in conns))
        spent = time.process_time() - started
        for conn in conns:
            await conn.close()
        return spent / count * 1e6
    return uvloop.run(main())


def processes(url: str, sched: dict[str, Any], address_range: tuple[int, int], rounds: int, seconds: int,
              connections: int, folder: Path) -> dict[str, Any]:
    """`POST /subscriptions` on one API process and on two, taking turns."""
    token = sched["token"]
    script, args = HERE / "post_subscription.lua", [str(address_range[0]), str(address_range[1]), "2031-01-15"]
    servers = {n: _serve(url, n, folder / f"serve-{n}.log") for n in (1, 2)}
    try:
        for n, port in SERVE_PORTS.items():
            _up(port, token, servers[n], folder / f"serve-{n}.log")
            wrk("/subscriptions", token, 2, connections, script, args, port=port)  # warm-up: every process
        out = []
        for number in range(rounds):
            # CPU of the server processes and of PostgreSQL's backends per request, each taken
            # around its own run: the backends of both servers are counted (one database), so a
            # snapshot taken before both runs counted the first run's backends in the second's.
            before = _cpu_seconds(url, servers[1].pid)
            one = wrk("/subscriptions", token, seconds, connections, script, args, port=SERVE_PORTS[1])
            cpu_one = _per_request(before, _cpu_seconds(url, servers[1].pid), one["rps"] * seconds)
            before = _cpu_seconds(url, servers[2].pid)
            two = wrk("/subscriptions", token, seconds, connections, script, args, port=SERVE_PORTS[2])
            cpu_two = _per_request(before, _cpu_seconds(url, servers[2].pid), two["rps"] * seconds)
            out.append({"one": one["rps"], "two": two["rps"], "ratio": two["rps"] / one["rps"],
                        "non_2xx": one["non_2xx"] + two["non_2xx"], "one_cpu_ms": cpu_one, "two_cpu_ms": cpu_two})
            print(f"  writes round {number + 1}: one process {one['rps']:,.0f} req/s, two {two['rps']:,.0f} "
                  f"({out[-1]['ratio']:.2f}x); CPU per request, one: server {out[-1]['one_cpu_ms']['server']:.2f} ms "
                  f"+ PostgreSQL {out[-1]['one_cpu_ms']['postgres']:.2f} ms", flush=True)
    finally:
        for process in servers.values():
            _stop(process)
    return {"rounds": out, "ratio": median(r["ratio"] for r in out)}


def _per_request(before: dict[str, float], after: dict[str, float], requests: float) -> dict[str, float]:
    """ms of CPU per request, of the server and of PostgreSQL's backends."""
    return {k: (after[k] - before[k]) / requests * 1e3 for k in after}


def _cpu_seconds(url: str, server_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of a `rebill serve` and its processes, and of every
    PostgreSQL backend of ``url``'s database (backends that ended meanwhile are not counted:
    the servers keep theirs open)."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu(pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick

    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == server_pid:
                children.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        backends = [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (name,))]
    return {"server": cpu(server_pid) + sum(cpu(pid) for pid in children),
            "postgres": sum(cpu(pid) for pid in backends)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="postgresql://root@127.0.0.1:5432/postgres", help="PostgreSQL admin URL")
    parser.add_argument("--seconds", type=int, default=3, help="per case and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--addresses", type=int, default=10_000, help="addresses the subscriptions go to")
    parser.add_argument("--charges", type=int, default=100_000, help="due charges of the billing day (0: skip)")
    parser.add_argument("--nice", type=int, help="run this bench, its servers, wrk and the database's server "
                        "processes at this priority (root only; as bench/workers.py --nice): on a machine shared "
                        "with other work, what is measured is then the servers, not what the other work leaves")
    args = parser.parse_args()
    if args.nice is not None:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # every process started from here inherits it
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: run `make bench` (it installs wrk from Debian's packages)")
    url, cleanup = fresh_database(args.database)
    folder = Path(tempfile.mkdtemp(prefix="rebill-bench-pg-"))
    try:
        print("seeding: one store with a customer; a store of addresses for the subscriptions", flush=True)
        token, customer_id, store_id = seed(url)
        sched_store, sched_token, address_ids = schedule.seed(url, args.addresses, 1)
        # Its queued charges planned and the statistics fresh, as on a store that has lived: on
        # empty charge tables PostgreSQL plans the create's look-ups as scans, whose cost then
        # grows with every charge the benchmark adds (4 to 14 ms of its CPU a create in five rounds).
        schedule.regenerate(url, sched_store, address_ids)
        sched = {"store": sched_store, "token": sched_token}
        with workers.prioritized(url, args.nice):
            print("reads: GET /customers/{id} against the bare endpoint, one process", flush=True)
            read = reads(url, token, customer_id, args.rounds, args.seconds, args.connections)
            read["floor_us"] = read_floor(url, store_id, customer_id, args.connections)
            print("writes: POST /subscriptions, one API process against two", flush=True)
            write = processes(url, sched, (min(address_ids), max(address_ids)), args.rounds, args.seconds,
                              args.connections, folder)
        day = workers.run(url, args.charges, args.nice) if args.charges else None
    finally:
        cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nRebill on PostgreSQL, wrk -t1 -c{args.connections}, {args.rounds} rounds of {args.seconds}s")
    errors = sum(r["non_2xx"] for r in read["rounds"]) + sum(r["non_2xx"] for r in write["rounds"])
    print(f"{BARE}: {median(r['bare'] for r in read['rounds']):,.0f} req/s; every answer 2xx: {errors == 0}")
    print(f"read target (GET /customers/{{id}} at least 0.25x the bare endpoint): "
          f"{'met' if read['ratio'] >= 0.25 else 'NOT met'} ({read['ratio']:.2f}; "
          f"{median(r['read'] for r in read['rounds']):,.0f} req/s)")
    bare_rps = median(r["bare"] for r in read["rounds"])
    best = ceiling(bare_rps, read["floor_us"])
    print(f"  its statement alone, on asyncpg with no server, costs {read['floor_us']:.0f} µs "
          f"of a process's time; with the bare endpoint's {1e6 / bare_rps:.0f} µs the best reachable ratio is "
          f"{best:.2f}")
    read["ceiling"] = best
    print(f"API processes target (POST /subscriptions, two processes at least 1.6x one): "
          f"{'met' if write['ratio'] >= 1.6 else 'NOT met'} ({write['ratio']:.2f}x: "
          f"{median(r['two'] for r in write['rounds']):,.0f} against {median(r['one'] for r in write['rounds']):,.0f} "
          f"req/s)")
    one_rps = median(r["one"] for r in write["rounds"])
    for n, key in ((1, "one_cpu_ms"), (2, "two_cpu_ms")):
        server = median(r[key]["server"] for r in write["rounds"])
        backends = median(r[key]["postgres"] for r in write["rounds"])
        most = os.cpu_count() * 1e3 / (server + backends)
        print(f"  {n} process(es): {server:.2f} ms of server CPU and {backends:.2f} ms of PostgreSQL's per request; "
              f"{os.cpu_count()} cores at full use would serve at most {most:,.0f} req/s, {most / one_rps:.2f}x what "
              f"one process served (wrk's own share not counted)")
    if day is not None:
        print(f"workers target (a billing day, two workers at least 1.6x one): "
              f"{'met' if day['ratio'] >= 1.6 else 'NOT met'} ({day['ratio']:.2f}x: "
              f"{day['two_per_second']:,.0f} against {day['one_per_second']:,.0f} charges/s)")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "latest-postgresql-targets.json").write_text(json.dumps(
        {"reads": read, "writes": write, "workers": day}, indent=2, default=str))


if __name__ == "__main__":
    main()
