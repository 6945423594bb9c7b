"""Found by a stateful random audit: a charge in retry recomputed keeps its shipping lines in
step with its totals; a skipped charge whose date has passed is history (never rewritten,
deleted or made again); a subscription its last failed retry cancelled loses its skips ahead,
as a cancel by request does; a merge's next date is refused on a date the item skipped."""

from __future__ import annotations

from datetime import date, timedelta
from types import SimpleNamespace

from sqlalchemy import update

from rebill.models import stores
from tests.api.test_charges_skip import skip_date
from tests.builders import charges_of, events_of, make_address, make_onetime, make_subscription
from tests.scenarios.conftest import advance, pay_with, subscriber


def test_a_recomputed_charge_in_retry_shows_the_shipping_it_bills(api, at):
    at(date(2027, 1, 10))
    address, _ = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 1, 12), price="10.00")
    once = make_onetime(api, address, next_charge_scheduled_at=date(2027, 1, 12), price="3.00")
    assert advance(api, to="2027-01-12")["failed"] == 1
    assert api.put(f"/addresses/{address.id}", json={
        "shipping_lines_override": [{"code": "x", "price": "0.93", "title": "Cheap"}]}).status_code == 200
    assert api.delete(f"/onetimes/{once.id}").status_code == 204
    [charge] = charges_of(api, address.id)
    assert charge.status == "error"
    shipping = sum(float(line["price"]) for line in charge.shipping_lines)
    assert f"{shipping:.2f}" == f"{charge.total_shipping:.2f}" == "0.93"
    assert charge.total_price == charge.subtotal_price - charge.total_discounts + charge.total_shipping + \
        charge.total_tax


def test_a_past_skipped_charge_is_history(api, at):
    at(date(2027, 1, 10))
    address, sub = subscriber(api, next_charge_scheduled_at=date(2027, 1, 11), order_interval_unit="week",
                              order_interval_frequency=1, charge_interval_frequency=1)
    [first] = charges_of(api, address.id)
    assert api.post(f"/charges/{first.id}/skip", json={}).status_code == 200
    advance(api, to="2027-01-13")
    skipped = [c for c in charges_of(api, address.id) if c.status == "skipped"]
    assert [c.id for c in skipped] == [first.id]
    assert api.put(f"/subscriptions/{sub.id}", json={"quantity": 3}).status_code == 200
    [kept] = [c for c in charges_of(api, address.id) if c.status == "skipped"]
    assert (kept.id, kept.total_price, kept.line_items[0]["quantity"]) == (first.id, first.total_price, 1)
    pay_with(api, "pm_declined")
    advance(api, to="2027-01-19")  # the renewal fails: the retry holds the subscription
    pay_with(api, "pm_ok")
    advance(api, to="2027-01-26")  # the retry is paid
    assert [c.id for c in charges_of(api, address.id) if c.status == "skipped"] == [first.id]
    assert ("charge/deleted", first.id) not in events_of(api, first.id)


def test_a_subscription_cancelled_by_its_last_retry_loses_its_skips_ahead(api, at):
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(
            dunning={"first_retry_days": 1, "retry_every_days": 2, "max_attempts": 3,
                     "on_max_retries": "cancel_subscriptions"}))
    at(date(2027, 1, 10))
    address, sub = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 1, 11),
                              order_interval_unit="day", order_interval_frequency=30, charge_interval_frequency=30)
    ahead = skip_date(api, address.id, {"date": "2027-03-12", "subscription_ids": [sub.id]})
    assert ahead.status_code == 200, ahead.text
    advance(api, to="2027-01-20")  # three attempts: closed, the subscription cancelled
    assert api.get(f"/subscriptions/{sub.id}").json()["subscription"]["status"] == "cancelled"
    pay_with(api, "pm_ok")
    assert api.post(f"/subscriptions/{sub.id}/activate", json={}).status_code == 200
    assert [c for c in charges_of(api, address.id) if c.status == "skipped"] == []


def test_a_merge_does_not_put_a_next_date_on_a_date_its_item_skipped(api, at):
    at(date(2027, 1, 10))
    source, sub = subscriber(api, next_charge_scheduled_at=date(2027, 1, 15), order_interval_unit="week",
                             order_interval_frequency=1, charge_interval_frequency=1)
    target = make_address(api, SimpleNamespace(id=source.customer_id))
    skipped_on = date(2027, 1, 15) + timedelta(days=7)
    assert skip_date(api, source.id, {"date": skipped_on.isoformat(), "subscription_ids": [sub.id]}).status_code == 200
    reply = api.post("/addresses/merge", json={"target_address": {"id": target.id},
                                              "source_addresses": [{"id": source.id}],
                                              "next_charge_date": skipped_on.isoformat()})
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"next_charge_date": [
        f"purchase item {sub.id} is skipped on {skipped_on}: unskip that charge instead"]}
    assert api.get(f"/subscriptions/{sub.id}").json()["subscription"]["address_id"] == source.id


def test_a_skip_ahead_keeps_its_charge_and_id_while_the_item_waits_for_a_retry(api, at):
    """decisions §5.11, §5.16: the skipped charge of a later date stays, under its id, while the
    item's earlier charge is in dunning (found by an audit: the failed payment deleted it, and it
    came back under a new id once the retry was paid)."""
    at(date(2027, 1, 10))
    address, sub = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 1, 20), price="10.00")
    ahead = skip_date(api, address.id, {"date": "2027-02-20", "subscription_ids": [sub.id]})
    assert ahead.status_code == 200, ahead.text
    skipped_id = ahead.json()["charge"]["id"]
    assert advance(api, to="2027-01-20")["failed"] == 1
    statuses = [(c.status, c.scheduled_at) for c in charges_of(api, address.id)]
    assert statuses == [("error", date(2027, 1, 20)), ("skipped", date(2027, 2, 20))]
    assert api.get(f"/charges/{skipped_id}").json()["charge"]["status"] == "skipped"
    # Nothing queued to come back to while the retry waits: 422 naming it, not 404.
    refused = api.post(f"/charges/{skipped_id}/unskip", json={}, version="2021-11")
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == {"purchase_item_ids": [f"purchase item {sub.id} waits for the retry of charge "
                                                              f"{charges_of(api, address.id)[0].id}"]}
    assert [(c.id, c.status) for c in charges_of(api, address.id)][1] == (skipped_id, "skipped")
    pay_with(api, "pm_ok")
    advance(api, to="2027-01-21")  # the retry is paid
    by_date = {c.scheduled_at: (c.id, c.status) for c in charges_of(api, address.id)}
    assert by_date[date(2027, 2, 20)] == (skipped_id, "skipped")
    assert by_date[date(2027, 3, 20)][1] == "queued"  # the renewal passes over the skipped date
    assert ("charge/deleted", skipped_id) not in events_of(api, skipped_id)


def test_a_new_cadence_is_refused_while_the_charge_its_last_retry_closed_holds_the_subscription(api, at):
    """A cancelled subscription is still on the charge its last failed retry closed (decisions
    §6.4); a new cadence would bill that charge for more deliveries (found by a random audit: the
    closed charge was repriced for two, and a manual process took it). 422 as for a charge in
    retry: process that charge first."""
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == api.store.id).values(
            dunning={"first_retry_days": 1, "retry_every_days": 2, "max_attempts": 3,
                     "on_max_retries": "cancel_subscriptions"}))
    at(date(2027, 1, 10))
    address, sub = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 1, 11), price="10.00")
    advance(api, to="2027-01-20")  # three attempts: closed, the subscription cancelled
    assert api.get(f"/subscriptions/{sub.id}").json()["subscription"]["status"] == "cancelled"
    [closed] = charges_of(api, address.id)
    reply = api.put(f"/subscriptions/{sub.id}", json={"order_interval_unit": "month", "order_interval_frequency": 1,
                                                      "charge_interval_frequency": 2})
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"charge_interval_frequency": [
        f"purchase item {sub.id} is held by charge {closed.id}, whose last retry failed: process that charge first"]}
    [after] = charges_of(api, address.id)
    assert (after.total_price, after.line_items, after.orders_count) == (
        closed.total_price, closed.line_items, closed.orders_count)


def test_a_whole_unskip_brings_back_the_items_that_do_not_wait_for_a_retry(api, at):
    """The items of a skipped charge whose earlier charge waits for its retry stay skipped; the
    others come back (found by a review: one waiting item made the whole unskip a 422)."""
    at(date(2027, 1, 10))
    address, waiting = subscriber(api, token="pm_declined", next_charge_scheduled_at=date(2027, 1, 20))
    free = make_subscription(api, address, next_charge_scheduled_at=date(2027, 2, 20))
    skipped = skip_date(api, address.id, {"date": "2027-02-20", "subscription_ids": [waiting.id, free.id]})
    assert skipped.status_code == 200, skipped.text
    assert advance(api, to="2027-01-20")["failed"] == 1
    reply = api.post(f"/charges/{skipped.json()['charge']['id']}/unskip", json={}, version="2021-11")
    assert reply.status_code == 200, reply.text
    assert [line["purchase_item_id"] for line in reply.json()["charge"]["line_items"]] == [free.id]
    on_date = {c.status: c for c in charges_of(api, address.id) if c.scheduled_at == date(2027, 2, 20)}
    assert sorted(on_date) == ["queued", "skipped"]
    assert on_date["skipped"].id == skipped.json()["charge"]["id"]
    assert [line["purchase_item_id"] for line in on_date["skipped"].line_items] == [waiting.id]
