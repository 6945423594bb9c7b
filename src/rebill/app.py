"""Build the ASGI application from settings: storage, clock, verifier, edge and routes."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from rebill.api.call import Services
from rebill.api.resources import addresses, customers, store
from rebill.api.routing import SegmentRouter, build_routes
from rebill.api.versions import VERSIONS
from rebill.clock import Clock, SystemClock
from rebill.db.engine import Database
from rebill.domain.address.verifier import AddressVerifier, OfflineZipVerifier
from rebill.errors import MethodNotAllowed, NotFound, ServiceError
from rebill.http.auth import TokenResolver
from rebill.http.edge import Edge
from rebill.http.ratelimit import LeakyBuckets
from rebill.http.render import error_response
from rebill.settings import Settings

RESOURCES = (store, customers, addresses)
# When no store is known (401, 426 before auth), responses name the oldest version, the
# default of new stores (decisions §1.3).
FALLBACK_VERSION = "2021-01"


async def _service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    mapped: ServiceError = {404: NotFound(), 405: MethodNotAllowed()}.get(exc.status_code) or ServiceError(exc.detail)
    mapped.status = exc.status_code
    mapped.headers = dict(exc.headers or {})  # e.g. Allow on 405
    return error_response(mapped)


async def _crash(request: Request, exc: Exception) -> Response:
    return error_response(ServiceError())


def create_app(settings: Settings | None = None, *, db: Database | None = None, clock: Clock | None = None,
               verifier: AddressVerifier | None = None, monotonic: Any = None) -> Edge:
    settings = settings or Settings.from_env()
    db = db or Database.from_url(settings.database_url, echo=settings.echo_sql)
    services = Services(db=db, clock=clock or SystemClock(), verifier=verifier or OfflineZipVerifier())
    operations = [op for module in RESOURCES for op in module.endpoints.operations]
    api = Starlette(
        exception_handlers={ServiceError: _service_error, HTTPException: _http_error, Exception: _crash},
    )
    api.router = SegmentRouter(build_routes(operations, services))
    extra = {"monotonic": monotonic} if monotonic else {}
    tokens = TokenResolver(db, ttl=settings.token_cache_seconds, **extra)
    buckets = LeakyBuckets(settings.rate_limit, **extra)
    edge = Edge(api, tokens=tokens, buckets=buckets, versions=VERSIONS, fallback_version=FALLBACK_VERSION)
    edge.services = services  # type: ignore[attr-defined]
    return edge
