"""What a subscription's cadence keeps through updates it does not change, and through a cancel
(decisions §5.3, §5.16; docs/api-choices.md "Month ends", "Order days", activation): found by an
audit, each test failed before its fix.

- a PUT that sends the cadence and the date back as they are keeps the day the cadence is on;
- a cadence changed while cancelled is the one an activation bills on;
- a skipped one-time item whose date changes is on one charge, its new date's.
"""

from __future__ import annotations

from typing import Any

from tests.builders import charges_of, make_address, make_onetime, make_subscription

# Far enough ahead of the shared test clock whatever it says; 2040 is a leap year.
JAN_31 = "2040-01-31"


def _sub(api: Any, sub_id: int) -> dict[str, Any]:
    response = api.get(f"/subscriptions/{sub_id}")
    assert response.status_code == 200, response.text
    return response.json()["subscription"]


def _queued(api: Any, address_id: int) -> Any:
    [queued] = [c for c in charges_of(api, address_id) if c.status == "queued"]
    return queued


def _skip_queued(api: Any, address_id: int) -> None:
    response = api.post(f"/charges/{_queued(api, address_id).id}/skip", json={})
    assert response.status_code == 200, response.text


def test_a_put_of_the_subscription_as_shown_keeps_its_month_end_anchor(vapi):
    address = make_address(vapi)
    sub = make_subscription(vapi, address, next_charge_scheduled_at=_date(JAN_31))
    _skip_queued(vapi, address.id)  # Jan 31 skipped: on Feb 29, the cadence still on the 31st
    shown = _sub(vapi, sub.id)
    assert shown["next_charge_scheduled_at"].startswith("2040-02-29")
    echoed = vapi.put(f"/subscriptions/{sub.id}", json={**_writable(shown, vapi.version), "quantity": 2})
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["subscription"]["next_charge_scheduled_at"].startswith("2040-02-29")
    _skip_queued(vapi, address.id)  # Feb 29 skipped: the next is the 31st of March, not the 29th
    assert _sub(vapi, sub.id)["next_charge_scheduled_at"].startswith("2040-03-31")


def test_a_cadence_made_weekly_while_cancelled_is_the_one_activation_bills_on(api):
    address = make_address(api)
    sub = make_subscription(api, address, next_charge_scheduled_at=_date("2040-01-10"))
    assert api.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "away"}).status_code == 200
    weekly = {"order_interval_unit": "week", "order_interval_frequency": 1, "charge_interval_frequency": 1}
    assert api.put(f"/subscriptions/{sub.id}", json=weekly).status_code == 200
    activated = api.post(f"/subscriptions/{sub.id}/activate", json={})
    assert activated.status_code == 200, activated.text
    first = _date(activated.json()["subscription"]["next_charge_scheduled_at"][:10])
    assert first > api.clock.now().date()
    assert _queued(api, address.id).scheduled_at == first
    _skip_queued(api, address.id)  # the next is one week on, on the same weekday
    assert _date(_sub(api, sub.id)["next_charge_scheduled_at"][:10]) - first == _days(7)


def test_an_order_day_set_while_cancelled_is_the_day_activation_bills_on(api):
    address = make_address(api)
    sub = make_subscription(api, address, next_charge_scheduled_at=_date("2040-01-06"))
    assert api.post(f"/subscriptions/{sub.id}/cancel", json={"cancellation_reason": "away"}).status_code == 200
    assert api.put(f"/subscriptions/{sub.id}", json={"order_day_of_month": 20}).status_code == 200
    shown = api.post(f"/subscriptions/{sub.id}/activate", json={}).json()["subscription"]
    assert shown["order_day_of_month"] == 20
    first = _date(shown["next_charge_scheduled_at"][:10])
    assert first.day == 20  # what it shows is what it bills
    _skip_queued(api, address.id)
    after = _date(_sub(api, sub.id)["next_charge_scheduled_at"][:10])
    assert (after.day, (after.year * 12 + after.month) - (first.year * 12 + first.month)) == (20, 1)


def test_a_skipped_one_time_item_moved_to_another_date_is_queued_there_alone(api):
    address = make_address(api)
    item = make_onetime(api, address, next_charge_scheduled_at=_date("2040-01-01"))
    _skip_queued(api, address.id)
    moved = api.put(f"/onetimes/{item.id}", json={"next_charge_scheduled_at": "2040-01-15"})
    assert moved.status_code == 200, moved.text
    rows = [(c.status, c.scheduled_at.isoformat()) for c in charges_of(api, address.id)]
    assert rows == [("queued", "2040-01-15")]


def _date(text: str) -> Any:
    from datetime import date
    return date.fromisoformat(text)


def _days(n: int) -> Any:
    from datetime import timedelta
    return timedelta(days=n)


def _writable(shown: dict[str, Any], version: str) -> dict[str, Any]:
    """The GET body as a client sends it back: every field the update takes, as shown."""
    read_only = {"id", "created_at", "updated_at", "cancelled_at", "status", "customer_id", "address_id",
                 "analytics_data", "has_queued_charges", "is_prepaid", "max_retries_reached", "presentment_currency",
                 "email", "shopify_product_id", "shopify_variant_id", "recharge_product_id", "is_skippable",
                 "is_swappable", "cancellation_reason", "cancellation_reason_comments", "external_product_id",
                 "external_variant_id", "plan_id", "charge_delay", "sku_override", "sku", "product_title",
                 "variant_title", "properties", "price", "expire_after_specific_number_of_charges",
                 "commit_update", "shopify_customer_id", "charges_count"}
    return {k: v for k, v in shown.items() if k not in read_only}
