"""Charge dates through HTTP: monthly, weekly and daily cadences, order days, month ends."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace

import pytest

from tests.builders import make_address
from tests.scenarios.conftest import assert_schedule_consistent


def subscribe(api, address, **fields):
    body = {"address_id": address.id, "product_title": "Coffee", "price": "12.50", "quantity": 1,
            "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month", **fields}
    response = api.post("/subscriptions", json=body)
    assert response.status_code == 201, response.text
    return response.json()["subscription"]


def queued(api, address_id):
    charges = api.get("/charges", params={"address_id": address_id, "status": "queued"}).json()["charges"]
    return [(c["scheduled_at"], sorted(line["purchase_item_id"] for line in c["line_items"])) for c in charges]


def skip_next(api, subscription_id):
    charge = api.get("/charges", params={"purchase_item_id": subscription_id, "status": "queued"}).json()["charges"][0]
    response = api.post(f"/charges/{charge['id']}/skip", json={"purchase_item_ids": [subscription_id]})
    assert response.status_code == 200, response.text
    return api.get(f"/subscriptions/{subscription_id}").json()["subscription"]["next_charge_scheduled_at"]


def test_a_monthly_schedule_from_january_31_clamps_to_february_and_returns_to_the_31st(api, at):
    at(date(2026, 1, 15))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-01-31")
    assert queued(api, address.id) == [("2026-01-31", [sub["id"]])]
    assert [skip_next(api, sub["id"]) for _ in range(3)] == ["2026-02-28", "2026-03-31", "2026-04-30"]
    assert queued(api, address.id) == [("2026-04-30", [sub["id"]])]
    assert_schedule_consistent(api, address.id)


def test_a_monthly_schedule_in_a_leap_year_lands_on_february_29(api, at):
    at(date(2028, 1, 10))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2028-01-31")
    assert skip_next(api, sub["id"]) == "2028-02-29"
    assert skip_next(api, sub["id"]) == "2028-03-31"


def test_order_day_of_month_places_the_first_charge_on_that_day_one_interval_ahead(api, at):
    at(date(2026, 3, 20))
    address = make_address(api)
    sub = subscribe(api, address, order_day_of_month=5)
    # One month from March 20 is April 20; the order day moves it to the next 5th.
    assert sub["next_charge_scheduled_at"] == "2026-05-05"
    assert skip_next(api, sub["id"]) == "2026-06-05"


def test_order_day_of_month_31_clamps_in_short_months(api, at):
    at(date(2026, 1, 1))
    address = make_address(api)
    sub = subscribe(api, address, order_day_of_month=31)
    assert sub["next_charge_scheduled_at"] == "2026-02-28"
    assert skip_next(api, sub["id"]) == "2026-03-31"


def test_a_weekly_schedule_with_order_day_of_week_falls_on_that_weekday(api, at):
    at(date(2026, 3, 2))  # a Monday
    address = make_address(api)
    sub = subscribe(api, address, charge_interval_frequency=2, order_interval_frequency=2,
                    order_interval_unit="week", order_day_of_week=4)  # Friday
    first = date.fromisoformat(sub["next_charge_scheduled_at"])
    assert first == date(2026, 3, 20) and first.weekday() == 4
    assert skip_next(api, sub["id"]) == "2026-04-03"


def test_a_weekly_order_day_holds_after_a_first_date_given_on_another_weekday(api, at):
    at(date(2026, 3, 2))  # a Monday
    address = make_address(api)
    sub = subscribe(api, address, charge_interval_frequency=1, order_interval_frequency=1,
                    order_interval_unit="week", order_day_of_week=2,  # Wednesday
                    next_charge_scheduled_at="2026-03-06")  # a Friday: the first charge is there
    assert sub["next_charge_scheduled_at"] == "2026-03-06"
    # Then the cadence is back on its order day: the first Wednesday a week on, and weekly after.
    assert [skip_next(api, sub["id"]) for _ in range(3)] == ["2026-03-18", "2026-03-25", "2026-04-01"]


def test_a_weekly_charge_moved_by_hand_sets_its_weekday_from_then_on(api, at):
    at(date(2026, 3, 2))
    address = make_address(api)
    sub = subscribe(api, address, charge_interval_frequency=1, order_interval_frequency=1,
                    order_interval_unit="week", order_day_of_week=2)
    [charge] = [c for c in api.get("/charges", params={"address_id": address.id}).json()["charges"]]
    moved = api.post(f"/charges/{charge['id']}/change_next_charge_date", json={"next_charge_date": "2026-03-13"},
                     version="2021-01")
    assert moved.status_code == 200, moved.text
    assert skip_next(api, sub["id"]) == "2026-03-20"  # Fridays now, as the charge was moved to


def _set_by(api, how, sub, when):
    if how == "put":
        return api.put(f"/subscriptions/{sub['id']}", json={"next_charge_scheduled_at": when})
    if how == "set_next_charge_date":
        return api.post(f"/subscriptions/{sub['id']}/set_next_charge_date", json={"date": when})
    if how == "change_address":
        return api.post(f"/subscriptions/{sub['id']}/change_address",
                        json={"address_id": sub["address_id"], "next_charge_scheduled_at": when})
    [charge] = api.get("/charges", params={"purchase_item_id": sub["id"], "status": "queued"}).json()["charges"]
    return api.post(f"/charges/{charge['id']}/change_next_charge_date", json={"next_charge_date": when},
                    version="2021-01")


HOW = ["put", "set_next_charge_date", "change_address", "charge_moved"]


@pytest.mark.parametrize("how", HOW)
def test_a_monthly_next_date_set_by_hand_moves_the_order_day_with_it(api, at, how):
    """Every way of setting a next date gives one cadence, and the order day shown is the day
    billed (found by an audit: set_next_charge_date billed the 20th while showing 15, and a PUT
    of the date went back to the 15th)."""
    at(date(2027, 3, 2))
    address = make_address(api)
    sub = subscribe(api, address, order_day_of_month=15, next_charge_scheduled_at="2027-04-15")
    reply = _set_by(api, how, sub, "2027-04-20")
    assert reply.status_code == 200, reply.text
    shown = api.get(f"/subscriptions/{sub['id']}").json()["subscription"]
    assert (shown["next_charge_scheduled_at"], shown["order_day_of_month"]) == ("2027-04-20", 20)
    assert [skip_next(api, sub["id"]) for _ in range(2)] == ["2027-05-20", "2027-06-20"]


@pytest.mark.parametrize("how", HOW)
def test_a_weekly_next_date_set_by_hand_moves_the_order_weekday_with_it(api, at, how):
    at(date(2027, 3, 2))  # a Tuesday
    address = make_address(api)
    sub = subscribe(api, address, charge_interval_frequency=1, order_interval_frequency=1,
                    order_interval_unit="week", order_day_of_week=0)  # Mondays
    reply = _set_by(api, how, sub, "2027-03-10")  # a Wednesday
    assert reply.status_code == 200, reply.text
    assert api.get(f"/subscriptions/{sub['id']}").json()["subscription"]["order_day_of_week"] == 2
    assert [skip_next(api, sub["id"]) for _ in range(2)] == ["2027-03-17", "2027-03-24"]


def test_a_merge_with_a_next_date_moves_the_order_day_with_it(api, at):
    at(date(2027, 3, 2))
    source = make_address(api)
    target = make_address(api, SimpleNamespace(id=source.customer_id))
    sub = subscribe(api, source, order_day_of_month=15, next_charge_scheduled_at="2027-04-15")
    reply = api.post("/addresses/merge", json={"target_address": {"id": target.id},
                                              "source_addresses": [{"id": source.id}],
                                              "next_charge_date": "2027-04-20"})
    assert reply.status_code == 200, reply.text
    shown = api.get(f"/subscriptions/{sub['id']}").json()["subscription"]
    assert (shown["address_id"], shown["order_day_of_month"]) == (target.id, 20)
    assert skip_next(api, sub["id"]) == "2027-05-20"


def test_a_put_that_sends_the_order_day_with_the_date_keeps_the_order_day(api, at):
    """The order day sent in the same request is the cadence's: the date is charged once, and the
    dates after it go back to the order day, as on create (docs/api-choices.md, Order days)."""
    at(date(2027, 3, 2))
    address = make_address(api)
    sub = subscribe(api, address, order_day_of_month=15, next_charge_scheduled_at="2027-04-15")
    reply = api.put(f"/subscriptions/{sub['id']}", json={"next_charge_scheduled_at": "2027-04-20",
                                                       "order_day_of_month": 15})
    assert reply.status_code == 200, reply.text
    assert reply.json()["subscription"]["order_day_of_month"] == 15
    assert skip_next(api, sub["id"]) == "2027-05-15"


def test_a_monthly_next_date_set_by_hand_without_an_order_day_leaves_it_unset(api, at):
    at(date(2027, 3, 2))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2027-04-15")
    assert _set_by(api, "set_next_charge_date", sub, "2027-04-20").status_code == 200
    assert api.get(f"/subscriptions/{sub['id']}").json()["subscription"]["order_day_of_month"] is None
    assert skip_next(api, sub["id"]) == "2027-05-20"


def test_a_daily_schedule_moves_by_its_frequency_in_days(api, at):
    at(date(2026, 3, 2))
    address = make_address(api)
    sub = subscribe(api, address, charge_interval_frequency=3, order_interval_frequency=3,
                    order_interval_unit="day", next_charge_scheduled_at="2026-03-04")
    assert [skip_next(api, sub["id"]) for _ in range(2)] == ["2026-03-07", "2026-03-10"]


def test_interval_units_are_accepted_in_any_case_and_answered_lower_case(api, at):
    at(date(2026, 3, 2))
    sub = subscribe(api, make_address(api), order_interval_unit="WEEK")
    assert sub["order_interval_unit"] == "week"


def test_changing_the_interval_recomputes_the_next_date_from_the_creation_date(api, at):
    at(date(2026, 3, 2))
    address = make_address(api)
    sub = subscribe(api, address, next_charge_scheduled_at="2026-04-02")
    at(date(2026, 3, 10))
    response = api.put(f"/subscriptions/{sub['id']}", json={
        "charge_interval_frequency": 2, "order_interval_frequency": 2, "order_interval_unit": "week"})
    assert response.status_code == 200, response.text
    # Created March 2, no charge yet: March 2 + 2 weeks = March 16, after today (March 10).
    assert response.json()["subscription"]["next_charge_scheduled_at"] == "2026-03-16"
    assert queued(api, address.id) == [("2026-03-16", [sub["id"]])]


def test_changing_the_interval_to_one_already_passed_takes_the_first_date_after_today(api, at):
    at(date(2026, 3, 2))
    sub = subscribe(api, make_address(api), next_charge_scheduled_at="2026-04-02")
    at(date(2026, 3, 20))
    response = api.put(f"/subscriptions/{sub['id']}", json={
        "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "week"})
    # March 2 + 1 week = March 9, not after March 20: the cadence's first date after it.
    assert response.json()["subscription"]["next_charge_scheduled_at"] == "2026-03-23"
