"""The event log, 2021-11 (03-real-fields "event (2021-11)", issue 14): every recorded change
of the store, newest first, with who made it and what it changed; scope `read_events`."""

from __future__ import annotations

from rebill.domain.event import service

from ..call import Call, Reply
from ..declared import one, page
from ..routing import Endpoints

endpoints = Endpoints()
READ = "read_events"


@endpoints.get("/events", scope=READ, versions=("2021-11",), reply=page("events"))
def list_events(call: Call) -> Reply:
    query = call.list_query("events")
    with call.read() as unit:
        return call.page("events", service.list_page(unit, query), unit, query)


@endpoints.get("/events/{event_id:id}", scope=READ, versions=("2021-11",), reply=one("event"))
def get_event(call: Call) -> Reply:
    with call.read() as unit:
        return call.one("event", service.get(unit, call.path["event_id"]))
