"""Fidelity (issue 15): the fields integrations built for the real service used to reject,
asserted by JSON type and value in each version, on both databases.

- order `line_items[].original_price` is a number in both versions (03-real-fields "order");
- 2021-01 address `original_shipping_lines` is an array, `[]` without an override;
- 2021-11 discount `applies_to.purchase_item_type` is upper case (decisions §7.5, corrected),
  input in either case;
- the store's `email`, `phone` and `checkout_logo_url` are strings, `""` until set (decisions
  §1.6; `rebill stores create|update`);
- an order's `external_order_number.ecommerce` (2021-11) is a string: the order's number in its
  store (docs/api-choices.md, Orders); 2021-01 `platform_order_number` is that number.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from rebill.cli import app as cli
from rebill.domain.order import repository as order_repo
from rebill.domain.store import repository as store_repo
from rebill.domain.store import service as store_service
from rebill.errors import ValidationFailed
from rebill.models import revisions
from rebill.models.order import order_numbers
from tests.api.test_orders import prepaid, set_order
from tests.api.test_real_fields import NUM, STR, assert_fields
from tests.builders import make_address, make_customer, make_onetime, make_orders, make_payment_method

V01, V11 = "2021-01", "2021-11"


def _ok(response: Any, key: str) -> Any:
    assert response.status_code in (200, 201), response.text
    return response.json()[key]


# Order line items: original_price is a number ------------------------------------------------

def _order_with_two_lines(api: Any) -> Any:
    """A paid order holding a subscription line at 12.50 and a one-time line at 7.00."""
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = make_address(api, customer)
    today = api.clock.now().date()
    make_onetime(api, address, price=Decimal("7"), next_charge_scheduled_at=today)
    [first] = make_orders(api, address)
    return first


def test_order_line_original_price_is_a_json_number_in_both_versions(vapi):
    first = _order_with_two_lines(vapi)
    shown = [_ok(vapi.get(f"/orders/{first.id}"), "order"),
             *_ok(vapi.get("/orders", params={"ids": str(first.id)}), "orders")]
    for order in shown:
        assert_fields(order, [("line_items[].original_price", {NUM})])
        prices = sorted(line["original_price"] for line in order["line_items"])
        assert prices == [7.0, 12.5]
        assert all(type(p) is float for p in prices)


def test_order_original_price_keeps_the_unit_price_to_the_cent(vapi):
    first = make_orders(vapi, price=Decimal("1234567.89"))[0]
    [line] = _ok(vapi.get(f"/orders/{first.id}"), "order")["line_items"]
    assert line["original_price"] == 1234567.89
    assert Decimal(str(line["original_price"])) == Decimal(first.line_items[0]["unit_price"])


def test_only_original_price_turns_into_a_number_other_amounts_stay_strings(vapi):
    first = make_orders(vapi)[0]
    order = _ok(vapi.get(f"/orders/{first.id}"), "order")
    [line] = order["line_items"]
    assert isinstance(order["total_price"], str) and isinstance(order["subtotal_price"], str)
    assert isinstance(line["price"], str)
    if vapi.version == V11:
        assert (line["unit_price"], line["total_price"]) == ("12.50", "12.50")
    # A charge's line keeps its string (03-real-fields charge: string).
    [charge_line] = _ok(vapi.get(f"/charges/{first.charge_id}"), "charge")["line_items"]
    assert charge_line["original_price"] == "12.50"


# 2021-01 address: original_shipping_lines is an array -----------------------------------------

def test_2021_01_address_without_an_override_has_empty_original_shipping_lines(api):
    address = make_address(api)
    customer_id = address.customer_id
    shown = [_ok(api.get(f"/addresses/{address.id}", version=V01), "address"),
             *_ok(api.get("/addresses", params={"customer_id": customer_id}, version=V01), "addresses"),
             *_ok(api.get(f"/customers/{customer_id}/addresses", version=V01), "addresses")]
    assert len(shown) == 3
    for body in shown:
        assert body["original_shipping_lines"] == []
        assert body["shipping_lines_override"] is None  # 03-real-fields: null there


def test_2021_01_original_shipping_lines_follows_the_override_and_empties_when_it_is_removed(api):
    created = _ok(api.post(f"/customers/{make_customer(api).id}/addresses", version=V01, json={
        "address1": "1 Main St", "city": "Austin", "country": "United States", "province": "TX", "zip": "73301",
        "first_name": "Ada", "last_name": "Lovelace", "phone": ""}), "address")
    assert created["original_shipping_lines"] == []
    lines = [{"code": "std", "price": "4.00", "title": "Standard"}]
    updated = _ok(api.put(f"/addresses/{created['id']}", version=V01, json={"shipping_lines_override": lines}),
                  "address")
    assert updated["original_shipping_lines"] == updated["shipping_lines_override"] == lines
    cleared = _ok(api.put(f"/addresses/{created['id']}", version=V01, json={"original_shipping_lines": None}),
                  "address")
    assert (cleared["original_shipping_lines"], cleared["shipping_lines_override"]) == ([], None)


def test_2021_01_address_sent_back_as_shown_keeps_the_store_shipping(api):
    """Found by an audit: the GET body sent back answered 422 (`[]` against null), and
    `original_shipping_lines: []` alone put an empty override on the address, so every charge
    lost its shipping. `[]` under the old name is no override, as it shows."""
    from tests.api.test_charges_totals import set_rates
    from tests.builders import make_subscription
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5.00"}])
    address = make_address(api)
    make_subscription(api, address)
    shown = _ok(api.get(f"/addresses/{address.id}", version=V01), "address")
    assert (shown["original_shipping_lines"], shown["shipping_lines_override"]) == ([], None)

    def shipping() -> list[str]:
        [charge] = _ok(api.get("/charges", params={"address_id": address.id}, version=V01), "charges")
        return [line["price"] for line in charge["shipping_lines"]]

    assert shipping() == ["5.00"]
    for body in (shown, {"original_shipping_lines": []},
                 {"shipping_lines_override": None, "original_shipping_lines": []}):
        again = _ok(api.put(f"/addresses/{address.id}", version=V01, json=body), "address")
        assert (again["original_shipping_lines"], again["shipping_lines_override"]) == ([], None)
        assert shipping() == ["5.00"]
    # Both names sent: the new one decides; a free-shipping override is made with it.
    free = _ok(api.put(f"/addresses/{address.id}", version=V01,
                       json={"shipping_lines_override": [], "original_shipping_lines": []}), "address")
    assert free["shipping_lines_override"] == [] and shipping() == []
    back = _ok(api.put(f"/addresses/{address.id}", version=V01, json=free), "address")
    assert back["shipping_lines_override"] == [] and shipping() == []


def test_2021_11_address_has_no_original_shipping_lines(api):
    body = _ok(api.get(f"/addresses/{make_address(api).id}", version=V11), "address")
    assert "original_shipping_lines" not in body and body["shipping_lines_override"] is None


# 2021-11 discount: purchase_item_type upper case ------------------------------------------------

def _discount(api: Any, **body: Any) -> Any:
    return api.post("/discounts", version=V11, json={"code": f"FID{next(_codes)}", "value": "10",
                                                     "value_type": "percentage", **body})


_codes = iter(range(1, 10**6))


@pytest.mark.parametrize("sent,shown", [
    ("subscription", "SUBSCRIPTION"), ("ONETIME", "ONETIME"), ("All", "ALL"), (" onetime ", "ONETIME")])
def test_2021_11_discount_purchase_item_type_is_upper_case_whatever_case_was_sent(api, sent, shown):
    made = _ok(_discount(api, applies_to={"purchase_item_type": sent}), "discount")
    assert made["applies_to"]["purchase_item_type"] == shown
    again = _ok(api.get(f"/discounts/{made['id']}", version=V11), "discount")
    listed = [d for d in _ok(api.get("/discounts", version=V11), "discounts") if d["id"] == made["id"]]
    assert again["applies_to"] == listed[0]["applies_to"] == made["applies_to"]
    old = _ok(api.get(f"/discounts/{made['id']}", version=V01), "discount")
    assert old["applies_to_product_type"] == shown


def test_2021_11_discount_without_applies_to_shows_all(api):
    made = _ok(_discount(api), "discount")
    assert made["applies_to"] == {"ids": [], "purchase_item_type": "ALL", "resource": None}


@pytest.mark.parametrize("flat", [{"applies_to_product_type": "subscription"}, {}])
def test_a_discount_made_with_the_flat_names_shows_upper_case_in_2021_11(api, flat):
    made = _ok(api.post("/discounts", version=V01, json={"code": f"FLAT{next(_codes)}", "value": "10",
                                                         "discount_type": "percentage", "duration": "forever",
                                                         **flat}), "discount")
    head = _ok(api.get(f"/discounts/{made['id']}", version=V11), "discount")
    assert head["applies_to"]["purchase_item_type"] == ("SUBSCRIPTION" if flat else "ALL")


@pytest.mark.parametrize("sent", ["everything", "", "sub"])
def test_2021_11_discount_refuses_an_unknown_purchase_item_type_naming_the_upper_case_values(api, sent):
    response = _discount(api, applies_to={"purchase_item_type": sent})
    assert response.status_code == 422, response.text
    assert response.json() == {"errors": {"applies_to": {"purchase_item_type": [
        "must be one of: ALL, ONETIME, SUBSCRIPTION"]}}}


def test_2021_11_discount_refuses_a_purchase_item_type_that_is_not_a_string(api):
    response = _discount(api, applies_to={"purchase_item_type": 3})
    assert response.status_code == 422, response.text
    assert response.json() == {"errors": {"applies_to": {"purchase_item_type": ["must be a string"]}}}


# The store's contact settings: strings, "" until set ----------------------------------------------

STORE_SETTINGS_11 = [("email", {STR}), ("phone", {STR}), ("checkout_logo_url", {STR})]
SHOP_SETTINGS_01 = [*STORE_SETTINGS_11, ("shop_email", {STR}), ("shop_phone", {STR})]


def _settings(api: Any) -> dict[str, Any]:
    """The contact settings as GET /store (2021-11) and GET /shop (2021-01, both keys) show them."""
    store = _ok(api.get("/store", version=V11), "store")
    shop = api.get("/shop", version=V01)
    assert shop.status_code == 200, shop.text
    body = shop.json()
    assert_fields(store, STORE_SETTINGS_11)
    for key in ("shop", "store"):
        assert_fields(body[key], SHOP_SETTINGS_01)
        assert (body[key]["shop_email"], body[key]["shop_phone"]) == (body[key]["email"], body[key]["phone"])
        assert {n: body[key][n] for n in ("email", "phone", "checkout_logo_url")} == {
            n: store[n] for n in ("email", "phone", "checkout_logo_url")}
    return {n: store[n] for n in ("email", "phone", "checkout_logo_url")}


def test_a_new_store_shows_empty_strings_in_both_versions(api):
    assert _settings(api) == {"email": "", "phone": "", "checkout_logo_url": ""}


def test_store_settings_given_at_creation_are_shown(api):
    other = api.other_store(email=" owner@shop.test ", phone="+1 415 555 0100",
                            checkout_logo_url="https://cdn.shop.test/logo.png")
    assert _settings(other) == {"email": "owner@shop.test", "phone": "+1 415 555 0100",
                                "checkout_logo_url": "https://cdn.shop.test/logo.png"}


def _update(api: Any, **settings: Any) -> Any:
    with api.db.write() as conn:
        store = store_repo.get(conn, api.store.id)
        assert store is not None
        return store_service.update_settings(conn, api.clock.now(), store, **settings)


def test_updating_some_settings_leaves_the_others_and_empty_strings_clear_them(api):
    _update(api, email="billing@shop.test", phone="555-0100")
    assert _settings(api) == {"email": "billing@shop.test", "phone": "555-0100", "checkout_logo_url": ""}
    _update(api, checkout_logo_url="http://shop.test/l.svg")
    assert _settings(api) == {"email": "billing@shop.test", "phone": "555-0100",
                              "checkout_logo_url": "http://shop.test/l.svg"}
    _update(api, email="", phone="")
    assert _settings(api) == {"email": "", "phone": "", "checkout_logo_url": "http://shop.test/l.svg"}


def test_the_store_email_is_the_token_information_contact_once_set(api, version):
    _update(api, email="owner@shop.test")
    info = _ok(api.get("/token_information", version=version), "token_information")
    assert (info["contact_email"], info["client"]["contact_email"]) == ("owner@shop.test", "owner@shop.test")


def test_an_update_that_changes_nothing_writes_nothing(api):
    _update(api, email="owner@shop.test")
    with api.db.read() as conn:
        before = store_repo.get(conn, api.store.id)
        revision = conn.execute(select(revisions.c.value)).scalar_one()
    api.clock.advance(timedelta(minutes=5))
    after = _update(api, email=" owner@shop.test ", phone="")
    with api.db.read() as conn:
        assert conn.execute(select(revisions.c.value)).scalar_one() == revision
    assert after == before


def test_an_update_moves_updated_at(api):
    api.clock.advance(timedelta(minutes=5))
    after = _update(api, phone="555-0100")
    assert after.updated_at == api.clock.now() > api.store.updated_at
    store = _ok(api.get("/store", version=V11), "store")
    assert store["updated_at"] == api.clock.now().replace(microsecond=0).isoformat()


@pytest.mark.parametrize("settings,errors", [
    ({"email": "not-an-email"}, {"email": ["is invalid"]}),
    ({"email": "a@b"}, {"email": ["is invalid"]}),
    ({"email": "x" * 250 + "@a.com"}, {"email": ["is too long (at most 255 characters)"]}),
    ({"phone": "1" * 65}, {"phone": ["is too long (at most 64 characters)"]}),
    ({"phone": "55\x000"}, {"phone": ["must not contain NUL characters"]}),
    ({"checkout_logo_url": "ftp://shop.test/logo.png"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "logo.png"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://shop.test/a logo.png"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://[::1/logo"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://shop.test:99999/l.png"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://me:pw@shop.test/l.png"}, {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://shop.test/\u202egnp.png"},
     {"checkout_logo_url": ["must be an http or https URL"]}),
    ({"checkout_logo_url": "https://shop.test/" + "a" * 2040},
     {"checkout_logo_url": ["is too long (at most 2048 characters)"]}),
    ({"email": "bad", "checkout_logo_url": "bad"},
     {"email": ["is invalid"], "checkout_logo_url": ["must be an http or https URL"]}),
])
def test_bad_settings_are_refused_by_name_and_change_nothing(api, settings, errors):
    with pytest.raises(ValidationFailed) as refused:
        _update(api, **settings)
    assert refused.value.errors == errors
    with pytest.raises(ValidationFailed) as refused_at_creation:
        api.other_store(**settings)
    assert refused_at_creation.value.errors == errors
    assert _settings(api) == {"email": "", "phone": "", "checkout_logo_url": ""}


# The command line -----------------------------------------------------------------------------

runner = CliRunner()


def _url(api: Any) -> str:
    return api.db.engine.url.render_as_string(hide_password=False)


def _cli(api: Any, *args: str) -> Any:
    return runner.invoke(cli, [*args, "--database", _url(api)], catch_exceptions=False)


def test_stores_create_takes_the_settings(api):
    name = f"{api.store.name}-cli"
    result = _cli(api, "stores", "create", name, "--email", "owner@shop.test", "--phone", "+33 1 23",
                  "--checkout-logo-url", "https://shop.test/logo.png")
    assert result.exit_code == 0, result.output
    with api.db.read() as conn:
        store = store_repo.by_name(conn, name)
    assert store is not None
    assert (store.email, store.phone, store.checkout_logo_url) == ("owner@shop.test", "+33 1 23",
                                                                   "https://shop.test/logo.png")


def test_stores_create_without_settings_stores_empty_strings(api):
    name = f"{api.store.name}-plain"
    assert _cli(api, "stores", "create", name).exit_code == 0
    with api.db.read() as conn:
        store = store_repo.by_name(conn, name)
    assert store is not None and (store.email, store.phone, store.checkout_logo_url) == ("", "", "")


def test_stores_update_changes_what_it_is_given_and_the_api_shows_it_at_once(api):
    result = _cli(api, "stores", "update", api.store.name, "--email", "owner@shop.test",
                  "--checkout-logo-url", "https://shop.test/logo.png")
    assert result.exit_code == 0, result.output
    assert "updated email, checkout_logo_url of" in result.output
    assert _settings(api) == {"email": "owner@shop.test", "phone": "", "checkout_logo_url": "https://shop.test/logo.png"}
    result = _cli(api, "stores", "update", api.store.name, "--email", "")
    assert result.exit_code == 0, result.output
    assert _settings(api) == {"email": "", "phone": "", "checkout_logo_url": "https://shop.test/logo.png"}
    again = _cli(api, "stores", "update", api.store.name, "--email", "")
    assert again.exit_code == 0 and "nothing changed" in again.output


def test_stores_update_refuses_bad_settings_an_unknown_store_and_no_setting(api):
    bad = _cli(api, "stores", "update", api.store.name, "--email", "nope", "--checkout-logo-url", "ftp://x")
    assert bad.exit_code == 2
    assert "email: is invalid" in bad.output and "checkout_logo_url: must be an http or https URL" in bad.output
    unknown = _cli(api, "stores", "update", f"{api.store.name}-missing", "--email", "a@b.co")
    assert unknown.exit_code == 2 and "no store named" in unknown.output
    empty = _cli(api, "stores", "update", api.store.name)
    assert empty.exit_code == 2 and "nothing to change" in empty.output
    assert _settings(api) == {"email": "", "phone": "", "checkout_logo_url": ""}


def test_a_store_s_time_zone_is_set_by_the_command_line_and_decides_its_today(api):
    """decisions §1.3 (found by an audit: no command set one, so every store ran on UTC)."""
    name = f"{api.store.name}-kiritimati"
    made = _cli(api, "stores", "create", name, "--timezone", "Pacific/Kiritimati")
    assert made.exit_code == 0, made.output
    with api.db.read() as conn:
        assert store_repo.by_name(conn, name).timezone == "Pacific/Kiritimati"
    before = api.clock.now()
    try:
        moved = _cli(api, "stores", "update", api.store.name, "--timezone", " Pacific/Pago_Pago ")
        assert moved.exit_code == 0 and "updated timezone of" in moved.output, moved.output
        assert _ok(api.get("/store", version=V11), "store")["timezone"]["iana_name"] == "Pacific/Pago_Pago"
        # 05:00 UTC on March 2 is still March 1 in Pago Pago (UTC-11): March 1 is today there,
        # February 28 the past.
        api.clock.set(datetime(2027, 3, 2, 5, 0, tzinfo=UTC))
        address = make_address(api)
        body = {"address_id": address.id, "product_title": "Tea", "price": "5.00", "quantity": 1,
                "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}
        today = api.post("/subscriptions", json={**body, "next_charge_scheduled_at": "2027-03-01"}, version=V11)
        assert today.status_code == 201, today.text
        past = api.post("/subscriptions", json={**body, "next_charge_scheduled_at": "2027-02-28"}, version=V11)
        assert past.json()["errors"] == {"next_charge_scheduled_at": ["must not be in the past"]}
    finally:
        api.clock.set(before)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "utc+3", "../etc/passwd", "", "EST5EDT "])
def test_a_time_zone_not_in_the_tz_database_is_refused(api, zone):
    created = _cli(api, "stores", "create", f"{api.store.name}-bad-zone", "--timezone", zone)
    updated = _cli(api, "stores", "update", api.store.name, "--timezone", zone)
    if zone.strip() == "EST5EDT":  # a tz database name, spaces around it trimmed
        assert created.exit_code == updated.exit_code == 0, created.output + updated.output
        return
    for result in (created, updated):
        assert result.exit_code == 2, result.output
        assert "timezone: must be an IANA time zone name" in result.output
    with api.db.read() as conn:
        assert store_repo.by_name(conn, f"{api.store.name}-bad-zone") is None
        assert store_repo.by_name(conn, api.store.name).timezone == api.store.timezone


# Orders: external_order_number is the order's number in the store -----------------------------

def _numbers(api: Any, *order_ids: int) -> list[tuple[Any, Any]]:
    """(2021-11 external_order_number.ecommerce, 2021-01 platform_order_number) of each order."""
    found = []
    for order_id in order_ids:
        head = _ok(api.get(f"/orders/{order_id}", version=V11), "order")
        old = _ok(api.get(f"/orders/{order_id}", version=V01), "order")
        found.append((head["external_order_number"]["ecommerce"], old["platform_order_number"]))
    return found


def test_orders_are_numbered_from_one_in_each_store_as_strings_in_2021_11_and_integers_in_2021_01(api):
    first = make_orders(api)[0]
    second = make_orders(api)[0]
    other = api.other_store()
    elsewhere = make_orders(other)[0]
    assert _numbers(api, first.id, second.id) == [("1", 1), ("2", 2)]
    assert _numbers(other, elsewhere.id) == [("1", 1)]
    for order in _ok(api.get("/orders", version=V11), "orders"):
        assert_fields(order, [("external_order_number", {"object"}), ("external_order_number.ecommerce", {STR})])
    listed = _ok(api.get("/orders", version=V01), "orders")
    assert sorted(o["platform_order_number"] for o in listed) == [1, 2]


def test_the_orders_of_a_prepaid_charge_take_consecutive_numbers_in_date_order(api):
    orders = prepaid(api)
    assert [o.number for o in orders] == [1, 2, 3]
    assert [n for n, _ in _numbers(api, *(o.id for o in orders))] == ["1", "2", "3"]


def test_a_clone_takes_the_next_number_and_a_deleted_number_is_never_given_again(api):
    orders = prepaid(api)
    clone = _ok(api.post(f"/orders/{orders[0].id}/clone", version=V11,
                         json={"scheduled_at": (api.clock.now().date() + timedelta(days=30)).isoformat()}), "order")
    assert clone["external_order_number"] == {"ecommerce": "4"}
    assert api.delete(f"/orders/{clone['id']}", version=V11).status_code == 204
    after = make_orders(api)[0]
    assert _numbers(api, after.id) == [("5", 5)]
    with api.db.read() as conn:
        assert conn.execute(select(order_numbers.c.last_number)
                            .where(order_numbers.c.store_id == api.store.id)).scalar_one() == 5


def test_a_number_the_platform_set_is_shown_instead(api):
    first = make_orders(api)[0]
    set_order(api, first.id, external_order_number="#A-77")
    assert _numbers(api, first.id) == [("#A-77", None)]
    set_order(api, first.id, external_order_number="1001")
    assert _numbers(api, first.id) == [("1001", 1001)]


def test_two_transactions_making_orders_for_one_store_number_them_one_after_the_other(api):
    """PostgreSQL: the second waits on the counter's row until the first ends, then takes the
    numbers after the first's. SQLite serializes writers anyway (one write at a time)."""
    if api.db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has one writer at a time: nothing runs at once")
    taken: list[int] = []
    started = threading.Event()

    def second() -> None:
        with api.db.write() as conn:
            started.set()
            taken.append(order_repo.take_numbers(conn, api.store.id, 1))

    with api.db.write() as conn:
        first_last = order_repo.take_numbers(conn, api.store.id, 2)
        thread = threading.Thread(target=second)
        thread.start()
        assert started.wait(5)
        thread.join(0.3)
        assert thread.is_alive() and taken == [], "the second transaction must wait for the first"
    thread.join(5)
    assert (first_last, taken) == (2, [3])
