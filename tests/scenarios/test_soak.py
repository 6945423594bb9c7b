"""The soak of issue 18, short (`make soak` runs the same code for 10 minutes, bench/soak.py):
`rebill serve --workers 2 --jobs off` and two `rebill worker` processes on a PostgreSQL database
of their own (Redis shared by the API processes when it answers), about 28 s of mixed load
(reads, writes, async batches, the store's test clock moving a day a second so that charges fall
due, are paid or declined and retried), then quiet: no 5xx and no failed request, every charge
that fell due paid or failed with one ledger payment per attempt and one order per paid charge,
every event of a subscribed topic delivered once to each webhook, every batch task run once,
every created customer and subscription stored once, no traceback in any log. Past 30 paying
subscribers a new one retires the oldest of them (`--steady`, as `make soak` does past 400).

Memory: the same check as the 10-minute run, each process's RSS growing less than 10% from the
end of the warm-up (the first 30% of the load, about 8 s) to the end. A warm-up this short is
enough because what an API process loads once is loaded by its first requests: its first
address (the zip code tables, about 40 MB of its 150) and its first payment method and clock
advance come within the first seconds of a load that starts with a subscriber and makes about
three a second, spread over both processes by a connection per request; a worker's first
billing run, delivery and batch come as early. After that both grow by a few MB in 30 s
(docs/performance.md, "Soak").

About 40 s on a quiet machine: 8 to 15 s of start-up (a database, migrations, four processes), 28 s of load, a few
seconds to quiesce, check and stop."""

from __future__ import annotations

from bench import soak

from tests.conftest import fresh_database_url

LOAD_SECONDS = 28
# About half the run's paying subscribers: the later ones retire the oldest of them (every
# subscription cancelled), as `make soak`'s cap does after its warm-up. A failing card's
# subscriber is not retired: the run still sees its charges closed after the last retry.
STEADY = 30


def test_a_short_soak_of_two_api_processes_and_two_workers_loses_doubles_and_leaks_nothing(tmp_path):
    options = soak.Options(seconds=LOAD_SECONDS, rate=30, clients=6, day_seconds=1.0, batch_every=6.0,
                           sample_every=1.0, quiesce_seconds=30.0, warmup=0.3, steady_subscribers=STEADY,
                           redis_url=soak.redis_answering())
    with fresh_database_url("postgresql", tmp_path) as url:
        report = soak.run(url, options, tmp_path / "logs")
    summary = report.summary()
    print(summary)
    assert report.failures == [], summary
    # The load did what it says, so that the checks had something to check.
    figures = report.figures
    assert report.requests >= 0.8 * options.rate * LOAD_SECONDS, summary
    assert report.days_moved >= 15 and report.statuses["POST /store/clock/advance"]["200"] >= 3, summary
    # 47 to 63 with the cap (retired subscribers' charges are never due): 30 leaves room for a slow machine.
    assert figures["charges paid"] >= 30 and figures["failed attempts"] >= 1, summary
    assert figures["charges closed after max retries"] >= 1, summary
    assert figures["webhook deliveries"] >= 300 and set(figures["received by topic"]) >= {
        "customer/created", "charge/paid", "order/created", "subscription/created"}, summary
    assert figures["async batches"] >= 3 and figures["batch tasks"] == 100 * figures["async batches"], summary
    assert figures["customers created"] >= 50, summary
    assert figures["customers created"] >= STEADY + 10, summary  # so that subscribers were retired
    assert report.statuses["POST /subscriptions/{id}/cancel"]["200"] >= 10, summary
    assert set(report.rss) == {"serve", "api-1", "api-2", "worker-1", "worker-2"}, summary
