"""Leaky bucket per token (decisions §9.1): ``burst`` deep, leaking ``per_second``; past it 429,
and every authenticated response carries ``X-Service-Limit: <used>/<burst>``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import update
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.models import stores, tokens
from rebill.settings import RateLimit, Settings
from tests.conftest import Api, make_api


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake() -> FakeMonotonic:
    return FakeMonotonic()


def _client(database: Any, clock: Any, fake: FakeMonotonic, limit: RateLimit) -> TestClient:
    settings = Settings(database_url="unused", rate_limit=limit, token_cache_seconds=0)
    return TestClient(create_app(settings, db=database, clock=clock, monotonic=fake), base_url="http://rebill.test")


@pytest.fixture
def limited(database: Any, clock: Any, fake: FakeMonotonic) -> Iterator[Api]:
    with _client(database, clock, fake, RateLimit(burst=3, per_second=1.0)) as client:
        yield make_api(client, database, clock)


def test_service_limit_counts_up_to_the_burst(limited):
    seen = [limited.get("/").headers["X-Service-Limit"] for _ in range(3)]
    assert seen == ["1/3", "2/3", "3/3"]


def test_request_past_the_burst_answers_429_with_retry_after(limited):
    for _ in range(3):
        assert limited.get("/").status_code == 200
    response = limited.get("/")
    assert response.status_code == 429
    body = response.json()
    assert set(body) == {"errors"} and body["errors"]
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1
    assert response.headers["X-Service-Limit"] == "3/3"
    assert response.headers["X-Request-Id"]
    assert response.headers["X-Service-Version"] == "2021-11"


def test_rejected_requests_do_not_fill_the_bucket(limited, fake):
    for _ in range(3):
        limited.get("/")
    for _ in range(5):
        assert limited.get("/").status_code == 429
    fake.advance(1.0)
    assert limited.get("/").status_code == 200


def test_waiting_retry_after_seconds_is_enough(limited, fake):
    for _ in range(3):
        limited.get("/")
    response = limited.get("/")
    assert response.status_code == 429
    fake.advance(float(response.headers["Retry-After"]))
    assert limited.get("/").status_code == 200


def test_retry_after_follows_a_slow_leak_rate(database, clock, fake):
    with _client(database, clock, fake, RateLimit(burst=1, per_second=0.25)) as client:
        api = make_api(client, database, clock)
        assert api.get("/").status_code == 200
        response = api.get("/")
        assert response.status_code == 429
        fake.advance(float(response.headers["Retry-After"]))
        assert api.get("/").status_code == 200


def test_leaking_restores_capacity_over_time(limited, fake):
    for _ in range(3):
        limited.get("/")
    assert limited.get("/").status_code == 429
    fake.advance(0.5)
    assert limited.get("/").status_code == 429, "half a request leaked is not room for one"
    fake.advance(0.5)
    response = limited.get("/")
    assert response.status_code == 200
    assert response.headers["X-Service-Limit"] == "3/3"
    assert limited.get("/").status_code == 429


def test_bucket_empties_completely_after_a_long_pause(limited, fake):
    for _ in range(3):
        limited.get("/")
    fake.advance(60)
    assert limited.get("/").headers["X-Service-Limit"] == "1/3"


def test_leak_rate_lowers_the_count(limited, fake):
    for _ in range(3):
        limited.get("/")
    fake.advance(2.0)
    assert limited.get("/").headers["X-Service-Limit"] == "2/3"


def test_buckets_are_per_token(limited):
    second = limited.token_with("read_customers")
    for _ in range(3):
        limited.get("/")
    assert limited.get("/").status_code == 429
    response = limited.get("/", token=second)
    assert response.status_code == 200
    assert response.headers["X-Service-Limit"] == "1/3"


def test_buckets_of_other_stores_are_independent(limited):
    other = limited.other_store()
    for _ in range(3):
        limited.get("/")
    assert limited.get("/").status_code == 429
    assert other.get("/").status_code == 200


def test_every_endpoint_counts_against_the_bucket(limited):
    assert limited.get("/").status_code == 200
    assert limited.get("/nope").status_code == 404
    assert limited.get("/customers").status_code == 200
    assert limited.get("/customers").status_code == 429


def test_a_429_names_the_stores_default_version(limited):
    """Found by an audit: it named the fallback 2021-01 for a store whose default is 2021-11."""
    other = limited.other_store(default_api_version="2021-11")
    headers = {"X-Service-Access-Token": other.token}
    for _ in range(3):
        assert other.client.get("/", headers=headers).headers["X-Service-Version"] == "2021-11"
    refused = other.client.get("/", headers=headers)
    assert refused.status_code == 429 and refused.headers["X-Service-Version"] == "2021-11"


def test_unauthenticated_requests_answer_401_not_429(limited):
    for _ in range(6):
        assert limited.get("/", token="rb_unknown").status_code == 401


def test_disabled_rate_limit_never_answers_429(database, clock, fake):
    with _client(database, clock, fake, RateLimit(enabled=False)) as client:
        api = make_api(client, database, clock)
        statuses = {api.get("/").status_code for _ in range(60)}
    assert statuses == {200}


def test_token_rate_limit_setting_overrides_the_default(limited):
    with limited.db.write() as conn:
        conn.execute(update(tokens).where(tokens.c.store_id == limited.store.id).values(rate_limit="2/1"))
    assert [limited.get("/").headers["X-Service-Limit"] for _ in range(2)] == ["1/2", "2/2"]
    assert limited.get("/").status_code == 429


def test_store_rate_limit_setting_overrides_the_default(limited):
    with limited.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == limited.store.id).values(rate_limit="5/1"))
    responses = [limited.get("/") for _ in range(6)]
    assert [r.status_code for r in responses] == [200] * 5 + [429]
    assert responses[4].headers["X-Service-Limit"] == "5/5"


def test_an_unreadable_stored_limit_falls_back_to_the_default_not_a_500(limited):
    with limited.db.write() as conn:
        conn.execute(update(tokens).where(tokens.c.store_id == limited.store.id).values(rate_limit="40/nan"))
    response = limited.get("/")
    assert response.status_code == 200
    assert response.headers["X-Service-Limit"].endswith("/3")  # the process's limit of this fixture


def test_store_rate_limit_off_disables_the_limit(limited):
    with limited.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == limited.store.id).values(rate_limit="off"))
    assert {limited.get("/").status_code for _ in range(10)} == {200}


# RateLimit.parse -------------------------------------------------------------------------


def test_parse_burst_and_rate():
    assert RateLimit.parse("40/2") == RateLimit(burst=40, per_second=2.0, enabled=True)
    assert RateLimit.parse(" 10/0.5 ") == RateLimit(burst=10, per_second=0.5)


def test_parse_burst_alone_keeps_default_rate():
    assert RateLimit.parse("10") == RateLimit(burst=10, per_second=2.0)


@pytest.mark.parametrize("text", ["off", "OFF", " off "])
def test_parse_off_disables(text):
    assert RateLimit.parse(text).enabled is False


@pytest.mark.parametrize("text", ["", "abc", "x/2", "10/y", "0/1", "-5/1", "5/0", "5/-1", "40/2/3", "4.5/1",
                                  "40/nan", "40/inf", "40/-inf", "40/1e999"])
def test_parse_rejects_bad_values(text):
    with pytest.raises(ValueError):
        RateLimit.parse(text)


def test_default_rate_limit_is_40_leaking_2_per_second():
    assert RateLimit() == RateLimit(burst=40, per_second=2.0, enabled=True)


def test_settings_read_rate_limit_from_environment():
    assert Settings.from_env({"REBILL_RATE_LIMIT": "7/3"}).rate_limit == RateLimit(burst=7, per_second=3.0)
    assert Settings.from_env({"REBILL_RATE_LIMIT": "off"}).rate_limit.enabled is False
    with pytest.raises(ValueError):
        Settings.from_env({"REBILL_RATE_LIMIT": "fast"})


def test_switched_off_the_header_never_reports_more_than_the_burst(database, clock, fake):
    with _client(database, clock, fake, RateLimit(burst=40, per_second=2, enabled=False)) as client:
        api = make_api(client, database, clock)
        headers = [api.get("/").headers["X-Service-Limit"] for _ in range(45)]
    assert headers[-1] == "40/40" and headers[0] == "1/40"


def test_an_invalid_version_still_counts_and_carries_the_limit_header(limited):
    response = limited.get("/", version="2099-01")
    assert response.status_code == 426
    assert response.headers["X-Service-Limit"] == "1/3"
    assert limited.get("/").headers["X-Service-Limit"] == "2/3"
