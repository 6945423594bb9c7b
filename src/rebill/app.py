"""Build the ASGI application from settings: storage, clock, verifier, edge and routes."""

from __future__ import annotations

from typing import Any

from rebill.api import payloads  # noqa: F401 - installs the webhook payload renderer
from rebill.api.call import Services
from rebill.api.resources import (
    addresses,
    async_batches,
    bundle_selections,
    bundle_variants,
    charges,
    checkouts,
    collections,
    customers,
    discounts,
    events,
    metafields,
    onetimes,
    orders,
    payment_methods,
    plans,
    products,
    store,
    subscriptions,
    webhooks,
)
from rebill.api.routing import Api
from rebill.api.versions import FALLBACK_VERSION, VERSIONS
from rebill.clock import Clock, SystemClock
from rebill.db.engine import Database
from rebill.domain.address.verifier import AddressVerifier, OfflineZipVerifier
from rebill.domain.payment.processors import gateway_for
from rebill.http import observe
from rebill.http.auth import TokenResolver
from rebill.http.edge import Edge
from rebill.http.ratelimit import LeakyBuckets
from rebill.http.ratelimit_redis import SharedBuckets
from rebill.jobs.scheduler import Jobs
from rebill.observability import metrics
from rebill.settings import Settings

RESOURCES = (store, customers, addresses, products, plans, subscriptions, onetimes, charges, payment_methods,
             orders, metafields, discounts, webhooks, events, collections, async_batches, checkouts,
             bundle_variants, bundle_selections)


def build_services(settings: Settings, db: Database, clock: Clock, verifier: AddressVerifier | None = None) -> Services:
    """What handlers and jobs call: storage, clock, address verifier, payment gateway (the API
    and `rebill worker` alike, jobs/worker.py)."""
    # NOTE: decisions §6.2, issue 16: the sandbox gateway is the default; a store that chose
    # Stripe is paid through its own Stripe client (the router picks per store).
    return Services(db=db, clock=clock, verifier=verifier or OfflineZipVerifier(),
                    gateway=gateway_for(db, clock.now, secret_key=settings.secret_key,
                                        timeout=settings.stripe_timeout_seconds),
                    webhook_private=settings.webhook_private_addresses)


def create_app(settings: Settings | None = None, *, db: Database | None = None, clock: Clock | None = None,
               verifier: AddressVerifier | None = None, monotonic: Any = None) -> Edge:
    settings = settings or Settings.from_env()
    db = db or Database.from_url(settings.database_url, echo=settings.echo_sql,
                                   idle_transaction_seconds=settings.idle_transaction_seconds)
    clock = clock or SystemClock()
    services = build_services(settings, db, clock, verifier)
    api = Api([op for module in RESOURCES for op in module.endpoints.operations], services)
    extra = {"monotonic": monotonic} if monotonic else {}
    tokens = TokenResolver(db, ttl=settings.token_cache_seconds, **extra)
    # Shared through Redis when a deployment has one, else per process (http/ratelimit_redis.py).
    buckets = SharedBuckets(settings.rate_limit, settings.redis_url, settings.redis_prefix, **extra) \
        if settings.redis_url else LeakyBuckets(settings.rate_limit, **extra)
    edge = Edge(api, tokens=tokens, buckets=buckets, versions=VERSIONS, fallback_version=FALLBACK_VERSION)
    edge.services = services  # type: ignore[attr-defined]
    # Issue 18: `/metrics` and the figures, when the setting is on (observability/metrics.py).
    edge.metrics = metrics.enable(db, clock) if settings.metrics else None
    app: Any = edge
    if settings.regenerate_every > 0 or settings.bill_every > 0 or settings.purge_every > 0 or \
            settings.deliver_webhooks or settings.batch_every > 0:
        app = Jobs(edge, db, clock, services.gateway, settings)
    # Timed, counted and logged per request, when metrics or request lines are on.
    return observe.wrap(app, api, edge.metrics)  # type: ignore[no-any-return]
