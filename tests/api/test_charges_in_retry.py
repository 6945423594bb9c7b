"""A charge in retry keeps its items for the retry (decisions §6.3), but an item cancelled or
deleted leaves it (decisions §5.16): a retry must never take money for it
(domain/charge/errored.py). Both versions, both databases."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from tests.builders import (
    charges_of,
    events_of,
    make_address,
    make_customer,
    make_discount,
    make_payment_method,
    make_subscription,
)


@pytest.fixture
def tier_a(vapi):
    store = vapi.other_store(plan_tier="premium_a")
    store.version = vapi.version
    return store


def _in_retry(api):
    """A charge of two subscriptions (9.00 and 3.00) whose payment failed."""
    customer = make_customer(api)
    method = make_payment_method(api, customer, processor_payment_method_token="pm_declined")
    address = make_address(api, customer)
    first = make_subscription(api, address, price=Decimal("9.00"))
    second = make_subscription(api, address, price=Decimal("3.00"))
    [charge] = charges_of(api, address.id)
    reply = api.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200 and reply.json()["charge"]["status"].lower() == "error", reply.text
    return address, charge.id, first, second, method


def _charge(api, charge_id):
    return api.get(f"/charges/{charge_id}", version="2021-11").json()["charge"]


def _cancel(api, subscription_id):
    reply = api.post(f"/subscriptions/{subscription_id}/cancel", json={"cancellation_reason": "too much tea"})
    assert reply.status_code == 200, reply.text


def test_a_cancelled_subscription_leaves_its_charge_in_retry_which_costs_the_rest(tier_a):
    address, charge_id, first, second, _ = _in_retry(tier_a)
    before = _charge(tier_a, charge_id)
    assert before["subtotal_price"] == "12.00"
    _cancel(tier_a, first.id)
    after = _charge(tier_a, charge_id)
    assert [line["purchase_item_id"] for line in after["line_items"]] == [second.id]
    assert after["subtotal_price"] == "3.00"
    # Still in retry, as it was: status, attempts and retry date stay.
    assert (after["status"], after["charge_attempts"], after["retry_date"]) == (
        "error", before["charge_attempts"], before["retry_date"])
    assert ("charge/updated", charge_id) in events_of(tier_a, charge_id)
    # The subscription filter no longer finds the charge through the cancelled item.
    listed = tier_a.get("/charges", params={"purchase_item_id": first.id}, version="2021-11").json()["charges"]
    assert charge_id not in [c["id"] for c in listed]


def test_the_retry_then_takes_only_what_is_left(tier_a):
    from sqlalchemy import select

    from rebill.models import sandbox_payments
    address, charge_id, first, _, method = _in_retry(tier_a)
    _cancel(tier_a, first.id)
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    paid = tier_a.post(f"/charges/{charge_id}/process", json={}, version="2021-11")
    assert paid.status_code == 200 and paid.json()["charge"]["status"] == "success", paid.text
    with tier_a.db.read() as conn:
        amounts = list(conn.execute(select(sandbox_payments.c.amount).where(
            sandbox_payments.c.store_id == tier_a.store.id, sandbox_payments.c.operation == "charge")
            .order_by(sandbox_payments.c.id)).scalars())
    assert amounts[-1] == Decimal(300)  # minor units: 3.00, not 12.00


def test_a_charge_in_retry_left_with_nothing_is_deleted(tier_a):
    address, charge_id, first, second, _ = _in_retry(tier_a)
    _cancel(tier_a, first.id)
    assert tier_a.delete(f"/subscriptions/{second.id}").status_code in (200, 204)
    assert tier_a.get(f"/charges/{charge_id}").status_code == 404
    assert ("charge/deleted", charge_id) in events_of(tier_a, charge_id)
    assert [c.status for c in charges_of(tier_a, address.id)] == []


# What a charge in retry follows (found by audits) ----------------------------------------------

def _failing(api, **subscription):
    customer = make_customer(api)
    method = make_payment_method(api, customer, processor_payment_method_token="pm_declined")
    address = make_address(api, customer)
    item = make_subscription(api, address, **subscription)
    [charge] = charges_of(api, address.id)
    return address, charge.id, item, method


def _process(api, charge_id, status):
    reply = api.post(f"/charges/{charge_id}/process", json={}, version="2021-11")
    assert reply.status_code == 200 and reply.json()["charge"]["status"] == status, reply.text
    return reply.json()["charge"]


def test_a_retry_paid_late_dates_the_next_charge_after_today(tier_a):
    """Found by an audit: the next date was the charge's date plus one interval even when that
    had passed, so a weekly subscription whose retry succeeded five weeks late was billed for
    each missed week in the same run. The next date is the first on its cadence after today
    (decisions §5.16's rule for a new interval)."""
    start = tier_a.clock.now().date() + timedelta(days=1)
    address, charge_id, item, method = _failing(tier_a, order_interval_unit="week", next_charge_scheduled_at=start)
    _process(tier_a, charge_id, "error")
    tier_a.clock.advance(timedelta(days=34))  # today: start + 33 days
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    _process(tier_a, charge_id, "success")
    shown = tier_a.get(f"/subscriptions/{item.id}", version="2021-11").json()["subscription"]
    assert shown["next_charge_scheduled_at"][:10] == (start + timedelta(weeks=5)).isoformat()
    assert [(c.status, c.scheduled_at) for c in charges_of(tier_a, address.id) if c.status == "queued"] == [
        ("queued", start + timedelta(weeks=5))]


def test_a_charge_in_retry_takes_its_addresss_code_again_once_it_qualifies(tier_a):
    """Found by an audit: below the code's minimum for a moment, a charge in retry lost its
    address's code for good, and its retry took 10.00 too much."""
    make_discount(tier_a, code="QUARTER", value="25", prerequisite_subtotal_min=Decimal("30"))
    address, charge_id, item, _ = _failing(tier_a, price=Decimal("20.00"), quantity=2)
    assert tier_a.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "QUARTER"}).status_code == 200
    assert _process(tier_a, charge_id, "error")["total_discounts"] == "10.00"
    for quantity, off in ((1, "0.00"), (2, "10.00")):
        assert tier_a.put(f"/subscriptions/{item.id}", json={"quantity": quantity}).status_code == 200
        assert _charge(tier_a, charge_id)["total_discounts"] == off


def test_a_code_applied_to_a_charge_in_retry_alone_goes_when_its_items_change(tier_a):
    """Spec 02 Charges rule 2, for a charge in retry too (found by an audit: it stayed on after
    a new quantity and price, and the retry used it)."""
    make_discount(tier_a, code="JUSTONCE", value="25")
    address, charge_id, item, _ = _failing(tier_a, price=Decimal("20.00"))
    assert tier_a.post(f"/charges/{charge_id}/apply_discount", json={"discount_code": "JUSTONCE"}).status_code == 200
    assert _process(tier_a, charge_id, "error")["total_discounts"] == "5.00"
    for quantity in (3, 1):  # and gone for good: the charge back as it was takes it no more
        assert tier_a.put(f"/subscriptions/{item.id}", json={"quantity": quantity}).status_code == 200
        assert _charge(tier_a, charge_id)["total_discounts"] == "0.00"


def test_an_address_update_reaches_its_charge_in_retry(tier_a):
    """Found by an audit: the retry shipped to the address as it was when the payment failed
    (and its money followed the new one only at the next change of an item)."""
    address, charge_id, _, _ = _failing(tier_a, price=Decimal("20.00"))
    _process(tier_a, charge_id, "error")
    reply = tier_a.put(f"/addresses/{address.id}", json={"address1": "2 Other St"}, version="2021-11")
    assert reply.status_code == 200, reply.text
    after = _charge(tier_a, charge_id)
    assert (after["status"], after["shipping_address"]["address1"]) == ("error", "2 Other St")
    assert ("charge/updated", charge_id) in events_of(tier_a, charge_id)


def test_new_store_rates_reach_a_charge_in_retry(tier_a):
    """Found by an audit: `rebill stores rates` replanned the queued charges only; a charge in
    retry kept the old tax and shipping, and the retry took them (until an unrelated address
    edit recomputed it)."""
    from tests.api.test_charges_totals import set_rates
    set_rates(tier_a, tax=[{"country_code": "US", "rate": "0.10"}])
    address, charge_id, _, _, method = _in_retry(tier_a)
    before = _charge(tier_a, charge_id)
    assert (before["total_tax"], before["total_price"]) == ("1.20", "13.20")
    set_rates(tier_a, tax=[{"country_code": "US", "rate": "0.20"}],
              shipping=[{"price": "4.00", "country_codes": ["US"], "title": "Post"}])
    after = _charge(tier_a, charge_id)
    assert (after["status"], after["charge_attempts"], after["retry_date"]) == (
        "error", before["charge_attempts"], before["retry_date"])
    assert (after["total_tax"], after["shipping_lines"][0]["price"], after["total_price"]) == ("2.40", "4.00", "18.40")
    assert ("charge/updated", charge_id) in events_of(tier_a, charge_id)
    # The retry takes the new total.
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    paid = tier_a.post(f"/charges/{charge_id}/process", json={}, version="2021-11")
    assert paid.status_code == 200 and paid.json()["charge"]["total_price"] == "18.40", paid.text


def test_a_code_removed_from_the_address_through_its_endpoint_leaves_the_charge_in_retry(tier_a):
    """Found by an audit: `POST /addresses/{id}/remove_discount` replanned the queued charges
    only; the retry took the removed code (spec 02: "also removed from future charges") and
    counted a use of it, where `PUT /addresses/{id} {"discounts": []}` recomputed the charge."""
    code = make_discount(tier_a, code="GONE", value="10")
    address, charge_id, _, method = _failing(tier_a, price=Decimal("20.00"))
    assert tier_a.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": code},
                       version="2021-11").status_code == 200
    assert _process(tier_a, charge_id, "error")["total_discounts"] == "2.00"
    assert tier_a.post(f"/addresses/{address.id}/remove_discount", json={}, version="2021-11").status_code == 200
    after = _charge(tier_a, charge_id)
    assert (after["status"], after["total_discounts"], after["discounts"]) == ("error", "0.00", [])
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    paid = _process(tier_a, charge_id, "success")
    assert paid["total_discounts"] == "0.00" and paid["discounts"] == []
    used = tier_a.get(f"/discounts/{code}", version="2021-01").json()["discount"]["times_used"]
    assert used == 0


@pytest.mark.parametrize("path", ["addresses", "charges"])
def test_a_code_applied_to_the_address_reaches_its_charge_in_retry(tier_a, path):
    """The other way round (found by the same audit): a code applied through the address's
    endpoint, or the charge's with the address named, is taken by the retry too."""
    make_discount(tier_a, code="LATE", value="10")
    address, charge_id, _, _ = _failing(tier_a, price=Decimal("20.00"))
    assert _process(tier_a, charge_id, "error")["total_discounts"] == "0.00"
    reply = tier_a.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "LATE"}, version="2021-11")
    assert reply.status_code == 200, reply.text
    after = _charge(tier_a, charge_id)
    assert (after["status"], after["total_discounts"], [d["code"] for d in after["discounts"]]) == (
        "error", "2.00", ["LATE"])
    if path == "charges":  # removed through the charge, naming its address
        reply = tier_a.post(f"/charges/{charge_id}/remove_discount", json={"address_id": address.id},
                            version="2021-11")
        assert reply.status_code == 200, reply.text
        assert _charge(tier_a, charge_id)["total_discounts"] == "0.00"


def test_a_customers_new_billing_address_reaches_its_charge_in_retry(tier_a):
    """Found by a review: a 2021-01 customer update of its billing fields replanned the queued
    charges only; the retry billed the old billing address."""
    address, charge_id, _, _, _ = _in_retry(tier_a)
    billing = {"billing_address1": "77 Changed Ave", "billing_city": "San Francisco", "billing_country": "US",
               "billing_first_name": "Ada", "billing_last_name": "Lovelace", "billing_province": "CA",
               "billing_zip": "94105"}
    reply = tier_a.put(f"/customers/{address.customer_id}", json=billing, version="2021-01")
    assert reply.status_code == 200, reply.text
    after = _charge(tier_a, charge_id)
    assert (after["status"], after["billing_address"]["address1"]) == ("error", "77 Changed Ave")


@pytest.mark.parametrize("how", ["apply_discount", "put_address"])
def test_a_single_use_code_applied_while_a_charge_is_in_retry_goes_to_one_charge(tier_a, how):
    """Found by a stateful audit: the replan gave the address's new single-use code to its queued
    charge (no use in flight yet), then the charge in retry took it too, and both were paid with
    it. The charge in retry takes it (it pays first; a use in flight), the queued one does not."""
    from sqlalchemy import func, select

    from rebill.models import discount_redemptions
    make_discount(tier_a, code="ONCE", value="10", duration="single_use")
    address, charge_id, _, method = _failing(tier_a, price=Decimal("100.00"))
    _process(tier_a, charge_id, "error")
    later = tier_a.clock.now().date() + timedelta(days=3)
    reply = tier_a.post("/onetimes", version="2021-11", json={
        "address_id": address.id, "external_product_id": {"ecommerce": "x1"}, "product_title": "Extra",
        "price": "20.00", "quantity": 1, "next_charge_scheduled_at": later.isoformat()})
    assert reply.status_code in (200, 201), reply.text
    if how == "apply_discount":
        reply = tier_a.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "ONCE"},
                            version="2021-11")
    else:
        reply = tier_a.put(f"/addresses/{address.id}", json={"discounts": [{"code": "ONCE"}]}, version="2021-11")
    assert reply.status_code == 200, reply.text
    carrying = [c for c in tier_a.get("/charges", params={"address_id": address.id}, version="2021-11")
                .json()["charges"] if c["discounts"]]
    assert [(c["id"], c["status"]) for c in carrying] == [(charge_id, "error")]
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    assert _process(tier_a, charge_id, "success")["total_discounts"] == "10.00"
    [queued] = [c for c in tier_a.get("/charges", params={"address_id": address.id, "status": "queued"},
                                      version="2021-11").json()["charges"] if c["scheduled_at"][:10] == later.isoformat()]
    assert _process(tier_a, queued["id"], "success")["total_discounts"] == "0.00"
    with tier_a.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(discount_redemptions).where(
            discount_redemptions.c.store_id == tier_a.store.id)).scalar() == 1


def test_weight_orders_and_taxes_included_of_a_charge_in_retry_follow_it(tier_a):
    """Found by an audit: a charge in retry computed again kept the weight and the order count
    of items cancelled meanwhile (and its order carried that weight), and a store turned to
    taxes included left `taxes_included: false` on amounts computed with them."""
    from sqlalchemy import update

    from rebill.models import purchase_items
    from tests.api.test_charges_totals import set_rates
    customer = make_customer(tier_a)
    method = make_payment_method(tier_a, customer, processor_payment_method_token="pm_declined")
    address = make_address(tier_a, customer)
    prepaid = make_subscription(tier_a, address, price=Decimal("9.00"), charge_interval_frequency=3)
    plain = make_subscription(tier_a, address, price=Decimal("3.00"), quantity=2)
    with tier_a.db.write() as conn:
        for item, grams in ((prepaid, 1000), (plain, 250)):
            conn.execute(update(purchase_items).where(purchase_items.c.id == item.id).values(grams=grams))
    assert tier_a.put(f"/addresses/{address.id}", json={"address2": "Unit 1"}, version="2021-11").status_code == 200
    [charge] = charges_of(tier_a, address.id)
    _process(tier_a, charge.id, "error")
    before = _charge(tier_a, charge.id)
    assert (before["total_weight_grams"], before["orders_count"], before["taxes_included"]) == (3500, 3, False)
    _cancel(tier_a, prepaid.id)
    after = _charge(tier_a, charge.id)
    assert (after["total_weight_grams"], after["orders_count"]) == (500, 1)
    set_rates(tier_a, tax=[{"country_code": "US", "rate": "0.10"}], taxes_included=True)
    after = _charge(tier_a, charge.id)
    assert (after["taxes_included"], after["total_tax"], after["total_price"]) == (True, "0.55", "6.00")
    assert all(line["unit_price_includes_tax"] for line in after["line_items"])
    # The address's note reaches it too, as a queued charge's.
    noted = tier_a.put(f"/addresses/{address.id}", json={"order_note": "Leave at the door"}, version="2021-11")
    assert noted.status_code == 200, noted.text
    assert _charge(tier_a, charge.id)["note"] == "Leave at the door"
    tier_a.put(f"/payment_methods/{method}", json={"processor_payment_method_token": "pm_ok"}, version="2021-11")
    _process(tier_a, charge.id, "success")
    [order] = tier_a.get("/orders", params={"charge_id": charge.id}, version="2021-11").json()["orders"]
    assert (order["total_weight_grams"], order["total_tax"], order["total_price"]) == (500, "0.55", "6.00")
