"""Review of metafields, payment methods, orders and the test clock against the spec
(decisions §6.11, §6.12, §7.2, §7.6): each test holds one discrepancy found and fixed. Both
databases (the `api` fixture)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_metafield,
    make_onetime,
    make_payment_method,
)


def _today(api) -> date:
    return date.fromisoformat(api.post("/store/clock/advance", json={"days": 1}).json()["store_clock"]["today"])


# Test clock: a null beside the field that was given is no value (decisions §6.12) ---------------

@pytest.mark.parametrize("body", [{"days": 2, "to": None}, {"to": None, "days": 2}])
def test_a_null_to_beside_days_moves_the_clock_by_the_days(api, body):
    before = _today(api)
    reply = api.post("/store/clock/advance", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["store_clock"]["today"] == (before + timedelta(days=2)).isoformat()


def test_a_null_days_beside_to_moves_the_clock_to_the_date(api):
    target = (_today(api) + timedelta(days=5)).isoformat()
    reply = api.post("/store/clock/advance", json={"days": None, "to": target})
    assert reply.status_code == 200, reply.text
    assert reply.json()["store_clock"]["today"] == target


@pytest.mark.parametrize("body", [{"days": None}, {"to": None}, {"days": None, "to": None}])
def test_nulls_alone_still_ask_for_days_or_to(api, body):
    reply = api.post("/store/clock/advance", json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json() == {"errors": {"days": ["is required"]}}


# Metafields: a move takes the new owner's locks before the metafield's row (decisions §7.6) ---

def _race(api, database, monkeypatch, move):
    """An address delete holds its address, then pauses before it deletes the metafields of
    what goes with it; meanwhile ``move`` (a metafield update) runs. Returns what each side
    raised (None when it succeeded)."""
    import threading
    import time

    from rebill.domain.address import service as address_service
    from rebill.domain.unit import Unit
    if database.dialect != "postgresql":
        pytest.skip("row locks: PostgreSQL only (SQLite serializes writers)")
    holding = threading.Event()
    real = address_service.charges.delete_many

    def delete_slowly(conn, store_id, ids):
        holding.set()
        time.sleep(0.5)  # the update below arrives now
        return real(conn, store_id, ids)

    monkeypatch.setattr(address_service.charges, "delete_many", delete_slowly)
    outcome: dict[str, Any] = {}

    def run(name, work):
        try:
            with api.db.write() as conn:
                work(Unit(conn, api.store, api.clock.now()))
            outcome[name] = None
        except Exception as exc:  # noqa: BLE001 - what each side raised is the result
            outcome[name] = exc

    def delete():
        run("delete", lambda unit: address_service.delete(unit, move["address"]))

    def update():
        holding.wait(timeout=10)
        run("update", move["update"])

    threads = [threading.Thread(target=delete), threading.Thread(target=update)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcome


def test_moving_a_metafield_while_its_address_is_deleted_never_deadlocks(api, database, monkeypatch):
    from rebill.domain.metafield import service as metafield_service
    from rebill.domain.metafield.model import MetafieldUpdate
    from rebill.errors import NotFound, ValidationFailed
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = make_address(api, customer)
    make_onetime(api, address)
    [charge] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    metafield = make_metafield(api, address, owner_resource="address")
    outcome = _race(api, database, monkeypatch, {
        "address": address.id,
        "update": lambda unit: metafield_service.update(
            unit, metafield.id, MetafieldUpdate(owner_resource="charge", owner_id=charge.id))})
    assert outcome["delete"] is None, outcome
    assert isinstance(outcome["update"], (NotFound, ValidationFailed)), outcome
    assert api.get(f"/metafields/{metafield.id}").status_code == 404
    assert api.get(f"/addresses/{address.id}").status_code == 404


def test_a_metafield_created_on_a_queued_charge_while_its_address_is_deleted_is_refused_not_orphaned(
        api, database, monkeypatch):
    from rebill.domain.metafield import service as metafield_service
    from rebill.domain.metafield.model import MetafieldCreate
    from rebill.errors import ValidationFailed
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = make_address(api, customer)
    make_onetime(api, address)
    [charge] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    outcome = _race(api, database, monkeypatch, {
        "address": address.id,
        "update": lambda unit: metafield_service.create(unit, MetafieldCreate(
            owner_resource="charge", owner_id=charge.id, namespace="n", key="k", value="v", value_type="string"))})
    assert outcome["delete"] is None, outcome
    assert isinstance(outcome["update"], ValidationFailed), outcome
    assert outcome["update"].errors == {"owner_id": ["charge not found"]}
    listed = api.get("/metafields", params={"owner_resource": "charge", "owner_id": charge.id}).json()
    assert listed["metafields"] == []
