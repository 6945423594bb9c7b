"""The suite's Stripe: localstripe (a fake, stateful Stripe server from the package registry)
with a layer of our own in front of its handlers for what it lacks. Run as
``python -m tests.stripe_processor.fake --port N``; the suite starts it (conftest.py here).

What the layer adds, as Stripe documents it:

- **Idempotency keys**: a POST repeated with the same ``Idempotency-Key`` (per API key) gets
  the first answer back, marked ``Idempotent-Replayed: true``, and nothing runs again; the same
  key with other parameters is a 400 ``idempotency_error``; one still running, a 409.
  Rate-limited requests are not saved (Stripe's limiter runs before its idempotency layer).
- **Faults**, set by a test (``POST /_config/rebill/faults``): a 429, a 500 before the request runs,
  a 500 after it ran (Stripe saves that 500 for the key, so a repeat gets it again), and a
  dropped answer after it ran (the client sees a connection error or a timeout).
- **Test cards** that localstripe refuses to attach or does not decline at charge time:
  4000000000000002 (card_declined, generic_decline), 4000000000009995 (insufficient_funds),
  4000000000000069 (expired_card), 4000002760003184 (authentication_required),
  4000000000000119 (processing_error). They attach like 4242 and fail when charged, as in
  Stripe's test mode; 4242424242424242 pays.
- **An account's or a customer's PaymentIntents** (``GET /v1/payment_intents[?customer=]``):
  localstripe lists every account's and takes no customer filter.
- **Ownership**: a PaymentIntent naming a customer and a payment method that is not attached
  to that customer (detached, or another customer's) is refused as Stripe refuses it.
- ``GET /_config/rebill/log`` (every /v1 request: method, path, key, replayed, status) and
  ``GET /_config/rebill/intents?account=sk_...`` (the PaymentIntents localstripe holds that an
  API key made, with their metadata), which the exactly-once tests count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from aiohttp import web
from localstripe import resources, server
from localstripe.resources import PaymentIntent, PaymentMethod

# NOTE: Stripe's test cards (docs "Testing", declined payments), as they behave when charged.
CARDS = {
    "4000000000000002": (402, "card_declined", "generic_decline", "Your card was declined."),
    "4000000000009995": (402, "card_declined", "insufficient_funds", "Your card has insufficient funds."),
    "4000000000000069": (402, "expired_card", None, "Your card has expired."),
    "4000002760003184": (402, "authentication_required", "authentication_required",
                         "Your card was declined. This transaction requires authentication."),
    "4000000000000119": (402, "processing_error", None, "An error occurred while processing your card."),
}
NOT_ATTACHED = ("The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, "
                "shared with a connected account without Customer attachment, or was detached from a Customer. "
                "It may not be used again.")

behaves: dict[str, str] = {}  # payment method id -> the test card it stands for
saved: dict[tuple[str, str], tuple[str, int, bytes]] = {}  # (api key, idempotency key) -> (print, status, body)
running: set[tuple[str, str]] = set()
faults: list[dict[str, Any]] = []
log: list[dict[str, Any]] = []
owners: dict[str, str] = {}  # PaymentIntent id -> the API key that made it (an account, in Stripe)


def _error(status: int, error: dict[str, Any]) -> web.Response:
    return web.json_response({"error": error}, status=status)


def _listed(request: web.Request) -> web.Response | None:
    """The account's PaymentIntents, or a customer's, newest first, a page at a time
    (``limit``, ``starting_after``), as Stripe lists them (localstripe lists every account's,
    oldest first, and takes no customer filter)."""
    if request.method != "GET" or request.path != "/v1/payment_intents":
        return None
    customer = request.query.get("customer")
    account = server.get_api_key(request)
    data = [value._export() for key, value in resources.store.items() if key.startswith("payment_intent:")
            and (not customer or value.customer == customer) and owners.get(value.id) == account]
    data.sort(key=lambda i: i["created"], reverse=True)
    after = request.query.get("starting_after")
    if after:
        ids = [i["id"] for i in data]
        data = data[ids.index(after) + 1:] if after in ids else []
    limit = int(request.query.get("limit", 10))
    return web.json_response({"object": "list", "url": "/v1/payment_intents", "has_more": len(data) > limit,
                              "data": data[:limit]})


async def _emulated(request: web.Request) -> web.Response | None:
    """Test cards and ownership where localstripe differs from Stripe; None: localstripe answers."""
    if server.get_api_key(request) is None:
        return None  # localstripe answers 401
    listed = _listed(request)
    if listed is not None:
        return listed
    if request.method != "POST" or request.path not in ("/v1/payment_methods", "/v1/payment_intents"):
        return None
    data = await server.get_post_data(request) or {}
    if request.path == "/v1/payment_methods":
        number = (data.get("card") or {}).get("number")
        if number not in CARDS:
            return None
        data.pop("expand", None)
        data["card"] = {**data["card"], "number": "4242424242424242"}
        method = PaymentMethod._api_create(**data)
        method.card["last4"] = number[-4:]
        behaves[method.id] = number
        return web.json_response(method._export())
    method_id, customer = data.get("payment_method"), data.get("customer")
    if not method_id or str(data.get("confirm")).lower() != "true":
        return None
    method = resources.store.get("payment_method:" + method_id)
    if method is not None and customer and method.customer != customer:
        return _error(400, {"type": "invalid_request_error", "param": "payment_method", "message": NOT_ATTACHED})
    if method_id not in behaves:
        return None
    status, code, decline, message = CARDS[behaves[method_id]]
    unconfirmed = {k: v for k, v in data.items() if k not in ("confirm", "off_session", "expand")}
    intent = PaymentIntent._api_create(**unconfirmed)
    error = {"type": "card_error", "code": code, "message": message, "payment_intent": intent._export()}
    if decline:
        error["decline_code"] = decline
    return _error(status, error)


def _fault(request: web.Request) -> dict[str, Any] | None:
    for fault in faults:
        if request.method == fault.get("method", "POST") and request.path.startswith(fault["path"]):
            fault["times"] -= 1
            if fault["times"] <= 0:
                faults.remove(fault)
            return fault
    return None


@web.middleware
async def stripe_layer(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.path.startswith("/_config/rebill/"):
        return await handler(request)
    fault = _fault(request)
    entry: dict[str, Any] = {"method": request.method, "path": request.path, "account": server.get_api_key(request),
                             "key": request.headers.get("Idempotency-Key"), "replayed": False,
                             "fault": fault and fault["action"]}
    log.append(entry)
    if fault and fault["action"] == "rate_limit":
        entry["status"] = 429
        return _error(429, {"type": "invalid_request_error", "code": "rate_limit",
                            "message": "Too many requests hit the API too quickly."})
    if fault and fault["action"] == "error_before":
        entry["status"] = 500
        return _error(500, {"type": "api_error", "message": "An unknown error occurred."})
    key = request.headers.get("Idempotency-Key") if request.method == "POST" else None
    scope = (request.headers.get("Authorization", ""), key or "")
    body = await request.read()
    fingerprint = request.path + "?" + body.decode()
    if key and scope in saved:
        first, status, text = saved[scope]
        if first != fingerprint:
            response = _error(400, {"type": "idempotency_error", "message": "Keys for idempotent requests can only "
                                    "be used with the same parameters they were first used with."})
        else:
            entry["replayed"] = True
            response = web.Response(status=status, body=text, content_type="application/json",
                                    headers={"Idempotent-Replayed": "true"})
    elif key and scope in running:
        return _error(409, {"type": "idempotency_error", "code": "idempotency_key_in_use",
                            "message": "There is currently another in-progress request using this key."})
    else:
        if key:
            running.add(scope)
        try:
            response = await _emulated(request) or await handler(request)
        except server.UserError as exc:
            response = exc.to_response()
        finally:
            running.discard(scope)
        if request.path == "/v1/payment_intents":
            _own(request, response)
        if fault and fault["action"] == "error_after":
            response = _error(500, {"type": "api_error", "message": "An unknown error occurred."})
        if key:
            saved[scope] = (fingerprint, response.status, response.body)  # type: ignore[attr-defined]
    entry["status"] = response.status
    if fault and fault["action"] == "drop_after":
        # The request ran (and was saved); its answer never reaches the client.
        entry["status"] = "dropped"
        if fault.get("delay"):
            await asyncio.sleep(fault["delay"])
        assert request.transport is not None
        request.transport.close()
        raise asyncio.CancelledError()
    return response


def _own(request: web.Request, response: Any) -> None:
    try:
        answer = json.loads(response.body)
    except (TypeError, ValueError):
        return
    intent = answer.get("error", {}).get("payment_intent") or answer
    if str(intent.get("id", "")).startswith("pi_"):
        owners[intent["id"]] = server.get_api_key(request) or ""


async def put_fault(request: web.Request) -> web.Response:
    fault = await request.json()
    fault.setdefault("times", 1)
    faults.append(fault)
    return web.json_response({"faults": len(faults)})


async def clear_faults(request: web.Request) -> web.Response:
    faults.clear()
    return web.json_response({"faults": 0})


async def get_log(request: web.Request) -> web.Response:
    return web.json_response(log)


async def get_intents(request: web.Request) -> web.Response:
    account = request.query.get("account")
    intents = [value._export() for key, value in resources.store.items() if key.startswith("payment_intent:")
               and (account is None or owners.get(value.id) == account)]
    return web.json_response([{k: i[k] for k in ("id", "amount", "currency", "status", "metadata", "customer",
                                                   "capture_method")} | {"refunded": _refunded(i)}
                              for i in intents])


def _refunded(intent: dict[str, Any]) -> int:
    charge = intent.get("latest_charge")
    return charge["amount_refunded"] if isinstance(charge, dict) else 0


def build() -> web.Application:
    resources.store.dump_to_disk = lambda: None  # type: ignore[method-assign]  # no shared /tmp file
    app = server.app
    app.middlewares.insert(0, stripe_layer)
    app.router.add_post("/_config/rebill/faults", put_fault)
    app.router.add_delete("/_config/rebill/faults", clear_faults)
    app.router.add_get("/_config/rebill/log", get_log)
    app.router.add_get("/_config/rebill/intents", get_intents)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(build(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
