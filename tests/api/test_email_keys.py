"""An e-mail whose lower-cased key outgrows its column (found by an audit: 'İ' lower-cases to
two characters): PostgreSQL refused the key, so `POST /customers` answered 500, and a checkout
took the buyer's money, then failed to record it, over and over. Now every way that gives a
customer an e-mail answers 422 before anything is written or charged, on both databases."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from rebill.models import checkouts, customers, sandbox_payments
from tests.api.test_checkouts import CHARGE, count, create, priced_store, ready
from tests.api.test_customers import V01, V11, create_body, created_status

# 252 characters as sent (under the column's 255), 492 once lower-cased.
LONG_KEY = "İ" * 240 + "@example.com"
TOO_LONG = {"email": ["is too long (at most 255 characters)"]}


@pytest.mark.parametrize("version", [V01, V11])
def test_a_customer_email_whose_key_is_too_long_is_refused_on_create_and_update(api: Any, version: str) -> None:
    before = count(api, customers)
    reply = api.post("/customers", json=create_body(version, email=LONG_KEY), version=version)
    assert (reply.status_code, reply.json()) == (422, {"errors": TOO_LONG})
    assert count(api, customers) == before
    made = api.post("/customers", json=create_body(version), version=version)
    assert made.status_code == created_status(version), made.text
    customer_id = made.json()["customer"]["id"]
    reply = api.put(f"/customers/{customer_id}", json={"email": LONG_KEY}, version=version)
    assert (reply.status_code, reply.json()) == (422, {"errors": TOO_LONG})
    # The same length in characters that lower-case to themselves is fine.
    fine = "i" * 240 + "@example.com"
    assert api.put(f"/customers/{customer_id}", json={"email": fine}, version=version).status_code == 200


def test_a_checkout_refuses_such_an_email_and_never_charges_one_stored_before(api: Any) -> None:
    priced_store(api)
    reply = api.post("/checkouts", json={"email": LONG_KEY, "line_items": [{"product_id": "200", "variant_id": "201",
                                                                             "quantity": 1}]})
    assert (reply.status_code, reply.json()) == (422, {"errors": TOO_LONG})
    token = create(api)["token"]
    assert api.put(f"/checkouts/{token}", json={"email": LONG_KEY}).json() == {"errors": TOO_LONG}
    # A checkout that holds one already (stored by an older version): refused before paying.
    stored = ready(api)["token"]
    with api.db.write() as conn:
        conn.execute(update(checkouts).where(checkouts.c.token == stored).values(email=LONG_KEY))
    reply = api.post(f"/checkouts/{stored}/charge", json=CHARGE)
    assert (reply.status_code, reply.json()) == (422, {"errors": TOO_LONG})
    assert count(api, sandbox_payments) == 0
