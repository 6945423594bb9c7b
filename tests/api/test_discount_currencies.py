"""A discount's amounts are the store's currency (decisions §2.7, §7.5): its minimum is refused
on a charge in another presentment currency as a fixed amount is, and shown with the store's
minor digits; a checkout in another currency shows a fixed code's value in the store's. Found by
an audit; each test failed before its fix."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_checkouts import SHIPPING, priced_store
from tests.builders import charges_of, make_address, make_discount, make_subscription

NEEDS = "a discount with a minimum subtotal applies only to charges in USD"


def _foreign(api: Any) -> tuple[Any, Any]:
    store = api.other_store(presentment_currencies=["JPY"])
    address = make_address(store, presentment_currency="JPY")
    make_subscription(store, address, price="20", quantity=3)
    return store, address


def test_a_minimum_is_not_met_by_a_subtotal_in_another_currency_applied_to_an_address(api):
    store, address = _foreign(api)
    code = make_discount(store, code="MIN50", value="10", prerequisite_subtotal_min="50.00")
    response = store.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": code})
    assert (response.status_code, response.json()) == (422, {"errors": {"discount_id": [NEEDS]}})
    [queued] = charges_of(store, address.id)
    assert store.get(f"/charges/{queued.id}").json()["charge"]["discounts"] == []


def test_a_minimum_is_not_met_by_a_subtotal_in_another_currency_applied_to_a_charge(api):
    store, address = _foreign(api)
    make_discount(store, code="MIN50", value="10", prerequisite_subtotal_min="50.00")
    [queued] = charges_of(store, address.id)
    response = store.post(f"/charges/{queued.id}/apply_discount", json={"discount_code": "MIN50"})
    assert response.status_code == 422 and NEEDS in str(response.json()["errors"])


def test_a_code_without_a_minimum_still_applies_in_another_currency(api):
    store, address = _foreign(api)
    code = make_discount(store, code="TEN", value="10")
    assert store.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": code}).status_code == 200
    [queued] = charges_of(store, address.id)
    assert store.get(f"/charges/{queued.id}").json()["charge"]["total_discounts"] == "6"


@pytest.mark.parametrize("currency, sent, shown", [("USD", "30.5", "30.50"), ("KWD", "1.5", "1.500"),
                                                    ("JPY", "30", "30")])
def test_a_minimum_is_shown_with_the_store_currencys_minor_digits(api, currency, sent, shown):
    store = api.other_store(currency=currency)
    made = store.post("/discounts", json={"code": "M", "value_type": "percentage", "value": "5",
                                          "prerequisite_subtotal_min": sent}, version="2021-11")
    assert made.status_code in (200, 201), made.text
    assert made.json()["discount"]["prerequisite_subtotal_min"] == shown
    got = store.get(f"/discounts/{made.json()['discount']['id']}", version="2021-11").json()["discount"]
    assert got["prerequisite_subtotal_min"] == shown


def test_a_minimum_not_met_names_it_with_its_minor_digits(api):
    address = make_address(api)
    make_subscription(api, address, price="7.35")
    make_discount(api, code="MIN", value="5", prerequisite_subtotal_min="30.5")
    [queued] = charges_of(api, address.id)
    response = api.post(f"/charges/{queued.id}/apply_discount", json={"discount_code": "MIN"})
    assert response.status_code == 422
    assert "below the discount's minimum 30.50" in str(response.json()["errors"])


@pytest.mark.parametrize("currency", ["JPY", "KWD"])
def test_a_checkout_in_another_currency_shows_a_fixed_codes_value_in_the_stores(api, currency):
    store = api.other_store(presentment_currencies=[currency])
    priced_store(store)
    make_discount(store, code="FIX1050", discount_type="fixed_amount", value="10.50")
    response = store.post("/checkouts", json={"currency": currency, "discount_code": "FIX1050",
                                              "line_items": [{"product_id": "200", "variant_id": "201", "quantity": 1}],
                                              "email": "x@example.com", "shipping_address": dict(SHIPPING)})
    assert response.status_code in (200, 201), response.text
    applied = response.json()["checkout"]["applied_discount"]
    assert (applied["value"], applied["applicable"]) == ("10.50", False)
