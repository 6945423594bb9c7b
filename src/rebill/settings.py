"""Typed settings, read once from the environment (``REBILL_*``) and overridable by the CLI."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DEFAULT_DATABASE_URL = f"sqlite:///{Path('var') / 'rebill.db'}"


@dataclass(frozen=True)
class RateLimit:
    """Leaky bucket per token (decisions §9.1): ``burst`` deep, leaking ``per_second``."""

    burst: int = 40
    per_second: float = 2.0
    enabled: bool = True

    @classmethod
    def parse(cls, text: str) -> "RateLimit":
        """``"40/2"`` or ``"off"``."""
        text = text.strip().lower()
        if text in {"off", "0", "false", "no"}:
            return cls(enabled=False)
        burst, _, rate = text.partition("/")
        try:
            value = cls(burst=int(burst), per_second=float(rate or 2))
        except ValueError as exc:
            raise ValueError(f"rate limit must look like BURST/PER_SECOND or 'off', not {text!r}") from exc
        # `float` also reads "nan" and "inf", on which the bucket arithmetic breaks.
        if value.burst < 1 or not value.per_second > 0 or not math.isfinite(value.per_second):
            raise ValueError("rate limit burst and rate must be positive numbers")
        return value


def _one_of(what: str, choices: tuple[str, ...], text: str) -> str:
    value = text.strip().lower()
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}, not {text!r}")
    return value


LOG_FORMATS = ("text", "json")


def log_format(text: str) -> str:
    return _one_of("log format", LOG_FORMATS, text)


BACKGROUND_JOBS = ("auto", "on", "off")


def background_jobs(text: str) -> str:
    """``auto``, ``on`` or ``off`` (docs/operations.md, "Background jobs")."""
    return _one_of("background jobs", BACKGROUND_JOBS, text)


# Which stores' webhooks may reach non-public networks (domain/webhook/rules.py).
WEBHOOK_PRIVATE_POLICIES = ("sandbox", "all", "none")


def webhook_private_addresses(text: str) -> str:
    """``sandbox``, ``all`` or ``none`` (docs/webhooks.md, "Addresses")."""
    return _one_of("webhook private addresses", WEBHOOK_PRIVATE_POLICIES, text)


def _days(name: str, text: str) -> float:
    """A number of days to keep rows, 0 forever; a negative, infinite or non-number value is
    refused: a typo must not purge everything, nor turn a purge off unnoticed."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a number of days, 0 or more (0 keeps them forever), not {text!r}")
    return value


# The longest period or wait a setting in seconds may name: a year. `inf` or 1e12 stopped the job
# scheduler at start (a date out of range) and left the API with no jobs (found by an audit).
MAX_SECONDS = 366 * 86400


def _secret_key(text: str) -> str:
    """Fernet keys, checked here so that a malformed one stops every command at its start in one
    line (found by an audit: `rebill serve` printed a traceback from each API process, and with
    --workers kept restarting them, serving nothing)."""
    from rebill.domain.payment.vault import Vault, VaultError
    try:
        Vault(text)
    except VaultError as exc:
        raise ValueError(str(exc)) from None
    return text


def _seconds(name: str, text: str) -> float:
    """A number of seconds, 0 to a year; anything else stops the start with its name."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise ValueError(f"{name} must be a number of seconds from 0 to {MAX_SECONDS}, not {text!r}")
    return value


def client_read_seconds(env: Any) -> float:
    """`REBILL_CLIENT_READ_SECONDS` (30): how long a connection may go without a byte while a
    request is awaited (http/protocol.py); 0 is refused (a request would never be read)."""
    text = env.get("REBILL_CLIENT_READ_SECONDS") or "30"
    value = _seconds("REBILL_CLIENT_READ_SECONDS", text)
    if value <= 0:
        raise ValueError(f"REBILL_CLIENT_READ_SECONDS must be more than 0, not {text!r}")
    return value


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


_PASSWORD_PARAMETER = re.compile(r"(?i)([?&]password=)[^&#]*")


def shown_url(url: str) -> str:
    """A database or Redis URL as logs and messages show it: without its password (found by an
    audit: a Redis outage logged `redis://:secret@...` on every process)."""
    # libpq also takes the password as a parameter (found by a review).
    url = _PASSWORD_PARAMETER.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a netloc urlsplit cannot read (an unclosed `[`)
        parts, password = None, None
    if parts is not None and password is not None:
        user = parts.username or ""
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    # Not a URL urlsplit reads as one (a typo in its scheme, `redis//:secret@host`): what
    # follows the first colon of the user part, up to the last `@` (found by an audit: the
    # error naming the typo printed the password).
    head, at, host = url.rpartition("@")
    userinfo = head.rpartition("/")[2]
    user, colon, secret = userinfo.partition(":")
    if at and colon and secret:
        return f"{head[:len(head) - len(userinfo)]}{user}:***@{host}"
    return url


def redis_url(text: str) -> str:
    """A URL the redis client takes; checked at start, since the client would refuse it at
    every request instead (found by an audit: every request with a token answered 500)."""
    if not text.strip().lower().startswith(REDIS_SCHEMES):
        raise ValueError(f"REBILL_REDIS_URL must begin with {', '.join(REDIS_SCHEMES)}, not {shown_url(text)!r}")
    return text.strip()


def host_and_port(name: str, text: str) -> str:
    """HOST:PORT with a port from 1 to 65535."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{name} must be HOST:PORT with a port from 1 to 65535, not {text!r}")
    return text


def _switch(name: str, text: str) -> bool:
    """``on``/``off`` (and the usual spellings); anything else is a mistake worth stopping for:
    a typo must not leave an unauthenticated endpoint on, or metrics silently off."""
    value = text.strip().lower()
    if value in {"1", "on", "true", "yes"}:
        return True
    if value in {"0", "off", "false", "no"}:
        return False
    raise ValueError(f"{name} must be on or off, not {text!r}")


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    rate_limit: RateLimit = field(default_factory=RateLimit)
    # Seconds a resolved token stays cached in a process; revocations and store
    # uninstalls take effect within this delay.
    token_cache_seconds: float = 5.0
    # Echo SQL for debugging.
    echo_sql: bool = False
    # Seconds between two looks for deferred regenerations (decisions §5.3); 0 switches it off.
    regenerate_every: float = 1.0
    # Seconds after which a billing run's claim on a charge counts as abandoned (its process
    # died) and another run may finish the charge (domain/billing/claim.py).
    claim_stale_seconds: float = 60.0
    # PostgreSQL: seconds a connection may sit inside a transaction without a statement before
    # the server ends its session and frees its locks (a frozen process's; db/engine.py).
    # At most ``claim_stale_seconds``, so that a frozen run's rows are free when its claims
    # are taken over; 0 switches it off.
    idle_transaction_seconds: float = 60.0
    # Seconds a connection may go without a byte while a request is awaited (http/protocol.py,
    # which reads it from the environment in each process).
    client_read_seconds: float = 30.0
    # Seconds between two billing runs inside `rebill serve`; 0 switches them off.
    bill_every: float = 60.0
    # Seconds between two purges of expired idempotency keys (decisions §9.2), processor event
    # ids, old webhook deliveries and old events; 0 switches it off.
    purge_every: float = 3600.0
    # Days a finished webhook delivery (with its attempts and payload) is kept after its last
    # change; 0 keeps them forever. A pending delivery is never purged (domain/webhook/retention.py).
    delivery_retention_days: float = 30.0
    # Days an event is kept; 0 (the default) keeps them forever: `GET /events` is part of the
    # API, so forgetting events is the operator's choice (domain/event/retention.py).
    event_retention_days: float = 0.0
    # Whether `rebill serve` sends webhook deliveries (decisions §8.4); off in processes that
    # leave them to others.
    deliver_webhooks: bool = True
    # Seconds a worker's lease on a delivery holds: one whose worker died goes out again after it.
    delivery_lease_seconds: float = 30.0
    # Seconds between two looks for submitted async batches (issue 15; a submit also wakes the
    # job of its own process); 0 switches the batch job off.
    batch_every: float = 1.0
    # Seconds a worker's lease on a running batch holds: a batch whose worker died is taken over after it.
    batch_lease_seconds: float = 30.0
    # Fernet key(s) that encrypt the stores' Stripe keys (issue 16; comma-separated, the first
    # encrypts, every one decrypts); never shown in a repr.
    secret_key: str | None = field(default=None, repr=False)
    # Seconds a call to Stripe may take before its outcome counts as unknown (issue 16).
    stripe_timeout_seconds: float = 30.0
    # `GET /metrics` in the Prometheus text format, without a token (issue 18; off by default:
    # docs/operations.md, "Metrics and logs"). The directory the processes of one `rebill serve`
    # share their figures in; None: one `rebill serve` picks and cleans its own.
    metrics: bool = False
    metrics_dir: str | None = None
    # Where a process without the API (`rebill worker`) serves its own `/metrics`: HOST:PORT.
    worker_metrics_address: str = "127.0.0.1:9464"
    # Log lines as text or as one JSON object each; a line per request when ``log_requests``
    # says so, or by default with JSON lines only (``request_lines``).
    log_format: str = "text"
    log_requests: bool | None = None
    # Which processes run the background jobs (issue 18, jobs/leader.py): ``auto``, one process
    # of the deployment (the one holding its jobs lock) while no `rebill worker` runs; ``on``,
    # this process whatever the others do; ``off``, never this one (API processes beside workers).
    background_jobs: str = "auto"
    # Seconds a stopping process gives its running jobs to finish their batch (a billing batch
    # recorded, a batch chunk committed, deliveries in flight answered) before it exits anyway.
    jobs_stop_seconds: float = 20.0
    # Redis shared by the processes of a deployment (issue 18): the rate-limit buckets live
    # there when set, per process when not (http/ratelimit_redis.py). Every key begins with
    # ``redis_prefix``, so that several deployments (or tests) can share one Redis.
    redis_url: str | None = None
    redis_prefix: str = "rebill:"
    # Which stores' webhooks may reach loopback, private or reserved networks: ``sandbox``
    # stores only, ``all``, or ``none`` (docs/webhooks.md, "Addresses"; domain/webhook/rules.py).
    webhook_private_addresses: str = "sandbox"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ if env is None else env)
        values: dict[str, object] = {}
        if env.get("REBILL_DATABASE_URL"):
            values["database_url"] = env["REBILL_DATABASE_URL"]
        if env.get("REBILL_RATE_LIMIT"):
            values["rate_limit"] = RateLimit.parse(env["REBILL_RATE_LIMIT"])
        if env.get("REBILL_TOKEN_CACHE_SECONDS"):
            values["token_cache_seconds"] = _seconds("REBILL_TOKEN_CACHE_SECONDS", env["REBILL_TOKEN_CACHE_SECONDS"])
        if env.get("REBILL_REGENERATE_EVERY"):
            values["regenerate_every"] = _seconds("REBILL_REGENERATE_EVERY", env["REBILL_REGENERATE_EVERY"])
        if env.get("REBILL_CLAIM_STALE_SECONDS"):
            values["claim_stale_seconds"] = _seconds("REBILL_CLAIM_STALE_SECONDS", env["REBILL_CLAIM_STALE_SECONDS"])
        if env.get("REBILL_IDLE_TRANSACTION_SECONDS"):
            values["idle_transaction_seconds"] = _seconds("REBILL_IDLE_TRANSACTION_SECONDS",
                                                          env["REBILL_IDLE_TRANSACTION_SECONDS"])
        values["client_read_seconds"] = client_read_seconds(env)
        if env.get("REBILL_BILL_EVERY"):
            values["bill_every"] = _seconds("REBILL_BILL_EVERY", env["REBILL_BILL_EVERY"])
        if env.get("REBILL_PURGE_EVERY"):
            values["purge_every"] = _seconds("REBILL_PURGE_EVERY", env["REBILL_PURGE_EVERY"])
        if env.get("REBILL_DELIVERY_RETENTION_DAYS"):
            values["delivery_retention_days"] = _days("REBILL_DELIVERY_RETENTION_DAYS",
                                                      env["REBILL_DELIVERY_RETENTION_DAYS"])
        if env.get("REBILL_EVENT_RETENTION_DAYS"):
            values["event_retention_days"] = _days("REBILL_EVENT_RETENTION_DAYS", env["REBILL_EVENT_RETENTION_DAYS"])
        if env.get("REBILL_DELIVER_WEBHOOKS"):
            values["deliver_webhooks"] = _switch("REBILL_DELIVER_WEBHOOKS", env["REBILL_DELIVER_WEBHOOKS"])
        if env.get("REBILL_DELIVERY_LEASE_SECONDS"):
            values["delivery_lease_seconds"] = _seconds("REBILL_DELIVERY_LEASE_SECONDS", env["REBILL_DELIVERY_LEASE_SECONDS"])
        if env.get("REBILL_BATCH_EVERY"):
            values["batch_every"] = _seconds("REBILL_BATCH_EVERY", env["REBILL_BATCH_EVERY"])
        if env.get("REBILL_BATCH_LEASE_SECONDS"):
            values["batch_lease_seconds"] = _seconds("REBILL_BATCH_LEASE_SECONDS", env["REBILL_BATCH_LEASE_SECONDS"])
        if env.get("REBILL_SECRET_KEY"):
            values["secret_key"] = _secret_key(env["REBILL_SECRET_KEY"])
        if env.get("REBILL_STRIPE_TIMEOUT_SECONDS"):
            values["stripe_timeout_seconds"] = _seconds("REBILL_STRIPE_TIMEOUT_SECONDS", env["REBILL_STRIPE_TIMEOUT_SECONDS"])
        if env.get("REBILL_METRICS"):
            values["metrics"] = _switch("REBILL_METRICS", env["REBILL_METRICS"])
        if env.get("REBILL_METRICS_DIR"):
            values["metrics_dir"] = env["REBILL_METRICS_DIR"]
        if env.get("REBILL_WORKER_METRICS_ADDRESS"):
            values["worker_metrics_address"] = host_and_port("REBILL_WORKER_METRICS_ADDRESS",
                                                             env["REBILL_WORKER_METRICS_ADDRESS"])
        if env.get("REBILL_LOG_FORMAT"):
            values["log_format"] = log_format(env["REBILL_LOG_FORMAT"])
        if env.get("REBILL_LOG_REQUESTS"):
            values["log_requests"] = _switch("REBILL_LOG_REQUESTS", env["REBILL_LOG_REQUESTS"])
        if env.get("REBILL_BACKGROUND_JOBS"):
            values["background_jobs"] = background_jobs(env["REBILL_BACKGROUND_JOBS"])
        if env.get("REBILL_JOBS_STOP_SECONDS"):
            values["jobs_stop_seconds"] = _seconds("REBILL_JOBS_STOP_SECONDS", env["REBILL_JOBS_STOP_SECONDS"])
        if env.get("REBILL_REDIS_URL"):
            values["redis_url"] = redis_url(env["REBILL_REDIS_URL"])
        if env.get("REBILL_REDIS_PREFIX"):
            values["redis_prefix"] = env["REBILL_REDIS_PREFIX"]
        if env.get("REBILL_WEBHOOK_PRIVATE_ADDRESSES"):
            values["webhook_private_addresses"] = webhook_private_addresses(env["REBILL_WEBHOOK_PRIVATE_ADDRESSES"])
        if env.get("REBILL_ECHO_SQL"):
            values["echo_sql"] = env["REBILL_ECHO_SQL"] not in {"0", "false", ""}
        return cls(**values)  # type: ignore[arg-type]

    @property
    def request_lines(self) -> bool:
        """A log line per request: as ``REBILL_LOG_REQUESTS`` says, else with JSON lines only.
        JSON lines go to a log store, where a line per request is what one searches; text is
        read by a person, to whom thousands of lines a second say nothing, and each line costs
        the request path more than the read itself (docs/performance.md)."""
        return self.log_requests if self.log_requests is not None else self.log_format == "json"

    def with_(self, **changes: object) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
