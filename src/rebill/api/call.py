"""One API call as a handler sees it: who asks (store, token), in which version, with which
body and parameters, plus the ways to open a unit of work and to shape the reply.

Handlers are plain functions ``(Call) -> Reply``. On PostgreSQL they run in a worker thread,
so the network round trips never stall the event loop; on SQLite they run on the loop itself,
reads on one held connection (``Database.read_on_loop``) and writes in the loop's open group
(``db/loop_writer.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import msgspec
from sqlalchemy import Connection
from starlette.requests import Request
from starlette.types import Receive, Scope

from rebill.clock import Clock
from rebill.db.engine import Database, HeldRead
from rebill.domain.address.verifier import AddressVerifier
from rebill.domain.listing import ListQuery, PageResult
from rebill.domain.payment.gateway import Gateway
from rebill.domain.store import clock as store_clock
from rebill.domain.store.model import Store, Token
from rebill.domain.unit import Unit
from rebill.errors import ValidationFailed
from rebill.http.context import RequestContext

from . import includes
from .contract import ListContract, Version
from .listing import cursor_key, encode_cursor, link_header, parse_filters, parse_include, parse_list

T = TypeVar("T")


def convert(clean: dict[str, Any], cls: type[T]) -> T:
    """A parsed body as a domain command. The schema has checked every field; a value the
    command still cannot take (a null where the command has none) is the caller's error, named."""
    try:
        return msgspec.convert(clean, cls)
    except msgspec.ValidationError as exc:
        # msgspec names the field as "... - at `$.name`": the name without the backquote.
        path = str(exc).rpartition("$.")[2].split(".")[0].split("[")[0].rstrip("`") or "body"
        raise ValidationFailed.field(path, "is invalid" if "null" not in str(exc) else "cannot be null") from None


def query_items(query_string: bytes) -> list[tuple[str, str]]:
    """The query's (name, value) pairs, decoded as Starlette's ``query_params`` decodes them
    (`+` a space, blank values kept), except that a value or name whose bytes are not UTF-8 is
    refused, 422 `"is not valid UTF-8"` as in a body (found by an audit: `?email=a%FFZZ` became
    `a\ufffdZZ` and matched another customer's e-mail)."""
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, errors="surrogateescape")
    bad = {_shown(name): ["is not valid UTF-8"] for name, value in pairs if _escaped(name) or _escaped(value)}
    if bad:
        raise ValidationFailed(bad)
    return pairs


def _escaped(text: str) -> bool:
    """Whether ``surrogateescape`` kept bytes of ``text`` that UTF-8 does not decode."""
    return not text.isascii() and any("\udc80" <= ch <= "\udcff" for ch in text)


def _shown(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@dataclass(frozen=True)
class Services:
    """What handlers may use besides the request, chosen once per app by settings."""

    db: Database
    clock: Clock
    verifier: AddressVerifier
    gateway: Gateway
    # REBILL_WEBHOOK_PRIVATE_ADDRESSES: which stores' webhooks may reach non-public networks.
    webhook_private: str = "sandbox"


@dataclass(slots=True)
class Reply:
    body: Any
    status: int = 200
    headers: dict[str, str] | None = None


class Call:
    __slots__ = ("scope", "receive", "version", "store", "token", "services", "body", "path", "on_loop", "wrote",
                 "held", "cursor_params", "_params", "_request")

    def __init__(self, scope: Scope, receive: Receive, ctx: RequestContext, services: Services) -> None:
        self.scope = scope
        self.receive = receive
        self.version: Version = ctx.version
        self.store: Store = ctx.store
        self.token: Token = ctx.token
        self.services = services
        self.body: dict[str, Any] = {}  # the JSON object of a POST or PUT, set by the dispatcher
        self.path: dict[str, Any] = scope["path_params"]
        self.on_loop = False  # set by the dispatcher when the handler runs on the event loop
        self.wrote = False  # set by write() on the loop: the reply waits for the group's COMMIT
        # PostgreSQL reads on the loop: the async read connection, as the greenlet sees it.
        self.held: Connection | None = None
        # The list parameters a cursor carries forward: set by list_query, used by page.
        self.cursor_params: dict[str, str] = {}
        self._params: dict[str, str] | None = None
        self._request: Request | None = None

    @property
    def request(self) -> Request:
        """Starlette's view of the request, made on first use (a single read never needs it)."""
        if self._request is None:
            self._request = Request(self.scope, self.receive)
        return self._request

    @property
    def params(self) -> dict[str, str]:
        """Query parameters, parsed on first use (most calls never read them)."""
        if self._params is None:
            self._params = {}
            if self.scope["query_string"]:
                # A parameter sent twice is its values joined by commas, as the lists the filters
                # take (`ids=1,2`) and as a header sent twice (found by an audit: the last one won,
                # so `status=QUEUED&status=ERROR` counted the errors alone). A parameter of one
                # value sent twice with two values is then a value it refuses (422).
                values: dict[str, dict[str, None]] = {}
                for name, value in query_items(self.scope["query_string"]):
                    values.setdefault(name, {})[value] = None
                self._params = {name: ",".join(each) for name, each in values.items()}
        return self._params

    # Units of work -----------------------------------------------------------------

    def read(self) -> Unit:
        """``with call.read() as unit``: the transaction ends with the block."""
        if self.held is not None:
            return self._unit(HeldRead(self.held))
        db = self.services.db
        return self._unit(db.read_on_loop() if self.on_loop else db.read())

    def write(self) -> Unit:
        if self.held is not None:
            # A GET that writes (rare): its blocking write must not run on the event loop. It
            # has changed nothing yet; the dispatcher runs it again in a worker thread.
            raise NeedsThread()
        db = self.services.db
        if self.on_loop:
            # The dispatcher answers only once this write's transaction has committed.
            unit = self._unit(db.loop_writer.open(), writes=True)  # type: ignore[union-attr]
            self.wrote = True
            return unit
        return self._unit(db.write(), writes=True)

    def now(self) -> datetime:
        """The store's time: the real one, or a sandbox store's test clock."""
        return store_clock.clock_for(self.store, self.services.clock.now)()

    def _unit(self, opened: AbstractContextManager[Connection], *, writes: bool = False) -> Unit:
        now = store_clock.clock_for(self.store, self.services.clock.now)
        return Unit(opened.__enter__(), self.store, now, opened.__exit__, writes=writes)

    # Requests ----------------------------------------------------------------------

    def command(self, schema: str, cls: type[T], *, partial: bool = False, **extra: Any) -> T:
        """The body, validated by this version's schema, as a domain command."""
        return self.command_apart(schema, cls, (), partial=partial, **extra)[0]

    def command_apart(self, schema: str, cls: type[T], apart: Iterable[str], *, partial: bool = False,
                      **extra: Any) -> tuple[T, dict[str, Any]]:
        """``command``, with the validated fields named in ``apart`` taken out of it: those the
        body sent, by name (fields the schema knows and the command does not)."""
        clean = self.version.schemas[schema].parse(self.body, partial=partial)
        taken = {name: clean.pop(name) for name in apart if name in clean}
        clean.update(extra)
        return convert(clean, cls), taken

    def contract(self, plural: str) -> ListContract:
        return self.version.lists[plural]

    def cursor_key(self, plural: str) -> str:
        return cursor_key(plural, self.version.name, self.scope["path"])

    def list_query(self, plural: str) -> ListQuery:
        query, self.cursor_params = parse_list(self.contract(plural), self.params, self.cursor_key(plural))
        includes.check_available(self.contract(plural).kind, query.include)
        return query

    def include(self, plural: str) -> tuple[str, ...]:
        if not self.params:
            return ()
        contract = self.contract(plural)
        names = parse_include(contract, self.params.get("include"))
        includes.check_available(contract.kind, names)
        return names

    # Replies -----------------------------------------------------------------------

    def render(self, kind: str, items: list[Any], unit: Unit | None = None,
               include: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        return includes.embed(self.version.serialize, unit, kind, items, include)

    def one(self, kind: str, obj: Any, unit: Unit | None = None, *, include: tuple[str, ...] = (),
            status: int = 200) -> Reply:
        if not include:
            return Reply({kind: self.version.serialize(kind, obj)}, status)
        return Reply({kind: self.render(kind, [obj], unit, include)[0]}, status)

    def created(self, kind: str, obj: Any) -> Reply:
        return self.one(kind, obj, status=self.version.created_status)

    def deleted(self) -> Reply:
        status = self.version.deleted_status
        return Reply(None if status == 204 else {}, status)

    def page(self, plural: str, result: PageResult, unit: Unit, query: ListQuery) -> Reply:
        contract = self.contract(plural)
        records = self.render(contract.kind, result.rows, unit, query.include)
        key = self.cursor_key(plural)
        next_cursor = encode_cursor(key, self.cursor_params, result.next) if result.next else None
        previous_cursor = encode_cursor(key, self.cursor_params, result.previous) if result.previous else None
        if self.version.cursor_in_body:
            return Reply({plural: records, "next_cursor": next_cursor, "previous_cursor": previous_cursor})
        # NOTE: spec 02 Cursor paging, "requests filtering by ids ... get none either": every
        # list's (found by an audit: only /charges and /products left it out); such a list pages
        # with `page`. /charges adds its own (created_at_min, updated_at_min), /products its
        # platform ids.
        links = [] if "ids" in query.filters else [
            (rel, c) for rel, c in (("next", next_cursor), ("previous", previous_cursor)) if c]
        url = self.request.url
        headers = {"Link": link_header(f"{url.scheme}://{url.netloc}{url.path}", query.limit, links)} if links else {}
        return Reply({plural: records}, headers=headers)

    def count_filters(self, plural: str) -> dict[str, Any]:
        contract = self.contract(plural)
        return parse_filters(contract.filters, self.params, allowed=contract.count_filters)


class NeedsThread(Exception):
    """Raised by ``Call.write`` in a read held on the event loop (api/routing.py)."""
