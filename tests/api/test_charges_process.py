"""`POST /charges/{id}/process` (decisions §6.6, §6.12), both versions, both databases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rebill.domain.schedule.dates import add_interval
from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription


@pytest.fixture
def tier_a(vapi):
    store = vapi.other_store(plan_tier="premium_a")
    store.version = vapi.version
    return store


def _queued(api, token="pm_ok"):
    customer = make_customer(api)
    make_payment_method(api, customer, processor_payment_method_token=token)
    address = make_address(api, customer)
    subscription = make_subscription(api, address)
    [charge] = charges_of(api, address.id)
    return charge, subscription


def test_processing_a_queued_charge_pays_it_now_and_answers_the_charge(tier_a):
    charge, subscription = _queued(tier_a)
    reply = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200, reply.text
    body = reply.json()["charge"]
    assert body["id"] == charge.id
    assert body["status"] == ("success" if tier_a.version == "2021-11" else "SUCCESS")
    # NOTE: decisions §6.12, an early manual process advances from the charge's date.
    nxt = tier_a.get(f"/subscriptions/{subscription.id}").json()["subscription"]["next_charge_scheduled_at"]
    assert nxt.startswith(add_interval(charge.scheduled_at, "month", 1).isoformat())


def test_a_failed_payment_answers_200_with_the_charge_in_error(tier_a):
    charge, _ = _queued(tier_a, token="pm_declined")
    reply = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200, reply.text
    body = reply.json()["charge"]
    assert body["status"].lower() == "error"
    assert body["error_type"] == "CARD_DECLINED"


def test_a_charge_of_zero_is_paid_without_asking_the_processor(tier_a):
    """Found by an audit: a free box (0.00) with a card the sandbox declines went into dunning,
    while Stripe stores pay a charge of 0 without asking. No processor is asked for nothing."""
    customer = make_customer(tier_a)
    make_payment_method(tier_a, customer, processor_payment_method_token="pm_declined")
    address = make_address(tier_a, customer)
    make_subscription(tier_a, address, price="0.00")
    [charge] = charges_of(tier_a, address.id)
    assert charge.total_price == 0
    reply = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 200, reply.text
    assert reply.json()["charge"]["status"] == ("success" if tier_a.version == "2021-11" else "SUCCESS")
    # No card was tried: the method is not `valid` for it (found by an audit, on checkouts).
    [method] = tier_a.get("/payment_methods", params={"customer_id": customer.id},
                          version="2021-11").json()["payment_methods"]
    assert method["status"] == "unvalidated"
    # A charge that costs something is still declined.
    paying = make_subscription(tier_a, make_address(tier_a, customer), price="5.00")
    [dear] = [c for c in charges_of(tier_a, paying.address_id)]
    reply = tier_a.post(f"/charges/{dear.id}/process", json={})
    assert reply.json()["charge"]["status"] == ("error" if tier_a.version == "2021-11" else "ERROR")


def test_a_paid_charge_cannot_be_processed_again(tier_a):
    charge, _ = _queued(tier_a)
    assert tier_a.post(f"/charges/{charge.id}/process", json={}).status_code == 200
    again = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert again.status_code == 422
    assert "only a queued or error charge" in again.json()["errors"]["status"][0]


def test_an_errored_charge_can_be_processed_again_with_a_new_attempt(tier_a):
    charge, _ = _queued(tier_a, token="pm_declined")
    tier_a.post(f"/charges/{charge.id}/process", json={})
    second = tier_a.post(f"/charges/{charge.id}/process", json={}).json()["charge"]
    # 2021-01 calls the count `number_times_tried`.
    assert second.get("charge_attempts", second.get("number_times_tried")) == 2


def test_processing_needs_plan_tier_a(vapi):
    charge, _ = _queued(vapi)
    reply = vapi.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 403
    assert "tier A" in str(reply.json()["errors"])
    assert vapi.get(f"/charges/{charge.id}").json()["charge"]["status"].lower() == "queued"


def test_processing_an_unknown_or_another_stores_charge_is_404(tier_a):
    charge, _ = _queued(tier_a)
    other = tier_a.other_store(plan_tier="premium_a")
    other.version = tier_a.version
    assert other.post(f"/charges/{charge.id}/process", json={}).status_code == 404
    assert tier_a.post("/charges/999999999/process", json={}).status_code == 404


def test_processing_needs_the_write_orders_scope(tier_a):
    charge, _ = _queued(tier_a)
    reply = tier_a.post(f"/charges/{charge.id}/process", json={}, token=tier_a.token_with("read_orders"))
    assert reply.status_code == 403
    assert tier_a.get(f"/charges/{charge.id}").json()["charge"]["status"].lower() == "queued"


def test_a_skipped_charge_is_not_processed(tier_a):
    charge, _ = _queued(tier_a)
    assert tier_a.post(f"/charges/{charge.id}/skip", json={}).status_code == 200
    assert tier_a.post(f"/charges/{charge.id}/process", json={}).status_code == 422


def test_a_charge_skipped_while_the_process_was_claiming_it_answers_422_naming_its_status(tier_a, monkeypatch):
    """Found by an audit: a process that lost the race to a skip answered 409 "being processed
    by another request", though nothing processes it; its status says why (as a retry would)."""
    from rebill.domain.billing import manual
    charge, _ = _queued(tier_a)
    real = manual.run.process

    def skipped_first(*args, **kw):
        assert tier_a.post(f"/charges/{charge.id}/skip", json={}).status_code == 200  # the skip wins
        return real(*args, **kw)
    monkeypatch.setattr(manual.run, "process", skipped_first)
    reply = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert (reply.status_code, reply.json()) == (422, {"errors": {"status": [
        "only a queued or error charge can be processed; this one is "
        + ("SKIPPED" if tier_a.version == "2021-01" else "skipped")]}})


def test_a_charge_claimed_by_a_running_billing_run_answers_409(tier_a):
    from rebill.domain.billing.claim import claim
    charge, _ = _queued(tier_a)
    with tier_a.db.write() as conn:
        assert claim(conn, tier_a.store.id, [charge.id], "another-run", tier_a.clock.now()) == [charge.id]
    reply = tier_a.post(f"/charges/{charge.id}/process", json={})
    assert reply.status_code == 409
    tier_a.clock.advance(timedelta(minutes=2))  # the other run's claim went stale
    assert tier_a.post(f"/charges/{charge.id}/process", json={}).status_code == 200


def test_a_skip_before_a_date_already_paid_cannot_be_undone(tier_a):
    # Found by an audit on PostgreSQL: skip a date, pay the next one early, unskip: the skipped
    # date came back queued and, once paid, the subscription renewed onto the paid date, which
    # was paid a second time.
    charge, subscription = _queued(tier_a)
    field = "purchase_item_ids" if tier_a.version == "2021-11" else "subscription_ids"
    assert tier_a.post(f"/charges/{charge.id}/skip", json={}).status_code == 200
    [later] = [c for c in charges_of(tier_a, charge.address_id) if c.status == "queued"]
    assert tier_a.post(f"/charges/{later.id}/process", json={}).json()["charge"]["status"] in ("success", "SUCCESS")
    before = sorted((c.id, c.status, c.scheduled_at) for c in charges_of(tier_a, charge.address_id))
    refused = tier_a.post(f"/charges/{charge.id}/unskip", json={})
    assert (refused.status_code, refused.json()) == (422, {"errors": {field: [
        f"purchase item {subscription.id} was already charged for {later.scheduled_at.isoformat()}, after this date"]}})
    assert sorted((c.id, c.status, c.scheduled_at) for c in charges_of(tier_a, charge.address_id)) == before


def test_a_next_date_on_or_before_a_date_already_paid_is_refused_by_every_request_that_sets_one(tier_a):
    # Found by a stateful random audit: a charge processed early, then its item's next date set
    # back onto the date just paid: a second charge of that date, paid too.
    charge, subscription = _queued(tier_a)
    paid_for = charge.scheduled_at
    assert tier_a.post(f"/charges/{charge.id}/process", json={}).status_code == 200
    [queued] = [c for c in charges_of(tier_a, charge.address_id) if c.status == "queued"]
    before = sorted((c.id, c.status, c.scheduled_at) for c in charges_of(tier_a, charge.address_id))
    problem = f"purchase item {subscription.id} was already charged for {paid_for.isoformat()}: " \
              "its next charge date must come after it"
    earlier = paid_for - timedelta(days=1)
    requests = [
        ("POST", f"/subscriptions/{subscription.id}/set_next_charge_date", {"date": paid_for.isoformat()}, "date",
         "2021-11"),
        ("POST", f"/subscriptions/{subscription.id}/set_next_charge_date", {"date": earlier.isoformat()}, "date",
         "2021-11"),
        ("PUT", f"/subscriptions/{subscription.id}", {"next_charge_scheduled_at": paid_for.isoformat()},
         "next_charge_scheduled_at", "2021-11"),
        ("POST", f"/charges/{queued.id}/change_next_charge_date", {"next_charge_date": paid_for.isoformat()},
         "next_charge_date", "2021-01"),
    ]
    for method, path, body, field, version in requests:
        reply = tier_a.request(method, path, json=body, version=version)
        assert (reply.status_code, reply.json()) == (422, {"errors": {field: [problem]}}), (path, body)
    assert sorted((c.id, c.status, c.scheduled_at) for c in charges_of(tier_a, charge.address_id)) == before
    later = paid_for + timedelta(days=1)
    moved = tier_a.post(f"/subscriptions/{subscription.id}/set_next_charge_date", json={"date": later.isoformat()},
                        version="2021-11")
    assert moved.status_code == 200, moved.text
