"""What an async batch task is: a call of one endpoint, made without HTTP (decisions §7.7,
issue 15).

Each batch type names the operation of the route table that its tasks call, so a task goes
the one way through the code a request goes: the endpoint's own handler parses the body with
the batch's version schema, calls the service and renders the reply, or raises the error the
endpoint would answer. ``TaskCall`` is the ``Call`` it gets: the task's body, its path ids,
and units of work on the connection of the batch job's transaction (jobs/batches.py), whose
changes are the task's alone inside a savepoint.

A task body is the endpoint's body plus the path's ids under their names (decisions §7.7 item
11): `POST /addresses/{address_id}/apply_discount` is `{"address_id": 5, "discount_id": 9}`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from rebill.domain.store.model import Store
from rebill.domain.unit import Unit
from rebill.errors import Forbidden, ServiceError, ValidationFailed

from .call import Call, Reply, Services
from .contract import Version
from .fields import Field, Schema
from .resources import charges, discounts, onetimes, plans, products, subscriptions
from .routing import Operation

logger = logging.getLogger("rebill.batches")
HEAD, OLD = "2021-11", "2021-01"


@dataclass(frozen=True)
class BatchType:
    name: str
    operation: Operation
    # The path's ids, as the body names them (decisions §7.7 item 11) and as the route does.
    ids: tuple[tuple[str, str], ...] = ()
    # Its use case ignores what a replan returns, its reply shows no charge, and it changes no
    # address: a chunk of its tasks replans their addresses once, at the end, taking each
    # address as a task locked and read it (jobs/batches.py).
    replan_later: bool = False

    @property
    def scopes(self) -> tuple[str, ...]:
        """What a request to its endpoint needs (the endpoint's scope and any it also needs)."""
        return self.operation.scopes

    @property
    def read_scopes(self) -> tuple[str, ...]:
        """What reading its endpoint's answers needs: its tasks' bodies and results show the
        records the endpoint wrote (`read_discounts` for a `discount_create` batch)."""
        return tuple("read_" + scope.removeprefix("write_") for scope in self.scopes)


def _operation(module: Any, method: str, path: str) -> Operation:
    for op in module.endpoints.operations:
        if op.method == method and op.path == path:
            return op
    raise LookupError(f"no operation {method} {path}")


def _types() -> dict[str, dict[str, BatchType]]:
    discount = (
        BatchType("discount_create", _operation(discounts, "POST", "/discounts")),
        BatchType("discount_update", _operation(discounts, "PUT", "/discounts/{discount_id:id}"),
                  (("discount_id", "discount_id"),)),
        BatchType("discount_delete", _operation(discounts, "DELETE", "/discounts/{discount_id:id}"),
                  (("discount_id", "discount_id"),)),
        BatchType("onetime_delete", _operation(onetimes, "DELETE", "/onetimes/{onetime_id:id}"),
                  (("onetime_id", "onetime_id"),), replan_later=True),
    )
    head = (
        *discount,
        BatchType("onetime_create", _operation(onetimes, "POST", "/onetimes"), replan_later=True),
        BatchType("bulk_plans_create", _operation(plans, "POST", "/plans/bulk_create")),
        BatchType("bulk_plans_update", _operation(plans, "PUT", "/plans/bulk_update")),
        # No route: the specification has no bulk delete of plans (docs/api-choices.md).
        BatchType("bulk_plans_delete", Operation("DELETE", "/plans/bulk_delete", plans.WRITE, frozenset({HEAD}),
                                                 plans.bulk_delete_plans)),
    )
    address = (("address_id", "address_id"),)
    old = (
        *discount,
        BatchType("onetime_create", _operation(onetimes, "POST", "/addresses/{address_id:id}/onetimes"), address,
                  replan_later=True),
        BatchType("address_discount_apply",
                  _operation(discounts, "POST", "/addresses/{address_id:id}/apply_discount"), address),
        BatchType("address_discount_remove",
                  _operation(discounts, "POST", "/addresses/{address_id:id}/remove_discount"), address),
        BatchType("change_next_charge_date",
                  _operation(charges, "POST", "/charges/{charge_id:id}/change_next_charge_date"),
                  (("charge_id", "charge_id"),)),
        BatchType("product_create", _operation(products, "POST", "/products")),
        BatchType("product_update", _operation(products, "PUT", "/products/{product_key}"),
                  (("product_id", "product_key"),)),
        BatchType("product_delete", _operation(products, "DELETE", "/products/{product_key}"),
                  (("product_id", "product_key"),)),
        BatchType("bulk_subscriptions_create",
                  _operation(subscriptions, "POST", "/addresses/{address_id:id}/subscriptions-bulk"), address),
        BatchType("bulk_subscriptions_update",
                  _operation(subscriptions, "PUT", "/addresses/{address_id:id}/subscriptions-bulk"), address),
        BatchType("bulk_subscriptions_delete",
                  _operation(subscriptions, "DELETE", "/addresses/{address_id:id}/subscriptions-bulk"), address),
        BatchType("subscription_cancel",
                  _operation(subscriptions, "POST", "/subscriptions/{subscription_id:id}/cancel"),
                  (("subscription_id", "subscription_id"),)),
    )
    found = {HEAD: {t.name: t for t in head}, OLD: {t.name: t for t in old}}
    for version, kinds in found.items():
        for kind in kinds.values():
            assert version in kind.operation.versions, f"{kind.name} calls no {version} endpoint"
    return found


# NOTE: issue 15, the batch types of each version.
TYPES = _types()


def batch_type(version: str, name: str) -> BatchType:
    """The type a batch of ``version`` may have, or 422 naming `batch_type`."""
    kind = TYPES[version].get(name.strip().lower())
    if kind is None:
        raise ValidationFailed.field("batch_type", f"must be one of: {', '.join(sorted(TYPES[version]))}")
    return kind


def of(version: str, name: str) -> BatchType:
    return TYPES[version][name]


def require_scope(call: Call, kind: BatchType, *, reading: bool = False) -> None:
    """NOTE: a batch needs `write_batches` and the scope of the endpoint its tasks call
    (docs/scopes.md): a batch cannot do what its token could not do itself. Its tasks are read
    with `read_batches` and the read half of that scope: a task shows the body sent and the
    record answered (found by an audit: a `read_batches` token read new discount codes and
    customers' e-mails from the tasks' results)."""
    for scope in kind.read_scopes if reading else kind.scopes:
        if not call.token.allows(scope):
            raise Forbidden(f"This token lacks the scope this batch type needs: {scope}")


class TaskUnit(Unit):
    """A unit on the batch job's connection that leaves the events it records in the
    connection's buffer: the job flushes them with the task's result, or drops them when the
    task fails (jobs/batches.py)."""

    __slots__ = ()

    def __exit__(self, *exc: Any) -> None:
        return None


class TaskCall(Call):
    """The call a handler gets for a task: ``body`` and ``path`` from the task's body, units
    of work on the job's connection, the time of the chunk, no query string."""

    __slots__ = ("conn", "at", "token_id", "replans")

    def __init__(self, version: Version, store: Store, services: Services, conn: Connection, at: datetime,
                 token_id: int | None, body: dict[str, Any], path: dict[str, Any],
                 replans: dict[int, Any] | None) -> None:
        self.scope = {"path_params": path, "query_string": b""}
        self.receive = None
        self.version = version
        self.store = store
        self.token = None  # type: ignore[assignment]  # tasks check no scopes: their batch did
        self.services = services
        self.body = body
        self.path = path
        self.on_loop = False
        self.wrote = False
        self.cursor_params = {}
        self._params = {}
        self._request = None
        self.conn, self.at, self.token_id, self.replans = conn, at, token_id, replans

    def read(self) -> Unit:
        return TaskUnit(self.conn, self.store, self.at, origin="batch", token_id=self.token_id)

    def write(self) -> Unit:
        unit = TaskUnit(self.conn, self.store, self.at, origin="batch", token_id=self.token_id)
        unit.replans = self.replans
        return unit

    def now(self) -> datetime:
        return self.at


_schemas: dict[tuple[tuple[str, str], ...], Schema] = {}


def _path(kind: BatchType, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The endpoint's body and path parameters of a task body; 422 naming a path id that is
    missing or no integer (as a body's id would)."""
    if not kind.ids:
        return body, {}
    schema = _schemas.get(kind.ids)
    if schema is None:
        schema = _schemas[kind.ids] = Schema(*(Field(name, "int", required=True, nullable=False)
                                                for name, _ in kind.ids))
    clean = schema.parse(body)
    rest = {k: v for k, v in body.items() if k not in clean}
    # `{product_key}` is a string route parameter: 2021-01 reads it as our integer id.
    path = {param: clean[name] if param.endswith("_id") else str(clean[name]) for name, param in kind.ids}
    return rest, path


def run(kind: BatchType, call: TaskCall) -> tuple[int, Any]:
    """The endpoint's answer to the task: (status, body). A ServiceError is answered as the
    endpoint answers it (http/render.py), in the batch's version; anything else propagates
    (the job rolls the task back and records a 500)."""
    try:
        if kind.operation.store_check is not None:
            kind.operation.store_check(call.store)  # what the router checks before the body
        call.body, call.path = _path(kind, call.body)
        call.scope["path_params"] = call.path
        reply: Reply = kind.operation.handler(call)
    except ServiceError as exc:
        if isinstance(exc, ValidationFailed):
            # Domain rules name head fields; the batch's version says them in its own names.
            exc.errors = kind.operation.said_in(call.version, exc.errors, call.body)
        return exc.status, {"errors": exc.errors}
    return reply.status, reply.body
