"""Rebill's figures for Prometheus (issue 18), kept with the maintained ``prometheus_client``;
docs/operations.md, "Metrics and logs", lists each one.

**Several processes, one answer.** ``rebill serve --workers N`` runs N processes behind one
port, and whichever of them a scrape reaches answers for all of them. prometheus_client's
multiprocess mode does that: each process writes its figures to memory-mapped files in one
directory (``PROMETHEUS_MULTIPROC_DIR``, which `rebill serve` creates and empties when it starts,
``prepare_directory``), and a scrape reads and sums them. The counters and histograms of a
process that ended stay in the sums, so a worker the server restarts never makes a counter go
back; the pool's gauges are ``livesum`` (the live processes' own), and a scrape forgets those of
processes that are gone. The mode is chosen when prometheus_client is first imported, from that
variable: this module imports it only once metrics are enabled, after `rebill serve` has set
it. Without the variable (the test client, a bare ``uvicorn rebill.asgi:app``) the figures live
in a registry of the process.

**Off the request path.** In multiprocess mode every update of a figure takes a lock and writes
a memory-mapped file: a request's counter and histogram cost 7.8 µs that way, a quarter of a
single-record read in process (docs/performance.md). So a request only adds itself to plain
dicts of this process (about half a microsecond), and the sums go to prometheus_client once a
second (``flush``, on the event loop, started with the server's lifespan) and before every
scrape of this process. What that costs: another process's requests show in a scrape up to a
second late, and a process killed outright (SIGKILL) loses the last second of its request
counts; the jobs' figures, few and far between, are written at once. The figures that read the
database (deliveries and batch tasks waiting, the age of the oldest delivery) are read when
scraped, by the process that answers, with two statements on partial indexes. The pool's
figures are sampled once a second in each process, and at a scrape.

**Cardinality.** Requests are labelled by route template (``/customers/{id}``, never the path),
a method of a fixed list (any other is ``OTHER``), the version served and the status: a client
cannot make new series by inventing paths, methods or versions.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import shutil
import tempfile
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select

from rebill.api.openapi.edge_paths import METRICS_PATH
from rebill.clock import Clock
from rebill.models import async_batch_tasks, async_batches, webhook_deliveries, webhooks

if TYPE_CHECKING:
    from rebill.db.engine import Database
    from rebill.settings import Settings

logger = logging.getLogger("rebill.metrics")

DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
PATH = METRICS_PATH
# The classic text format, which every Prometheus reads (the 1.0.0 type prometheus_client
# now offers as the latest is refused by servers before Prometheus 3; the body is the same).
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# A route the router does not know, and requests the edge answers before any route (a target
# that is no path): one series for all of them, whatever the path.
UNMATCHED = "unmatched"
# A single-record read takes about a millisecond; a list page or a write, tens.
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# A job's run: an idle look takes milliseconds, a billing day minutes.
RUN_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
SAMPLE_SECONDS = 1.0


def run_directory(name: str, root: str | Path | None = None) -> Path:
    """Where `rebill serve` keeps its processes' files: a folder of its own per server run
    (``name``, then the supervisor's pid) under ``root`` (``REBILL_METRICS_DIR``), else under a
    folder per user in the system's temporary directory. Two servers never share or clean each
    other's (found by an audit: a second `serve` on a busy port emptied and removed the running
    one's folder, and its /metrics answered 500 from then on), and nothing else in ``root`` is
    touched (found by an audit: a REBILL_METRICS_DIR holding the SQLite database had its `*.db`
    deleted at start, and the folder removed at a clean stop). The folders of earlier runs whose
    process is gone (a crash, SIGKILL) are removed here, and only those."""
    base = Path(root) if root else Path(tempfile.gettempdir()) / f"rebill-metrics-{os.getuid()}"
    for earlier in base.glob(f"{name}-*"):
        pid = earlier.name.removeprefix(f"{name}-")
        if pid.isdigit() and earlier.is_dir() and not _alive(int(pid)):
            shutil.rmtree(earlier, ignore_errors=True)
    return base / f"{name}-{os.getpid()}"


def prepare_directory(path: str | Path) -> str:
    """Creates the run's folder (``run_directory``: its own, new, so a restarted server starts
    its counters at zero, as Prometheus expects of a restarted target) and points
    prometheus_client at it, for this process and the workers it starts. Call it before anything
    imports prometheus_client, and before starting the workers."""
    directory = Path(path).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    os.environ[DIRECTORY_VARIABLE] = str(directory)
    return str(directory)


def remove_directory(path: str | Path) -> None:
    """At a clean stop: the run's own folder (``run_directory``), of no use to the next run."""
    shutil.rmtree(path, ignore_errors=True)


def method_label(method: str) -> str:
    return method if method in METHODS else "OTHER"


class Metrics:
    """The figures of this process, and the scrape that answers for every process."""

    def __init__(self, db: Database | None, clock: Clock) -> None:
        import prometheus_client as prom
        from prometheus_client import values

        self.db, self.clock = db, clock
        self.directory = os.environ.get(DIRECTORY_VARIABLE) or None
        if bool(self.directory) != getattr(values.ValueClass, "_multiprocess", False):
            # prometheus_client was imported before the directory was set or removed (a test,
            # `serve_worker`): its choice of storage is made again, before any figure.
            values.ValueClass = values.get_value_class()
        self._prom = prom
        self.registry = None if self.directory else prom.CollectorRegistry()
        reg: dict[str, Any] = {"registry": self.registry}
        live: dict[str, Any] = {"multiprocess_mode": "livesum"} if self.directory else {}
        self.requests = prom.Counter(
            "rebill_http_requests", "Requests answered, by method, route template, API version served and status.",
            ("method", "route", "version", "status"), **reg)
        self.latency = prom.Histogram(
            "rebill_http_request_duration_seconds",
            "Time from the request's arrival at Rebill to its answer's last byte, by method and route template.",
            ("method", "route"), buckets=REQUEST_BUCKETS, **reg)
        self.charges = prom.Counter(
            "rebill_billing_charges", "Charges a billing run processed, by outcome (paid, pending, failed).",
            ("outcome",), **reg)
        self.retried = prom.Counter(
            "rebill_billing_charges_retried", "Charges a billing run processed that had failed before (retries).", **reg)
        self.closed = prom.Counter(
            "rebill_billing_charges_closed",
            "Failed charges whose dunning ended (their subscriptions cancelled or left as the store says).", **reg)
        self.billing_runs = prom.Histogram(
            "rebill_billing_run_duration_seconds", "Duration of a billing run over every store.",
            buckets=RUN_BUCKETS, **reg)
        self.jobs = prom.Counter(
            "rebill_jobs", "Runs of each background job, by result (ok, error).", ("job", "result"), **reg)
        self.job_seconds = prom.Histogram(
            "rebill_job_duration_seconds", "Duration of a background job's run.", ("job",), buckets=RUN_BUCKETS, **reg)
        self.attempts = prom.Counter(
            "rebill_webhook_delivery_attempts", "Webhook delivery attempts, by result (succeeded, failed).",
            ("result",), **reg)
        self.tasks = prom.Counter(
            "rebill_batch_tasks_processed", "Async batch tasks run, by result (success, failed).", ("result",), **reg)
        # Their known label values start at 0 in every process, the API's too (Prometheus practice:
        # a query finds 0 before the first event, not "no data"; found by an audit).
        for counter, known in ((self.charges, ("paid", "pending", "failed")), (self.attempts, ("succeeded", "failed")),
                               (self.tasks, ("success", "failed"))):
            for label in known:
                counter.labels(label)
        self.pool_size = prom.Gauge(
            "rebill_db_pool_size", "Connections each process's pool keeps (summed over the processes).", **reg, **live)
        self.pool_open = prom.Gauge(
            "rebill_db_pool_connections", "Connections open in the pools (summed over the processes).", **reg, **live)
        self.pool_out = prom.Gauge(
            "rebill_db_pool_checked_out", "Connections in use (summed over the processes).", **reg, **live)
        self._children: dict[tuple[str, str, str, int], tuple[Any, Any]] = {}
        # Requests since the last flush: (method, route, version, status) -> [count, seconds,
        # per-bucket counts]. Touched on the event loop's thread only.
        self._pending: dict[tuple[str, str, str, int], list[Any]] = {}
        self._backlog = Backlog(db, clock)
        if self.registry is not None:
            self.registry.register(self._backlog)
        self._stop: threading.Event | None = None

    # Updates ------------------------------------------------------------------------

    def request(self, method: str, route: str, version: str, status: int, seconds: float) -> None:
        """A request answered: added to this process's sums (on the event loop's thread)."""
        key = (method, route, version, status)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = [0, 0.0, [0] * (len(REQUEST_BUCKETS) + 1)]
        pending[0] += 1
        pending[1] += seconds
        # A bucket counts the durations up to its bound (`le`); past the last, +Inf.
        pending[2][bisect_left(REQUEST_BUCKETS, seconds)] += 1

    def flush(self) -> None:
        """Hands the requests' sums to prometheus_client (its files, in multiprocess mode). On
        the event loop's thread, like ``request``: the loop runs one of them at a time."""
        pending, self._pending = self._pending, {}
        for key, (count, seconds, buckets) in pending.items():
            children = self._children.get(key)
            if children is None:
                method, route, version, status = key
                children = self._children[key] = (
                    self.requests.labels(method_label(method), route, version, str(status)),
                    self.latency.labels(method_label(method), route))
            counter, histogram = children
            counter.inc(count)
            # A histogram takes one observation at a time in its public API, which would cost
            # what this sum saves; its per-bucket values (non-cumulative, as the files keep them)
            # and its sum take the counts whole. The tests read the result through the parser.
            histogram._sum.inc(seconds)
            for bucket, n in zip(histogram._buckets, buckets):
                if n:
                    bucket.inc(n)

    def charges_of(self, summary: Any) -> None:
        """A store's part of a billing run (``domain/billing/run.Summary``)."""
        for outcome, count in (("paid", summary.paid), ("pending", summary.pending), ("failed", summary.failed)):
            self.charges.labels(outcome).inc(count)  # an inc of 0 still shows the series
        self.retried.inc(summary.retried)
        self.closed.inc(summary.closed)

    def job(self, name: str, seconds: float, ok: bool) -> None:
        self.jobs.labels(name, "ok" if ok else "error").inc()
        self.job_seconds.labels(name).observe(seconds)

    def delivery_attempts(self, succeeded: int, failed: int) -> None:
        self.attempts.labels("succeeded").inc(succeeded)
        self.attempts.labels("failed").inc(failed)

    def batch_tasks(self, succeeded: int, failed: int) -> None:
        self.tasks.labels("success").inc(succeeded)
        self.tasks.labels("failed").inc(failed)

    # The pool -----------------------------------------------------------------------

    def sample_pool(self) -> None:
        """Every pool of the process (PostgreSQL's read lanes too, db/read_lanes.py), added up."""
        if self.db is None:
            return
        kept, out, idle = self.db.pool_figures()
        if not kept:  # a pool without figures (a test's static pool)
            return
        self.pool_size.set(kept)
        self.pool_out.set(out)
        self.pool_open.set(out + idle)

    async def flush_every_second(self) -> None:
        """Until cancelled (the server's lifespan): the requests' sums go out once a second."""
        try:
            while True:
                await asyncio.sleep(SAMPLE_SECONDS)
                self.flush()
        finally:
            self.flush()

    def start_sampling(self) -> None:
        """A thread that samples the pool once a second until ``stop_sampling``: in every
        process, so that the sums are of every process's pool."""
        if self._stop is not None:
            return
        stop = self._stop = threading.Event()

        def sample() -> None:
            while not stop.wait(SAMPLE_SECONDS):
                try:
                    self.sample_pool()
                except Exception:  # noqa: BLE001 - a figure never stops the process
                    logger.exception("sampling the database pool failed")
        threading.Thread(target=sample, name="rebill-metrics-pool", daemon=True).start()

    def stop_sampling(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None

    # The scrape ---------------------------------------------------------------------

    def registry_for_scrape(self) -> Any:
        """What a scrape collects: this process's registry, or every process's files."""
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        if self.directory is None:
            return self.registry
        self._forget_dead()
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.directory)
        registry.register(self._backlog)
        return registry

    def exposition(self) -> bytes:
        """The text format of every figure (of every process in multiprocess mode). Reads
        files and the database: run it in a worker thread, after a ``flush`` on the loop."""
        from prometheus_client import generate_latest

        self.sample_pool()
        return generate_latest(self.registry_for_scrape())

    def _forget_dead(self) -> None:
        """Drops the live gauges of processes that are gone (a worker the server replaced)."""
        from prometheus_client.multiprocess import mark_process_dead

        assert self.directory is not None
        for path in glob.glob(os.path.join(self.directory, "gauge_live*_*.db")):
            try:
                pid = int(os.path.basename(path).rsplit("_", 1)[1][:-3])
            except ValueError:
                continue
            if not _alive(pid):
                mark_process_dead(pid, self.directory)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class Backlog:
    """A collector of what waits in the database, read when scraped (one process answers for
    the database all processes share): deliveries due or retrying and the age of the oldest,
    and the tasks of submitted async batches not yet run."""

    def __init__(self, db: Database | None, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def describe(self) -> list[Any]:
        return []  # read only when collected: registering it must not query the database

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        if self.db is None:
            return
        try:
            pending, oldest, tasks = self._read()
        except Exception:  # noqa: BLE001 - the database is down: say so, serve the rest
            logger.warning("metrics: the database could not be read", exc_info=True)
            yield GaugeMetricFamily("rebill_database_up", "Whether the scrape could read the database.", value=0)
            return
        yield GaugeMetricFamily("rebill_database_up", "Whether the scrape could read the database.", value=1)
        yield GaugeMetricFamily(
            "rebill_webhook_deliveries_pending",
            "Webhook deliveries waiting to be sent (due or retrying later), of enabled webhooks.", value=pending)
        age = max(0.0, (self.clock.now() - oldest).total_seconds()) if oldest is not None else 0.0
        yield GaugeMetricFamily(
            "rebill_webhook_delivery_oldest_pending_age_seconds",
            "Seconds since the oldest pending delivery of an enabled webhook was created (0 when none waits).",
            value=age)
        yield GaugeMetricFamily(
            "rebill_batch_tasks_pending", "Tasks of submitted async batches not yet run (pending or running).",
            value=tasks)

    def _read(self) -> tuple[int, Any, int]:
        d, t = webhook_deliveries, async_batch_tasks
        assert self.db is not None
        with self.db.read() as conn:
            # A disabled webhook's deliveries wait for it to be enabled (decisions §8.4): not a
            # backlog of the sender's. A test delivery goes out to a disabled one too.
            pending, oldest = conn.execute(
                select(func.count(), func.min(d.c.created_at)).select_from(d)
                .join(webhooks, webhooks.c.id == d.c.webhook_id)
                .where(d.c.status == "pending", or_(webhooks.c.disabled_at.is_(None), d.c.event_id.is_(None)))).one()
            tasks = conn.execute(
                select(func.count()).select_from(t).join(async_batches, async_batches.c.id == t.c.batch_id)
                .where(t.c.status.in_(("pending", "processing")), async_batches.c.submitted_at.is_not(None))).scalar()
        return int(pending), oldest, int(tasks or 0)


_current: Metrics | None = None


class AddressUnavailable(Exception):
    """The worker's metrics address cannot be listened on (in use, not this host's)."""


def serve_worker(settings: Settings, db: Database, clock: Clock) -> Callable[[], None] | None:
    """For a process without the API (`rebill worker`): when ``settings.metrics`` is on, its
    figures (jobs, billing, deliveries, batches, its pool, and what waits in the database) on
    ``GET /metrics`` at ``settings.worker_metrics_address`` (HOST:PORT), served from a thread
    by prometheus_client's own HTTP server; returns what stops it, or None when metrics are
    off. A worker is one process: its figures live in its own registry, never in the
    directory of a `rebill serve` whose variable it may have inherited."""
    from prometheus_client import start_http_server

    if not settings.metrics:
        return None
    host, _, port = settings.worker_metrics_address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"REBILL_WORKER_METRICS_ADDRESS must be HOST:PORT, not {settings.worker_metrics_address!r}")
    os.environ.pop(DIRECTORY_VARIABLE, None)
    figures = enable(db, clock)
    try:
        # A port in use is said in one line, not a traceback (found by an audit).
        server, thread = start_http_server(int(port), addr=host.strip("[]"), registry=_Scrape(figures))
    except (OSError, OverflowError) as exc:
        disable()
        raise AddressUnavailable(f"REBILL_WORKER_METRICS_ADDRESS {settings.worker_metrics_address}: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from None
    figures.start_sampling()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        figures.stop_sampling()
    logger.info("metrics: GET http://%s/metrics (this worker's figures)", settings.worker_metrics_address)
    return stop


class _Scrape:
    """A collector for prometheus_client's HTTP server: whatever a scrape of ``figures`` reads."""

    def __init__(self, figures: Metrics) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Any]:
        self.figures.sample_pool()
        yield from self.figures.registry_for_scrape().collect()


def enable(db: Database | None, clock: Clock) -> Metrics:
    """The figures of this process from now on: the jobs' hooks count into them, and the app
    built with them serves them. One per process (a second replaces the first for the hooks)."""
    global _current
    _current = Metrics(db, clock)
    return _current


def current() -> Metrics | None:
    return _current


def disable() -> None:
    """No figures from now on (a test that enabled them, done)."""
    global _current
    if _current is not None:
        _current.stop_sampling()
    _current = None
