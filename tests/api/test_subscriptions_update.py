"""Updating a subscription, in both versions (decisions §5.1, §5.3, §5.16): fields, the three
interval fields together, the next date recomputed on an interval change, deferred
regeneration (`commit=false` / `commit_update=false`), plan and product references."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rebill.domain.charge.model import item_ids
from rebill.jobs import regenerate
from tests.api.test_subscriptions import (
    MONTHLY,
    NOT_FOUND,
    V01,
    V11,
    create_sub,
    day,
    errors_of,
    line_ids,
    make_catalog,
    next_date,
    stamp,
    today,
    topics,
)
from tests.builders import charges_of, events_of, make_address, make_customer, make_subscription

# Update ------------------------------------------------------------------------------------------

def test_update_changes_the_fields_records_the_event_and_replans_the_charge(vapi):
    address = make_address(vapi)
    sub = create_sub(vapi, address)
    vapi.clock.advance(seconds=1)
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"price": "15", "quantity": 2, "product_title": "Tea",
                                                             "properties": [{"name": "size", "value": "L"}]})
    assert response.status_code == 200, response.text
    updated = response.json()["subscription"]
    assert (updated["price"], updated["quantity"], updated["product_title"]) == ("15.00", 2, "Tea")
    assert updated["properties"] == [{"name": "size", "value": "L"}]
    assert updated["updated_at"] == stamp(vapi.version, vapi) != sub["updated_at"]
    assert topics(vapi, sub["id"])[-1] == "subscription/updated"
    charge = charges_of(vapi, address.id)[0]
    assert charge.total_line_items_price == 30 and charge.line_items[0]["title"] == "Tea"


def test_an_update_that_changes_nothing_records_no_event_and_keeps_updated_at(api):
    sub = create_sub(api)
    before = events_of(api)
    api.clock.advance(seconds=1)
    response = api.put(f"/subscriptions/{sub['id']}", json={"price": "12.50", "quantity": 1})
    assert response.json()["subscription"]["updated_at"] == sub["updated_at"]
    assert events_of(api) == before


def test_the_shown_analytics_data_sent_back_is_no_change(vapi):
    """Found by an audit: the first round trip stored the shown default over null, with an event."""
    sub = create_sub(vapi)
    before = events_of(vapi)
    vapi.clock.advance(seconds=1)
    shown = vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]["analytics_data"]
    assert shown == {"utm_params": []}
    reply = vapi.put(f"/subscriptions/{sub['id']}", json={"analytics_data": shown})
    assert reply.status_code == 200 and reply.json()["subscription"]["updated_at"] == sub["updated_at"]
    assert events_of(vapi) == before


def test_a_status_is_changed_by_its_actions_not_by_an_update(vapi):
    """Found by an audit: `{"status": "cancelled"}` answered 200 and the subscription stayed
    active. The status it has, sent back as shown, passes."""
    sub = create_sub(vapi)
    before = events_of(vapi)
    other = "cancelled" if vapi.version == V11 else "CANCELLED"
    reply = vapi.put(f"/subscriptions/{sub['id']}", json={"status": other, "quantity": 3})
    assert errors_of(reply) == {"status": [f"is changed by POST /subscriptions/{sub['id']}/cancel or /activate, "
                                           "not by an update"]}
    shown = vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]
    assert (shown["status"].lower(), shown["quantity"]) == ("active", 1) and events_of(vapi) == before
    assert vapi.put(f"/subscriptions/{sub['id']}", json={"status": shown["status"]}).status_code == 200
    assert errors_of(vapi.put(f"/subscriptions/{sub['id']}", json={"status": 5})) == {"status": ["must be a string"]}


def test_an_address_is_changed_by_change_address_not_by_an_update(vapi):
    """Found by an audit: `{"address_id": B}` answered 200 and the subscription stayed on A. The
    address it is on, sent back as shown, passes."""
    customer = make_customer(vapi)
    address, other = make_address(vapi, customer), make_address(vapi, customer)
    sub = create_sub(vapi, address)
    before = events_of(vapi, resource="subscription")
    reply = vapi.put(f"/subscriptions/{sub['id']}", json={"address_id": other.id, "quantity": 3})
    assert errors_of(reply) == {"address_id": [
        f"is not changed by an update; POST /subscriptions/{sub['id']}/change_address moves it"]}
    shown = vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]
    assert (shown["address_id"], shown["quantity"]) == (address.id, 1)
    assert events_of(vapi, resource="subscription") == before and charges_of(vapi, other.id) == []
    kept = vapi.put(f"/subscriptions/{sub['id']}", json={"address_id": address.id, "quantity": 2})
    assert kept.status_code == 200, kept.text
    assert (kept.json()["subscription"]["address_id"], kept.json()["subscription"]["quantity"]) == (address.id, 2)
    assert errors_of(vapi.put(f"/subscriptions/{sub['id']}", json={"address_id": "x"})) == {
        "address_id": ["must be an integer"]}
    assert errors_of(vapi.put(f"/subscriptions/{sub['id']}", json={"address_id": None})) == {
        "address_id": ["cannot be null"]}


def test_a_presentment_currency_other_than_the_addresss_is_refused(vapi):
    """Found by an audit: `"presentment_currency": "USD"` on an address in yen answered 201 (and
    a PUT 200) in JPY. The address's currency, sent (back), passes."""
    store = vapi.other_store(presentment_currencies=["JPY"])
    store.version = vapi.version
    address = make_address(store, presentment_currency="JPY")
    body = {"address_id": address.id, "product_title": "Tea", "price": "1999", "quantity": 1,
            "charge_interval_frequency": 1, "order_interval_frequency": 1, "order_interval_unit": "month"}
    said = {"presentment_currency": ["must be the address's currency (JPY): an item is charged in it"]}
    assert errors_of(store.post("/subscriptions", json={**body, "presentment_currency": "USD"})) == said
    assert store.get("/subscriptions").json()["subscriptions"] == []
    made = store.post("/subscriptions", json={**body, "presentment_currency": "jpy"})
    assert made.status_code in (200, 201), made.text
    sub = made.json()["subscription"]
    assert errors_of(store.put(f"/subscriptions/{sub['id']}", json={"presentment_currency": "USD", "quantity": 2})) \
        == said
    kept = store.put(f"/subscriptions/{sub['id']}", json={"presentment_currency": "JPY", "quantity": 2})
    assert kept.status_code == 200 and kept.json()["subscription"]["quantity"] == 2
    onetime = {"address_id": address.id, "product_title": "Cup", "price": "500", "quantity": 1,
               "next_charge_scheduled_at": str(vapi.clock.now().date() + timedelta(days=3))}
    path = "/onetimes" if vapi.version == V11 else f"/addresses/{address.id}/onetimes"
    assert errors_of(store.post(path, json={**onetime, "presentment_currency": "USD"})) == said
    for bad in (5, None, "JPYX"):
        assert list(errors_of(store.put(f"/subscriptions/{sub['id']}", json={"presentment_currency": bad}))) == [
            "presentment_currency"], bad


def test_a_cancelled_subscription_sent_back_as_shown_is_no_change(vapi):
    """Found by an audit: its `next_charge_scheduled_at: null` sent back answered 422 `cannot be
    null`. A null over a date still does."""
    sub = create_sub(vapi)
    assert errors_of(vapi.put(f"/subscriptions/{sub['id']}", json={"next_charge_scheduled_at": None})) == {
        "next_charge_scheduled_at": ["cannot be null"]}
    cancel = vapi.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "moving"})
    assert cancel.status_code == 200, cancel.text
    shown = vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]
    assert shown["next_charge_scheduled_at"] is None
    before = events_of(vapi)
    vapi.clock.advance(seconds=1)
    reply = vapi.put(f"/subscriptions/{sub['id']}", json=shown)
    assert reply.status_code == 200, reply.text
    assert reply.json()["subscription"]["updated_at"] == shown["updated_at"] and events_of(vapi) == before


def test_a_prepaid_subscriptions_shown_is_skippable_sent_back_is_no_change(api):
    """Found by an audit: a prepaid item shows `is_skippable: false`; sent back, it was stored
    (an update event), and the item stayed unskippable once it was prepaid no more."""
    sub = create_sub(api, charge_interval_frequency=3, order_interval_frequency=1)
    shown = api.get(f"/subscriptions/{sub['id']}").json()["subscription"]
    assert (shown["is_prepaid"], shown["is_skippable"]) == (True, False)
    before = events_of(api)
    api.clock.advance(seconds=1)
    reply = api.put(f"/subscriptions/{sub['id']}", json=shown)
    assert reply.status_code == 200, reply.text
    assert reply.json()["subscription"]["updated_at"] == shown["updated_at"] and events_of(api) == before
    plain = api.put(f"/subscriptions/{sub['id']}", json={"order_interval_unit": "month", "order_interval_frequency": 1,
                                                        "charge_interval_frequency": 1})
    assert plain.json()["subscription"]["is_skippable"] is True
    # A false sent with the cadence that ends prepaid is meant (found by a review: it was lost).
    other = create_sub(api, charge_interval_frequency=3, order_interval_frequency=1)
    meant = api.put(f"/subscriptions/{other['id']}", json={
        "order_interval_unit": "month", "order_interval_frequency": 1, "charge_interval_frequency": 1,
        "is_skippable": False})
    assert (meant.json()["subscription"]["is_prepaid"], meant.json()["subscription"]["is_skippable"]) == (False, False)


def test_the_three_interval_fields_change_together_or_not_at_all(vapi):
    sub = create_sub(vapi)
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"order_interval_unit": "week"})
    assert errors_of(response) == {"charge_interval_frequency": ["must be sent with order_interval_unit"],
                                   "order_interval_frequency": ["must be sent with order_interval_unit"]}
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"order_interval_frequency": 2,
                                                             "charge_interval_frequency": 2})
    assert errors_of(response) == {"order_interval_unit": [
        "must be sent with charge_interval_frequency, order_interval_frequency"]}


def test_an_interval_change_recomputes_the_next_date_from_the_creation_date(vapi):
    address = make_address(vapi)
    sub = create_sub(vapi, address, next_charge_scheduled_at=day(vapi, 20))
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"order_interval_unit": "week",
                                                             "order_interval_frequency": 1,
                                                             "charge_interval_frequency": 1})
    assert response.status_code == 200, response.text
    # NOTE: decisions §5.16, the creation date (no charge yet) plus one new interval.
    assert response.json()["subscription"]["next_charge_scheduled_at"] == next_date(vapi.version, day(vapi, 7))
    assert line_ids(vapi, address.id) == [(day(vapi, 7), [sub["id"]])]


def test_an_interval_change_whose_first_date_has_passed_takes_the_next_date_on_the_cadence(api):
    created = today(api)
    sub = create_sub(api, order_interval_unit="day", order_interval_frequency=10, charge_interval_frequency=10,
                     next_charge_scheduled_at=None)
    api.clock.advance(days=3)
    response = api.put(f"/subscriptions/{sub['id']}", json={"order_interval_unit": "day",
                                                            "order_interval_frequency": 2,
                                                            "charge_interval_frequency": 2})
    # created + 2 is in the past: the first date after today on that cadence is created + 4.
    assert response.json()["subscription"]["next_charge_scheduled_at"] == (created + timedelta(days=4)).isoformat()


def test_an_explicit_next_date_sent_with_the_interval_is_kept(api):
    sub = create_sub(api)
    response = api.put(f"/subscriptions/{sub['id']}", json={**MONTHLY, "order_interval_unit": "week",
                                                            "next_charge_scheduled_at": day(api, 3)})
    assert response.json()["subscription"]["next_charge_scheduled_at"] == day(api, 3)


@pytest.mark.parametrize("values,errors", [
    ({"next_charge_scheduled_at": None}, {"next_charge_scheduled_at": ["cannot be null"]}),
    ({"quantity": 0}, {"quantity": ["must be from 1 to 1000000"]}),
    ({"price": "1.001"}, {"price": ["has too many decimal places for USD (at most 2)"]}),
    ({"price": "abc"}, {"price": ["must be a decimal number as a string"]}),
    ({"product_title": ""}, {"product_title": ["cannot be blank"]}),
    ({**MONTHLY, "charge_interval_frequency": 3, "order_interval_frequency": 2},
     {"charge_interval_frequency": ["must equal order_interval_frequency or be a larger multiple of it (prepaid)"]}),
    ({"order_day_of_week": 3}, {"order_day_of_week": ["applies to weekly intervals only"]}),
    ({"is_swappable": "no"}, {"is_swappable": ["must be a boolean"]}),
])
def test_update_rules_answer_422_naming_the_field(vapi, values, errors):
    sub = create_sub(vapi)
    assert errors_of(vapi.put(f"/subscriptions/{sub['id']}", json=values)) == errors


def test_update_to_a_past_next_date_answers_422(vapi):
    sub = create_sub(vapi)
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"next_charge_scheduled_at": day(vapi, -1)})
    assert errors_of(response) == {"next_charge_scheduled_at": ["must not be in the past"]}


def test_update_of_the_next_date_moves_the_charge(api):
    address = make_address(api)
    sub = create_sub(api, address)
    api.put(f"/subscriptions/{sub['id']}", json={"next_charge_scheduled_at": day(api, 4)})
    assert line_ids(api, address.id) == [(day(api, 4), [sub["id"]])]


def test_a_cancelled_subscription_takes_no_next_date(api):
    sub = create_sub(api)
    api.post(f"/subscriptions/{sub['id']}/cancel", json={"cancellation_reason": "x"})
    response = api.put(f"/subscriptions/{sub['id']}", json={"next_charge_scheduled_at": day(api, 4)})
    assert errors_of(response) == {"next_charge_scheduled_at": ["a cancelled or expired subscription has none"]}


def test_swapping_to_another_catalog_variant_takes_its_titles_and_sku(vapi):
    product_id, _ = make_catalog(vapi)
    sub = create_sub(vapi, **({"external_product_id": {"ecommerce": product_id}} if vapi.version == V11
                              else {"platform_product_id": product_id}))
    change = ({"external_variant_id": {"ecommerce": f"{product_id}-2"}} if vapi.version == V11
              else {"platform_variant_id": f"{product_id}-2"})
    swapped = vapi.put(f"/subscriptions/{sub['id']}", json=change).json()["subscription"]
    assert (swapped["variant_title"], swapped["sku"]) == ("1 kg", "COF-1K")


def test_a_subscription_that_is_not_swappable_keeps_its_variant(api):
    product_id, _ = make_catalog(api)
    sub = create_sub(api, external_product_id={"ecommerce": product_id}, is_swappable=False)
    response = api.put(f"/subscriptions/{sub['id']}", json={"external_variant_id": {"ecommerce": f"{product_id}-2"}})
    assert errors_of(response) == {"external_variant_id": ["this subscription is not swappable"]}
    # Nor by its product alone, which changes the variant too (found by an audit), in either version.
    other, _ = make_catalog(api)
    for version, body, named in ((V11, {"external_product_id": {"ecommerce": other}}, "external_variant_id"),
                                 (V01, {"platform_product_id": other}, "platform_variant_id")):
        response = api.put(f"/subscriptions/{sub['id']}", json=body, version=version)
        assert errors_of(response) == {named: ["this subscription is not swappable"]}
    assert api.get(f"/subscriptions/{sub['id']}").json()["subscription"]["external_product_id"] == {
        "ecommerce": product_id}
    # Sending back what it has is no swap.
    assert api.put(f"/subscriptions/{sub['id']}", json={"external_product_id": {"ecommerce": product_id}}
                   ).status_code == 200


def test_its_own_product_sent_alone_keeps_the_variant(vapi):
    """Found by an audit: a PUT naming only the product it has took that product's first
    variant (another size shipped), in both versions. Only a new product changes the variant."""
    product_id, _ = make_catalog(vapi)
    own = ({"external_product_id": {"ecommerce": product_id}} if vapi.version == V11
           else {"platform_product_id": product_id})
    variant = ({"external_variant_id": {"ecommerce": f"{product_id}-2"}} if vapi.version == V11
               else {"platform_variant_id": f"{product_id}-2"})
    sub = create_sub(vapi, **own, **variant)
    assert sub["sku"] == "COF-1K"
    reply = vapi.put(f"/subscriptions/{sub['id']}", json=own)
    assert reply.status_code == 200, reply.text
    kept = reply.json()["subscription"]
    assert (kept["variant_title"], kept["sku"], kept["updated_at"]) == (sub["variant_title"], "COF-1K", sub["updated_at"])
    variant_key = "external_variant_id" if vapi.version == V11 else "platform_variant_id"
    assert kept[variant_key] == sub[variant_key]


def test_update_of_an_unknown_or_another_stores_subscription_answers_404(vapi):
    foreign = make_subscription(vapi.other_store())
    for ident in (foreign.id, 999_999_999):
        response = vapi.put(f"/subscriptions/{ident}", json={"quantity": 2})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


# Deferred regeneration (decisions §5.3) ------------------------------------------------------

def test_a_charge_whose_plan_did_not_change_loses_its_flag_without_an_event(api):
    """The flag is set with no event and no `updated_at` (docs/api-choices.md, The schedule), so
    it goes back the same way on a charge the change did not touch (found by an audit: the
    regeneration told charge/updated of the address's charge of another date)."""
    address = make_address(api)
    sub = create_sub(api, address)
    other = make_subscription(api, address, next_charge_scheduled_at=today(api) + timedelta(days=20))
    before = {c.id: c.updated_at for c in charges_of(api, address.id)}
    assert len(before) == 2
    api.put(f"/subscriptions/{sub['id']}", json={"price": "20"}, params={"commit": "false"})
    assert all(c.has_uncommitted_changes for c in charges_of(api, address.id))
    api.clock.advance(seconds=6)
    told = len(events_of(api))
    assert regenerate.run_due(api.db, api.clock, store_id=api.store.id) == 1
    after = {c.id: c for c in charges_of(api, address.id)}
    assert not any(c.has_uncommitted_changes for c in after.values())
    [changed] = [c for c in after.values() if other.id not in item_ids(c.line_items)]
    [untouched] = [c for c in after.values() if other.id in item_ids(c.line_items)]
    assert changed.total_price == 20 and untouched.updated_at == before[untouched.id]
    assert events_of(api)[told:] == [("charge/updated", changed.id)]


@pytest.mark.parametrize("version", [V11, V01])
def test_commit_false_flags_the_charges_and_the_regeneration_follows_after_5_seconds(api, version):
    address = make_address(api)
    sub = create_sub(api, address)
    if version == V11:
        response = api.put(f"/subscriptions/{sub['id']}", json={"price": "20"}, params={"commit": "false"},
                           version=V11)
    else:
        response = api.put(f"/subscriptions/{sub['id']}", json={"price": "20", "commit_update": False}, version=V01)
    assert response.status_code == 200, response.text
    assert response.json()["subscription"]["price"] == "20.00"
    (charge,) = charges_of(api, address.id)
    assert charge.has_uncommitted_changes is True and charge.total_price == 12.5
    assert regenerate.run_due(api.db, api.clock, store_id=api.store.id) == 0
    api.clock.advance(seconds=5)
    assert regenerate.run_due(api.db, api.clock, store_id=api.store.id) == 1
    (charge,) = charges_of(api, address.id)
    assert charge.has_uncommitted_changes is False and charge.total_price == 20


def test_commit_true_or_absent_regenerates_at_once(api):
    address = make_address(api)
    sub = create_sub(api, address)
    api.put(f"/subscriptions/{sub['id']}", json={"price": "20"}, params={"commit": "true"})
    (charge,) = charges_of(api, address.id)
    assert charge.has_uncommitted_changes is False and charge.total_price == 20


def test_a_commit_that_is_not_a_boolean_answers_422(api):
    sub = create_sub(api)
    response = api.put(f"/subscriptions/{sub['id']}", json={}, params={"commit": "maybe"})
    assert errors_of(response) == {"commit": ["Invalid boolean: maybe. Must be true, false, 1 or 0"]}
    response = api.put(f"/subscriptions/{sub['id']}", json={"commit_update": "maybe"}, version=V01)
    assert errors_of(response) == {"commit_update": ["must be a boolean"]}


# Update: plan and product references ------------------------------------------------------------

def test_update_to_an_unknown_or_another_stores_plan_answers_422(vapi):
    sub = create_sub(vapi)
    _, foreign_plan = make_catalog(vapi.other_store(), title="Theirs")
    for plan_id in (foreign_plan, 999_999_999):
        response = vapi.put(f"/subscriptions/{sub['id']}", json={"plan_id": plan_id})
        assert errors_of(response) == {"plan_id": ["plan not found"]}
    _, onetime_plan = make_catalog(vapi, type="onetime", title="Once", subscription_preferences=None)
    response = vapi.put(f"/subscriptions/{sub['id']}", json={"plan_id": onetime_plan})
    assert errors_of(response) == {"plan_id": ["is a onetime plan"]}
    assert vapi.get(f"/subscriptions/{sub['id']}").json()["subscription"]["plan_id"] is None


def test_update_to_a_plan_of_the_store_links_it(api):
    product_id, plan_id = make_catalog(api, title="Ours")
    sub = create_sub(api, external_product_id={"ecommerce": product_id}, product_title=None, variant_title=None,
                     price=None)
    assert api.put(f"/subscriptions/{sub['id']}", json={"plan_id": plan_id}).json()["subscription"]["plan_id"] == plan_id


def test_update_to_a_plan_of_another_product_or_variant_answers_422_and_changes_nothing(api):
    """A plan is a plan of one product, of some of its variants when it names any (decisions
    §5.8, §7.7 item 8 as bundles apply it)."""
    product_id, _ = make_catalog(api)
    _, other_plan = make_catalog(api, title="Other product's")
    made = api.post("/plans", json={
        "external_product_id": product_id, "title": "Only 1 kg", "type": "subscription",
        "external_variant_ids": [f"{product_id}-2"],
        "subscription_preferences": {"interval_unit": "week", "order_interval_frequency": 2,
                                     "charge_interval_frequency": 2}})
    assert made.status_code == 201, made.text
    restricted = made.json()["plan"]["id"]
    sub = create_sub(api, external_product_id={"ecommerce": product_id}, product_title=None, variant_title=None,
                     price=None)
    assert sub["external_variant_id"] == {"ecommerce": f"{product_id}-1"}
    assert errors_of(api.put(f"/subscriptions/{sub['id']}", json={"plan_id": other_plan})) == {
        "plan_id": [f"is not a plan of the product {product_id}"]}
    assert errors_of(api.put(f"/subscriptions/{sub['id']}", json={"plan_id": restricted})) == {
        "plan_id": [f"does not apply to the variant {product_id}-1"]}
    # With a swap to the variant it applies to, in the same request, it fits.
    moved = api.put(f"/subscriptions/{sub['id']}", json={
        "plan_id": restricted, "external_variant_id": {"ecommerce": f"{product_id}-2"}})
    assert moved.status_code == 200, moved.text
    assert moved.json()["subscription"]["plan_id"] == restricted


def test_moving_to_a_product_outside_the_catalog_keeps_the_titles_and_price(vapi):
    sub = create_sub(vapi)
    change = ({"external_product_id": {"ecommerce": "777"}} if vapi.version == V11 else {"platform_product_id": "777"})
    response = vapi.put(f"/subscriptions/{sub['id']}", json=change)
    assert response.status_code == 200, response.text
    moved = response.json()["subscription"]
    assert (moved["product_title"], moved["variant_title"], moved["price"]) == ("Coffee", "1 lb", "12.50")
    assert (moved["external_product_id"] if vapi.version == V11 else moved["platform_product_id"]) in (
        {"ecommerce": "777"}, 777)


# A GET body sent back (found by an audit) -------------------------------------------------------

def _echo(api, path, kind):
    shown = api.get(path).json()[kind]
    reply = api.put(path, json=shown)
    assert reply.status_code == 200, reply.text
    return shown, api.get(path).json()[kind]


def test_an_item_sent_back_takes_nothing_from_a_catalog_product_added_since(vapi):
    """Its own product and variant sent back are no swap: a GET body sent back took the titles,
    sku, weight and flags of a catalog product added after the item was made (the charge lost
    its shipping and tax), a one-time item the product's first variant."""
    from tests.api.test_products import make_product
    from tests.builders import make_onetime
    address = make_address(vapi)
    sub = create_sub(vapi, address, external_product_id={"ecommerce": "late-1"} if vapi.version == V11 else None,
                     **({"platform_product_id": "late-1"} if vapi.version == V01 else {}))
    onetime = make_onetime(vapi, address, external_product_id="late-2")
    make_product(vapi, "late-1")
    make_product(vapi, "late-2")
    total = charges_of(vapi, address.id)[0].total_price
    before = events_of(vapi)
    for path, kind in ((f"/subscriptions/{sub['id']}", "subscription"), (f"/onetimes/{onetime.id}", "onetime")):
        shown, after = _echo(vapi, path, kind)
        assert after == shown
    assert events_of(vapi) == before
    assert charges_of(vapi, address.id)[0].total_price == total


def test_a_subscription_in_dunning_sent_back_keeps_its_past_date(vapi):
    """Its date is its failed charge's, passed: sent back, it is no new date (it was 422 `must
    not be in the past`)."""
    from tests.builders import make_customer, make_payment_method
    store = vapi.other_store(plan_tier="premium_a")
    store.version = vapi.version
    customer = make_customer(store)
    make_payment_method(store, customer, processor_payment_method_token="pm_declined")
    address = make_address(store, customer)
    item = make_subscription(store, address)
    [charge] = charges_of(store, address.id)
    assert store.post(f"/charges/{charge.id}/process", json={}).status_code == 200
    store.clock.advance(timedelta(days=12))  # the charge's date (10 days ahead) has passed
    shown, after = _echo(store, f"/subscriptions/{item.id}", "subscription")
    assert after["next_charge_scheduled_at"] == shown["next_charge_scheduled_at"]


def test_an_update_and_a_create_name_every_bad_field_at_once(api):
    """decisions §2.3 (found by an audit: a zero quantity, then a price of three decimals, then an
    unknown unit, one request each; a create's past date after its quantity)."""
    sub = create_sub(api)
    reply = api.put(f"/subscriptions/{sub['id']}", json={
        "quantity": 0, "price": "1.005", "order_interval_unit": "year", "order_interval_frequency": 1,
        "charge_interval_frequency": 1}, version=V11)
    assert set(errors_of(reply)) == {"quantity", "price", "order_interval_unit"}, reply.text
    address = make_address(api)
    reply = api.post("/subscriptions", json={
        "address_id": address.id, "product_title": "Tea", "price": "5.00", "quantity": 0, **MONTHLY,
        "next_charge_scheduled_at": (today(api) - timedelta(days=1)).isoformat()}, version=V11)
    assert set(errors_of(reply)) == {"quantity", "next_charge_scheduled_at"}, reply.text
