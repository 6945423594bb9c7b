"""Contract tests of the discounts resource (spec 02 Discounts and Discount status, decisions
§7.1, §7.5, 03-real-fields "discount"): both versions, both databases (the `api` fixture)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from tests.api.test_real_fields import BOOL, INT, NULL, OBJ, STR, assert_fields
from tests.builders import charges_of, events_of, make_address, make_discount, make_subscription

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}


def create(api: Any, version: str = V11, **body: Any) -> dict[str, Any]:
    sent = {"code": "WELCOME", "value": "10", **body}
    sent.setdefault("value_type" if version == V11 else "discount_type", "percentage")
    if version == V01:
        sent.setdefault("duration", "forever")
    reply = api.post("/discounts", json=sent, version=version)
    assert reply.status_code == (201 if version == V11 else 200), reply.text
    return reply.json()["discount"]


def errors_of(reply: Any, status: int = 422) -> Any:
    assert reply.status_code == status, reply.text
    return reply.json()["errors"]


def test_create_2021_11_renders_the_nested_shape_of_decisions_7_1(api):
    made = create(api, code="Nested", value="15.5", applies_to={"ids": ["prod-1"], "resource": "product",
                                                                 "purchase_item_type": "subscription"},
                  usage_limits={"max_subsequent_redemptions": 2, "one_application_per_customer": True,
                                "redemptions": 100, "first_time_customer_restriction": True})
    assert made["applies_to"] == {"ids": ["prod-1"], "purchase_item_type": "SUBSCRIPTION", "resource": "product"}
    assert made["usage_limits"] == {"first_time_customer_restriction": True, "max_subsequent_redemptions": 2,
                                    "one_application_per_customer": True, "redemptions": 100}
    assert made["value"] == "15.5" and made["value_type"] == "percentage" and made["status"] == "enabled"
    assert made["channel_settings"]["api"] == {"can_apply": True}
    assert made["external_discount_id"] == {"ecommerce": None} and made["created_at"].endswith("+00:00")
    old = api.get(f"/discounts/{made['id']}", version=V01).json()["discount"]
    assert old["duration"] == "usage_limit" and old["duration_usage_limit"] == 2 and old["usage_limit"] == 100
    assert old["once_per_customer"] is True and old["applies_to_resource"] == "platform_product"
    assert old["first_time_customer_restriction"] == "customer_must_not_exist_in_service"
    assert old["times_used"] == 0 and old["discount_type"] == "percentage" and "value_type" not in old
    assert not old["created_at"].endswith("+00:00")


def test_a_minimum_subtotal_has_the_currencys_places_at_most(api):
    """Found by an audit: 2021-01 kept `30.555` (USD) and showed it as text."""
    for version, body in ((V01, {"discount_type": "percentage", "duration": "forever"}),
                          (V11, {"value_type": "percentage"})):
        reply = api.post("/discounts", version=version, json={
            "code": f"MIN{version[-2:]}", "value": "10", "prerequisite_subtotal_min": "30.555", **body})
        assert errors_of(reply) == {"prerequisite_subtotal_min": ["has too many decimal places for USD (at most 2)"]}
    assert create(api, V01, code="MINOK", discount_type="percentage", value="10", duration="forever",
                  prerequisite_subtotal_min="30.5")["prerequisite_subtotal_min"] == "30.50"  # the store currency's minor digits, as any amount


def test_create_2021_01_takes_the_flat_fields_and_requires_duration(api):
    made = create(api, V01, code="FLAT", discount_type="fixed_amount", value="5", duration="single_use",
                  applies_to_id=123, applies_to_product_type="onetime", prerequisite_subtotal_min=20)
    assert made["value"] == "5.00" and made["applies_to_id"] == 123 and made["applies_to_product_type"] == "ONETIME"
    assert made["prerequisite_subtotal_min"] == 20 and made["duration"] == "single_use"
    head = api.get(f"/discounts/{made['id']}").json()["discount"]
    assert head["usage_limits"]["max_subsequent_redemptions"] == 0
    assert head["applies_to"]["purchase_item_type"] == "ONETIME"
    missing = errors_of(api.post("/discounts", json={}, version=V01))
    assert missing == {name: ["is required"] for name in ("code", "discount_type", "value", "duration")}


def test_create_2021_11_defaults_duration_to_forever(api):
    made = create(api)
    assert made["usage_limits"]["max_subsequent_redemptions"] is None
    assert api.get(f"/discounts/{made['id']}", version=V01).json()["discount"]["duration"] == "forever"


@pytest.mark.parametrize("body, errors", [
    ({"code": 5, "value_type": "percentage", "value": "10"}, {"code": ["must be a string"]}),
    ({"code": "X", "value_type": "bogus", "value": "10"},
     {"value_type": ["must be one of: percentage, fixed_amount, shipping"]}),
    ({"code": "X", "value_type": "percentage", "value": "abc"}, {"value": ["must be a decimal number as a string"]}),
    ({"code": "X", "value_type": "percentage", "value": "101"},
     {"value": ["must be greater than 0 and at most 100 for a percentage"]}),
    ({"code": "X", "value_type": "fixed_amount", "value": "5.001"},
     {"value": ["has too many decimal places for USD (at most 2)"]}),
    ({"code": "X", "value_type": "percentage", "value": "10", "duration": "usage_limit"},
     {"duration_usage_limit": ["is required when duration is usage_limit"]}),
    ({"code": "X", "value_type": "percentage", "value": "10", "starts_at": "soon"},
     {"starts_at": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"]}),
    ({"code": "X", "value_type": "percentage", "value": "10", "starts_at": "2030-01-02",
      "ends_at": "2030-01-01"}, {"ends_at": ["must be after starts_at"]}),
    ({"code": "X", "value_type": "percentage", "value": "10", "channel_settings": {"api": {"can_apply": "no"}}},
     {"channel_settings": {"api": {"can_apply": ["must be a boolean"]}}}),
    ({"code": "X", "value_type": "percentage", "value": "10", "status": "fully_disabled"},
     {"status": ["must be enabled or disabled"]}),
    ({"code": "X", "value_type": "percentage", "value": "10", "usage_limit": 0}, {"usage_limit": ["must be at least 1"]}),
    ({"code": "X", "value_type": "percentage", "value": "10", "applies_to": {"ids": ["1", "2"]}},
     {"applies_to": {"ids": ["at most one id"]}}),
])
def test_create_refuses_bad_fields_with_every_problem_named_and_changes_nothing(api, body, errors):
    assert errors_of(api.post("/discounts", json=body)) == errors
    assert api.get("/discounts").json()["discounts"] == []


def test_codes_are_unique_per_store_case_insensitively(api):
    create(api, code="Summer")
    assert errors_of(api.post("/discounts", json={"code": "SUMMER", "value_type": "percentage", "value": "5"})) == {
        "code": ["has already been taken"]}
    other = api.other_store()
    create(other, code="summer")


def test_a_code_is_one_code_in_either_unicode_form_and_has_no_invisible_characters(api):
    """Found by an audit: `CAFÉ` with one character and with `E` and a combining accent were
    two codes, and a code with a zero-width space sat beside the plain one."""
    composed, decomposed = "CAF\u00c9", "CAFE\u0301"
    made = create(api, code=decomposed)
    assert made["code"] == composed  # kept in its one form
    assert errors_of(api.post("/discounts", json={"code": composed.lower(), "value_type": "percentage",
                                                  "value": "5"})) == {"code": ["has already been taken"]}
    listed = api.get("/discounts", params={"discount_code": decomposed.lower()}).json()["discounts"]
    assert [d["id"] for d in listed] == [made["id"]]
    address = make_address(api)
    applied = api.post(f"/addresses/{address.id}/apply_discount", json={"discount_code": "cafe\u0301"})
    assert applied.status_code == 200, applied.text
    for code in ("ZW\u200bSP", "NB\u00a0SP", "RTL\u202e", "TAB\tX"):
        assert errors_of(api.post("/discounts", json={"code": code, "value_type": "percentage", "value": "5"})) == {
            "code": ["must not contain invisible characters"]}, code


def test_get_update_delete_answer_404_for_unknown_and_another_stores_ids(vapi):
    foreign = create(vapi.other_store(), vapi.version)
    for path in (f"/discounts/{foreign['id']}", "/discounts/999999"):
        assert vapi.get(path).json() == NOT_FOUND
        assert vapi.put(path, json={"status": "disabled"}).json() == NOT_FOUND
        assert vapi.delete(path).json() == NOT_FOUND


def test_a_token_without_the_discount_scopes_gets_403(vapi):
    token = vapi.token_with("read_customers")
    made = create(vapi, vapi.version)
    message = {"errors": "This token lacks the scope this endpoint needs: read_discounts"}
    assert vapi.get("/discounts", token=token).json() == message
    assert vapi.get(f"/discounts/{made['id']}", token=token).status_code == 403
    reader = vapi.token_with("read_discounts")
    refused = vapi.post("/discounts", json={"code": "NOPE"}, token=reader)
    assert refused.status_code == 403
    assert refused.json() == {"errors": "This token lacks the scope this endpoint needs: write_discounts"}


@pytest.mark.parametrize("version", [V01, V11])
def test_update_changes_only_the_fields_spec_02_lists_and_refuses_the_others(api, version):
    """spec 02 Discounts: PUT takes `channel_settings`, `ends_at`, `starts_at`, `status` and
    `usage_limit`. Found by an audit: another field with another value (`value`, `code`...)
    answered 200 and changed nothing; it is refused now, and the discount's own value passes
    (a GET body sent back)."""
    kind = "value_type" if version == V11 else "discount_type"
    made = create(api, version, prerequisite_subtotal_min="20")
    path = f"/discounts/{made['id']}"
    told = len(events_of(api))
    refused = api.put(path, json={"value": "50", "code": "OTHER", kind: "fixed_amount", "usage_limit": 5,
                                  "prerequisite_subtotal_min": "30"}, version=version)
    said = ["cannot be changed once the discount is created"]
    assert errors_of(refused) == {"value": said, "code": said, kind: said, "prerequisite_subtotal_min": said}
    assert api.get(path, version=version).json()["discount"] == made and len(events_of(api)) == told
    shown = api.get(path, version=version).json()["discount"]
    limit = {"usage_limits": {**shown["usage_limits"], "redemptions": 5}} if version == V11 else {"usage_limit": 5}
    back = api.put(path, json={**shown, **limit, "code": " welcome ", "value": "10.00",
                               "channel_settings": {"api": {"can_apply": False}}}, version=version)
    assert back.status_code == 200, back.text
    changed = back.json()["discount"]
    assert (changed["value"], changed["code"]) == (made["value"], "WELCOME")
    assert (changed["usage_limits"]["redemptions"] if version == V11 else changed["usage_limit"]) == 5
    assert changed["channel_settings"]["api"] == {"can_apply": False}
    assert changed["channel_settings"]["customer_portal"] == {"can_apply": True}
    assert errors_of(api.put(path, json={"status": 3}, version=version)) == {"status": ["must be a string"]}
    assert errors_of(api.put(path, json={"value": "x"}, version=version)) == {
        "value": ["must be a decimal number as a string"]}


def test_events_discount_created_updated_deleted(api):
    made = create(api)
    api.put(f"/discounts/{made['id']}", json={"status": "fully_disabled"})
    api.delete(f"/discounts/{made['id']}")
    assert [t for t, i in events_of(api, made["id"]) if t.startswith("discount/")] == [
        "discount/created", "discount/updated", "discount/deleted"]


def test_setting_the_same_status_again_is_200_with_no_change(api):
    made = create(api)
    api.clock.advance(timedelta(minutes=5))
    reply = api.put(f"/discounts/{made['id']}", json={"status": "enabled"})
    assert reply.status_code == 200 and reply.json()["discount"]["updated_at"] == made["updated_at"]
    assert [t for t, _ in events_of(api, made["id"])] == ["discount/created"]


def test_delete_needs_fully_disabled_first(vapi):
    made = create(vapi, vapi.version)
    assert errors_of(vapi.delete(f"/discounts/{made['id']}")) == {
        "status": ["must be fully_disabled before the discount is deleted"]}
    vapi.put(f"/discounts/{made['id']}", json={"status": "fully_disabled"})
    reply = vapi.delete(f"/discounts/{made['id']}")
    assert reply.status_code == (204 if vapi.version == V11 else 200)
    assert vapi.get(f"/discounts/{made['id']}").status_code == 404


def test_a_deleted_discounts_id_is_never_given_again(api):
    """decisions §1.2 (found by an audit: on SQLite the next discount took the deleted one's id,
    and the charges that had carried the old code answered to it; migration 0022)."""
    made = create(api)
    api.put(f"/discounts/{made['id']}", json={"status": "fully_disabled"})
    assert api.delete(f"/discounts/{made['id']}").status_code == 204
    assert create(api)["id"] > made["id"]


def test_status_machine_follows_the_table_of_spec_02(api):
    made = create(api)
    path = f"/discounts/{made['id']}"
    assert api.put(path, json={"status": "disabled"}).json()["discount"]["status"] == "disabled"
    assert api.put(path, json={"status": "enabled"}).json()["discount"]["status"] == "enabled"
    assert api.put(path, json={"status": "fully_disabled"}).json()["discount"]["status"] == "fully_disabled"
    assert errors_of(api.put(path, json={"status": "disabled"})) == {
        "status": ["cannot change from fully_disabled to disabled"]}
    # NOTE: spec 02 table, fully_disabled -> enabled is allowed (and gives nothing back).
    assert api.put(path, json={"status": "enabled"}).json()["discount"]["status"] == "enabled"


def test_ends_at_passing_shows_disabled_and_lists_by_it(api):
    made = create(api, ends_at=(api.clock.now() + timedelta(days=1)).isoformat())
    assert api.get("/discounts", params={"status": "enabled"}).json()["discounts"][0]["id"] == made["id"]
    api.clock.advance(timedelta(days=1))
    assert api.get(f"/discounts/{made['id']}").json()["discount"]["status"] == "disabled"
    assert api.get("/discounts", params={"status": "enabled"}).json()["discounts"] == []
    assert [d["id"] for d in api.get("/discounts", params={"status": "disabled"}).json()["discounts"]] == [made["id"]]


def test_an_ended_discount_is_enabled_only_with_a_later_end(api):
    """Found by an audit: `status: enabled` on a discount shown `disabled` since its end passed
    answered 200, still `disabled`, and changed nothing."""
    ends = api.clock.now() + timedelta(days=1)
    made = create(api, ends_at=ends.isoformat())
    api.clock.advance(timedelta(days=2))
    path = f"/discounts/{made['id']}"
    stored = api.get(path).json()["discount"]
    assert errors_of(api.put(path, json={"status": "enabled"})) == {
        "status": [f"the discount ended at {ends.isoformat()}: send a later ends_at, or null, to enable it"]}
    assert api.get(path).json()["discount"] == stored
    later = (api.clock.now() + timedelta(days=3)).isoformat()
    for body in ({"status": "enabled", "ends_at": later}, {"status": "enabled", "ends_at": None}):
        assert api.put(path, json=body).json()["discount"]["status"] == "enabled"


def test_list_filters_sort_paging_and_count_in_2021_01(api):
    a = create(api, code="A1", value="5")
    b = create(api, code="B2", value_type="fixed_amount", value="3")
    c = create(api, code="C3", status="disabled")
    listed = api.get("/discounts").json()["discounts"]
    assert [d["id"] for d in listed] == [c["id"], b["id"], a["id"]]  # id-desc
    assert [d["id"] for d in api.get("/discounts", params={"discount_type": "fixed_amount"}).json()["discounts"]] == [
        b["id"]]
    assert [d["id"] for d in api.get("/discounts", params={"discount_code": "a1"}).json()["discounts"]] == [a["id"]]
    assert [d["id"] for d in api.get("/discounts", params={"ids": f"{a['id']},{c['id']}",
                                                           "sort_by": "id-asc"}).json()["discounts"]] == [a["id"],
                                                                                                        c["id"]]
    page = api.get("/discounts", params={"limit": 2}).json()
    assert len(page["discounts"]) == 2 and page["next_cursor"]
    rest = api.get("/discounts", params={"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [d["id"] for d in rest["discounts"]] == [a["id"]]
    assert api.get("/discounts/count", version=V01).json() == {"count": 3}
    assert api.get("/discounts/count", params={"status": "enabled"}, version=V01).json() == {"count": 2}
    assert api.get("/discounts/count", params={"discount_type": "percentage"}, version=V01).json() == {"count": 2}
    assert api.get("/discounts/count").status_code == 501
    assert errors_of(api.get("/discounts", params={"status": "bogus"})) == {
        "status": ["Invalid value: bogus. Must be one of enabled, disabled, fully_disabled"]}
    assert errors_of(api.get("/discounts", params={"ids": "x"}))["ids"]


def test_list_is_scoped_to_the_store(api):
    create(api.other_store())
    assert api.get("/discounts").json()["discounts"] == []


def test_2021_01_list_pages_by_link_header(api):
    for n in range(3):
        create(api, V01, code=f"L{n}")
    reply = api.get("/discounts", params={"limit": 2}, version=V01)
    assert len(reply.json()["discounts"]) == 2 and 'rel="next"' in reply.headers["Link"]


def test_fully_disabled_removes_the_code_from_addresses_and_queued_charges_for_good(api):
    discount_id = make_discount(api, value="20")
    address = make_address(api)
    make_subscription(api, address)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    [queued] = charges_of(api, address.id)
    assert queued.total_discounts == Decimal("2.50") and queued.discount_id == discount_id
    api.put(f"/discounts/{discount_id}", json={"status": "fully_disabled"})
    [queued] = charges_of(api, address.id)
    assert queued.total_discounts == 0 and queued.discounts == [] and queued.discount_id is None
    assert api.get(f"/addresses/{address.id}").json()["address"]["discounts"] == []
    topics = [t for t, _ in events_of(api)]
    assert "address/updated" in topics and "charge/updated" in topics
    # Re-enabling gives nothing back.
    api.put(f"/discounts/{discount_id}", json={"status": "enabled"})
    assert charges_of(api, address.id)[0].discount_id is None
    assert api.get(f"/addresses/{address.id}").json()["address"]["discounts"] == []


def test_disabling_keeps_the_code_on_addresses_already_holding_it(api):
    discount_id = make_discount(api, value="20")
    address = make_address(api)
    make_subscription(api, address)
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id})
    api.put(f"/discounts/{discount_id}", json={"status": "disabled"})
    assert charges_of(api, address.id)[0].discount_id == discount_id




def test_the_2021_11_discount_has_every_field_of_03_real_fields(api):
    made = create(api)
    assert_fields(made, [
        ("applies_to", {OBJ}), ("applies_to.ids", {"array"}), ("applies_to.purchase_item_type", {STR}),
        ("applies_to.resource", {NULL}), ("channel_settings.api.can_apply", {BOOL}),
        ("channel_settings.checkout_page.can_apply", {BOOL}), ("channel_settings.customer_portal.can_apply", {BOOL}),
        ("channel_settings.merchant_portal.can_apply", {BOOL}), ("code", {STR}), ("created_at", {STR}),
        ("ends_at", {NULL}), ("external_discount_id.ecommerce", {NULL}), ("external_discount_source", {NULL}),
        ("id", {INT}), ("prerequisite_subtotal_min", {NULL}), ("starts_at", {NULL}), ("status", {STR}),
        ("updated_at", {STR}), ("usage_limits.first_time_customer_restriction", {BOOL}),
        ("usage_limits.max_subsequent_redemptions", {NULL}), ("usage_limits.one_application_per_customer", {BOOL}),
        ("value", {STR}), ("value_type", {STR})])


def test_the_2021_01_discount_has_every_field_of_03_real_fields(api):
    made = create(api, V01)
    for name in ("applies_to", "applies_to_id", "applies_to_product_type", "applies_to_resource", "code",
                 "created_at", "discount_type", "duration", "duration_usage_limit", "ends_at", "id",
                 "once_per_customer", "starts_at", "status", "times_used", "updated_at", "usage_limit", "value"):
        assert name in made
