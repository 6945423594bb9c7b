"""Amounts of a charge (decisions §5.9, docs/api-choices.md "Amounts", the module docstring of
``domain/charge/totals.py``): lines, the address discount shared among the lines, store
shipping or the address's override, tax per line with taxes added or included, the
currency's minor digits (JPY 0, KWD 3), prepaid lines, exact strings to the minor unit."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from rebill.domain.store import rates
from rebill.models import stores
from tests.api.test_charges import V01, V11, charge, days, lines, only, weekly
from tests.builders import events_of, make_address, make_discount, make_onetime


def set_rates(api: Any, *, shipping: list[dict[str, Any]] | None = None, tax: list[dict[str, Any]] | None = None,
              taxes_included: bool | None = None) -> None:
    """Set the store's rates in the database and replan its addresses (an operator action);
    ``api.store`` follows, so builders plan with the new rates too."""
    with api.db.write() as conn:
        api.store = rates.update_rates(conn, api.clock.now(), api.store, shipping_rates=shipping, tax_rates=tax,
                                       taxes_included=taxes_included)


def queued_body(api: Any, address_id: int, version: str = V11) -> dict[str, Any]:
    return charge(api, only(api, address_id).id, version)


def with_discount(api: Any, address: Any, kind: str, value: str) -> int:
    discount_id = make_discount(api, discount_type=kind, value=value)
    response = api.put(f"/addresses/{address.id}", json={"discounts": [{"id": discount_id}]}, version=V11)
    assert response.status_code == 200, response.text
    return discount_id


def money(body: dict[str, Any]) -> tuple[str, ...]:
    return (body["subtotal_price"], body["total_discounts"], body["total_tax"], body["total_price"])


# Lines ---------------------------------------------------------------------------------------

def test_without_rates_or_discount_the_total_is_the_sum_of_the_lines(api):
    address = make_address(api)
    weekly(api, address, price="12.50")
    weekly(api, address, price="4.00", quantity=3)
    body = queued_body(api, address.id)
    assert [(li["unit_price"], li["quantity"], li["total_price"]) for li in body["line_items"]] == [
        ("12.50", 1, "12.50"), ("4.00", 3, "12.00")]
    assert body["total_line_items_price"] == "24.50"
    assert money(body) == ("24.50", "0.00", "0.00", "24.50")
    assert body["shipping_lines"] == [] and body["tax_lines"] == []


def test_subscriptions_and_onetimes_of_one_address_and_date_are_one_charge(api):
    address = make_address(api)
    sub = weekly(api, address, price="10.00")
    onetime = make_onetime(api, address, price="2.25", next_charge_scheduled_at=days(api, 7))
    body = queued_body(api, address.id)
    assert lines(body) == [sub.id, onetime.id]
    assert body["total_price"] == "12.25"


def test_a_prepaid_line_costs_the_price_of_every_order_it_pays_for(vapi):
    address = make_address(vapi)
    sub = weekly(vapi, address, price="12.50", charge_interval_frequency=21, order_interval_frequency=7)
    body = queued_body(vapi, address.id, vapi.version)
    line = body["line_items"][0]
    if vapi.version == V11:
        assert body["orders_count"] == 3
        assert (line["unit_price"], line["original_price"], line["total_price"]) == ("37.50", "37.50", "37.50")
    else:
        assert (line["subscription_id"], line["price"]) == (sub.id, "37.50")
    assert body["total_price"] == "37.50"


def test_a_charge_with_a_prepaid_and_a_plain_line_counts_the_prepaid_orders(api):
    address = make_address(api)
    weekly(api, address, price="10.00", charge_interval_frequency=21, order_interval_frequency=7)
    weekly(api, address, price="5.00")
    body = queued_body(api, address.id)
    assert body["orders_count"] == 3
    assert [li["total_price"] for li in body["line_items"]] == ["30.00", "5.00"]
    assert body["total_price"] == "35.00"


# Shipping --------------------------------------------------------------------------------

def test_the_store_rate_for_the_country_wins_over_the_rate_for_every_country(api):
    set_rates(api, shipping=[{"code": "world", "title": "World", "price": "15"},
                             {"code": "us", "title": "US", "price": "4.5", "country_codes": ["US"]},
                             {"code": "us2", "title": "US 2", "price": "9", "country_codes": ["US"]}])
    us = make_address(api)
    gb = make_address(api, country_code="GB", province=None, zip="SW1A 1AA", city="London")
    weekly(api, us, price="10.00")
    weekly(api, gb, price="10.00")
    us_body, gb_body = queued_body(api, us.id), queued_body(api, gb.id)
    assert [(s["code"], s["price"], s["source"]) for s in us_body["shipping_lines"]] == [("us", "4.50", "store")]
    assert [(s["code"], s["price"]) for s in gb_body["shipping_lines"]] == [("world", "15.00")]
    assert (us_body["total_price"], gb_body["total_price"]) == ("14.50", "25.00")


def test_a_rate_for_another_currency_does_not_apply(api):
    api = api.other_store(presentment_currencies=["EUR"])
    set_rates(api, shipping=[{"code": "eur", "title": "EU", "price": "3", "currency": "EUR"}])
    address = make_address(api)
    weekly(api, address, price="10.00")
    body = queued_body(api, address.id)
    assert body["shipping_lines"] == [] and body["total_price"] == "10.00"


def test_a_rate_must_be_exact_in_every_currency_it_applies_in(api):
    """Found by an audit: a rate naming no currency applies in every currency of the store as
    written, and 4.99 was charged 5 on an address in yen (0.40: free shipping); the price was
    checked in the store's currency only. Such a rate is refused, saying how to give it; a rate
    naming a currency is checked in that one, which must be the store's."""
    from rebill.errors import ValidationFailed
    api = api.other_store(presentment_currencies=["JPY"])
    for given, errors in (
            ([{"price": "4.99"}], {"0.price": ["has too many decimal places for JPY (at most 0); a rate that names no "
                                              "currency applies in every currency of the store: give this one a "
                                              "currency, and another rate for JPY"]}),
            ([{"price": "4.99", "currency": "jpy"}], {"0.price": ["has too many decimal places for JPY (at most 0)"]}),
            ([{"price": "3", "currency": "EUR"}], {"0.currency": ["must be one of the store's currencies: JPY, USD"]})):
        with pytest.raises(ValidationFailed) as refused:
            set_rates(api, shipping=given)
        assert refused.value.errors == {"shipping_rates": errors}
    set_rates(api, shipping=[{"price": "4.99", "currency": "usd"}, {"price": "500", "currency": "JPY"}])
    address = make_address(api, presentment_currency="JPY")
    weekly(api, address, price="1000")
    body = queued_body(api, address.id)
    assert [line["price"] for line in body["shipping_lines"]] == ["500"] and body["total_price"] == "1500"


def test_a_rate_in_the_charges_currency_wins_over_one_naming_none(api):
    """Found by an audit: a plain `5` listed first beat the store's `700` yen rate for a charge in
    yen, which paid 5 yen of shipping. The country still comes first: a rate for every country
    in yen does not beat the country's own plain rate."""
    api = api.other_store(presentment_currencies=["JPY"])
    set_rates(api, shipping=[{"code": "plain", "title": "Plain", "price": "5", "country_codes": ["US"]},
                             {"code": "yen", "title": "Yen", "price": "700", "country_codes": ["US"], "currency": "JPY"},
                             {"code": "world", "title": "World", "price": "900", "currency": "JPY"}])
    yen, dollars = make_address(api, presentment_currency="JPY"), make_address(api)
    gb = make_address(api, presentment_currency="JPY", country_code="GB", province=None, zip="SW1A 1AA",
                      city="London")
    for address in (yen, dollars, gb):
        weekly(api, address, price="1000")
    assert [s["code"] for s in queued_body(api, yen.id)["shipping_lines"]] == ["yen"]
    assert [s["code"] for s in queued_body(api, dollars.id)["shipping_lines"]] == ["plain"]
    assert [s["code"] for s in queued_body(api, gb.id)["shipping_lines"]] == ["world"]
    set_rates(api, shipping=[{"code": "plain", "title": "Plain", "price": "5", "country_codes": ["US"]},
                             {"code": "world", "title": "World", "price": "900", "currency": "JPY"}])
    assert [s["code"] for s in queued_body(api, yen.id)["shipping_lines"]] == ["plain"]


def test_a_four_digit_currency_keeps_its_four_digits(api):
    """Found by an audit: ISO 4217's CLF (and UYW) have four minor digits; a CLF store refused a
    price of `1.2345` ("at most 2") and showed amounts with two."""
    api = api.other_store(currency="CLF")
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "0.1234"}],
              tax=[{"country_code": "US", "rate": "0.1"}])
    address = make_address(api)
    made = api.post("/subscriptions", json={"address_id": address.id, "product_title": "Index", "price": "1.2345",
                                            "quantity": 1, "charge_interval_frequency": 1, "order_interval_frequency": 1,
                                            "order_interval_unit": "month",
                                            "next_charge_scheduled_at": str(days(api, 5))})
    assert made.status_code == 201, made.text
    assert made.json()["subscription"]["price"] == "1.2345"
    body = queued_body(api, address.id)
    assert (body["subtotal_price"], body["total_tax"], body["total_price"]) == ("1.2345", "0.1235", "1.4814")
    refused = api.post("/subscriptions", json={**{k: v for k, v in made.json()["subscription"].items()
                                                  if k in ("address_id", "product_title", "quantity")},
                                               "price": "1.23456", "charge_interval_frequency": 1,
                                               "order_interval_frequency": 1, "order_interval_unit": "month",
                                               "next_charge_scheduled_at": str(days(api, 5))})
    assert refused.json() == {"errors": {"price": ["has too many decimal places for CLF (at most 4)"]}}


def test_the_addresss_shipping_override_wins_over_the_store_rate(vapi):
    set_rates(vapi, shipping=[{"code": "std", "title": "Standard", "price": "5"}])
    address = make_address(vapi)
    weekly(vapi, address, price="10.00")
    response = vapi.put(f"/addresses/{address.id}", version=V11, json={"shipping_lines_override": [
        {"code": "express", "title": "Express", "price": "7.255"}, {"code": "gift", "title": "Gift wrap", "price": "1"}]})
    assert response.status_code == 200, response.text
    body = queued_body(vapi, address.id, vapi.version)
    if vapi.version == V11:
        assert [(s["code"], s["price"], s["source"], s["taxable"]) for s in body["shipping_lines"]] == [
            ("express", "7.26", "override", False), ("gift", "1.00", "override", False)]
    else:
        assert body["shipping_lines"] == [{"code": "express", "price": "7.26", "title": "Express"},
                                          {"code": "gift", "price": "1.00", "title": "Gift wrap"}]
    assert body["total_price"] == "18.26"


def test_changing_the_store_rates_updates_the_queued_charge_in_place(api):
    address = make_address(api)
    weekly(api, address, price="10.00")
    before = only(api, address.id)
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "2"}])
    after = queued_body(api, address.id)
    assert after["id"] == before.id and after["total_price"] == "12.00"
    assert ("charge/updated", before.id) in events_of(api, before.id)


# Tax ---------------------------------------------------------------------------------------

def test_tax_is_added_per_line_and_rounded_per_line(api):
    set_rates(api, tax=[{"country_code": "US", "rate": "0.1", "title": "Sales tax"}])
    address = make_address(api)
    weekly(api, address, price="0.05")
    weekly(api, address, price="0.05")
    body = queued_body(api, address.id)
    # 0.005 per line rounds half up to 0.01 each: 0.02, where the sum (0.10 x 0.1) would give 0.01.
    assert [li["tax_due"] for li in body["line_items"]] == ["0.01", "0.01"]
    assert [li["tax_lines"] for li in body["line_items"]][0] == [
        {"price": "0.01", "rate": "0.1", "title": "Sales tax", "unit_price": "0.01"}]
    assert body["tax_lines"] == [{"price": "0.02", "rate": "0.1", "title": "Sales tax"}]
    assert money(body) == ("0.10", "0.00", "0.02", "0.12")


def test_a_rate_stored_with_a_blank_province_is_the_countrys(api):
    # Rates set before the command line stored a blank province as none are read as the
    # country's rate; a province's own rate still wins over it.
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(tax_rates=[
            {"country_code": "US", "province": "", "rate": "0.1", "title": "Country"},
            {"country_code": "US", "province": "NY", "rate": "0.2", "title": "New York"}]))
    set_rates(api, shipping=[])  # replans the store with the rates as stored
    address = make_address(api)  # California
    weekly(api, address, price="10.00")
    assert queued_body(api, address.id)["tax_lines"] == [{"price": "1.00", "rate": "0.1", "title": "Country"}]


def test_tax_of_a_quantity_shows_the_unit_tax_in_the_tax_line(api):
    set_rates(api, tax=[{"country_code": "US", "rate": "0.0725"}])
    address = make_address(api)
    weekly(api, address, price="4.00", quantity=3)
    line = queued_body(api, address.id)["line_items"][0]
    assert (line["taxable_amount"], line["tax_due"]) == ("12.00", "0.87")  # 0.87
    assert line["tax_lines"] == [{"price": "0.87", "rate": "0.0725", "title": "Tax", "unit_price": "0.29"}]


def test_the_unit_tax_is_rounded_once_from_the_units_own_amount(api):
    """Found by an audit: the line's rounded tax over its quantity rounded twice (1733 x 2 at
    10 % in JPY: the line's 346.6 -> 347, then 347 / 2 = 173.5 -> 174, for a unit's 173.3)."""
    yen = api.other_store(currency="JPY")
    set_rates(yen, tax=[{"country_code": "JP", "rate": "0.1"}])
    address = make_address(yen, country_code="JP", province="Tokyo", zip="100-0001", city="Chiyoda")
    weekly(yen, address, price="1733", quantity=2)
    line = queued_body(yen, address.id)["line_items"][0]
    assert (line["total_price"], line["tax_due"]) == ("3466", "347")
    assert line["tax_lines"] == [{"price": "347", "rate": "0.1", "title": "Tax", "unit_price": "173"}]


def test_the_unit_tax_of_a_discounted_line_is_the_tax_of_its_discounted_unit(api):
    set_rates(api, tax=[{"country_code": "US", "rate": "0.0725"}], taxes_included=True)
    address = make_address(api)
    weekly(api, address, price="9.99", quantity=3)
    with_discount(api, address, "percentage", "10")
    line = queued_body(api, address.id)["line_items"][0]
    # 29.97 - 3.00 = 26.97; 26.97 x 0.0725 / 1.0725 = 1.823... -> 1.82; a unit: 8.99 -> 0.6077 -> 0.61
    assert (line["taxable_amount"], line["tax_due"]) == ("26.97", "1.82")
    assert line["tax_lines"][0]["unit_price"] == "0.61"


def test_a_province_rate_wins_over_the_country_rate(api):
    set_rates(api, tax=[{"country_code": "US", "rate": "0.05", "title": "Federal"},
                        {"country_code": "US", "province": "CA", "rate": "0.0725", "title": "California"}])
    ca = make_address(api)
    ny = make_address(api, province="NY", zip="10001", city="New York")
    weekly(api, ca, price="12.50")
    weekly(api, ny, price="12.50")
    ca_body, ny_body = queued_body(api, ca.id), queued_body(api, ny.id)
    assert (ca_body["tax_lines"][0]["title"], ca_body["total_tax"], ca_body["total_price"]) == (
        "California", "0.91", "13.41")  # 12.50 x 7.25 % = 0.90625
    assert (ny_body["tax_lines"][0]["title"], ny_body["total_tax"], ny_body["total_price"]) == (
        "Federal", "0.63", "13.13")  # 0.625 rounds half up


def test_taxes_included_are_shown_and_not_added(vapi):
    set_rates(vapi, shipping=[{"price": "5"}], tax=[{"country_code": "US", "rate": "0.0725"}], taxes_included=True)
    address = make_address(vapi)
    weekly(vapi, address, price="12.50")
    body = queued_body(vapi, address.id, vapi.version)
    # 12.50 x 0.0725 / 1.0725 = 0.84498... -> 0.84
    assert (body["total_tax"], body["total_price"]) == ("0.84", "17.50")
    if vapi.version == V11:
        assert body["taxes_included"] is True and body["line_items"][0]["unit_price_includes_tax"] is True
        assert body["line_items"][0]["tax_due"] == "0.84"


def test_an_untaxed_item_pays_no_tax_and_a_charge_of_untaxed_items_is_not_taxable(api):
    from tests.api.test_charges import make_product
    set_rates(api, tax=[{"country_code": "US", "rate": "0.1"}])
    address = make_address(api)
    weekly(api, address, external_product_id=make_product(api, taxable=False), price="10.00")
    body = queued_body(api, address.id)
    line = body["line_items"][0]
    assert (line["taxable"], line["taxable_amount"], line["tax_due"], line["tax_lines"]) == (False, "0.00", "0.00", [])
    assert (body["taxable"], body["tax_lines"], body["total_price"]) == (False, [], "10.00")


def test_shipping_is_not_taxed(api):
    set_rates(api, shipping=[{"price": "10"}], tax=[{"country_code": "US", "rate": "0.2"}])
    address = make_address(api)
    weekly(api, address, price="5.00")
    assert money(queued_body(api, address.id)) == ("5.00", "0.00", "1.00", "16.00")


# Discounts ----------------------------------------------------------------------------------

def test_a_percentage_discount_is_rounded_once_half_up_and_shown_in_each_version(vapi):
    address = make_address(vapi)
    weekly(vapi, address, price="12.50")
    discount_id = with_discount(vapi, address, "percentage", "15")
    body = queued_body(vapi, address.id, vapi.version)
    assert (body["total_discounts"], body["total_price"]) == ("1.88", "10.62")  # 1.875 -> 1.88
    code = next(iter(body["discounts"]))["code"] if vapi.version == V11 else body["discount_codes"][0]["code"]
    if vapi.version == V11:
        assert body["discounts"] == [{"id": discount_id, "code": code, "value": "15", "value_type": "percentage"}]
    else:
        assert body["discount_codes"] == [{"amount": "1.88", "code": code, "type": "percentage"}]


def test_a_discount_is_shared_among_the_lines_by_largest_remainder_and_taxed_after(api):
    set_rates(api, tax=[{"country_code": "US", "rate": "0.1"}])
    address = make_address(api)
    weekly(api, address, price="10.00")
    weekly(api, address, price="5.00")
    with_discount(api, address, "fixed_amount", "1")
    body = queued_body(api, address.id)
    # 1.00 x 10/15 = 0.666..., x 5/15 = 0.333...: the left-over cent goes to the larger remainder.
    assert [li["taxable_amount"] for li in body["line_items"]] == ["9.33", "4.67"]
    assert [li["tax_due"] for li in body["line_items"]] == ["0.93", "0.47"]
    assert [li["total_price"] for li in body["line_items"]] == ["10.00", "5.00"]
    assert money(body) == ("15.00", "1.00", "1.40", "15.40")


def test_a_fixed_discount_never_takes_more_than_the_lines_and_never_touches_shipping(api):
    set_rates(api, shipping=[{"price": "6"}])
    address = make_address(api)
    weekly(api, address, price="12.50")
    with_discount(api, address, "fixed_amount", "50")
    body = queued_body(api, address.id)
    assert money(body) == ("12.50", "12.50", "0.00", "6.00")


def test_removing_the_discount_restores_the_total(api):
    address = make_address(api)
    weekly(api, address, price="20.00")
    with_discount(api, address, "percentage", "10")
    assert queued_body(api, address.id)["total_price"] == "18.00"
    assert api.put(f"/addresses/{address.id}", json={"discounts": []}).status_code == 200
    body = queued_body(api, address.id)
    assert (body["discounts"], body["total_discounts"], body["total_price"]) == ([], "0.00", "20.00")


# Currencies ---------------------------------------------------------------------------------

def test_jpy_amounts_have_no_minor_digits(api):
    yen = api.other_store(currency="JPY")
    set_rates(yen, shipping=[{"price": "500"}], tax=[{"country_code": "JP", "rate": "0.1"}])
    address = make_address(yen, country_code="JP", province="Tokyo", zip="100-0001", city="Chiyoda")
    weekly(yen, address, price="999")
    with_discount(yen, address, "percentage", "15")
    body = queued_body(yen, address.id)
    # 999 x 15 % = 149.85 -> 150; (999 - 150) x 10 % = 84.9 -> 85; 999 - 150 + 500 + 85 = 1434
    assert body["currency"] == "JPY"
    assert money(body) == ("999", "150", "85", "1434")
    line = body["line_items"][0]
    assert (line["unit_price"], line["taxable_amount"], line["tax_due"]) == ("999", "849", "85")
    assert body["shipping_lines"][0]["price"] == "500"


def test_a_three_decimal_currency_keeps_three_digits(api):
    dinar = api.other_store(currency="KWD")
    set_rates(dinar, shipping=[{"price": "1.5"}], tax=[{"country_code": "AE", "rate": "0.05"}])
    address = make_address(dinar, country_code="AE", province="DU", zip=None, city="Dubai")
    weekly(dinar, address, price="12.345")
    body = queued_body(dinar, address.id)
    # 12.345 x 5 % = 0.61725 -> 0.617
    assert money(body) == ("12.345", "0.000", "0.617", "14.462")
    assert body["shipping_lines"][0]["price"] == "1.500"
    assert body["line_items"][0]["unit_price"] == "12.345"


def test_an_address_presenting_another_currency_is_charged_in_it(api):
    store = api.other_store(presentment_currencies=["JPY"])
    address = make_address(store, presentment_currency="JPY")
    weekly(store, address, price="1250", quantity=2)
    body = queued_body(store, address.id, V01)
    assert (body["total_price"], body["line_items"][0]["price"]) == ("2500", "1250")
    assert queued_body(store, address.id)["currency"] == "JPY"


def test_a_rate_in_exponent_form_is_stored_and_shown_positional(api):
    # Python writes some small decimals with an exponent (str(Decimal("1e-8")) is "1E-8"); a
    # client reading `rate` expects a plain decimal string.
    set_rates(api, tax=[{"country_code": "US", "rate": "1e-8", "title": "Tiny"}],
              shipping=[{"price": "1E+1", "country_codes": ["US"]}])
    assert [r["rate"] for r in api.store.tax_rates] == ["0.00000001"]
    assert [r["price"] for r in api.store.shipping_rates] == ["10"]
    address = make_address(api)
    weekly(api, address, price="100000000.00")
    body = queued_body(api, address.id)
    assert body["tax_lines"] == [{"price": "1.00", "rate": "0.00000001", "title": "Tiny"}]
    assert body["line_items"][0]["tax_lines"][0]["rate"] == "0.00000001"
    assert body["total_tax"] == "1.00"


def test_a_rate_stored_in_exponent_form_before_is_shown_positional(api):
    # A store whose rate was saved as "1E-8" by an older version: the plan (which reads the
    # store afresh) renders it positional.
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(
            tax_rates=[{"country_code": "US", "province": None, "rate": "1E-8", "title": "Tiny"}]))
    address = make_address(api)
    weekly(api, address, price="100000000.00")
    assert queued_body(api, address.id)["tax_lines"] == [{"price": "1.00", "rate": "0.00000001", "title": "Tiny"}]
