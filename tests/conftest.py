"""Test harness: one real database per run and per backend, migrations applied once.

Every storage and API test runs on SQLite and, when PostgreSQL answers at 127.0.0.1:5432,
on PostgreSQL too (CI sets REBILL_REQUIRE_POSTGRES=1 so a missing server fails the run
instead of skipping). Tests are isolated by tenancy: each test works in stores of its own,
so no cleanup is needed between tests.
"""

from __future__ import annotations

import gc
import itertools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.clock import FrozenClock
from rebill.db.engine import Database
from rebill.db.migrate import upgrade
from rebill.domain.store import service as store_service
from rebill.domain.store.model import Store
from rebill.settings import RateLimit, Settings

# Every reply the suite receives is checked against the OpenAPI document (docs/openapi.md).
pytest_plugins = ("tests.openapi_check",)

PG_ADMIN = os.environ.get("REBILL_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
VERSIONS = ("2021-01", "2021-11")


# The files that take longest (tens of seconds to two minutes each, most of it processes they
# start) run first. `make test` runs `pytest -n 3 --dist loadfile --no-loadscope-reorder`: xdist
# hands whole files to its workers in the order they were collected. By default it orders
# them by their number of tests instead, which put schemathesis (3 tests, 2 minutes) and the
# soak (1 test) last: one worker ran them for minutes after the other had run out of files (a
# clean run used 67 % of the two cores). Within a file the order is kept.
LONGEST_FIRST = (
    "tests/fuzz/test_schemathesis.py",
    "tests/scenarios/test_workers.py",
    "tests/api/test_edge_properties.py",
    "tests/scenarios/test_async_batch_crash.py",
    "tests/scenarios/test_soak.py",
    "tests/api/test_webhook_deliveries.py",
    "tests/stripe_processor/test_billing_crash.py",
    "tests/scenarios/test_webhook_crash.py",
    "tests/scenarios/test_faults.py",
    "tests/scenarios/test_billing_crash.py",
    "tests/scenarios/test_freshness.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def _postgres_available() -> bool:
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


@contextmanager
def fresh_database_url(backend: str, folder: Path) -> Iterator[str]:
    """A URL to an empty database of ``backend``; PostgreSQL ones are dropped afterwards.
    Skips (or fails, under REBILL_REQUIRE_POSTGRES=1) when PostgreSQL does not answer."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'rebill.db'}"
        return
    if not _postgres_available():
        if os.environ.get("REBILL_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is required (REBILL_REQUIRE_POSTGRES=1) but does not answer")
        pytest.skip("PostgreSQL does not answer at 127.0.0.1:5432")
    name = f"rebill_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with fresh_database_url(request.param, tmp_path_factory.mktemp("db")) as url:
        upgrade(url)
        db = Database.from_url(url)
        yield db
        db.dispose()


@pytest.fixture(scope="session")
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture(autouse=True)
def _clock_put_back(clock: FrozenClock) -> Iterator[None]:
    """Each test finds the clock where the test before it found it: tests that move it would
    otherwise add up until one day a test's "today" turned into tomorrow mid-test."""
    before = clock.now()
    yield
    clock.set(before)


@pytest.fixture(autouse=True)
def _heap_unfrozen() -> Iterator[None]:
    """A command run in process (CliRunner) freezes the heap as its process would (rebill/heap.py):
    the test process takes it back, or the fixtures alive then would keep their cycles for good."""
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def app(database: Database, clock: FrozenClock) -> Any:
    settings = Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                        regenerate_every=0, bill_every=0, purge_every=0, deliver_webhooks=False,
                        batch_every=0)
    return create_app(settings, db=database, clock=clock)


@pytest.fixture(scope="session")
def client(app: Any) -> Iterator[TestClient]:
    with TestClient(app, base_url="http://rebill.test") as test_client:
        yield test_client


_names = itertools.count(1)


@dataclass
class Api:
    """A store, an all-scopes token and a client: what a test of the API works with."""

    client: TestClient
    db: Database
    clock: FrozenClock
    store: Store
    token: str
    version: str = "2021-11"

    def request(self, method: str, path: str, *, json: Any = None, version: str | None = None,
                token: str | None = None, params: Any = None, headers: dict[str, str] | None = None,
                content: bytes | None = None) -> Any:
        sent = {"X-Service-Access-Token": token if token is not None else self.token,
                "X-Service-Version": version or self.version}
        sent.update(headers or {})
        return self.client.request(method, path, json=json, params=params, headers=sent, content=content)

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, json: Any = None, **kw: Any) -> Any:
        return self.request("POST", path, json=json, **kw)

    def put(self, path: str, json: Any = None, **kw: Any) -> Any:
        return self.request("PUT", path, json=json, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)

    def token_with(self, *scopes: str) -> str:
        with self.db.write() as conn:
            return store_service.create_token(conn, self.clock.now(), store=self.store, scopes=list(scopes))

    def other_store(self, **kw: Any) -> "Api":
        return make_api(self.client, self.db, self.clock, version=self.version, **kw)


def make_api(client: TestClient, db: Database, clock: FrozenClock, *, version: str = "2021-11",
             **store_options: Any) -> Api:
    store_options.setdefault("ships_to", ["US", "CA", "GB", "DE", "FR", "AE", "JP", "AU"])
    with db.write() as conn:
        store = store_service.create_store(conn, clock.now(), name=f"store-{uuid.uuid4().hex[:8]}-{next(_names)}",
                                           **store_options)
        token = store_service.create_token(conn, clock.now(), store=store, name="tests")
    return Api(client, db, clock, store, token, version)


@pytest.fixture
def api(client: TestClient, database: Database, clock: FrozenClock) -> Api:
    return make_api(client, database, clock)


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def vapi(api: Api, version: str) -> Api:
    """``api`` speaking the parametrized version."""
    api.version = version
    return api
