"""The benchmark server: Rebill plus a bare endpoint on the same stack (uvicorn, Starlette,
msgspec), so one run compares our endpoints with the cost of the stack alone."""

from __future__ import annotations

import os
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from bench import UNFROZEN
from rebill import heap
from rebill.app import create_app
from rebill.http.render import JSON

# A document shaped and sized like a 2021-11 customer.
BARE_DOCUMENT = {"customer": {
    "id": 1, "analytics_data": {"utm_params": []}, "created_at": "2026-01-15T12:00:00+00:00",
    "email": "bench@example.com", "external_customer_id": {"ecommerce": None},
    "first_charge_processed_at": None, "first_name": "Bench", "has_payment_method_in_dunning": False,
    "has_valid_payment_method": False, "hash": "0123456789abcdef01234567", "last_name": "Mark",
    "orders_count": 0, "phone": None, "subscriptions_active_count": 0, "subscriptions_total_count": 0,
    "tax_exempt": False, "updated_at": "2026-01-15T12:00:00+00:00",
}}


async def bare(request: Request) -> JSON:
    return JSON(BARE_DOCUMENT)


_bare = Starlette(routes=[Route("/__bare", bare)])
_rebill = create_app()
if not os.environ.get(UNFROZEN):
    heap.freeze()  # as rebill.asgi, the entry point of `rebill serve`: the process's start out of the collector


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/__bare":
        await _bare(scope, receive, send)
    else:
        await _rebill(scope, receive, send)
