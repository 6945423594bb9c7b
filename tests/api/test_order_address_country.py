"""An order's shipping address obeys the address rules on a country change (spec 01 Addresses
update: "Changing the country requires changing zip in the same request, otherwise an error
results"; docs/api-choices.md, Orders "Update"). Found by a review: `PUT /orders/{id}` moving
the address to Germany answered 200 and kept the US zip."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_orders import V01, V11, order, order_events, paid, queued

ZIP_MUST_CHANGE = {"errors": {"shipping_address": {"zip": ["must be changed when the country changes"]}}}
# The same move in each version's own country field (decisions §4.5).
TO_GERMANY = {V11: {"country_code": "DE"}, V01: {"country": "Germany"}}


def _put(api: Any, order_id: int, address: dict[str, Any]) -> Any:
    return api.put(f"/orders/{order_id}", json={"shipping_address": address})


def _refused_and_unchanged(api: Any, order_id: int, address: dict[str, Any]) -> None:
    before = order(api, order_id, V11)
    events = order_events(api, order_id)
    response = _put(api, order_id, address)
    assert (response.status_code, response.json()) == (422, ZIP_MUST_CHANGE)
    assert order(api, order_id, V11) == before
    assert order_events(api, order_id) == events  # no order/updated


@pytest.mark.parametrize("extra", [{}, {"province": None}, {"zip": "94105"}, {"zip": " 94105 "}],
                         ids=["country only", "with province", "same zip", "same zip spaced"])
def test_a_country_change_without_a_new_zip_is_refused_and_changes_nothing(vapi, extra):
    first = paid(vapi)
    assert first.shipping_address["zip"] == "94105"
    _refused_and_unchanged(vapi, first.id, {**TO_GERMANY[vapi.version], **extra})


def test_a_queued_orders_country_change_without_a_new_zip_is_refused_too(vapi):
    later = queued(vapi)
    _refused_and_unchanged(vapi, later.id, TO_GERMANY[vapi.version])


def test_a_country_change_with_a_new_zip_is_taken(vapi):
    first = paid(vapi)
    response = _put(vapi, first.id, {**TO_GERMANY[vapi.version], "zip": "10115", "city": "Berlin"})
    assert response.status_code == 200, response.text
    shown = order(vapi, first.id, V11)["shipping_address"]
    assert (shown["country_code"], shown["zip"], shown["city"], shown["province"]) == ("DE", "10115", "Berlin", None)
    assert order_events(vapi, first.id)[-1] == "order/updated"


def test_sending_the_orders_own_country_needs_no_new_zip(vapi):
    first = paid(vapi)
    same = {"country_code": "us"} if vapi.version == V11 else {"country": "United States"}
    response = _put(vapi, first.id, {**same, "city": "Oakland"})
    assert response.status_code == 200, response.text
    shown = order(vapi, first.id, V11)["shipping_address"]
    assert (shown["country_code"], shown["zip"], shown["city"]) == ("US", "94105", "Oakland")


@pytest.mark.parametrize("zip_sent", [None, ""])
def test_into_a_country_without_postal_codes_an_empty_zip_is_the_change(api, zip_sent):
    """As an address update (decisions §4.2): a zip sent null or empty is the change there;
    left out, it is not."""
    store = api.other_store(ships_to=["US", "AE"])
    first = paid(store)
    left_out = _put(store, first.id, {"country_code": "AE", "province": "Dubai"})
    assert (left_out.status_code, left_out.json()) == (422, ZIP_MUST_CHANGE)
    response = _put(store, first.id, {"country_code": "AE", "province": "Dubai", "zip": zip_sent})
    assert response.status_code == 200, response.text
    shown = order(store, first.id, V11)["shipping_address"]
    assert (shown["country_code"], shown["province"], shown["zip"] or None) == ("AE", "Dubayy", None)  # the ISO name


def test_the_zip_rule_comes_with_the_bodys_nesting_of_other_address_problems(api):
    """The country the store does not ship to is refused as before (check_location), once the
    zip changes with it."""
    first = paid(api)
    response = _put(api, first.id, {"country_code": "BR", "zip": "01001-000"})
    assert response.status_code == 422, response.text
    assert set(response.json()["errors"]) == {"shipping_address"}
    assert "zip" not in response.json()["errors"]["shipping_address"]
    assert order(api, first.id, V11)["shipping_address"]["country_code"] == "US"
