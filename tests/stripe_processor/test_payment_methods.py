"""Payment methods of a Stripe store (issue 16): Stripe says the Customer and the PaymentMethod
exist and belong together before the method is saved, and fills `payment_details`; both
databases, against the suite's Stripe."""

from __future__ import annotations

from tests.builders import make_customer


def _create(shop, customer_token, method_token, **extra):
    customer = make_customer(shop.api)
    body = {"customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_customer_token": customer_token,
            "processor_payment_method_token": method_token, **extra}
    return shop.api.post("/payment_methods", json=body)


def test_a_method_checked_with_stripe_takes_its_card_details_and_names_stripe(shop):
    cus, pm = shop.customer_with_card("4000000000009995")
    response = _create(shop, cus, pm, payment_details={"cardholder_name": "Ada", "last4": "0000"})
    assert response.status_code == 201, response.text
    method = response.json()["payment_method"]
    assert method["processor_name"] == "stripe"
    assert (method["processor_customer_token"], method["processor_payment_method_token"]) == (cus, pm)
    assert method["payment_details"]["last4"] == "9995"  # Stripe's, not what was sent
    assert method["payment_details"]["cardholder_name"] == "Ada"  # kept: Stripe named no holder
    assert {k: method["payment_details"][k] for k in ("brand", "exp_month", "exp_year")} == {
        "brand": "visa", "exp_month": 12, "exp_year": 2034}
    assert method["status"] == "unvalidated"


def test_an_unknown_stripe_customer_is_422_naming_the_customer_token(shop):
    _, pm = shop.customer_with_card()
    response = _create(shop, "cus_doesnotexist", pm)
    assert (response.status_code, response.json()) == (
        422, {"errors": {"processor_customer_token": ["no such customer in Stripe"]}})


def test_an_unknown_stripe_payment_method_is_422_naming_the_method_token(shop):
    cus, _ = shop.customer_with_card()
    response = _create(shop, cus, "pm_doesnotexist")
    assert (response.status_code, response.json()) == (
        422, {"errors": {"processor_payment_method_token": ["no such payment method in Stripe"]}})


def test_a_payment_method_of_another_stripe_customer_is_422(shop):
    cus, _ = shop.customer_with_card()
    _, others = shop.customer_with_card()
    response = _create(shop, cus, others)
    assert (response.status_code, response.json()) == (
        422, {"errors": {"processor_payment_method_token": ["belongs to another Stripe customer"]}})


def test_a_detached_payment_method_is_422(shop):
    cus, pm = shop.customer_with_card()
    shop.client.v1.payment_methods.detach(pm)
    response = _create(shop, cus, pm)
    assert response.json() == {"errors": {"processor_payment_method_token": [
        f"is not attached to the Stripe customer {cus}"]}}


def test_a_stripe_store_needs_both_tokens_and_the_stripe_label(shop):
    customer = make_customer(shop.api)
    response = shop.api.post("/payment_methods", json={
        "customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_payment_method_token": "tok_1",
        "processor_name": "braintree"})
    assert (response.status_code, response.json()) == (422, {"errors": {
        "processor_name": ["must be stripe: this store's payments go through Stripe"],
        "processor_customer_token": ["is required: this store's payments go through Stripe"],
        "processor_payment_method_token": ["must name a Stripe object (pm_...)"]}})


def test_an_update_to_other_stripe_objects_is_checked_too(shop):
    cus, pm = shop.customer_with_card()
    method = _create(shop, cus, pm).json()["payment_method"]
    _, others = shop.customer_with_card("4000000000000069")
    refused = shop.api.put(f"/payment_methods/{method['id']}", json={"processor_payment_method_token": others})
    assert refused.status_code == 422
    _, mine = shop.customer_with_card()
    shop.client.v1.payment_methods.attach(mine, {"customer": cus})
    moved = shop.api.put(f"/payment_methods/{method['id']}", json={"processor_payment_method_token": mine})
    assert moved.status_code == 200, moved.text
    assert moved.json()["payment_method"]["processor_payment_method_token"] == mine


def test_stripe_not_answering_is_503_and_nothing_is_saved(shop):
    cus, pm = shop.customer_with_card()
    shop.fake.fault("/v1/customers/", "error_before", method="GET", times=3)
    customer = make_customer(shop.api)
    response = shop.api.post("/payment_methods", json={
        "customer_id": customer.id, "payment_type": "CREDIT_CARD", "processor_customer_token": cus,
        "processor_payment_method_token": pm})
    assert response.status_code == 503
    assert shop.api.get("/payment_methods", params={"customer_id": customer.id}).json()["payment_methods"] == []
