"""The billing day on PostgreSQL with one `rebill worker` and with two (issue 18: two workers at
least 1.6x one on 100,000 charges).

    .venv/bin/python -m bench.workers --database postgresql://root@127.0.0.1/postgres [--charges 100000]

Seeds N addresses with a subscription due today and a payment method each (bench/billing.py's
seed, not measured), then bills three days of the same store, a month apart: the first with one
worker, the second with two, the third with one again. Each day is moved to by the store's test
clock (its offset, set straight in the database between days: no run happens on the way), and
its workers are real `rebill worker` processes started for it, which bill at once and are
stopped with SIGTERM once the day is paid. A day's time runs from its first claim (seen by
polling the claims every 20 ms; the processes' start-up is not in it) to its last charge paid.
`--nice -10` (root only) runs the workers and the database's server processes that serve them
at that priority: on a machine shared with other work, what is measured is then how the
workers scale, not what the other work leaves them.
Each day's tables are a month larger than the day before's, so the two-worker day is compared
with the mean of the one-worker days on either side of it. The figures go to
docs/performance.md by hand."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
from sqlalchemy import func, select, update

from bench.billing import seed
from rebill.clock import SystemClock
from rebill.db.engine import Database
from rebill.models import charges, stores

# Only the billing run: every other job of the workers off, so that a day's time is its billing.
QUIET = {"REBILL_REGENERATE_EVERY": "0", "REBILL_PURGE_EVERY": "0", "REBILL_BATCH_EVERY": "0",
         "REBILL_DELIVER_WEBHOOKS": "0", "REBILL_BILL_EVERY": "86400", "REBILL_LOG_FORMAT": "text"}
MONTH = timedelta(days=32)


def _due(store: Any, day: Any) -> Any:
    return (charges.c.store_id == store.id, charges.c.status.in_(("queued", "error")), charges.c.scheduled_at <= day)


def _count_due(db: Database, store: Any, day: Any) -> int:
    with db.read() as conn:
        return conn.execute(select(func.count()).select_from(charges).where(*_due(store, day))).scalar_one()


def _any_due(db: Database, store: Any, day: Any) -> bool:
    """Whether a charge of the day is still unpaid: one index look (a count of a day of 100,000
    charges twenty times a second took half a core from the workers it timed)."""
    with db.read() as conn:
        return conn.execute(select(charges.c.id).where(*_due(store, day)).limit(1)).first() is not None


def _claimed(db: Database, store: Any) -> bool:
    with db.read() as conn:
        return conn.execute(select(charges.c.id).where(charges.c.store_id == store.id,
                                                       charges.c.claimed_by.is_not(None)).limit(1)).first() is not None


@contextmanager
def prioritized(url: str, nice: int | None) -> Iterator[None]:
    """While the block runs, the PostgreSQL server processes of ``url``'s database (the
    workers' connections, as they open) run at ``nice`` (same machine, root)."""
    if nice is None:
        yield
        return
    stop = threading.Event()
    name = url.rsplit("/", 1)[1]

    def watch() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)):
                    try:
                        os.setpriority(os.PRIO_PROCESS, pid, nice)
                    except OSError:
                        pass
                time.sleep(0.2)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def day(url: str, db: Database, store: Any, offset: timedelta, workers: int, nice: int | None = None) -> dict[str, Any]:
    """Bills the day the store's clock shows at ``offset`` with ``workers`` processes."""
    with db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == store.id)
                     .values(clock_offset_seconds=int(offset.total_seconds())))
    today = (SystemClock().now() + offset).date()
    count = _count_due(db, store, today)
    env = {**os.environ, **QUIET}
    env.pop("REBILL_FAILPOINT", None)
    command = [sys.executable, "-m", "rebill.cli", "worker", "--database", url]
    if nice is not None:
        command = ["nice", "-n", str(nice), *command]
    # Their lines to a file: a pipe nobody reads would stop a worker once full.
    logs = tempfile.TemporaryFile()
    processes = [subprocess.Popen(command, env=env, stdout=logs, stderr=logs) for _ in range(workers)]
    try:
        while not _claimed(db, store):
            if any(p.poll() is not None for p in processes):
                logs.seek(0)
                raise SystemExit(f"a worker exited: {logs.read().decode(errors='replace')[-3000:]}")
            time.sleep(0.02)
        started = time.perf_counter()
        while (left := _any_due(db, store, today)) or _claimed(db, store):
            time.sleep(0.05 if left else 0.01)
        seconds = time.perf_counter() - started
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=120)
        logs.close()
    rate = count / seconds
    print(f"workers: {workers} worker(s), {count:,} charges in {seconds:.1f} s ({rate:,.0f} charges/s)", flush=True)
    return {"workers": workers, "charges": count, "seconds": seconds, "per_second": rate}


def run(url: str, n: int, nice: int | None = None) -> dict[str, Any]:
    print(f"workers: seeding {n:,} addresses with a subscription due today and a payment method each "
          "(not measured)", flush=True)
    store, _ = seed(url, n)
    db = Database.from_url(url)
    try:
        with prioritized(url, nice):
            one = day(url, db, store, timedelta(0), 1, nice)
            two = day(url, db, store, MONTH, 2, nice)
            again = day(url, db, store, 2 * MONTH, 1, nice)
    finally:
        db.dispose()
    single = (one["per_second"] + again["per_second"]) / 2
    ratio = two["per_second"] / single
    print(f"workers: two workers {two['per_second']:,.0f} charges/s against one's {single:,.0f} (the mean of the "
          f"days around it): {ratio:.2f}x (target at least 1.6x: {'met' if ratio >= 1.6 else 'NOT met'})", flush=True)
    return {"days": [one, two, again], "one_per_second": single, "two_per_second": two["per_second"],
            "ratio": ratio, "nice": nice}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--charges", type=int, default=100_000)
    parser.add_argument("--database", required=True, help="PostgreSQL admin URL (a database is made and dropped)")
    parser.add_argument("--nice", type=int, help="run the workers and their server processes at this priority "
                        "(e.g. -10; root, PostgreSQL on this machine)")
    args = parser.parse_args()
    if not args.database.startswith("postgres"):
        raise SystemExit("the workers' billing day is measured on PostgreSQL (SQLite writes one at a time)")
    from bench.run import fresh_database
    url, cleanup = fresh_database(args.database)
    try:
        run(url, args.charges, args.nice)
    finally:
        cleanup()


if __name__ == "__main__":
    main()
