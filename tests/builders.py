"""Plain builder functions with keyword overrides (design guide): they go through the same
services as the API, so built data obeys every rule."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import select

from rebill.domain.address import service as address_service
from rebill.domain.address.model import AddressCreate
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.domain.customer import service as customer_service
from rebill.domain.customer.model import CustomerCreate
from rebill.domain.discount import repository as discount_repo
from rebill.domain.payment_method import repository as pm_repo
from rebill.domain.unit import Unit
from rebill.models import events

_seq = itertools.count(1)


def _unit(api: Any, conn: Any) -> Unit:
    return Unit(conn, api.store, api.clock.now())


def make_customer(api: Any, **overrides: Any) -> Any:
    n = next(_seq)
    values = {"email": f"customer{n}@example.com", "first_name": "Ada", "last_name": f"Lovelace{n}", **overrides}
    with api.db.write() as conn:
        return customer_service.create(_unit(api, conn), CustomerCreate(**values))


def make_address(api: Any, customer: Any = None, **overrides: Any) -> Any:
    customer = customer or make_customer(api)
    values = {"customer_id": customer.id, "address1": "101 Market St", "city": "San Francisco",
              "country_code": "US", "province": "CA", "zip": "94105", "first_name": "Ada",
              "last_name": "Lovelace", "phone": "+14155550100", **overrides}
    with api.db.write() as conn:
        return address_service.create(_unit(api, conn), OfflineZipVerifier(), AddressCreate(**values))


def make_discount(api: Any, **overrides: Any) -> int:
    n = next(_seq)
    now = api.clock.now()
    values = {"store_id": api.store.id, "code": f"SAVE{n}", "discount_type": "percentage", "value": "10",
              "status": "enabled", "duration": "forever", "duration_usage_limit": None, "usage_limit": None,
              "times_used": 0, "once_per_customer": False, "applies_to_id": None, "applies_to_resource": None,
              "applies_to_product_type": "ALL", "channel_settings": {}, "first_time_customer_restriction": None,
              "prerequisite_subtotal_min": None, "starts_at": None, "ends_at": None,
              "created_at": now, "updated_at": now, **overrides}
    from decimal import Decimal
    values["value"] = Decimal(str(values["value"]))
    with api.db.write() as conn:
        return discount_repo.insert_discount(conn, values)


def make_payment_method(api: Any, customer: Any, **overrides: Any) -> int:
    """A payment method through the service (the customer's first becomes its default);
    ``status``/``status_reason``, which only charges set, are written after it."""
    from rebill.domain.payment_method import service as payment_method_service
    from rebill.domain.payment_method.model import PaymentMethodCreate
    status = {k: overrides.pop(k) for k in ("status", "status_reason") if k in overrides}
    if "is_default" in overrides:
        overrides["default"] = overrides.pop("is_default")
    values = {"customer_id": customer.id, "payment_type": "CREDIT_CARD",
              "payment_details": {"brand": "visa", "exp_month": 12, "exp_year": 2030, "last4": "4242"},
              "processor_name": "sandbox", "processor_customer_token": "cus_1",
              "processor_payment_method_token": "pm_ok", **overrides}
    with api.db.write() as conn:
        created = payment_method_service.create(_unit(api, conn), PaymentMethodCreate(**values))
        if status:
            pm_repo.update_payment_method(conn, api.store.id, created.id, status)
    return created.id


def events_of(api: Any, resource_id: int | None = None, resource: str | None = None) -> list[tuple[str, int]]:
    """``resource`` ("charge", ...): ids are per table, so a charge may share its id with the
    subscription the test made beside it."""
    stmt = select(events.c.topic, events.c.resource_id).where(events.c.store_id == api.store.id)
    if resource_id is not None:
        stmt = stmt.where(events.c.resource_id == resource_id)
    if resource is not None:
        stmt = stmt.where(events.c.resource == resource)
    with api.db.read() as conn:
        return [(r.topic, r.resource_id) for r in conn.execute(stmt.order_by(events.c.id))]


def make_subscription(api: Any, address: Any = None, **overrides: Any) -> Any:
    """A monthly subscription through the service (its charge is planned like any other)."""
    from datetime import timedelta
    from decimal import Decimal

    from rebill.domain.subscription import service as subscription_service
    from rebill.domain.subscription.model import SubscriptionCreate
    address = address or make_address(api)
    values = {"address_id": address.id, "product_title": "Coffee", "variant_title": "1 lb", "price": Decimal("12.50"),
              "quantity": 1, "charge_interval_frequency": 1, "order_interval_frequency": 1,
              "order_interval_unit": "month", "next_charge_scheduled_at": api.clock.now().date() + timedelta(days=10),
              **overrides}
    if isinstance(values["price"], str):
        values["price"] = Decimal(values["price"])
    with api.db.write() as conn:
        return subscription_service.create(_unit(api, conn), SubscriptionCreate(**values))


def make_onetime(api: Any, address: Any = None, **overrides: Any) -> Any:
    from datetime import timedelta
    from decimal import Decimal

    from rebill.domain.subscription import onetimes
    from rebill.domain.subscription.model import OnetimeCreate
    address = address or make_address(api)
    values = {"address_id": address.id, "product_title": "Mug", "price": Decimal("8.00"), "quantity": 1,
              "next_charge_scheduled_at": api.clock.now().date() + timedelta(days=10), **overrides}
    if isinstance(values["price"], str):
        values["price"] = Decimal(values["price"])
    with api.db.write() as conn:
        return onetimes.create(_unit(api, conn), OnetimeCreate(**values))


def charges_of(api: Any, address_id: int) -> list[Any]:
    """The stored charges of an address, oldest first."""
    from rebill.models import charges
    stmt = select(charges).where(charges.c.store_id == api.store.id, charges.c.address_id == address_id)
    with api.db.read() as conn:
        return list(conn.execute(stmt.order_by(charges.c.scheduled_at, charges.c.id)))


def make_orders(api: Any, address: Any = None, **subscription: Any) -> list[Any]:
    """The orders of a real payment: a subscription due today, its charge paid through the
    billing run's own path (sandbox gateway). Several orders when ``subscription`` makes it
    prepaid (``charge_interval_frequency=3``). Without ``address`` a customer with a payment
    method is made; a given address's customer needs one. Oldest first, as domain orders."""
    from rebill.domain.billing import run as billing
    from rebill.domain.order import repository as order_repo
    from rebill.domain.payment.sandbox import SandboxGateway
    if address is None:
        customer = make_customer(api)
        make_payment_method(api, customer)
        address = make_address(api, customer)
    today = _unit(api, None).today
    item = make_subscription(api, address, **{"next_charge_scheduled_at": today, **subscription})
    [charge] = [c for c in charges_of(api, address.id)
                if c.status == "queued" and c.scheduled_at == item.next_charge_scheduled_at]
    [paid] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge.id], api.clock.now())
    assert paid.status == "success", paid
    with api.db.read() as conn:
        rows = order_repo.of_charge(conn, api.store.id, charge.id)
        return [order_repo.get(conn, api.store.id, row.id) for row in rows]


def make_order(api: Any, address: Any = None, **subscription: Any) -> Any:
    """One paid order (the first of its charge): see ``make_orders``."""
    return make_orders(api, address, **subscription)[0]


def make_metafield(api: Any, owner: Any = None, owner_resource: str = "customer", **overrides: Any) -> Any:
    """A metafield through the service, on ``owner`` (a record with an ``id``; a new customer
    when none is given; the store itself for ``owner_resource="store"``)."""
    from rebill.domain.metafield import service as metafield_service
    from rebill.domain.metafield.model import MetafieldCreate
    if owner_resource == "store":
        owner_id = api.store.id
    else:
        owner_id = (owner or make_customer(api)).id
    n = next(_seq)
    values = {"owner_resource": owner_resource, "owner_id": owner_id, "namespace": "loyalty", "key": f"key{n}",
              "value": "gold", "value_type": "string", **overrides}
    with api.db.write() as conn:
        return metafield_service.create(_unit(api, conn), MetafieldCreate(**values))


def concurrently(api: Any, requests: list[tuple[str, str, Any]], version: str | None = None) -> list[Any]:
    """Sends ``requests`` (method, path, body) at once through the ASGI app on one event loop,
    as a server with many connections does (in ``version``, else the api's); returns the
    responses in order."""
    import asyncio

    import httpx2 as httpx

    async def main() -> list[Any]:
        transport = httpx.ASGITransport(app=api.client.app)
        headers = {"X-Service-Access-Token": api.token, "X-Service-Version": version or api.version}
        async with httpx.AsyncClient(transport=transport, base_url="http://rebill.test", headers=headers) as http:
            return list(await asyncio.gather(*(http.request(m, p, json=b) for m, p, b in requests)))
    return asyncio.run(main())


def wait_for(check: Callable[[], object], seconds: float = 30.0) -> bool:
    """Whether ``check`` came true within ``seconds`` (a background job of a running app)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def while_row_locked(api: Any, table: Any, row_id: int, requests: list[tuple[str, str, Any]],
                     version: str | None = None) -> list[Any]:
    """PostgreSQL: the requests sent while another transaction holds ``table``'s row
    ``row_id`` under an update lock, each once the one before waits for a lock (so they take
    it in their order), released once all wait; their responses in order. A request that never
    waits fails the test: its write does not queue behind the row."""
    import threading

    from sqlalchemy import select, text

    def waiting() -> int:
        # This database's sessions only: others share the server, and a row lock is waited
        # for on a transaction id, which names no database.
        with api.db.read() as conn:
            return int(conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                         "AND wait_event_type = 'Lock'")).scalar_one())

    replies: dict[int, Any] = {}
    senders = []
    with api.db.write() as conn:
        conn.execute(select(table.c.id).where(table.c.id == row_id).with_for_update())
        for number, request in enumerate(requests):
            def send(number: int = number, request: tuple[str, str, Any] = request) -> None:
                replies[number] = concurrently(api, [request], version)[0]
            senders.append(threading.Thread(target=send, daemon=True))
            senders[-1].start()
            deadline = time.monotonic() + 20
            while waiting() < number + 1:
                assert time.monotonic() < deadline, f"request {number} never waited for the lock"
                time.sleep(0.02)
    for sender in senders:
        sender.join(30)
    return [replies[n] for n in range(len(requests))]


@contextmanager
def key_taken_over(api: Any, taken: datetime) -> Iterator[None]:
    """Runs the block as a request whose Idempotency-Key it took at ``taken`` and a repeat took
    over a minute later (its process was stopped): its recording units are refused."""
    from rebill.api import idempotency
    from rebill.domain.unit import REQUEST_KEY
    from rebill.models import tokens
    with api.db.read() as conn:
        token_id = conn.execute(select(tokens.c.id).where(tokens.c.store_id == api.store.id)
                                .order_by(tokens.c.id)).scalars().first()
    owner = (api.store.id, token_id, f"taken-over-{next(_seq)}")
    assert idempotency.begin(api.db, *owner, "print", taken) is None
    assert idempotency.begin(api.db, *owner, "print", taken + 2 * idempotency.ABANDONED) is None  # the repeat's
    marked = REQUEST_KEY.set((*owner, taken))
    try:
        yield
    finally:
        REQUEST_KEY.reset(marked)
