"""A buyer's checkout, told through HTTP (issue 15 proof; spec 02 Checkouts, decisions §7.3,
§7.7): made with a partial address, completed, its shipping rates read, a discount code added,
paid with a subscription line and a one-time line, then renewed by the test clock; and a
declined checkout that changes nothing at all. Money is counted in the sandbox ledger."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import func, select

from rebill.models import addresses, charges, checkouts, customers, discounts, events, orders, purchase_items
from rebill.models import sandbox_payments as ledger
from tests.api.test_checkouts import CHARGE, ONE_LINE, SHIPPING, SUB_LINE, priced_store
from tests.builders import make_discount
from tests.scenarios.conftest import advance, assert_schedule_consistent

V11 = "2021-11"


def _count(api: Any, table: Any, *where: Any) -> int:
    with api.db.read() as conn:
        return conn.execute(select(func.count()).select_from(table)
                            .where(table.c.store_id == api.store.id, *where)).scalar()


def _payments(api: Any) -> list[tuple[str, str, int]]:
    """(key, outcome, amount in minor units) of every payment the sandbox processor took."""
    with api.db.read() as conn:
        rows = conn.execute(select(ledger.c.idempotency_key, ledger.c.outcome, ledger.c.amount)
                            .where(ledger.c.store_id == api.store.id).order_by(ledger.c.id)).all()
    return [(key, outcome, int(amount)) for key, outcome, amount in rows]


def _ok(response: Any) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


def test_a_checkout_from_a_partial_address_to_its_first_renewal(vapi, at):
    at(date(2027, 1, 20))
    priced_store(vapi)
    make_discount(vapi, code="WELCOME10", value="10")

    # A cart first, with only what a mobile wallet tells before paying: the country and zip.
    made = _ok(vapi.post("/checkouts", json={"line_items": [SUB_LINE, ONE_LINE], "partial_shipping": True,
                                             "shipping_address": {"country_code": "US", "zip": "94105"}}))["checkout"]
    token = made["token"]
    assert (made["subtotal_price"], made["total_tax"], made["total_price"]) == ("33.00", "2.39", "40.39")

    # Then the buyer: an e-mail and the rest of the address.
    rest = {k: v for k, v in SHIPPING.items() if k not in ("country_code", "zip")}
    updated = _ok(vapi.put(f"/checkouts/{token}", json={"email": "grace@example.com",
                                                        "shipping_address": rest}))["checkout"]
    assert updated["shipping_address"]["address1"] == "101 Market St"
    assert updated["shipping_address_validations"] == {"country_is_supported": True, "ups": True}

    rates = _ok(vapi.get(f"/checkouts/{token}/shipping_rates"))["shipping_rates"]
    assert [(r["code"], r["price"], r["checkout"]["total_price"]) for r in rates] == [("std", "5.00", "40.39")]

    # A code: 10 % of 33.00 shared 2.50 / 0.80, tax on what is left (1.63 + 0.52).
    coded = _ok(vapi.put(f"/checkouts/{token}", json={"discount_code": "WELCOME10"}))["checkout"]
    assert coded["applied_discount"] == {"amount": "3.30", "applicable": True, "non_applicable_reason": None,
                                         "value": "10", "value_type": "percentage"}
    assert (coded["total_tax"], coded["total_price"]) == ("2.15", "36.85")

    paid = _ok(vapi.post(f"/checkouts/{token}/charge", json=CHARGE))["checkout_charge"]
    checkout_id = _ok(vapi.get(f"/checkouts/{token}", version=V11))["checkout"]["id"]
    assert _payments(vapi) == [(f"rebill-checkout-{checkout_id}-attempt-1", "captured", 3685)]
    charge = _ok(vapi.get(f"/charges/{paid['charge_id']}", version=V11))["charge"]
    assert (charge["type"], charge["status"], charge["total_price"], charge["scheduled_at"]) == \
        ("checkout", "success", "36.85", "2027-01-20")
    assert charge["discounts"] == [{"id": charge["discounts"][0]["id"], "code": "WELCOME10", "value": "10",
                                    "value_type": "percentage"}]
    subscription_id = charge["line_items"][0]["purchase_item_id"]
    address_id = charge["address_id"]
    address = _ok(vapi.get(f"/addresses/{address_id}", version=V11))["address"]
    assert [d["code"] for d in address["discounts"]] == ["WELCOME10"]
    subscription = _ok(vapi.get(f"/subscriptions/{subscription_id}", version=V11))["subscription"]
    assert subscription["next_charge_scheduled_at"] == "2027-02-20"
    # The next charge is planned already: the subscription line alone, the code still on it.
    [queued] = _ok(vapi.get("/charges", params={"address_id": address_id, "status": "queued"},
                            version=V11))["charges"]
    assert (queued["scheduled_at"], queued["total_discounts"], queued["total_price"]) == \
        ("2027-02-20", "2.50", "29.13")
    assert_schedule_consistent(vapi, address_id)

    # A month on: the billing run of the test clock renews it with the card the checkout kept.
    clock = advance(vapi, to="2027-02-21")
    assert (clock["paid"], clock["failed"]) == (1, 0)
    assert _payments(vapi)[1:] == [(f"rebill-charge-{queued['id']}-attempt-1", "captured", 2913)]
    renewed = _ok(vapi.get(f"/charges/{queued['id']}", version=V11))["charge"]
    assert (renewed["status"], renewed["type"], renewed["payment_processor"]) == ("success", "recurring", "sandbox")
    kinds = sorted(o["type"] for o in _ok(vapi.get("/orders", params={"address_id": address_id},
                                                   version=V11))["orders"])
    assert kinds == ["checkout", "recurring"]
    subscription = _ok(vapi.get(f"/subscriptions/{subscription_id}", version=V11))["subscription"]
    assert subscription["next_charge_scheduled_at"] == "2027-03-20"
    with vapi.db.read() as conn:
        used = conn.execute(select(discounts.c.times_used).where(discounts.c.store_id == vapi.store.id)).scalar()
    assert used == 2  # the checkout and its renewal
    assert_schedule_consistent(vapi, address_id)


def test_a_declined_checkout_changes_nothing(vapi, at):
    at(date(2027, 1, 20))
    priced_store(vapi)
    token = _ok(vapi.post("/checkouts", json={"line_items": [SUB_LINE, ONE_LINE], "email": "decline@example.com",
                                              "shipping_address": SHIPPING}))["checkout"]["token"]
    tables = (customers, addresses, purchase_items, charges, orders, events)
    before = [_count(vapi, table) for table in tables]
    checkout_before = _ok(vapi.get(f"/checkouts/{token}"))["checkout"]

    response = vapi.post(f"/checkouts/{token}/charge", json={**CHARGE, "payment_token": "tok_insufficient_funds"})
    assert (response.status_code, response.json()) == (422, {"errors": {"payment_token": ["Insufficient funds."]}})

    assert [_count(vapi, table) for table in tables] == before
    assert _ok(vapi.get(f"/checkouts/{token}"))["checkout"] == checkout_before
    # The processor said no: it took no money (its ledger keeps the refusal, under that attempt's key).
    assert [outcome for _, outcome, _ in _payments(vapi)] == ["failed"]
    assert _count(vapi, checkouts, checkouts.c.completed_at.is_not(None)) == 0
