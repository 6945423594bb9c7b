"""Discounts told through HTTP while a sandbox store's clock moves (decisions §7.5, spec 02
Discount and its status table): durations, a code that ends mid-dunning, a fully disabled code
vanishing, once per customer, exact amounts on a multi-item charge, and uses counted exactly
once by parallel billing runs."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

from sqlalchemy import select, update

from rebill.models import discount_redemptions, payment_methods
from tests.api.test_charges_totals import set_rates
from tests.builders import (
    charges_of,
    make_address,
    make_customer,
    make_discount,
    make_onetime,
    make_subscription,
)
from tests.scenarios.conftest import advance as _advance
from tests.scenarios.conftest import assert_schedule_consistent
from tests.scenarios.conftest import subscriber as _subscriber
from tests.scenarios.test_billing_crash import _bill

V01 = "2021-01"


def _apply(api, address, discount_id):
    reply = api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    assert reply.status_code == 200, reply.text


def _times_used(api, discount_id):
    return api.get(f"/discounts/{discount_id}", version=V01).json()["discount"]["times_used"]


def test_a_usage_limit_code_on_a_monthly_subscription_stops_after_three_paid_charges(api, at):
    # NOTE: spec 02 duration usage_limit: the first use plus duration_usage_limit (2) re-applications.
    at(date(2027, 1, 20))
    discount_id = make_discount(api, duration="usage_limit", duration_usage_limit=2, value="10")
    address, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    _apply(api, address, discount_id)
    assert _advance(api, to="2027-07-15")["paid"] == 6
    paid = [(c.scheduled_at.month, c.total_discounts) for c in charges_of(api, address.id) if c.status == "success"]
    assert paid == [(2, Decimal("1.25")), (3, Decimal("1.25")), (4, Decimal("1.25")),
                    (5, Decimal("0.00")), (6, Decimal("0.00")), (7, Decimal("0.00"))]
    assert _times_used(api, discount_id) == 3
    [queued] = [c for c in charges_of(api, address.id) if c.status == "queued"]
    assert queued.discount_id is None and queued.total_price == Decimal("12.50")
    assert_schedule_consistent(api, address.id)


def test_a_code_that_ends_mid_dunning_stays_on_the_retried_charge_and_later_ones(api, at):
    at(date(2027, 1, 20))
    discount_id = make_discount(api, value="20", ends_at=datetime(2027, 2, 5, tzinfo=timezone.utc))
    address, _ = _subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    _apply(api, address, discount_id)
    assert _advance(api, to="2027-02-06")["failed"] == 2
    assert api.get(f"/discounts/{discount_id}").json()["discount"]["status"] == "disabled"
    with api.db.write() as conn:
        conn.execute(update(payment_methods).where(payment_methods.c.store_id == api.store.id)
                     .values(processor_payment_method_token="pm_new_card"))
    assert _advance(api, to="2027-03-02")["paid"] == 2  # the Feb 8 retry, then Mar 1
    paid = [c for c in charges_of(api, address.id) if c.status == "success"]
    assert [(c.scheduled_at, c.total_discounts) for c in paid] == [
        (date(2027, 2, 1), Decimal("2.50")), (date(2027, 3, 1), Decimal("2.50"))]
    assert _times_used(api, discount_id) == 2
    # Ended: no new application.
    other, _ = _subscriber(api)
    refused = api.post(f"/addresses/{other.id}/apply_discount", json={"discount_id": discount_id})
    assert refused.json() == {"errors": {"discount_id": ["discount has ended"]}}
    assert_schedule_consistent(api, address.id)


def test_a_fully_disabled_code_vanishes_from_queued_and_retried_charges(api, at):
    at(date(2027, 1, 20))
    discount_id = make_discount(api, value="20")
    failing, _ = _subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 2, 1))
    waiting, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 3, 1))
    for address in (failing, waiting):
        _apply(api, address, discount_id)
    assert _advance(api, to="2027-02-02")["failed"] == 2  # Feb 1 and its first retry
    [in_retry] = [c for c in charges_of(api, failing.id) if c.status == "error"]
    assert in_retry.total_discounts == Decimal("2.50")
    assert api.put(f"/discounts/{discount_id}", json={"status": "fully_disabled"}).status_code == 200
    for address in (failing, waiting):
        for charge in charges_of(api, address.id):
            assert charge.discount_id is None and charge.total_discounts == 0 and charge.discounts == []
    api.put(f"/discounts/{discount_id}", json={"status": "enabled"})
    _advance(api, to="2027-03-02")
    assert all(c.discount_id is None for a in (failing, waiting) for c in charges_of(api, a.id))
    assert_schedule_consistent(api, failing.id, waiting.id)


def test_a_once_per_customer_code_is_refused_on_the_second_address(api, at):
    at(date(2027, 1, 20))
    discount_id = make_discount(api, once_per_customer=True)
    customer = make_customer(api)
    first, _ = _subscriber(api, customer=customer, next_charge_scheduled_at=date(2027, 2, 1))
    _apply(api, first, discount_id)
    _advance(api, to="2027-02-02")
    api.post(f"/addresses/{first.id}/remove_discount", json={})
    second = make_address(api, customer)
    make_subscription(api, second)
    refused = api.post(f"/addresses/{second.id}/apply_discount", json={"discount_id": discount_id}, version=V01)
    assert refused.status_code == 422
    assert refused.json() == {"errors": {"discount_id": ["discount can be used once per customer"]}}


def _multi_item_charge(api, discount_id):
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00"}],
              tax=[{"country_code": "US", "rate": "0.0825", "title": "Sales tax"}])
    address = make_address(api)
    when = date(2027, 2, 1)
    make_subscription(api, address, price="12.50", next_charge_scheduled_at=when)
    make_subscription(api, address, price="4.00", quantity=3, next_charge_scheduled_at=when)
    make_onetime(api, address, price="7.99", next_charge_scheduled_at=when)
    _apply(api, address, discount_id)
    [charge] = charges_of(api, address.id)
    return charge


def test_a_percentage_discount_on_a_multi_item_charge_with_shipping_and_tax_is_exact(api, at):
    at(date(2027, 1, 20))
    charge = _multi_item_charge(api, make_discount(api, value="15"))
    # 32.49 x 15% = 4.8735 -> 4.87, shared 1.87 / 1.80 / 1.20; tax 8.25% per discounted line.
    assert [line["taxable_amount"] for line in charge.line_items] == ["10.63", "10.20", "6.79"]
    assert [line["tax_due"] for line in charge.line_items] == ["0.88", "0.84", "0.56"]
    assert (charge.subtotal_price, charge.total_discounts, charge.total_shipping, charge.total_tax,
            charge.total_price) == (Decimal("32.49"), Decimal("4.87"), Decimal("5.00"), Decimal("2.28"),
                                    Decimal("34.90"))
    body = api.get(f"/charges/{charge.id}", version=V01).json()["charge"]
    assert body["discount_codes"][0]["amount"] == "4.87" and body["total_price"] == "34.90"


def test_a_fixed_discount_on_a_multi_item_charge_with_shipping_and_tax_is_exact(api, at):
    at(date(2027, 1, 20))
    charge = _multi_item_charge(api, make_discount(api, discount_type="fixed_amount", value="5"))
    # 5.00 shared 1.92 / 1.85 / 1.23 (largest remainder); shipping untouched.
    assert [line["taxable_amount"] for line in charge.line_items] == ["10.58", "10.15", "6.76"]
    assert (charge.total_discounts, charge.total_tax, charge.total_price) == (
        Decimal("5.00"), Decimal("2.27"), Decimal("34.76"))
    body = api.get(f"/charges/{charge.id}").json()["charge"]
    assert body["discounts"][0]["value"] == "5.00" and body["total_discounts"] == "5.00"


def test_two_billing_runs_paying_at_once_use_a_usage_limit_1_code_once(api):
    discount_id = make_discount(api, usage_limit=1, duration="single_use")
    address, _ = _subscriber(api)
    _apply(api, address, discount_id)
    others = [_subscriber(api)[0] for _ in range(6)]
    runs = [_bill(api, stale="60"), _bill(api, stale="60")]
    for proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert _times_used(api, discount_id) == 1
    with api.db.read() as conn:
        used = conn.execute(select(discount_redemptions.c.charge_id).where(
            discount_redemptions.c.discount_id == discount_id)).all()
    assert len(used) == 1
    assert all(c.status == "success" for a in [address, *others] for c in charges_of(api, a.id)
               if c.status != "queued")


def test_a_run_killed_after_the_payment_is_finished_by_the_next_and_counts_the_use_once(api):
    discount_id = make_discount(api, duration="single_use")
    address, _ = _subscriber(api)
    _apply(api, address, discount_id)
    crashed = _bill(api, failpoint="billing.after_gateway")
    crashed.communicate(timeout=120)
    restarted = _bill(api)
    _, err = restarted.communicate(timeout=120)
    assert restarted.returncode == 0, err
    assert _times_used(api, discount_id) == 1


def test_discounts_in_a_currency_without_minor_units_round_to_whole_yen(api, at):
    at(date(2027, 1, 20))
    yen = api.other_store(currency="JPY")
    percentage, fixed = make_discount(yen, value="10"), make_discount(yen, discount_type="fixed_amount", value="300")
    totals = []
    for discount_id in (percentage, fixed):
        address = make_address(yen)
        make_subscription(yen, address, price="1005", next_charge_scheduled_at=date(2027, 2, 1))
        _apply(yen, address, discount_id)
        [charge] = charges_of(yen, address.id)
        totals.append((charge.currency, charge.total_discounts, charge.total_price))
        body = yen.get(f"/charges/{charge.id}").json()["charge"]
        assert body["total_discounts"] == str(charge.total_discounts)
        assert "." not in body["total_price"]
    # 1005 x 10% = 100.5, rounded half up once: 101.
    assert totals == [("JPY", Decimal("101"), Decimal("904")), ("JPY", Decimal("300"), Decimal("705"))]


def test_a_usage_limit_refuses_new_applications_only(api, at):
    """NOTE: decisions §7.5, `usage_limit` compares with `times_used` and refuses new
    applications only: the addresses that took the code before keep it on their charges."""
    at(date(2027, 1, 20))
    discount_id = make_discount(api, value="10", usage_limit=1)
    first, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    second, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    _apply(api, first, discount_id)
    _apply(api, second, discount_id)  # times_used is still 0: allowed
    _advance(api, days=12)
    paid = [c for a in (first, second) for c in charges_of(api, a.id) if c.status == "success"]
    assert [c.total_discounts for c in paid] == [Decimal("1.25")] * 2
    assert _times_used(api, discount_id) == 2  # past the limit: counting is not refusing
    queued = [c for a in (first, second) for c in charges_of(api, a.id) if c.status == "queued"]
    assert queued and all(c.total_discounts == Decimal("1.25") for c in queued)
    third, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 3, 1))
    refused = api.post(f"/addresses/{third.id}/apply_discount", json={"discount_id": discount_id})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == {"discount_id": ["discount has reached its usage limit"]}
    assert_schedule_consistent(api, first.id, second.id, third.id)


def test_two_processes_paying_two_charges_with_one_code_count_each_use_once(api):
    discount_id = make_discount(api, value="10", usage_limit=1)
    addresses = [_subscriber(api)[0] for _ in range(2)]
    for address in addresses:
        _apply(api, address, discount_id)
    runs = [_bill(api, stale="60"), _bill(api, stale="60")]
    for proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with api.db.read() as conn:
        used = conn.execute(select(discount_redemptions.c.charge_id).where(
            discount_redemptions.c.discount_id == discount_id)).scalars().all()
    first_charges = [min(charges_of(api, a.id), key=lambda c: c.scheduled_at) for a in addresses]
    # Each paid charge counted once, whichever run paid it, and no more than were paid.
    assert len(used) == len(set(used)) == _times_used(api, discount_id)
    assert {c.id for c in first_charges} <= set(used)
    assert all(c.status == "success" and c.total_discounts == Decimal("1.25") for c in first_charges)


def test_an_authorized_charge_counts_its_use_when_it_is_captured(api, at):
    at(date(2027, 1, 20))
    discount_id = make_discount(api, value="10", usage_limit=2)
    first, _ = _subscriber(api, token="authorize_only", next_charge_scheduled_at=date(2027, 2, 1))
    second, _ = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 3))
    _apply(api, first, discount_id)
    _apply(api, second, discount_id)
    _advance(api, days=14)  # Feb 1: authorized, not captured; Feb 3: paid
    [pending] = [c for c in charges_of(api, first.id) if c.status == "pending"]
    [paid] = [c for c in charges_of(api, second.id) if c.status == "success"]
    assert pending.total_discounts == paid.total_discounts == Decimal("1.25")
    assert _times_used(api, discount_id) == 1  # the authorized one counts when the capture succeeds


def test_a_code_applied_to_a_charge_goes_when_the_charge_is_regenerated_into_something_else(api, at):
    at(date(2027, 1, 20))
    discount_id = make_discount(api, value="10")
    address, subscription = _subscriber(api, next_charge_scheduled_at=date(2027, 2, 1))
    [charge] = charges_of(api, address.id)
    reply = api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})
    assert reply.status_code == 200, reply.text
    # A replan of the address that leaves the charge as it was keeps the code.
    make_onetime(api, address, next_charge_scheduled_at=date(2027, 3, 1))
    [kept] = [c for c in charges_of(api, address.id) if c.id == charge.id]
    assert kept.total_discounts == Decimal("1.25")
    # NOTE: spec 02 Charges rule 2, a regeneration that changes the charge drops the code.
    assert api.put(f"/subscriptions/{subscription.id}", json={"quantity": 2}).status_code == 200
    [changed] = [c for c in charges_of(api, address.id) if c.id == charge.id]
    assert changed.total_discounts == 0 and changed.discount_id is None
    assert_schedule_consistent(api, address.id)
    # The charge is free to take a code again.
    again = api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})
    assert again.status_code == 200 and Decimal(again.json()["charge"]["total_discounts"]) == Decimal("2.50")
