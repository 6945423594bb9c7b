"""One charge per address and date: items share it, split off and come back, with stable ids."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from sqlalchemy import update

from rebill.domain.store import rates
from rebill.jobs.regenerate import run_due
from rebill.models import purchase_items
from tests.builders import charges_of, events_of, make_address
from tests.scenarios.conftest import assert_schedule_consistent
from tests.scenarios.test_schedule_intervals import queued, subscribe


def charge_of(api, subscription_id, status="queued"):
    found = api.get("/charges", params={"purchase_item_id": subscription_id, "status": status}).json()["charges"]
    assert len(found) == 1, found
    return found[0]


def test_two_subscriptions_on_one_address_and_date_share_one_charge_and_split_when_one_moves(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    coffee = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    tea = subscribe(api, address, product_title="Tea", price="4.00", quantity=3, next_charge_scheduled_at="2026-02-01")
    shared = charge_of(api, coffee["id"])
    assert [line["purchase_item_id"] for line in shared["line_items"]] == [coffee["id"], tea["id"]]
    assert shared["total_price"] == "24.50"

    api.post(f"/subscriptions/{tea['id']}/set_next_charge_date", json={"date": "2026-02-10"})
    assert queued(api, address.id) == [("2026-02-01", [coffee["id"]]), ("2026-02-10", [tea["id"]])]
    assert charge_of(api, coffee["id"])["id"] == shared["id"]  # same address and date: same charge
    assert charge_of(api, coffee["id"])["total_price"] == "12.50"

    api.post(f"/subscriptions/{tea['id']}/set_next_charge_date", json={"date": "2026-02-01"})
    assert queued(api, address.id) == [("2026-02-01", [coffee["id"], tea["id"]])]
    assert charge_of(api, tea["id"])["id"] == shared["id"]
    assert_schedule_consistent(api, address.id)


def test_a_partial_skip_keeps_the_queued_charge_and_unskip_puts_everything_back(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    coffee = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    tea = subscribe(api, address, product_title="Tea", price="4.00", next_charge_scheduled_at="2026-02-01")
    charge = charge_of(api, coffee["id"])

    skipped = api.post(f"/charges/{charge['id']}/skip", json={"purchase_item_ids": [tea["id"]]}).json()["charge"]
    assert skipped["status"] == "skipped" and skipped["id"] != charge["id"]
    assert [line["purchase_item_id"] for line in skipped["line_items"]] == [tea["id"]]
    remaining = api.get(f"/charges/{charge['id']}").json()["charge"]
    assert remaining["status"] == "queued"
    assert [line["purchase_item_id"] for line in remaining["line_items"]] == [coffee["id"]]
    # The skipped subscription moves on to its next date, with a queued charge of its own.
    assert api.get(f"/subscriptions/{tea['id']}").json()["subscription"]["next_charge_scheduled_at"] == "2026-03-01"
    assert queued(api, address.id) == [("2026-02-01", [coffee["id"]]), ("2026-03-01", [tea["id"]])]
    assert ("subscription/skipped", tea["id"]) in events_of(api, tea["id"])

    back = api.post(f"/charges/{skipped['id']}/unskip", json={}).json()["charge"]
    assert back["id"] == charge["id"] and back["status"] == "queued"
    assert [line["purchase_item_id"] for line in back["line_items"]] == [coffee["id"], tea["id"]]
    assert api.get(f"/charges/{skipped['id']}").status_code == 404
    assert queued(api, address.id) == [("2026-02-01", [coffee["id"], tea["id"]])]
    assert_schedule_consistent(api, address.id)


def test_skipping_a_whole_charge_keeps_its_id(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    charge = charge_of(api, sub["id"])
    skipped = api.post(f"/charges/{charge['id']}/skip", json={}).json()["charge"]
    assert (skipped["id"], skipped["status"]) == (charge["id"], "skipped")
    unskipped = api.post(f"/charges/{charge['id']}/unskip", json={}, version="2021-01").json()["charge"]
    assert (unskipped["id"], unskipped["status"]) == (charge["id"], "QUEUED")


def test_moving_a_charge_onto_another_queued_charge_merges_them(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    coffee = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    tea = subscribe(api, address, product_title="Tea", price="4.00", next_charge_scheduled_at="2026-02-05")
    first, second = charge_of(api, coffee["id"]), charge_of(api, tea["id"])
    response = api.post(f"/charges/{first['id']}/change_next_charge_date", json={"next_charge_date": "2026-02-05"},
                        version="2021-01")
    assert response.status_code == 200, response.text
    merged = response.json()["charge"]
    assert merged["id"] == second["id"]
    assert sorted(line["subscription_id"] for line in merged["line_items"]) == [coffee["id"], tea["id"]]
    assert api.get(f"/charges/{first['id']}").status_code == 404
    assert api.get(f"/charges/{second['id']}").json()["charge"]["merged_at"] is not None


def test_moving_a_charge_to_a_free_date_keeps_its_id(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    charge = charge_of(api, sub["id"])
    moved = api.put(f"/charges/{charge['id']}/change_next_charge_date", json={"next_charge_date": "2026-02-12"},
                    version="2021-01").json()["charge"]
    assert moved["id"] == charge["id"] and moved["scheduled_at"] == "2026-02-12T00:00:00"
    assert api.get(f"/subscriptions/{sub['id']}").json()["subscription"]["next_charge_scheduled_at"] == "2026-02-12"
    assert_schedule_consistent(api, address.id)


def test_a_prepaid_subscription_pays_every_order_of_its_interval_and_cannot_be_skipped(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, charge_interval_frequency=3, order_interval_frequency=1,
                    next_charge_scheduled_at="2026-02-01")
    assert sub["is_prepaid"] is True
    charge = charge_of(api, sub["id"])
    assert charge["orders_count"] == 3
    assert charge["line_items"][0]["unit_price"] == "37.50" and charge["total_price"] == "37.50"
    response = api.post(f"/charges/{charge['id']}/skip", json={})
    assert response.status_code == 422
    assert response.json()["errors"] == {"purchase_item_ids": [f"purchase item {sub['id']} is prepaid and cannot "
                                                               "be skipped"]}


def test_a_subscription_that_reached_its_number_of_charges_has_no_queued_charge(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, expire_after_specific_number_of_charges=2, next_charge_scheduled_at="2026-02-01")
    assert queued(api, address.id) == [("2026-02-01", [sub["id"]])]
    # The billing run counts successful charges (next issue); two of them end the schedule.
    with api.db.write() as conn:
        conn.execute(update(purchase_items).where(purchase_items.c.id == sub["id"]).values(charges_count=2))
    api.put(f"/addresses/{address.id}", json={"address2": "Suite 5"})  # any change replans the address
    assert queued(api, address.id) == []


def test_a_onetime_item_joins_the_charge_of_its_date(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    response = api.post("/onetimes", json={"address_id": address.id, "product_title": "Mug", "price": "8.00",
                                           "next_charge_scheduled_at": "2026-02-01"})
    assert response.status_code == 201, response.text
    onetime = response.json()["onetime"]
    charge = charge_of(api, sub["id"])
    assert [(line["purchase_item_id"], line["purchase_item_type"]) for line in charge["line_items"]] == [
        (sub["id"], "subscription"), (onetime["id"], "onetime")]
    assert charge["total_price"] == "20.50"
    api.delete(f"/onetimes/{onetime['id']}")
    assert charge_of(api, sub["id"])["total_price"] == "12.50"


def test_commit_false_defers_the_charges_for_five_seconds(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    response = api.put(f"/subscriptions/{sub['id']}", json={"quantity": 4}, params={"commit": "false"})
    assert response.status_code == 200
    charge = charge_of(api, sub["id"])
    assert charge["has_uncommitted_changes"] is True and charge["total_price"] == "12.50"
    assert run_due(api.db, api.clock, store_id=api.store.id) == 0  # the window is not over
    api.clock.advance(seconds=5)
    assert run_due(api.db, api.clock, store_id=api.store.id) == 1
    charge = charge_of(api, sub["id"])
    assert charge["has_uncommitted_changes"] is False and charge["total_price"] == "50.00"
    assert_schedule_consistent(api, address.id)


def test_a_store_rate_change_regenerates_every_queued_charge_of_the_store(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)  # San Francisco, California
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    before = charge_of(api, sub["id"])
    with api.db.write() as conn:
        rates.update_rates(conn, api.clock.now(), api.store,
                           shipping_rates=[{"code": "std", "title": "Standard", "price": "5", "country_codes": ["US"]}],
                           tax_rates=[{"country_code": "US", "province": "CA", "rate": "0.0725", "title": "CA"}])
    after = charge_of(api, sub["id"])
    assert after["id"] == before["id"]
    assert (after["total_tax"], after["total_price"]) == ("0.91", "18.41")  # 12.50 x 7.25 % = 0.906 -> 0.91
    assert after["shipping_lines"][0]["price"] == "5.00"
    with api.db.write() as conn:
        rates.update_rates(conn, api.clock.now(), api.store, taxes_included=True)
    included = charge_of(api, sub["id"])
    # 12.50 x 0.0725 / 1.0725 = 0.84499... -> 0.84, shown but not added.
    assert (included["total_tax"], included["total_price"]) == ("0.84", "17.50")
    assert_schedule_consistent(api, address.id)


def test_an_address_change_reaches_its_queued_charges(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    api.put(f"/addresses/{address.id}", json={"shipping_lines_override": [{"code": "x", "price": "3", "title": "X"}]})
    charge = charge_of(api, sub["id"])
    assert charge["shipping_address"]["address1"] == "101 Market St"
    assert charge["total_price"] == "15.50"


def test_cancel_and_activate_take_the_item_out_of_its_charge_and_back(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    api.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "too much coffee"})
    assert queued(api, address.id) == []
    back = api.post(f"/subscriptions/{sub['id']}/activate", json={}).json()["subscription"]
    assert back["next_charge_scheduled_at"] == "2026-02-01"
    assert queued(api, address.id) == [("2026-02-01", [sub["id"]])]
    at(date(2026, 1, 10) + timedelta(days=40))
    api.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "again"})
    assert api.post(f"/subscriptions/{sub['id']}/activate", json={}).json()["subscription"][
        "next_charge_scheduled_at"] == "2026-02-20"  # the old date passed: tomorrow


def test_money_is_exact_in_a_currency_without_minor_units(api, at):
    at(date(2026, 1, 10))
    jpy = api.other_store(currency="JPY")
    address = make_address(jpy)
    sub = subscribe(jpy, address, price="1200", quantity=3, next_charge_scheduled_at="2026-02-01")
    charge = charge_of(jpy, sub["id"])
    assert (charge["currency"], charge["total_price"], sub["price"]) == ("JPY", "3600", "1200")
    assert charges_of(jpy, address.id)[0].total_price == Decimal("3600")


def test_a_price_with_more_decimals_than_the_currency_answers_422(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    response = api.post("/subscriptions", json={
        "address_id": address.id, "product_title": "Tea", "price": "9.999", "charge_interval_frequency": 1,
        "order_interval_frequency": 1, "order_interval_unit": "month"})
    assert response.status_code == 422
    assert response.json()["errors"] == {"price": ["has too many decimal places for USD (at most 2)"]}
    assert charges_of(api, address.id) == []


def test_charges_sorted_by_date_page_with_cursors_in_both_versions(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    for day in (5, 3, 9, 1):
        subscribe(api, address, next_charge_scheduled_at=f"2026-02-0{day}")
    for version, sort, key in (("2021-11", "scheduled_at-desc", "scheduled_at"),
                               ("2021-01", "charge_date-desc", "scheduled_at")):
        first = api.get("/charges", params={"sort_by": sort, "limit": 2}, version=version)
        assert first.status_code == 200, first.text
        dates = [c[key][:10] for c in first.json()["charges"]]
        if version == "2021-11":
            cursor = first.json()["next_cursor"]
        else:
            link = first.headers["link"]
            cursor = link.split("page_info=")[1].split(">")[0]
        second = api.get("/charges", params={"cursor": cursor, "limit": 2}, version=version)
        assert second.status_code == 200, second.text
        dates += [c[key][:10] for c in second.json()["charges"]]
        assert dates == ["2026-02-09", "2026-02-05", "2026-02-03", "2026-02-01"]


def test_a_new_2021_01_billing_address_reaches_the_customers_queued_charges(api, at):
    at(date(2026, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-02-01")
    response = api.put(f"/customers/{address.customer_id}", version="2021-01", json={
        "billing_address1": "9 Billing Way", "billing_city": "Austin", "billing_country": "United States",
        "billing_province": "TX", "billing_zip": "73301", "billing_first_name": "Ada",
        "billing_last_name": "Lovelace"})
    assert response.status_code == 200, response.text
    billing = charge_of(api, sub["id"])["billing_address"]
    assert (billing["address1"], billing["city"], billing["country_code"]) == ("9 Billing Way", "Austin", "US")
    assert_schedule_consistent(api, address.id)
