"""The paths the edge serves itself, without a token (http/edge.py): the document, its
reference page, Stripe's webhook events in, and `/metrics` when its setting is on. They are no
operations of the route table, so each is described here, beside the constants the edge
matches them by."""

from __future__ import annotations

from typing import Any

from rebill.domain.payment.processors import EVENTS_PATH
from rebill.http.processor_events import PATH as EVENTS_PATTERN

from . import components as c

DOCUMENT_PATH = "/openapi.json"
METRICS_PATH = "/metrics"
DOCS_PATH = "/docs"
DOCS_ASSETS = DOCS_PATH + "/static/"

_COMMON = {"X-Request-Id": c.header("X-Request-Id")}
_ERROR = {"$ref": "#/components/schemas/Error"}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "headers": _COMMON, "content": {c.JSON: {"schema": _ERROR}}}


_KEY = EVENTS_PATTERN.pattern[len(EVENTS_PATTERN.pattern.split("(")[0]):]  # the key's group, `([A-Za-z0-9_-]{16,64})`

EDGE_PATHS: dict[str, dict[str, Any]] = {
    DOCUMENT_PATH: {"get": {
        "operationId": "openapi_document",
        "summary": "This document",
        "description": "The OpenAPI document of a version: `?version=` (422 when unknown), else "
                       "`X-Service-Version` (426 when unknown), else the newest version. No token needed.",
        "tags": ["documentation", "Rebill extensions"], "x-rebill-extension": True, "security": [],
        "parameters": [{"name": "version", "in": "query", "required": False, "schema": {"type": "string"}},
                       {"name": "X-Service-Version", "in": "header", "required": False, "schema": {"type": "string"}}],
        "responses": {
            "200": {"description": "An OpenAPI 3.1 document.", "headers": _COMMON,
                    "content": {c.JSON: {"schema": {"type": "object", "required": ["openapi", "info", "paths"]}}}},
            "422": _error("An unknown `version`."),
            "426": _error("An unknown `X-Service-Version`."),
        },
    }},
    DOCS_PATH: {"get": {
        "operationId": "reference_page",
        "summary": "The reference page",
        "description": "Swagger UI (served from the package, no network) over both versions' documents, "
                       "with a version switch. No token needed.",
        "tags": ["documentation", "Rebill extensions"], "x-rebill-extension": True, "security": [],
        "responses": {"200": {"description": "An HTML page.", "content": {"text/html": {"schema": {"type": "string"}}}}},
    }},
    METRICS_PATH: {"get": {
        "operationId": "metrics",
        "summary": "Figures for Prometheus",
        "description": "Every figure of every process of the server in the Prometheus text format (requests by "
                       "route template, version and status, latencies, billing runs, webhook deliveries, async "
                       "batch tasks, the database pool; docs/operations.md, \"Metrics and logs\"). Served only "
                       "when the server runs with `REBILL_METRICS=on` (off by default): otherwise the path is "
                       "unknown, and answers 401 without a token and 404 with one. No token needed; keep it "
                       "from the public at the proxy.",
        "tags": ["operations", "Rebill extensions"], "x-rebill-extension": True, "security": [],
        "responses": {
            "200": {"description": "The text format, version 0.0.4.", "headers": _COMMON,
                    "content": {"text/plain": {"schema": {"type": "string"}}}},
            # Off, the path is as unknown as any other: the token check first, then no route.
            "401": _error("Metrics are off and the request has no valid token."),
            "404": _error("Metrics are off (`REBILL_METRICS` is not `on`)."),
            "405": _error("Another method than GET or HEAD."),
        },
    }},
    EVENTS_PATH + "{key}": {"post": {
        "operationId": "stripe_events",
        "summary": "Stripe's webhook events in",
        "description": "Where Stripe sends a Stripe store's webhook events (docs/payments.md): no token, the "
                       "`Stripe-Signature` of the store's endpoint signing secret instead. Each event applies once.",
        "tags": ["processors", "Rebill extensions"], "x-rebill-extension": True, "security": [],
        "parameters": [
            {"name": "key", "in": "path", "required": True, "description": "The store's random endpoint key.",
             "schema": {"type": "string", "pattern": f"^{_KEY.strip('()')}$"}},
            {"name": "Stripe-Signature", "in": "header", "required": True, "schema": {"type": "string"}},
        ],
        "requestBody": {"required": True, "content": {c.JSON: {"schema": {"type": "object"}}}},
        "responses": {
            "200": {"description": "Applied, already applied, or of a type Rebill ignores.", "headers": _COMMON,
                    "content": {c.JSON: {"schema": {
                        "type": "object", "required": ["id", "type", "result"],
                        "properties": {"id": {"type": "string"}, "type": {"type": "string"},
                                       "result": {"type": "string"}}}}}},
            "400": _error("The signature does not verify, the body is no event, or the store takes no Stripe events."),
            "404": _error("No store has this endpoint key."),
            "405": _error("Another method."),
            "409": _error("The event's charge is being captured or refunded at this moment; Stripe sends it again."),
            "413": _error("The body is too large."),
            "503": _error("The store's Stripe keys cannot be read right now; Stripe sends it again."),
        },
    }},
}
