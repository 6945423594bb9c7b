"""What metrics and request log lines cost a request (issue 18): `GET /customers/{id}` through
the server, with them off and on, in one run.

    .venv/bin/python -m bench.metrics [--database postgresql://root@127.0.0.1/postgres] [--rounds 5]

One database (seeded as bench/run.py seeds it), five uvicorn processes of bench/app.py side by
side, each with one setting: nothing (the benchmark's usual server), metrics on (multiprocess
mode, a directory of its own, as `rebill serve` runs them), request lines as text (what
`rebill serve` writes by default), request lines as JSON, and metrics with JSON lines. Log lines
go to a file, as a server's standard error would go to a journal or a container's log.

Round after round each server answers wrk on its bare endpoint and on the read, and the
figure is the read's ratio to that server's own bare endpoint (which neither metrics nor log
lines touch: bench/app.py routes it before Rebill), so that the machine's drift from minute to
minute cancels out as in bench/run.py. The cost of a setting is the ratio it loses against the
server with nothing on, and the microseconds it adds to a request (``1/rps`` against the same
round's plain server). Figures go to docs/performance.md by hand.
"""

from __future__ import annotations

import argparse
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
from urllib.request import Request, urlopen

from bench import run
from rebill.observability.logs import logging_config

HERE = Path(__file__).parent
FIRST_PORT = 8770
# name: (environment, log format or None)
CASES: dict[str, tuple[dict[str, str], str | None]] = {
    "off": ({}, None),
    "metrics": ({"REBILL_METRICS": "on"}, None),
    "text lines": ({}, "text"),
    "json lines": ({}, "json"),
    "metrics + json lines": ({"REBILL_METRICS": "on"}, "json"),
}


def start(name: str, port: int, url: str, folder: Path) -> subprocess.Popen[bytes]:
    extra, log_format = CASES[name]
    env = {**os.environ, "REBILL_DATABASE_URL": url, "REBILL_RATE_LIMIT": "off", "REBILL_BILL_EVERY": "0",
           "REBILL_DELIVER_WEBHOOKS": "0", "REBILL_REGENERATE_EVERY": "0", "REBILL_BATCH_EVERY": "0",
           "REBILL_PURGE_EVERY": "0", **extra}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "uvicorn", "bench.app:app", "--port", str(port), "--no-access-log"]
    if extra.get("REBILL_METRICS"):
        directory = folder / f"metrics-{port}"
        directory.mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(directory)  # as `rebill serve` sets it
    if log_format:
        config = folder / f"logging-{port}.json"
        config.write_text(json.dumps(logging_config(log_format)))
        command += ["--log-config", str(config)]
    else:
        command += ["--log-level", "warning"]
    log = (folder / f"server-{port}.log").open("wb")
    return subprocess.Popen(command, env=env, cwd=HERE.parent, stdout=log, stderr=subprocess.STDOUT)


def wait_until_up(port: int, token: str) -> None:
    """Five servers start at once on two cores: each may take many seconds to import."""
    for _ in range(600):
        try:
            urlopen(Request(f"http://127.0.0.1:{port}/", headers={"X-Service-Access-Token": token}), timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the server on port {port} did not start")


def in_process(url: str, rounds: int, requests: int) -> dict[str, dict[str, float]]:
    """The same read driven straight through each setting's ASGI app in this process (no
    server, no network), in CPU time: what the setting adds to the request path itself, a
    figure the load of other processes on the machine moves far less than wrk's (the
    fastest of the rounds, which the least disturbed). Runs in a child process of its own:
    multiprocess mode is chosen before prometheus_client is first imported."""
    folder = Path(tempfile.mkdtemp(prefix="rebill-bench-metrics-"))
    code = f"from bench.metrics import _drive; _drive({url!r}, {str(folder)!r}, {rounds}, {requests})"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE.parent, capture_output=True, text=True,
                              check=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def _drive(url: str, folder: str, rounds: int, requests: int) -> None:
    import asyncio
    import logging
    import logging.config

    from rebill.app import create_app
    from rebill.settings import RateLimit, Settings

    token, customer_id, _ = run.seed(url)
    quiet = Settings(database_url=url, rate_limit=RateLimit(enabled=False), regenerate_every=0, bill_every=0,
                     purge_every=0, deliver_webhooks=False, batch_every=0)
    logging.getLogger("rebill.requests").setLevel(logging.WARNING)
    apps = {"off": create_app(quiet), "metrics": create_app(quiet.with_(metrics=True))}
    sinks = {}
    for name, log_format in (("text lines", "text"), ("json lines", "json"), ("metrics + json lines", "json")):
        config = logging_config(log_format)
        # To a file, as a journal or a container's log would take standard error.
        config["handlers"]["stderr"] = {"class": "logging.FileHandler", "formatter": "rebill",
                                        "filename": f"{folder}/{name.replace(' ', '-')}.log"}
        sinks[name] = config
        logging.config.dictConfig(config)
        apps[name] = create_app(quiet.with_(metrics=name.startswith("metrics")))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": f"/customers/{customer_id}", "raw_path": f"/customers/{customer_id}".encode(),
             "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
             "headers": [(b"x-service-access-token", token.encode()), (b"x-service-version", b"2021-11"),
                         (b"host", b"127.0.0.1")]}
    statuses: list[int] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])  # type: ignore[arg-type]

    async def drive(app: object, n: int) -> float:
        began = time.process_time()
        for _ in range(n):
            await app(dict(scope), receive, send)  # type: ignore[operator]
        return (time.process_time() - began) / n * 1e6

    loop = asyncio.new_event_loop()
    per_round: dict[str, list[float]] = {name: [] for name in apps}
    for name, app in apps.items():  # warm-up
        if name in sinks:
            logging.config.dictConfig(sinks[name])
        loop.run_until_complete(drive(app, 200))
    for _ in range(rounds):
        for name, app in apps.items():
            if name in sinks:
                logging.config.dictConfig(sinks[name])
            per_round[name].append(loop.run_until_complete(drive(app, requests)))
    assert set(statuses) == {200}, set(statuses)
    result = {name: {"us": min(times), "rounds": times} for name, times in per_round.items()}
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", help="PostgreSQL admin URL; default: a fresh SQLite file")
    parser.add_argument("--seconds", type=int, default=3, help="per endpoint, server and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--in-process", action="store_true", help="only the in-process CPU time per request")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)} (off always runs)")
    args = parser.parse_args()
    chosen = ["off", *[c for c in args.cases.split(",") if c in CASES and c != "off"]]
    if args.in_process:
        url, cleanup = run.fresh_database(args.database)
        try:
            found = in_process(url, 15, 2000)
        finally:
            cleanup()
        off = found["off"]["us"]
        print("GET /customers/{id} in process (the ASGI app called in a loop), CPU time per request, "
              "fastest of 15 rounds of 2,000")
        for name, figures in found.items():
            print(f"  {name:22} {figures['us']:7.1f} µs  (+{figures['us'] - off:5.1f} µs, {figures['us'] / off:.2f}x)")
        return
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: run `make bench` (it installs wrk from Debian's packages)")
    url, cleanup = run.fresh_database(args.database)
    folder = Path(tempfile.mkdtemp(prefix="rebill-bench-metrics-"))
    servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    try:
        token, customer_id, _ = run.seed(url)
        read = f"/customers/{customer_id}"
        for n, name in enumerate(chosen):
            servers[name] = (FIRST_PORT + n, start(name, FIRST_PORT + n, url, folder))

        def wrk(name: str, path: str) -> dict[str, float]:
            run.PORT = servers[name][0]  # bench/run.py's wrk and wait_until_up aim at run.PORT
            return run.wrk(path, token, args.seconds, args.connections)
        for name in chosen:
            run.PORT = servers[name][0]
            wait_until_up(servers[name][0], token)
            run.wrk("/__bare", token, 1, args.connections)  # warm-up
            run.wrk(read, token, 2, args.connections)
        rounds = []
        for number in range(args.rounds):
            print(f"round {number + 1} of {args.rounds}", flush=True)
            rounds.append({name: {"bare": wrk(name, "/__bare"), "read": wrk(name, read)} for name in chosen})
    finally:
        for _, process in servers.values():
            process.send_signal(signal.SIGINT)
        for _, process in servers.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        cleanup()
    shutil.rmtree(folder, ignore_errors=True)

    backend = "PostgreSQL" if args.database and not args.database.startswith("sqlite") else "SQLite"
    print(f"\nGET /customers/{{id}}, {backend}, one uvicorn process per setting, wrk -t1 -c{args.connections}, "
          f"{args.rounds} rounds of {args.seconds} s")
    print(f"{'setting':22} {'read req/s':>10} {'ratio to bare':>14} {'ratio per round':>32} {'vs off':>7} "
          f"{'µs added':>9} {'non-2xx':>8}")
    summary = {}
    for name in chosen:
        ratios = [r[name]["read"]["rps"] / r[name]["bare"]["rps"] for r in rounds]
        kept = median(ratios[i] / (r["off"]["read"]["rps"] / r["off"]["bare"]["rps"]) for i, r in enumerate(rounds))
        added = median(1e6 / r[name]["read"]["rps"] - 1e6 / r["off"]["read"]["rps"] for r in rounds)
        errors = sum(r[name]["read"]["non_2xx"] for r in rounds)
        rps = median(r[name]["read"]["rps"] for r in rounds)
        summary[name] = {"rps": rps, "ratio": median(ratios), "kept": kept, "added_us": added, "non_2xx": errors}
        print(f"{name:22} {rps:>10.0f} {median(ratios):>14.2f} {' / '.join(f'{x:.2f}' for x in ratios):>32} "
              f"{kept:>7.2f} {added:>9.1f} {errors:>8}")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"metrics-{backend.lower()}.json").write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
