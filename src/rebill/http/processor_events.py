"""`POST /processors/stripe/events/{key}`: Stripe's webhook events in (issue 16, docs/payments.md).

The one path the edge serves without a Rebill token, since Stripe cannot send one
(``http/edge.py`` sends every path under its prefix here, and nothing else; one that is no
endpoint address answers 404): the store is the one whose
endpoint key the path names (``processors.endpoint_key``, random: the address is public and names
no store), and the request is Stripe's when its ``Stripe-Signature`` verifies with that store's
endpoint secret. The edge still gives it its request id and the one error shape.

Answers: 200 for an event applied, already applied, changing nothing or of a type Rebill ignores
(Stripe stops sending it); 400 for a signature that does not verify (wrong secret, body changed,
too old, missing), a body that is no event, or a store that does not take Stripe's events (on
the sandbox, no signing secret); 404 for a key no store has; 405 for another method; 409 when a
refund event finds its charge being captured or refunded at that moment and 503 when the store's
keys cannot be read (Stripe sends the event again later); 413 past the edge's body limit.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from rebill.api.call import Services
from rebill.domain.billing import inbound
from rebill.domain.payment import processors, stripe_events
from rebill.domain.payment.gateway import GatewayUnavailable
from rebill.domain.payment.inbound import MethodUpdated
from rebill.domain.payment_method import processor_check
from rebill.domain.store import clock as store_clock
from rebill.domain.store import repository as stores
from rebill.domain.unit import REQUEST_SOURCE
from rebill.errors import BadRequest, MethodNotAllowed, NotFound, ServiceError, ServiceUnavailable

from .render import send_error, send_json

logger = logging.getLogger("rebill.payment")
PREFIX = processors.EVENTS_PATH
# The whole path, the key as processors makes it (token_urlsafe): anything else under the
# prefix is no exception to the token check.
PATH = re.compile(re.escape(PREFIX) + r"([A-Za-z0-9_-]{16,64})")
SIGNATURE_HEADER = b"stripe-signature"
NO_STORE = "No store takes Stripe's events at this address"


def endpoint_key(path: str) -> str | None:
    """The endpoint key when ``path`` is exactly a webhook address, else None."""
    found = PATH.fullmatch(path)
    return found[1] if found else None


class ProcessorEvents:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send, key: str | None,
                       headers: list[tuple[bytes, bytes]]) -> None:
        """``key``: the endpoint key of the path, None for a path under the prefix that is none."""
        try:
            if key is None:
                raise NotFound(NO_STORE)
            if scope["method"] != "POST":
                raise MethodNotAllowed(headers={"Allow": "POST"})
            body = await _body(receive)
            signature = next((v.decode("latin-1") for k, v in scope["headers"] if k == SIGNATURE_HEADER), None)
            # No token made what the event changes: its events' origin is the processor's.
            REQUEST_SOURCE.set(None)
            reply = await run_in_threadpool(receive_event, self.services, key, body, signature)
        except ServiceError as exc:
            await send_error(send, exc, headers)
            return
        except Exception:
            logger.exception("unhandled error in a Stripe event (request %s)", headers[0][1].decode())
            await send_json(send, 500, {"errors": ServiceError.default}, None, headers)
            return
        await send_json(send, 200, reply, None, headers)


async def _body(receive: Receive) -> bytes:
    """The whole body (the edge's receive already refuses one past its limit: 413)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def receive_event(services: Services, key: str, payload: bytes, signature: str | None) -> dict[str, Any]:
    """Finds the store, verifies the event with its secret and applies it (in a worker thread)."""
    with services.db.read() as conn:
        store_id = processors.store_of_endpoint(conn, key)
        store = stores.get(conn, store_id) if store_id is not None else None
    if store is None:
        raise NotFound(NO_STORE)
    stripe_account = getattr(services.gateway, "stripe_account", None)
    try:
        account = stripe_account(store.id) if stripe_account is not None else None
    except GatewayUnavailable:  # its keys cannot be read (logged): Stripe sends it again later
        raise ServiceUnavailable("This store's Stripe settings cannot be read right now") from None
    if account is None:
        raise BadRequest("This store's payments do not go through Stripe")
    if not account.webhook_secret:
        raise BadRequest("This store has no Stripe webhook signing secret (rebill stores processor "
                         "--webhook-secret-file)")
    try:
        event = stripe_events.read(stripe_events.verify(payload, signature, account.webhook_secret))
    except BadRequest as exc:
        logger.warning("store %s: a Stripe event was refused: %s", store.id, exc.errors)
        raise
    if isinstance(event.fact, MethodUpdated):
        # Outside any transaction (a call out): the method as Stripe has it now.
        details = processor_check.current_details(services.gateway, store.id, event.fact.method_token)
        event = replace(event, fact=None if details is None else MethodUpdated(event.fact.method_token, details))
    result = inbound.apply(services.db, store, store_clock.clock_for(store, services.clock.now)(),
                           services.clock.now(), event)
    return {"id": event.event_id, "type": event.type, "result": result}
