"""`GET /metrics` and the request and job log lines (issue 18; observability/, http/observe.py,
http/metrics.py): off by default, served without a token when on, the Prometheus text format
that prometheus_client's own parser reads, and each figure moved by what it counts: requests by
route template, version and status; billing runs; webhook deliveries; batch tasks; the pool.

The figures here live in a registry of the test process (no ``PROMETHEUS_MULTIPROC_DIR``); the
summing across the processes of a real `rebill serve --workers 2` is
tests/scenarios/test_metrics_processes.py. The database is one of this module's own (both
backends), so that the figures read from it (deliveries and tasks waiting) are this module's
alone."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.payment.sandbox import SandboxGateway
from rebill.domain.webhook import retries
from rebill.http.observe import Observed
from rebill.jobs.batches import BatchRunner
from rebill.jobs.scheduler import Jobs, bill_every_store
from rebill.observability import metrics
from rebill.observability.logs import JsonFormatter, TextFormatter
from rebill.settings import RateLimit, Settings
from tests.api.test_webhooks import create as create_webhook
from tests.api.test_webhooks import disable, drain, receiving
from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription
from tests.conftest import Api, fresh_database_url, make_api

V01, V11 = "2021-01", "2021-11"
FAMILIES = {
    "rebill_http_requests", "rebill_http_request_duration_seconds", "rebill_billing_charges",
    "rebill_billing_charges_retried", "rebill_billing_charges_closed", "rebill_billing_run_duration_seconds",
    "rebill_jobs", "rebill_job_duration_seconds", "rebill_webhook_delivery_attempts", "rebill_batch_tasks_processed",
    "rebill_db_pool_size", "rebill_db_pool_connections", "rebill_db_pool_checked_out", "rebill_database_up",
    "rebill_webhook_deliveries_pending", "rebill_webhook_delivery_oldest_pending_age_seconds",
    "rebill_batch_tasks_pending",
}


def _settings(**kw: Any) -> Settings:
    quiet = {"regenerate_every": 0, "bill_every": 0, "purge_every": 0, "deliver_webhooks": False, "batch_every": 0}
    return Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                    **{**quiet, **kw})


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def own_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with fresh_database_url(request.param, tmp_path_factory.mktemp("metrics")) as url:
        upgrade(url)
        db = Database.from_url(url)
        yield db
        db.dispose()


@pytest.fixture(scope="module")
def observed(own_db: Database, clock: Any) -> Iterator[TestClient]:
    app = create_app(_settings(metrics=True), db=own_db, clock=clock)
    try:
        with TestClient(app, base_url="http://rebill.test") as client:
            yield client
    finally:
        metrics.disable()


@pytest.fixture
def mapi(observed: TestClient, own_db: Database, clock: Any) -> Api:
    return make_api(observed, own_db, clock)


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `/metrics`, by name and labels; the text parsed by prometheus_client."""
    reply = client.get("/metrics")
    assert reply.status_code == 200, reply.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(reply.text) for s in family.samples}


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# Off by default ------------------------------------------------------------------------------------

def test_metrics_are_off_by_default_and_the_path_answers_as_an_unknown_one(api):
    assert Settings().metrics is False and Settings.from_env({}).metrics is False
    unknown, hidden = api.get("/no_such_path"), api.get("/metrics")
    assert hidden.status_code == unknown.status_code == 404 and hidden.json() == unknown.json()
    anonymous = api.client.get("/metrics")
    assert anonymous.status_code == 401 and anonymous.json() == api.client.get("/no_such_path").json()
    assert "rebill_" not in anonymous.text


def test_a_line_per_request_comes_with_json_lines_unless_told():
    assert Settings().request_lines is False and Settings(log_format="json").request_lines is True
    assert Settings.from_env({"REBILL_LOG_REQUESTS": "on"}).request_lines is True
    assert Settings.from_env({"REBILL_LOG_FORMAT": "json", "REBILL_LOG_REQUESTS": "off"}).request_lines is False
    with pytest.raises(ValueError, match="log format must be one of text, json"):
        Settings.from_env({"REBILL_LOG_FORMAT": "xml"})


def test_the_switch_is_read_strictly():
    assert Settings.from_env({"REBILL_METRICS": "on"}).metrics is True
    assert Settings.from_env({"REBILL_METRICS": "off"}).metrics is False
    with pytest.raises(ValueError, match="REBILL_METRICS must be on or off"):
        Settings.from_env({"REBILL_METRICS": "yes please"})


def test_with_metrics_and_request_lines_off_the_app_is_not_wrapped(api):
    app = create_app(_settings(), db=api.db, clock=api.clock)
    assert not isinstance(app, Observed) and app.metrics is None


# On ---------------------------------------------------------------------------------------------

def test_metrics_on_answer_the_text_format_without_a_token(observed, mapi):
    reply = observed.get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert len(reply.headers["x-request-id"]) == 32 and "x-service-limit" not in reply.headers
    names = {family.name for family in text_string_to_metric_families(reply.text)}
    assert FAMILIES <= names, FAMILIES - names
    head = observed.head("/metrics")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    refused = observed.post("/metrics")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
    # Only that path skips the token.
    assert observed.get("/metrics/x").status_code == 401 and observed.get("/metricsx").status_code == 401


def test_a_request_moves_its_counter_by_route_template_version_and_status(observed, mapi):
    customer = make_customer(mapi)
    before = scrape(observed)
    for version in (V01, V11, V11):
        assert mapi.get(f"/customers/{customer.id}", version=version).status_code == 200
    assert mapi.get("/customers/999999999").status_code == 404
    assert observed.get(f"/customers/{customer.id}").status_code == 401  # no token: before routing
    assert mapi.get("/nothing/here").status_code == 404
    assert mapi.request("BREW", "/customers").status_code == 405
    after = scrape(observed)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)
    route = "/customers/{customer_id}"
    requests = "rebill_http_requests_total"
    assert moved(requests, method="GET", route=route, version=V11, status="200") == 2
    assert moved(requests, method="GET", route=route, version=V01, status="200") == 1
    assert moved(requests, method="GET", route=route, version=V11, status="404") == 1
    assert moved(requests, method="GET", route=route, version=V01, status="401") == 1
    assert moved(requests, method="GET", route="unmatched", version=V11, status="404") == 1
    assert moved(requests, method="OTHER", route="/customers", version=V11, status="405") == 1
    latency = "rebill_http_request_duration_seconds"
    assert moved(f"{latency}_count", method="GET", route=route) == 5
    assert moved(f"{latency}_bucket", method="GET", route=route, le="+Inf") == 5
    assert moved(f"{latency}_sum", method="GET", route=route) > 0
    # No label ever holds a raw path: ids would make a series per record.
    routes = {v for _, labels in after for k, v in labels if k == "route"}
    assert not [r for r in routes if any(part.isdigit() for part in r.split("/"))], routes
    assert {"/customers/{customer_id}", "unmatched", "/customers", "/metrics"} <= routes


def test_a_client_gone_before_its_body_is_counted_499_and_logged_as_no_error(observed, mapi, caplog):
    """A client that closed the connection while its POST's body was on the way (wrk stopping
    mid-request) was an "unhandled error" with a traceback and a 500 in the figures."""
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"x-service-access-token", mapi.token.encode()), (b"x-service-version", V11.encode()),
               (b"content-type", b"application/json"), (b"content-length", b"60")]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/customers", "raw_path": b"/customers", "query_string": b"", "root_path": "",
             "headers": headers, "client": ("127.0.0.1", 5000), "server": ("rebill.test", 80)}
    before = scrape(observed)
    count = len(mapi.get("/customers", params={"limit": 250}).json()["customers"])
    with caplog.at_level(logging.INFO, logger="rebill"):
        observed.portal.call(observed.app, scope, receive, send)
    assert sent == []  # nobody to answer
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "closed the connection before its body arrived" in caplog.text
    after = scrape(observed)
    requests = "rebill_http_requests_total"
    labels = {"method": "POST", "route": "/customers", "version": V11}
    assert value(after, requests, **labels, status="499") - value(before, requests, **labels, status="499") == 1
    assert value(after, requests, **labels, status="500") == value(before, requests, **labels, status="500")
    assert len(mapi.get("/customers", params={"limit": 250}).json()["customers"]) == count


def test_a_billing_run_moves_the_billing_figures(observed, mapi):
    paid = _due_charge(mapi, "pm_ok")
    declined = _due_charge(mapi, "pm_declined")
    gateway = SandboxGateway(mapi.db, mapi.clock.now)
    before = scrape(observed)
    processed = bill_every_store(mapi.db, gateway, mapi.clock, timedelta(seconds=60))
    middle = scrape(observed)
    assert processed == 2  # this module's database: no other store has anything due
    assert charges_of(mapi, paid)[0].status == "success"

    def moved(start: Any, end: Any, name: str, **labels: str) -> float:
        return value(end, name, **labels) - value(start, name, **labels)
    assert moved(before, middle, "rebill_billing_charges_total", outcome="paid") == 1
    assert moved(before, middle, "rebill_billing_charges_total", outcome="failed") == 1
    assert moved(before, middle, "rebill_billing_charges_retried_total") == 0
    assert moved(before, middle, "rebill_billing_run_duration_seconds_count") == 1
    # The retry, a day later (the default dunning): counted as retried, failed again.
    mapi.clock.advance(timedelta(days=1))
    assert bill_every_store(mapi.db, gateway, mapi.clock, timedelta(seconds=60)) == 1
    after = scrape(observed)
    assert moved(middle, after, "rebill_billing_charges_retried_total") == 1
    assert moved(middle, after, "rebill_billing_charges_total", outcome="failed") == 1
    assert moved(middle, after, "rebill_billing_charges_total", outcome="paid") == 0
    assert moved(before, after, "rebill_billing_run_duration_seconds_count") == 2
    assert declined


def test_a_test_clock_advance_moves_the_billing_figures(observed, mapi):
    """Its stops are billing runs (found by an audit: an advance that paid 1,400 charges left
    the figures at 0)."""
    customer = make_customer(mapi)
    make_payment_method(mapi, customer, processor_payment_method_token="pm_ok")
    address = make_address(mapi, customer)
    make_subscription(mapi, address, next_charge_scheduled_at=mapi.clock.now().date() + timedelta(days=1))
    before = scrape(observed)
    reply = mapi.post("/store/clock/advance", json={"days": 2})
    assert reply.status_code == 200 and reply.json()["store_clock"]["paid"] == 1, reply.text
    after = scrape(observed)
    paid = ("rebill_billing_charges_total", (("outcome", "paid"),))
    assert after.get(paid, 0.0) - before.get(paid, 0.0) == 1
    assert charges_of(mapi, address.id)[0].status == "success"
    # One job run, counted as a scheduled billing run is.
    assert value(after, "rebill_jobs_total", job="billing_run", result="ok") - \
        value(before, "rebill_jobs_total", job="billing_run", result="ok") == 1


def test_a_test_clock_advance_logs_its_billing_as_a_job_run(mapi, observed, caplog):
    """Found by an audit: the store's line of an advance's billing had `job_id` and
    `duration_ms` null, and no run line followed (a scheduled run's have both)."""
    caplog.set_level(logging.INFO, logger="rebill.jobs")
    customer = make_customer(mapi)
    make_payment_method(mapi, customer, processor_payment_method_token="pm_ok")
    make_subscription(mapi, make_address(mapi, customer), next_charge_scheduled_at=mapi.clock.now().date()
                      + timedelta(days=1))
    assert mapi.post("/store/clock/advance", json={"days": 2}).status_code == 200
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "rebill.jobs"]
    store, run = lines
    assert store["job"] == run["job"] == "billing_run" and store["job_id"] == run["job_id"]
    assert len(run["job_id"]) == 16 and store["duration_ms"] is not None and run["count"] == 1
    assert (store["store_id"], store["paid"]) == (mapi.store.id, 1)


def test_a_refused_clock_advance_is_no_failed_billing_run(mapi, observed, caplog):
    """Found by an audit: `days: 0` answered 422 and also logged an ERROR line and counted a
    failed billing run, which an operator's alert on failed runs would take for stores unbilled."""
    caplog.set_level(logging.INFO, logger="rebill.jobs")
    before = scrape(observed)
    for body in ({"days": 0}, {"days": 99_999_999}, {"to": "2000-01-01"}, {"days": 1, "hours": 1}):
        assert mapi.post("/store/clock/advance", json=body).status_code == 422, body
    # Another advance holding the clock (its lease, as a running advance writes it): 409.
    from datetime import timedelta as later

    from sqlalchemy import update

    from rebill.models import stores
    with mapi.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == mapi.store.id).values(
            clock_moving_until=mapi.clock.now() + later(minutes=5)))
    assert mapi.post("/store/clock/advance", json={"days": 1}).status_code == 409
    after = scrape(observed)
    for result in ("ok", "error"):
        assert value(after, "rebill_jobs_total", job="billing_run", result=result) == \
            value(before, "rebill_jobs_total", job="billing_run", result=result)
    assert [r for r in caplog.records if r.name == "rebill.jobs"] == []


def test_every_job_run_is_counted_by_result(observed, mapi):
    def broken() -> None:
        raise RuntimeError("boom")
    before = scrape(observed)
    run_job(observed, "billing run", bill_every_store, mapi.db, SandboxGateway(mapi.db, mapi.clock.now),
            mapi.clock, timedelta(seconds=60))
    run_job(observed, "async batches", broken)
    after = scrape(observed)
    assert value(after, "rebill_jobs_total", job="billing_run", result="ok") - \
        value(before, "rebill_jobs_total", job="billing_run", result="ok") == 1
    assert value(after, "rebill_jobs_total", job="async_batches", result="error") - \
        value(before, "rebill_jobs_total", job="async_batches", result="error") == 1
    assert value(after, "rebill_job_duration_seconds_count", job="async_batches") - \
        value(before, "rebill_job_duration_seconds_count", job="async_batches") == 1


def test_deliveries_move_the_delivery_figures(observed, mapi):
    pending, oldest = "rebill_webhook_deliveries_pending", "rebill_webhook_delivery_oldest_pending_age_seconds"
    attempts = "rebill_webhook_delivery_attempts_total"
    customer = make_customer(mapi)  # before any webhook: no delivery
    start = scrape(observed)
    assert value(start, pending) == 0 and value(start, oldest) == 0 and value(start, "rebill_database_up") == 1
    with receiving(status=503) as receiver:
        create_webhook(mapi, address=receiver.url)
        make_customer(mapi)
        mapi.clock.advance(timedelta(seconds=90))
        waiting = scrape(observed)
        assert value(waiting, pending) == 1 and value(waiting, oldest) == 90
        assert drain(mapi) == 1  # answered 503: failed, retried later
        failed = scrape(observed)
        assert value(failed, attempts, result="failed") - value(start, attempts, result="failed") == 1
        assert value(failed, pending) == 1 and value(failed, oldest) == 90
        receiver.status = 200
        mapi.clock.advance(retries.DELAYS[0])
        assert drain(mapi) == 1
    done = scrape(observed)
    assert value(done, attempts, result="succeeded") - value(start, attempts, result="succeeded") == 1
    assert value(done, pending) == 0 and value(done, oldest) == 0
    # A disabled webhook's deliveries wait for it to be enabled: no backlog of the sender's.
    hook = create_webhook(mapi, address="https://hooks.example.com/off", topic="customer/updated")
    assert mapi.put(f"/customers/{customer.id}", json={"first_name": "Hopper"}).status_code == 200
    assert value(scrape(observed), pending) == 1
    disable(mapi, hook["id"])
    assert value(scrape(observed), pending) == 0


def test_batch_tasks_move_the_batch_figures(observed, mapi):
    from tests.api.test_async_batches import add, new_batch, submit
    processed, waiting = "rebill_batch_tasks_processed_total", "rebill_batch_tasks_pending"
    good = {"value_type": "percentage", "value": "10"}
    batch = new_batch(mapi)
    assert add(mapi, batch["id"], [{**good, "code": "M1"}, {**good, "code": "M2"}, {"code": "BAD"}]).status_code == 201
    before = scrape(observed)
    assert value(before, waiting) == 0  # not submitted yet: a client still fills it
    submit(mapi, batch["id"])
    assert value(scrape(observed), waiting) == 3
    assert BatchRunner(observed.app.services).run_due() == 3
    after = scrape(observed)
    assert value(after, waiting) == 0
    assert value(after, processed, result="success") - value(before, processed, result="success") == 2
    assert value(after, processed, result="failed") - value(before, processed, result="failed") == 1


def test_the_pool_figures_are_this_processs_pool(observed, mapi):
    samples = scrape(observed)
    # Every pool of the process: on PostgreSQL the read lanes, once used, keep 16 beside the 20.
    kept = mapi.db.pool_figures()[0]
    assert value(samples, "rebill_db_pool_size") == kept
    assert kept in ((20,) if mapi.db.dialect == "sqlite" else (20, 36))
    assert 1 <= value(samples, "rebill_db_pool_connections") <= kept + 18
    assert 0 <= value(samples, "rebill_db_pool_checked_out") <= value(samples, "rebill_db_pool_connections")


def test_a_database_that_cannot_be_read_is_said_and_the_rest_served(observed, mapi, monkeypatch):
    def down(self: Any) -> Any:
        raise OSError("connection refused")
    monkeypatch.setattr(metrics.Backlog, "_read", down)
    samples = scrape(observed)
    assert value(samples, "rebill_database_up") == 0
    assert ("rebill_webhook_deliveries_pending", ()) not in samples
    assert any(name == "rebill_http_requests_total" for name, _ in samples)


def test_a_worker_serves_its_own_figures_on_a_port_of_its_own(mapi, observed, monkeypatch):
    """`rebill worker` has no API to serve `/metrics` on: prometheus_client's own server does,
    in a thread, with the worker's figures (observability/metrics.serve_worker)."""
    monkeypatch.setattr(metrics, "_current", metrics.current())  # this module's figures come back after
    assert metrics.serve_worker(_settings(), mapi.db, mapi.clock) is None  # metrics off: nothing served
    port = free_port()
    stop = metrics.serve_worker(_settings(metrics=True, worker_metrics_address=f"127.0.0.1:{port}"), mapi.db, mapi.clock)
    assert stop is not None
    try:
        _due_charge(mapi, "pm_ok")
        run_job(observed, "billing run", bill_every_store, mapi.db, SandboxGateway(mapi.db, mapi.clock.now),
                mapi.clock, timedelta(seconds=60))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(text) for s in family.samples}
        assert value(samples, "rebill_billing_charges_total", outcome="paid") == 1  # a fresh registry: this run's
        assert value(samples, "rebill_jobs_total", job="billing_run", result="ok") == 1
        # The test's requests made the reads' engine too (a real worker serves none): every pool.
        kept = mapi.db.pool_figures()[0]
        assert value(samples, "rebill_db_pool_size") == kept and value(samples, "rebill_database_up") == 1
        assert not [key for key in samples if key[0] == "rebill_http_requests_total"]  # no API here
    finally:
        stop()
    with pytest.raises(ValueError, match="HOST:PORT"):
        metrics.serve_worker(_settings(metrics=True, worker_metrics_address="9464"), mapi.db, mapi.clock)


# Log lines -----------------------------------------------------------------------------------------

@pytest.fixture
def request_lines(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="rebill.requests")
    return caplog


def test_a_requests_line_carries_request_id_store_route_status_and_duration(api, request_lines):
    app = create_app(_settings(), db=api.db, clock=api.clock)  # request lines on: wrapped for them alone
    assert isinstance(app, Observed) and app.metrics is None
    customer = make_customer(api)
    client = TestClient(app, base_url="http://rebill.test")
    reply = client.get(f"/customers/{customer.id}?email=a%40b.example",
                       headers={"X-Service-Access-Token": api.token, "X-Service-Version": V01})
    assert reply.status_code == 200
    [record] = [r for r in request_lines.records if r.name == "rebill.requests"]
    line = json.loads(JsonFormatter().format(record))
    assert line["time"].endswith("+00:00") and line["level"] == "info" and line["logger"] == "rebill.requests"
    assert line["message"].startswith(f"GET /customers/{customer.id} 200 ")
    assert {k: line[k] for k in ("request_id", "store_id", "method", "path", "route", "version", "status")} == {
        "request_id": reply.headers["x-request-id"], "store_id": api.store.id, "method": "GET",
        "path": f"/customers/{customer.id}", "route": "/customers/{customer_id}", "version": V01, "status": 200}
    assert isinstance(line["duration_ms"], float) and 0 < line["duration_ms"] < 10_000
    assert "email" not in json.dumps(line)  # no query string: it may name a customer
    text = TextFormatter().format(record)
    assert f"request_id={reply.headers['x-request-id']}" in text and f"store_id={api.store.id}" in text
    assert "route=/customers/{customer_id}" in text and "status=200" in text and "duration_ms=" in text


def test_a_refused_requests_line_names_its_route_without_a_store(api, request_lines):
    app = create_app(_settings(), db=api.db, clock=api.clock)
    reply = TestClient(app, base_url="http://rebill.test").get("/customers/5")
    assert reply.status_code == 401
    [record] = [r for r in request_lines.records if r.name == "rebill.requests"]
    line = json.loads(JsonFormatter().format(record))
    assert line["store_id"] is None and line["route"] == "/customers/{customer_id}" and line["status"] == 401
    assert line["request_id"] == reply.headers["x-request-id"] and line["version"] == V01


@pytest.mark.parametrize("refusal", ["rate_limit", "version", "uninstalled"])
def test_a_request_the_edge_refused_after_its_token_named_a_store_names_the_store(api, request_lines, refusal):
    """429, 426 and the uninstalled store's 403 come before the request's context: their lines
    name the token's store all the same (found by an audit: `store_id: null`)."""
    from dataclasses import replace

    from sqlalchemy import update

    from rebill.models import stores
    settings = _settings()
    if refusal == "rate_limit":
        settings = replace(settings, rate_limit=RateLimit(burst=1, per_second=0.001))
    app = create_app(settings, db=api.db, clock=api.clock)
    client = TestClient(app, base_url="http://rebill.test")
    headers = {"X-Service-Access-Token": api.token, "X-Service-Version": "1999-01" if refusal == "version" else V11}
    if refusal == "uninstalled":
        with api.db.write() as conn:
            conn.execute(update(stores).where(stores.c.id == api.store.id).values(installed=False))
    if refusal == "rate_limit":
        assert client.get("/customers", headers=headers).status_code == 200
    reply = client.get("/customers", headers=headers)
    assert reply.status_code == {"rate_limit": 429, "version": 426, "uninstalled": 403}[refusal], reply.text
    line = json.loads(JsonFormatter().format(
        [r for r in request_lines.records if r.name == "rebill.requests"][-1]))
    assert (line["store_id"], line["status"], line["request_id"]) == (
        api.store.id, reply.status_code, reply.headers["x-request-id"])


def test_a_jobs_lines_carry_the_run_store_result_and_duration(mapi, observed, caplog):
    caplog.set_level(logging.INFO, logger="rebill.jobs")
    _due_charge(mapi, "pm_ok")
    run_job(observed, "billing run", bill_every_store, mapi.db, SandboxGateway(mapi.db, mapi.clock.now),
            mapi.clock, timedelta(seconds=60))
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "rebill.jobs"]
    store, run = lines
    assert store["job"] == run["job"] == "billing_run" and store["job_id"] == run["job_id"]
    assert len(run["job_id"]) == 16 and run["result"] == store["result"] == "ok"
    assert store["store_id"] == mapi.store.id and run["store_id"] is None
    assert (store["processed"], store["paid"], store["failed"], store["retried"]) == (1, 1, 0, 0)
    assert run["count"] == 1 and run["duration_ms"] >= store["duration_ms"] > 0
    caplog.clear()
    run_job(observed, "deferred regeneration", lambda: 0)  # idle ticks of the every-second jobs: no line
    assert not [r for r in caplog.records if r.name == "rebill.jobs"]

    def broken() -> None:
        raise RuntimeError("boom")
    run_job(observed, "async batches", broken)
    failed = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "rebill.jobs"]
    assert [(f["level"], f.get("result")) for f in failed] == [("error", None), ("error", "error")]
    assert "RuntimeError: boom" in failed[0]["exception"]  # the traceback, inside the one line


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_job(client: TestClient, name: str, job: Any, *args: Any) -> None:
    """One run of a job as the job runner runs it (jobs/scheduler.py), its hooks included."""
    app = client.app
    runner = Jobs(app, app.services.db, app.services.clock, app.services.gateway, _settings())
    asyncio.run(runner._run(name, job, *args))


def _due_charge(api: Api, token: str) -> int:
    """A charge due at the clock's now, of a customer whose payment method answers as ``token`` asks
    (decisions §6.2); returns its address's id."""
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    address = make_address(api, customer)
    make_subscription(api, address, next_charge_scheduled_at=api.clock.now().date())
    return address.id


@pytest.mark.parametrize("env, said", [
    ({"REBILL_DELIVER_WEBHOOKS": "maybe"}, "REBILL_DELIVER_WEBHOOKS must be on or off"),
    ({"REBILL_REDIS_URL": "127.0.0.1:6379"}, "REBILL_REDIS_URL must begin with redis://"),
    ({"REBILL_REDIS_URL": "notaurl"}, "REBILL_REDIS_URL must begin with redis://"),
    ({"REBILL_BILL_EVERY": "inf"}, "REBILL_BILL_EVERY must be a number of seconds from 0 to"),
    ({"REBILL_BATCH_EVERY": "1e12"}, "REBILL_BATCH_EVERY must be a number of seconds"),
    ({"REBILL_TOKEN_CACHE_SECONDS": "-1"}, "REBILL_TOKEN_CACHE_SECONDS must be a number of seconds"),
    ({"REBILL_JOBS_STOP_SECONDS": "soon"}, "REBILL_JOBS_STOP_SECONDS must be a number of seconds"),
    ({"REBILL_WORKER_METRICS_ADDRESS": "bad"}, "REBILL_WORKER_METRICS_ADDRESS must be HOST:PORT"),
    ({"REBILL_WORKER_METRICS_ADDRESS": "127.0.0.1:99999"}, "REBILL_WORKER_METRICS_ADDRESS must be HOST:PORT"),
])
def test_a_setting_it_cannot_take_stops_the_start_naming_it(env, said):
    """Found by an audit: a bad Redis URL answered 500 to every request, `False` left deliveries
    on, `inf` left the API with no jobs, a bad metrics address was a traceback."""
    with pytest.raises(ValueError, match=said):
        Settings.from_env(env)


def test_the_switches_take_every_usual_spelling():
    for off in ("0", "off", "OFF", "False", "no"):
        assert Settings.from_env({"REBILL_DELIVER_WEBHOOKS": off}).deliver_webhooks is False
    for on in ("1", "on", "True", "YES"):
        assert Settings.from_env({"REBILL_DELIVER_WEBHOOKS": on}).deliver_webhooks is True
    assert Settings.from_env({"REBILL_REDIS_URL": " rediss://h:6380/0 "}).redis_url == "rediss://h:6380/0"
    assert Settings.from_env({"REBILL_BILL_EVERY": "0.5"}).bill_every == 0.5


def test_the_known_outcomes_start_at_zero_in_every_process(clock, monkeypatch):
    """Found by an audit: the API's `/metrics` had no billing, delivery or batch series until
    they first moved (a query found no data where 0 was meant). A process's own figures, fresh."""
    from prometheus_client import generate_latest

    from rebill.observability.metrics import DIRECTORY_VARIABLE, Metrics
    monkeypatch.delenv(DIRECTORY_VARIABLE, raising=False)  # one process: its own registry
    fresh = Metrics(None, clock)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(fresh.registry).decode())
               for s in family.samples}
    for name, label, values in (("rebill_billing_charges_total", "outcome", ("paid", "pending", "failed")),
                                ("rebill_webhook_delivery_attempts_total", "result", ("succeeded", "failed")),
                                ("rebill_batch_tasks_processed_total", "result", ("success", "failed"))):
        for each in values:
            assert samples.get((name, ((label, each),))) == 0.0, (name, each)
