"""Checkouts, both versions (spec 02 Checkouts, decisions §7.3, §7.7; docs/api-choices.md,
Checkouts): platform B and custom stores only (403 on a platform S store, before anything else)."""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

from rebill.domain.checkout import charge as checkout_charge
from rebill.domain.checkout import service
from rebill.domain.checkout.model import ChargeRequest, CheckoutWrite

from ..call import Call, Reply
from ..declared import created, listed, one, update
from ..routing import Endpoints

endpoints = Endpoints()
# NOTE: docs/scopes.md, a checkout becomes an order and its charge: the orders scopes.
READ, WRITE = "read_orders", "write_orders"


class TokenConvertor(Convertor[str]):
    """``{name:checkout_token}``: ours are 32 hex characters; anything that is no token at all
    (past 64 characters, or other than letters, digits, `-` and `_`: a NUL, a `%`) matches no
    route and answers 404 unread, never reaching the database."""

    regex = "[0-9A-Za-z_-]{1,64}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("checkout_token", TokenConvertor())


@endpoints.post("/checkouts", scope=WRITE, body="checkout.create", reply=created("checkout"))
def create_checkout(call: Call) -> Reply:
    service.require_platform(call.store)
    command = call.command("checkout.create", CheckoutWrite)
    with call.write() as unit:
        return call.created("checkout", service.create(unit, call.services.verifier, command))


@endpoints.get("/checkouts/{token:checkout_token}", scope=READ, reply=one("checkout"))
def get_checkout(call: Call) -> Reply:
    service.require_platform(call.store)
    with call.read() as unit:
        return call.one("checkout", service.get(unit, call.path["token"]))


@endpoints.put("/checkouts/{token:checkout_token}", scope=WRITE, body=update("checkout.update"), reply=one("checkout"))
def update_checkout(call: Call) -> Reply:
    service.require_platform(call.store)
    command = call.command("checkout.update", CheckoutWrite, partial=True)
    with call.write() as unit:
        return call.one("checkout", service.update(unit, call.services.verifier, call.path["token"], command))


@endpoints.get("/checkouts/{token:checkout_token}/shipping_rates", scope=READ,
               reply=listed("shipping_rates", "shipping_rate"), errors=(422,))  # no shipping address yet
def list_shipping_rates(call: Call) -> Reply:
    """NOTE: spec 02 Checkouts, `{shipping_rates: [...]}`; decisions §7.7.5."""
    service.require_platform(call.store)
    with call.read() as unit:
        rates = service.shipping_rates(unit, call.path["token"])
    return Reply({"shipping_rates": [call.version.serialize("shipping_rate", rate) for rate in rates]})


# NOTE: spec 02 Customers, "a write permission on payments is needed ... when payment token
# data is created or changed": a charge keeps its payment token as the customer's payment
# method (found by an audit: an orders-only token stored one on an existing customer).
@endpoints.post("/checkouts/{token:checkout_token}/charge", scope=WRITE, calls_out=True, body="checkout.charge",
                reply=one("checkout_charge"), also_needs=("write_payment_methods",))
def charge_checkout(call: Call) -> Reply:
    """NOTE: spec 02 Checkouts charge, decisions §7.7.6: 200 `{checkout_charge}`; a declined
    payment 422 with the processor's reason, and the checkout stays open."""
    service.require_platform(call.store)
    request = call.command("checkout.charge", ChargeRequest)
    done = checkout_charge.charge(call.services.db, call.services.gateway, call.services.verifier, call.store,
                                  call.path["token"], request, call.now())
    return call.one("checkout_charge", done)
