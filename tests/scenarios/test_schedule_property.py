"""Property: after any sequence of subscription, one-time, skip, date and address operations,
the stored queued and skipped charges equal a plan made from scratch (design guide)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rebill.domain.address import service as address_service
from rebill.domain.address.model import AddressUpdate
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.domain.charge import repository as charge_repo
from rebill.domain.charge import service as charge_service
from rebill.domain.store import rates
from rebill.domain.subscription import lifecycle, onetimes, service
from rebill.domain.subscription.model import ONETIME, OnetimeCreate, SubscriptionCreate, SubscriptionUpdate
from rebill.domain.unit import Unit
from rebill.errors import ServiceError
from tests.builders import make_address, make_customer
from tests.scenarios.conftest import assert_schedule_consistent

OUTCOMES: dict[str, int] = {}
DAYS = st.integers(min_value=0, max_value=60)
PICK = st.integers(min_value=0, max_value=1000)
OPS = st.one_of(
    st.tuples(st.just("subscribe"), PICK, DAYS, st.sampled_from(["day", "week", "month"]),
              st.integers(1, 3), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("onetime"), PICK, DAYS),
    st.tuples(st.just("quantity"), PICK, st.integers(1, 5), st.booleans()),
    st.tuples(st.just("next_date"), PICK, DAYS),
    st.tuples(st.just("cancel"), PICK),
    st.tuples(st.just("activate"), PICK),
    st.tuples(st.just("move"), PICK, PICK),
    st.tuples(st.just("delete"), PICK),
    st.tuples(st.just("skip"), PICK, st.booleans()),
    st.tuples(st.just("unskip"), PICK),
    st.tuples(st.just("charge_date"), PICK, DAYS),
    st.tuples(st.just("address"), PICK, st.sampled_from([None, "2", "7.5"])),
    st.tuples(st.just("rates"), st.sampled_from(["0", "0.05", "0.0725"]), st.booleans()),
    st.tuples(st.just("advance"), st.integers(1, 20)),
)


def _pick(rows: list[Any], n: int) -> Any:
    return rows[n % len(rows)] if rows else None


def _apply(api: Any, state: dict[str, Any], op: tuple[Any, ...]) -> None:
    kind, today = op[0], api.clock.now().date()
    with api.db.write() as conn:
        unit = Unit(conn, api.store, api.clock.now())
        addresses, items = state["addresses"], state["items"]
        queued = charge_repo.of_addresses(conn, api.store.id, [a.id for a in addresses], ("queued",))
        skipped = charge_repo.of_addresses(conn, api.store.id, [a.id for a in addresses], ("skipped",))
        if kind == "subscribe":
            _, n, days, unit_name, order, times, prepaid = op
            made = service.create(unit, SubscriptionCreate(
                address_id=_pick(addresses, n).id, product_title="Thing", price=Decimal("9.99"),
                quantity=1, next_charge_scheduled_at=today + timedelta(days=days),
                order_interval_unit=unit_name, order_interval_frequency=order,
                charge_interval_frequency=order * (times if prepaid else 1)))
            items.append((made.id, "subscription"))
        elif kind == "onetime":
            made = onetimes.create(unit, OnetimeCreate(address_id=_pick(addresses, op[1]).id, product_title="Mug",
                                                      price=Decimal("3.10"),
                                                      next_charge_scheduled_at=today + timedelta(days=op[2])))
            items.append((made.id, ONETIME))
        elif not items and kind in ("quantity", "next_date", "cancel", "activate", "move", "delete"):
            return
        elif kind == "quantity":
            ident, item_kind = _pick(items, op[1])
            if item_kind == "subscription":
                service.update(unit, ident, SubscriptionUpdate(quantity=op[2], commit=op[3]))
        elif kind == "next_date":
            ident, item_kind = _pick(items, op[1])
            if item_kind == "subscription":
                lifecycle.set_next_charge_date(unit, ident, today + timedelta(days=op[2]))
        elif kind == "cancel":
            ident, item_kind = _pick(items, op[1])
            if item_kind == "subscription":
                lifecycle.cancel(unit, ident, "because", None)
        elif kind == "activate":
            ident, item_kind = _pick(items, op[1])
            if item_kind == "subscription":
                lifecycle.activate(unit, ident)
        elif kind == "move":
            ident, item_kind = _pick(items, op[1])
            if item_kind == "subscription":
                lifecycle.change_address(unit, ident, _pick(addresses, op[2]).id, None)
        elif kind == "delete":
            ident, item_kind = _pick(items, op[1])
            service.delete(unit, ident, item_kind)
            items.remove((ident, item_kind))
        elif kind == "skip" and queued:
            charge = _pick(queued, op[1])
            chosen = charge.purchase_item_ids[:1] if op[2] else None
            charge_service.skip(unit, charge.id, chosen)
        elif kind == "unskip" and skipped:
            charge_service.unskip(unit, _pick(skipped, op[1]).id, None)
        elif kind == "charge_date" and queued:
            charge_service.change_date(unit, _pick(queued, op[1]).id, today + timedelta(days=op[2]))
        elif kind == "address":
            lines = None if op[2] is None else [{"code": "x", "price": Decimal(op[2]), "title": "X"}]
            address_service.update(unit, OfflineZipVerifier(), _pick(addresses, op[1]).id,
                                   AddressUpdate(shipping_lines_override=lines))
        elif kind == "rates":
            rates.update_rates(conn, unit.now, api.store, tax_rates=[{"country_code": "US", "rate": op[1]}],
                               taxes_included=op[2])
        elif kind == "advance":
            api.clock.advance(days=op[1])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          database=None)
@given(ops=st.lists(OPS, min_size=1, max_size=14))
def test_queued_charges_always_equal_a_plan_from_scratch(api, ops):
    before = api.clock.now()
    store_api = api.other_store()
    customer = make_customer(store_api)
    state = {"addresses": [make_address(store_api, customer), make_address(store_api, customer,
                                                                            address1="1 Main St")], "items": []}
    try:
        for op in ops:
            try:
                _apply(store_api, state, op)
                OUTCOMES["done"] = OUTCOMES.get("done", 0) + 1
            except ServiceError:
                OUTCOMES["refused"] = OUTCOMES.get("refused", 0) + 1  # a refused operation rolled back
            if op[0] == "advance" or op[0] == "quantity":
                store_api.clock.advance(seconds=5)
                from rebill.jobs.regenerate import run_due
                run_due(store_api.db, store_api.clock, store_id=store_api.store.id)
            assert_schedule_consistent(store_api, *(a.id for a in state["addresses"]))
    finally:
        api.clock.set(before)


def test_most_generated_operations_were_carried_out():
    """Runs after the property test (same file, same worker): it must have exercised the
    schedule, not only been refused."""
    if OUTCOMES:
        assert OUTCOMES.get("done", 0) > OUTCOMES.get("refused", 0), OUTCOMES


def test_the_property_test_can_see_a_charge_that_disagrees(api):
    """The audit is not blind: a charge edited by hand is reported."""
    from sqlalchemy import update

    from rebill.models import charges
    from tests.builders import make_subscription
    address = make_address(api)
    make_subscription(api, address)
    with api.db.write() as conn:
        conn.execute(update(charges).where(charges.c.address_id == address.id).values(total_price=Decimal("1")))
    try:
        assert_schedule_consistent(api, address.id)
    except AssertionError as exc:
        assert "total_price" in str(exc)
    else:
        raise AssertionError("the audit missed a hand-edited charge")
