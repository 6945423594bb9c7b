"""What the edge learned about a request, handed to the API in ``scope["rebill"]``."""

from __future__ import annotations

from dataclasses import dataclass

from rebill.api.contract import Version
from rebill.domain.store.model import Store, Token


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str
    store: Store
    token: Token
    version: Version
