"""A JSON number is read as the number it is, or refused (decisions §2.7; docs/api-choices.md,
Hardening "Money"): a number with a fraction or exponent that no double holds exactly is refused
with 422 rather than rounded (found by an audit: `19.999999999999999` was taken as 20.00 while the
same text as a string was refused), and nothing changes."""

from __future__ import annotations

import pytest

from rebill.http.render import INEXACT
from tests.builders import make_address

BASE = {"product_title": "Tea", "quantity": 1, "charge_interval_frequency": 1, "order_interval_frequency": 1,
        "order_interval_unit": "month"}


def _raw(vapi, path: str, text: str):
    return vapi.client.post(path, content=text.encode(), headers={
        "X-Service-Access-Token": vapi.token, "X-Service-Version": vapi.version,
        "Content-Type": "application/json"})


@pytest.mark.parametrize("number", ["19.999999999999999", "99999999999.999999", "0.1000000000000000055511151231257827"])
def test_a_price_no_double_holds_exactly_is_refused_and_nothing_is_made(vapi, number):
    address = make_address(vapi)
    before = vapi.get(f"/subscriptions?address_id={address.id}").json()["subscriptions"]
    answer = _raw(vapi, "/subscriptions", '{"address_id": %d, "price": %s, %s' % (
        address.id, number, str(BASE)[1:].replace("'", '"')))
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"] == {"body": [INEXACT]}
    assert vapi.get(f"/subscriptions?address_id={address.id}").json()["subscriptions"] == before


@pytest.mark.parametrize("number, shown", [("12.5", "12.50"), ("1.25e1", "12.50"), ("0.1", "0.10"), ("12", "12.00")])
def test_a_number_a_double_holds_exactly_is_taken(vapi, number, shown):
    address = make_address(vapi)
    answer = _raw(vapi, "/subscriptions", '{"address_id": %d, "price": %s, %s' % (
        address.id, number, str(BASE)[1:].replace("'", '"')))
    assert answer.status_code in (200, 201), answer.text
    assert answer.json()["subscription"]["price"] == shown


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1e-400"])
def test_a_number_past_a_double_is_out_of_range(vapi, number):
    answer = _raw(vapi, "/customers", '{"email": "a@example.com", "first_name": "A", "last_name": "B", "x": %s}' % number)
    assert (answer.status_code, answer.json()["errors"]) == (422, {"body": ["has a number out of range"]})
