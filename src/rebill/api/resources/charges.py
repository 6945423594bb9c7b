"""Charges, both versions (spec 01 Charges, spec 02 Charges, decisions §5.9-§5.13), and the
skip of a charge by address and date (spec 01 Addresses, decisions §5.12)."""

from __future__ import annotations

from rebill.domain.billing import manual, money_back
from rebill.domain.charge import service

from ..call import Call, Reply
from ..declared import NO_FIELDS, count, one, page
from ..routing import Endpoints

endpoints = Endpoints()
# NOTE: docs/scopes.md, charges belong to the orders scopes, skipping them to the subscriptions'.
READ, WRITE = "read_orders", "write_subscriptions"


# NOTE: spec 02 Cursor paging, /charges lists that use these filters get no Link header (nor
# does any list filtered by `ids`: Call.page).
NO_LINK = frozenset({"created_at_min", "updated_at_min"})


@endpoints.get("/charges", scope=READ, reply=page("charges"))
def list_charges(call: Call) -> Reply:
    query = call.list_query("charges")
    with call.read() as unit:
        reply = call.page("charges", service.list_page(unit, query), unit, query)
    if reply.headers and NO_LINK.intersection(call.params):
        reply.headers.pop("Link", None)
    return reply


@endpoints.get("/charges/count", scope=READ, versions=("2021-01",), reply=count("charges"))
def count_charges(call: Call) -> Reply:
    filters = call.count_filters("charges")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


@endpoints.get("/charges/{charge_id:id}", scope=READ, reply=one("charge", include="charges"))
def get_charge(call: Call) -> Reply:
    include = call.include("charges")
    with call.read() as unit:
        return call.one("charge", service.get(unit, call.path["charge_id"]), unit, include=include)


def _items(call: Call, schema: str) -> tuple[list[int] | None, str]:
    """The named items and the body field that names them in the caller's version (errors
    about the items use it: 2021-01 callers sent `subscription_id(s)`)."""
    body = call.version.schemas[schema].parse(call.body)
    default = "subscription_ids" if call.version.name == "2021-01" else "purchase_item_ids"
    field = next((name for name in ("subscription_id", "subscription_ids", "purchase_item_ids") if name in call.body),
                 default)
    return body.get("purchase_item_ids"), field


@endpoints.post("/charges/{charge_id:id}/skip", scope=WRITE, body="charge.skip", reply=one("charge"))
def skip_charge(call: Call) -> Reply:
    items, field = _items(call, "charge.skip")
    with call.write() as unit:
        return call.one("charge", service.skip(unit, call.path["charge_id"], items, field))


@endpoints.post("/charges/{charge_id:id}/unskip", scope=WRITE, body="charge.unskip", reply=one("charge"))
def unskip_charge(call: Call) -> Reply:
    items, field = _items(call, "charge.unskip")
    with call.write() as unit:
        return call.one("charge", service.unskip(unit, call.path["charge_id"], items, field))


def _change_date(call: Call) -> Reply:
    body = call.version.schemas["charge.change_next_charge_date"].parse(call.body)
    with call.write() as unit:
        return call.one("charge", service.change_date(unit, call.path["charge_id"], body["next_charge_date"]))


# NOTE: decisions §5.13, 2021-01 only; older clients send PUT, which is accepted too.
CHANGE_DATE = {"body": "charge.change_next_charge_date", "reply": one("charge")}
endpoints.post("/charges/{charge_id:id}/change_next_charge_date", scope=WRITE, versions=("2021-01",),
               **CHANGE_DATE)(_change_date)
endpoints.put("/charges/{charge_id:id}/change_next_charge_date", scope=WRITE, versions=("2021-01",),
              **CHANGE_DATE)(_change_date)


@endpoints.post("/addresses/{address_id:id}/charges/skip", scope=WRITE, versions=("2021-11",),
                body="address.skip_charge", reply=one("charge"))
def skip_address_charge(call: Call) -> Reply:
    body = call.version.schemas["address.skip_charge"].parse(call.body)
    field = "subscription_ids" if "subscription_ids" in call.body else "purchase_item_ids"
    with call.write() as unit:
        charge = service.skip_on_address(unit, call.path["address_id"], body["date"], body["purchase_item_ids"], field)
        return call.one("charge", charge)


@endpoints.post("/charges/{charge_id:id}/process", scope="write_orders", calls_out=True, body=NO_FIELDS,
                store_check=manual.require_access, reply=one("charge"))
def process_charge(call: Call) -> Reply:
    """NOTE: decisions §6.6, §6.12: plan tier A; a queued or errored charge is paid now (a
    failed payment still answers 200, with the charge in error); a paid one answers 422 and
    the loser of two calls at once 409."""
    charge = manual.process(call.services.db, call.services.gateway, call.store, call.path["charge_id"],
                            call.now())
    return call.one("charge", charge)


@endpoints.post("/charges/{charge_id:id}/capture_payment", scope="write_orders", calls_out=True, body=NO_FIELDS,
                store_check=money_back.require_access, reply=one("charge"))
def capture_payment(call: Call) -> Reply:
    """NOTE: decisions §6.6, §6.7: plan tier A, a `pending` charge within 7 days."""
    return call.one("charge", money_back.capture(call.services.db, call.services.gateway, call.store,
                                                 call.path["charge_id"], call.now()))


@endpoints.post("/charges/{charge_id:id}/refund", scope="write_orders", calls_out=True, body="charge.refund",
                reply=one("charge"))
def refund_charge(call: Call) -> Reply:
    """NOTE: decisions §6.8, §6.12: up to what is left; `full_refund` refunds all of it."""
    sent = call.body
    if sent.get("full_refund") is True:
        # NOTE: decisions §6.12, with `full_refund: true` the `amount` is ignored, even unparsable.
        sent = {k: v for k, v in sent.items() if k != "amount"}
    body = call.version.schemas["charge.refund"].parse(sent)
    return call.one("charge", money_back.refund(call.services.db, call.services.gateway, call.store,
                                                call.path["charge_id"], body.get("amount"),
                                                bool(body.get("full_refund")), call.now()))
