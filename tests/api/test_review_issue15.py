"""Review of issue 15 (checkouts, collections, bundles, async batches): each test failed before
the fix it names. Both databases (the `api` fixture)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from rebill.domain.catalog.model import VariantInput
from rebill.models import events, sandbox_payments
from tests.api.test_bundle_variants import make_box, make_bundle, make_collection
from tests.api.test_charges_totals import set_rates
from tests.api.test_checkouts import CHARGE, SHIPPING, SUB_LINE, create, last_event, priced_store, stock
from tests.api.test_products import make_product
from tests.builders import make_address, make_subscription

V01, V11 = "2021-01", "2021-11"


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


# Collections --------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_bulk_products_with_a_null_nested_external_id_answer_422_not_500(api, method):
    """`{"external_product_id": {"ecommerce": null}}` reached the id check as None (500)."""
    make_product(api, "p-1")
    collection = make_collection(api)
    body = {"collection_products": [{"external_product_id": "p-1"},
                                    {"external_product_id": {"ecommerce": None}}]}
    reply = api.request(method, f"/collections/{collection}/collection_products-bulk", json=body, version=V11)
    assert errors_of(reply) == {"collection_products": {"1": {"external_product_id": ["is required"]}}}
    listed = api.get("/collection_products", params={"collection_id": collection}, version=V11)
    assert listed.json()["collection_products"] == []


# Checkouts ----------------------------------------------------------------------------------------

def test_a_checkout_in_a_currency_with_fewer_minor_digits_is_paid_and_recorded(api):
    """A JPY checkout of a 12.50 catalog price: the subscription it makes was given the catalog
    price unrounded, which the subscription's own rule refuses for JPY (422 "has too many
    decimal places") while recording, after the processor took the money: nothing was
    recorded, the checkout stayed held, and every later try (or the billing run) failed the
    same way. The checkout prices each line at the catalog price rounded to its currency, as
    a subscription made from the catalog is priced, so it charges what its renewals charge."""
    store = api.other_store(presentment_currencies=["JPY"])
    stock(store)
    made = store.post("/checkouts", json={"line_items": [SUB_LINE], "currency": "JPY", "email": "ada@example.com",
                                          "shipping_address": SHIPPING}, version=V11)
    assert made.status_code == 201, made.text
    checkout = made.json()["checkout"]
    [line] = checkout["line_items"]
    # 2 x 12.50 rounded half up to yen: 13 each, 26 in all (not 25 beside a unit price of 13).
    assert (line["price"], line["line_price"], checkout["subtotal_price"], checkout["total_price"]) == \
        ("13", "26", "26", "26")
    paid = store.post(f"/checkouts/{checkout['token']}/charge", json=CHARGE, version=V11)
    assert paid.status_code == 200, paid.text
    done = store.get(f"/checkouts/{checkout['token']}", version=V11).json()["checkout"]
    assert done["completed_at"] is not None
    subscription = store.get(f"/subscriptions/{done['line_items'][0]['subscription_id']}", version=V11).json()
    assert subscription["subscription"]["price"] == "13"
    charge = store.get(f"/charges/{done['charge_id']}", version=V11).json()["charge"]
    assert charge["total_price"] == "26"
    with store.db.read() as conn:
        assert [row.amount for row in conn.execute(select(sandbox_payments.c.amount).where(
            sandbox_payments.c.store_id == store.store.id))] == [Decimal(26)]


# Bundles ------------------------------------------------------------------------------------------

def test_a_dynamic_bundle_never_prices_its_item_past_the_range_of_a_price(api):
    """100 items of 1,000 at a 12-digit catalog price made the subscription's price
    99999999999999000.00 (17 integer digits), a price no endpoint takes (docs/api-choices.md,
    Hardening: at most 12): a client reading it back and sending it got 422."""
    store = api.other_store(plan_tier="premium_b")
    make_box(store)
    keys = [f"q{i}" for i in range(2)]
    for key in keys:
        make_product(store, key, variants=[VariantInput(external_variant_id=f"{key}-1",
                                                        price=Decimal("999999999999.99"))])
    make_bundle(store, [make_collection(store, *keys)], price_rule="dynamic")
    box = make_subscription(store, make_address(store), external_product_id="box", external_variant_id="box-1",
                            price=None)
    items = [{"external_product_id": key, "external_variant_id": f"{key}-1", "quantity": 1} for key in keys]
    reply = store.post("/bundle_selections", json={"purchase_item_id": box.id, "items": items}, version=V11)
    assert errors_of(reply) == {"items": [
        "the bundle would cost 1999999999999.98, out of range for a price (at most 12 integer digits)"]}
    shown = store.get(f"/subscriptions/{box.id}", version=V11).json()["subscription"]
    assert shown["price"] == "30.00"
    assert store.put(f"/subscriptions/{box.id}", json={"price": shown["price"]}, version=V11).status_code == 200
    one = store.post("/bundle_selections", json={"purchase_item_id": box.id, "items": items[:1]}, version=V11)
    assert one.status_code == 200, one.text
    assert store.get(f"/subscriptions/{box.id}", version=V11).json()["subscription"]["price"] == "999999999999.99"


def test_a_charge_that_prices_the_checkout_again_records_the_change_even_when_declined(api):
    """The charge prices a checkout again (the store's rates as they are then) and keeps the
    new figures, also when the payment is declined: the checkout's totals changed with no
    `checkout/updated` and an unchanged `updated_at`, so a client following the event log
    never learnt of them."""
    priced_store(api)
    made = create(api, email="ada@example.com", shipping_address=dict(SHIPPING))
    assert made["total_tax"] == "2.39"
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00", "country_codes": ["US"]}],
              tax=[{"country_code": "US", "rate": "0.10", "title": "Sales tax"}])
    api.clock.advance(timedelta(minutes=1))
    since = last_event(api)
    declined = api.post(f"/checkouts/{made['token']}/charge", json={**CHARGE, "payment_token": "tok_declined"},
                        version=V11)
    assert declined.status_code == 422, declined.text
    after = api.get(f"/checkouts/{made['token']}", version=V11).json()["checkout"]
    assert after["total_tax"] == "3.30"  # 10 % of 25.00 and of 8.00, each rounded
    assert after["updated_at"] == api.clock.now().strftime("%Y-%m-%dT%H:%M:%S+00:00")
    with api.db.read() as conn:
        recorded = list(conn.execute(select(events.c.topic, events.c.updated_attributes).where(
            events.c.store_id == api.store.id, events.c.id > since)))
    assert [tuple(row) for row in recorded] == [
        ("checkout/updated", ["line_items", "tax_lines", "total_price", "total_tax"])]
