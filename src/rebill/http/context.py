"""What the edge learned about a request, handed to the API in ``scope["rebill"]``."""

from __future__ import annotations

from dataclasses import dataclass

from rebill.api.contract import Version
from rebill.domain.store.model import Store, Token

# The store a token named, in the scope of a request the edge refused after resolving it (a
# 403, 429 or 426 has no context): the request's log line names it (http/observe.py).
STORE_KEY = "rebill.store_id"


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 0.7 µs more to build, per request
class RequestContext:
    store: Store
    token: Token
    version: Version
    # The edge's headers (request id, limit, version), added to every response by whoever
    # sends it: passing them along costs less than wrapping ``send``.
    headers: list[tuple[bytes, bytes]]
    # The template of the route the API matched (``/customers/{id}``): what metrics and logs
    # name a request by (http/observe.py); None until matched, or when nothing matched.
    route: str | None = None
    # The client went away before its request's body arrived: nothing was done and nothing is
    # answered; metrics and the log line say 499 (api/routing.py).
    closed: bool = False

    @property
    def request_id(self) -> str:
        return self.headers[0][1].decode()
