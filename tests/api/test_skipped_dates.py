"""A next date never lands on a date the subscription has skipped (decisions §5.11, §5.12;
found by conformance audits): moving a charge onto such a date answered 500, setting a
subscription's next date onto it showed a date with no queued charge, and a renewal whose next
cadence date was skipped ahead showed the skipped date instead of the date charged next."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_charges import V01, V11, days, move, only, stored, weekly
from tests.api.test_charges_skip import next_date, schedule, skip
from tests.builders import make_address


def _skipped_then_queued(api: Any) -> tuple[Any, Any, Any]:
    """A weekly subscription whose charge in 7 days is skipped, so the next is in 14."""
    address = make_address(api)
    sub = weekly(api, address)
    assert skip(api, only(api, address.id).id).status_code == 200
    return address, sub, only(api, address.id)


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_moving_a_charge_onto_a_date_its_items_skipped_is_refused(api: Any, method: str) -> None:
    address, sub, queued = _skipped_then_queued(api)
    before = schedule(api, address.id)
    reply = move(api, queued.id, days(api, 7), method)
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"next_charge_date": [
        f"purchase item {sub.id} is skipped on {days(api, 7)}: unskip that charge instead"]}
    assert schedule(api, address.id) == before  # nothing changed


@pytest.mark.parametrize("version", [V01, V11])
def test_a_next_date_onto_a_skipped_date_is_refused_in_every_form(api: Any, version: str) -> None:
    address, sub, _ = _skipped_then_queued(api)
    when = days(api, 7).isoformat()
    expected = f"purchase item {sub.id} is skipped on {when}: unskip that charge instead"
    reply = api.post(f"/subscriptions/{sub.id}/set_next_charge_date", json={"date": when}, version=version)
    assert (reply.status_code, reply.json()) == (422, {"errors": {"date": [expected]}})
    reply = api.put(f"/subscriptions/{sub.id}", json={"next_charge_scheduled_at": when}, version=version)
    assert (reply.status_code, reply.json()) == (422, {"errors": {"next_charge_scheduled_at": [expected]}})
    assert next_date(api, sub.id) == days(api, 14).isoformat()
    # A date not skipped is still fine.
    assert api.post(f"/subscriptions/{sub.id}/set_next_charge_date",
                    json={"date": days(api, 10).isoformat()}).status_code == 200


def test_a_whole_skip_keeps_its_charge_id_onto_a_date_already_partly_skipped(api: Any) -> None:
    """decisions §5.16, "skipping every item keeps the charge's id": also when part of the
    date was skipped before (that skipped charge is merged into this one)."""
    from tests.api.test_charges_skip import items_body
    from tests.builders import make_onetime

    address = make_address(api)
    sub = weekly(api, address)
    onetime = make_onetime(api, address, next_charge_scheduled_at=days(api, 7))
    queued = only(api, address.id)
    partial = skip(api, queued.id, items_body(V11, [sub.id]), version=V11)
    assert partial.status_code == 200, partial.text
    earlier = partial.json()["charge"]["id"]
    # The one-time item stays on the queued charge, which keeps its id.
    assert earlier != queued.id and queued.id in {c.id for c in stored(api, address.id, "queued")}
    whole = skip(api, queued.id, version=V11)
    assert whole.status_code == 200, whole.text
    body = whole.json()["charge"]
    assert (body["id"], body["status"]) == (queued.id, "skipped")
    assert sorted(line["purchase_item_id"] for line in body["line_items"]) == sorted([sub.id, onetime.id])
    assert api.get(f"/charges/{earlier}").status_code == 404
