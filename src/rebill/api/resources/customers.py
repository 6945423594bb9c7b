"""Customers, both versions (spec 02 Customers; 2021-11 per the public contract), and the
2021-11 delivery schedule (decisions §5.15, §5.16)."""

from collections.abc import Callable
from datetime import date
from typing import Any, TypeVar

from rebill.domain.customer import service
from rebill.domain.customer.model import CustomerCreate, CustomerUpdate
from rebill.domain.money import format_amount
from rebill.domain.payment_method.model import CUSTOMER_TOKEN_TYPES
from rebill.domain.schedule import delivery
from rebill.errors import Forbidden, ValidationFailed

from .. import query as q
from ..call import Call, Reply
from ..declared import count, created, deleted, one, page, update, whole
from ..routing import Endpoints
from ..v2021_11.payment_methods import billing_fields
from . import payment_methods

T = TypeVar("T")
endpoints = Endpoints()
READ, WRITE = "read_customers", "write_customers"
# NOTE: decisions §5.15, the delivery schedule's query (read by the handler itself, below).
SCHEDULE_QUERY = {
    "delivery_count_future": q.described(q.integer, minimum=1, maximum=delivery.MAX_COUNT,
                                         default=delivery.DEFAULT_COUNT),
    "future_interval": q.described(q.integer, minimum=0, maximum=delivery.MAX_INTERVAL_DAYS,
                                   default=delivery.DEFAULT_INTERVAL_DAYS),
    "date_max": q.datetime_,
}


@endpoints.get("/customers", scope=READ, reply=page("customers"))
def list_customers(call: Call) -> Reply:
    query = call.list_query("customers")
    with call.read() as unit:
        return call.page("customers", service.list_page(unit, query), unit, query)


@endpoints.get("/customers/count", scope=READ, versions=("2021-01",), reply=count("customers"))
def count_customers(call: Call) -> Reply:
    filters = call.count_filters("customers")
    with call.read() as unit:
        return Reply({"count": service.count(unit, filters)})


# NOTE: spec 02 Customers, the deprecated processor token fields of a 2021-01 customer body
# (api/v2021_01/changes.py CustomerProcessorTokens; 2021-11 declares none), by processor.
TOKEN_FIELDS = {f"{processor}_customer_token": processor for processor in CUSTOMER_TOKEN_TYPES}


def _command(call: Call, schema: str, cls: type[T], *, partial: bool = False) -> tuple[T, dict[str, str]]:
    """The body as ``cls``, and the processor customer tokens it gives (processor -> token;
    null gives none)."""
    command, sent = call.command_apart(schema, cls, TOKEN_FIELDS, partial=partial)
    return command, {TOKEN_FIELDS[name]: token for name, token in sent.items() if token is not None}


def _token_scope_check(call: Call) -> Callable[[], None]:
    """NOTE: spec 02 Customers, "a write permission on payments is needed only when payment
    token data is created or changed": the domain calls this before it writes a token, and the
    403 rolls back the whole request (docs/scopes.md)."""
    def check() -> None:
        if not call.token.allows(payment_methods.WRITE):
            raise Forbidden(f"This token lacks the scope a customer token needs: {payment_methods.WRITE}")
    return check


@endpoints.post("/customers", scope=WRITE, body="customer.create", reply=created("customer"))
def create_customer(call: Call) -> Reply:
    """In 2021-01, a body that sets a payment processor's customer token (`stripe_customer_token`,
    `braintree_customer_token`, ...) also needs the scope `write_payment_methods` (spec 02
    Customers); without it the answer is 403 and nothing is written."""
    command, tokens = _command(call, "customer.create", CustomerCreate)
    with call.write() as unit:
        return call.created("customer", service.create(unit, command, tokens=tokens,
                                                       authorize=_token_scope_check(call)))


@endpoints.get("/customers/{customer_id:id}", scope=READ, reply=one("customer", include="customers"))
def get_customer(call: Call) -> Reply:
    include = call.include("customers")
    with call.read() as unit:
        return call.one("customer", service.get(unit, call.path["customer_id"]), unit, include=include)


@endpoints.put("/customers/{customer_id:id}", scope=WRITE, body=update("customer.update"), reply=one("customer"))
def update_customer(call: Call) -> Reply:
    """In 2021-01, a body that sets a payment processor's customer token also needs the scope
    `write_payment_methods` (spec 02 Customers); without it the answer is 403 and nothing is
    written."""
    command, tokens = _command(call, "customer.update", CustomerUpdate, partial=True)
    with call.write() as unit:
        return call.one("customer", service.update(unit, call.path["customer_id"], command, tokens=tokens,
                                                   authorize=_token_scope_check(call)))


@endpoints.delete("/customers/{customer_id:id}", scope=WRITE, reply=deleted())
def delete_customer(call: Call) -> Reply:
    with call.write() as unit:
        service.delete(unit, call.path["customer_id"])
    return call.deleted()


def _bounded(call: Call, name: str, default: int, low: int, high: int, errors: dict[str, Any]) -> int:
    raw = call.params.get(name)
    if raw is None:
        return default
    try:
        value = q.integer(raw)
    except ValueError as exc:
        errors[name] = [str(exc)]
        return default
    if not low <= value <= high:
        errors[name] = [f"must be from {low} to {high}"]
    return value


def _date_max(call: Call, errors: dict[str, Any]) -> date | None:
    raw = call.params.get("date_max")
    if raw is None:
        return None
    try:
        return q.filter_datetime(raw).date()
    except ValueError as exc:
        errors["date_max"] = [str(exc)]
        return None


def _line(line: delivery.DeliveryLine, currency: str) -> dict[str, Any]:
    return {
        "external_product_id": {"ecommerce": line.external_product_id},
        "external_variant_id": {"ecommerce": line.external_variant_id},
        "images": line.images,
        "is_skippable": line.is_skippable,
        "is_skipped": line.is_skipped,
        "plan_type": line.plan_type,
        "product_title": line.product_title,
        "properties": line.properties,
        "quantity": line.quantity,
        "subscription_id": line.subscription_id,
        "subtotal_price": format_amount(line.subtotal_price, currency),
        "unit_price": format_amount(line.unit_price, currency),
        "variant_title": line.variant_title,
    }


def _payment_method(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"id": row.id, "billing_address": billing_fields(row.billing_address),
            "payment_details": row.payment_details or {}}


def _delivery_schedule(schedule: delivery.DeliverySchedule) -> dict[str, Any]:
    c = schedule.customer
    return {
        "customer": {"id": c.id, "email": c.email, "first_name": c.first_name, "last_name": c.last_name},
        "deliveries": [{"date": d.date.isoformat(), "orders": [{
            "id": order.id,  # NOTE: spec 03, a projected order has no id yet (null)
            "address_id": order.address_id,
            "charge_id": order.charge_id,
            "currency": order.currency,
            "line_items": [_line(line, order.currency) for line in order.lines],
            "payment_method": _payment_method(schedule.payment_methods.get(order.address_id)),
            "shipping_address": order.shipping_address,
            "total_price": format_amount(order.total_price, order.currency),
        } for order in d.orders]} for d in schedule.deliveries],
    }


@endpoints.get("/customers/{customer_id:id}/delivery_schedule", scope=READ, versions=("2021-11",),
               reply=whole("delivery_schedule"), query=SCHEDULE_QUERY)
def get_delivery_schedule(call: Call) -> Reply:
    """NOTE: decisions §5.15, §5.16; the query names are those of the public contract."""
    errors: dict[str, Any] = {}
    count = _bounded(call, "delivery_count_future", delivery.DEFAULT_COUNT, 1, delivery.MAX_COUNT, errors)
    days = _bounded(call, "future_interval", delivery.DEFAULT_INTERVAL_DAYS, 0, delivery.MAX_INTERVAL_DAYS, errors)
    date_max = _date_max(call, errors)
    with call.read() as unit:
        customer = service.get(unit, call.path["customer_id"])  # 404 first: the path names the customer
        if errors:
            raise ValidationFailed(errors)
        schedule = delivery.for_customer(unit, customer, count=count, future_days=days, date_max=date_max)
    return Reply(_delivery_schedule(schedule))
