"""External (platform) ids (``api/external_ids.py``; docs/api-choices.md, Hardening: external
ids): an id is printable ASCII. "²" and "³⁴⁵" (``str.isdigit()`` accepts them, ``int()``
refuses them) and "٣" (``int()`` reads it as 3) answer 422 naming the field wherever an id
enters, in either version, and nothing is stored. Rows written before the rule render in every
list that holds them, as the stored string: 2021-01 shows an id as a number only when it is a
plain ASCII integer. Both databases (the ``api`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from rebill.api.external_ids import NOT_ASCII, platform_id
from rebill.models import charges as charges_table
from rebill.models import orders as orders_table
from tests.api.test_customers import create_body as customer_body
from tests.api.test_onetimes import create_onetime
from tests.api.test_products import body as product_body
from tests.api.test_products import legacy_body as legacy_product_body
from tests.api.test_subscriptions import sub_body
from tests.builders import (
    make_address,
    make_customer,
    make_discount,
    make_onetime,
    make_orders,
    make_payment_method,
    make_subscription,
)

V01, V11 = "2021-01", "2021-11"
BAD = ["²", "³⁴⁵", "٣"]
# (head name, refused value); `sent_id` names and shapes the field as each version sends it.
PURCHASE_IDS = [("external_product_id", "³⁴⁵"), ("external_variant_id", "²"), ("external_product_id", "٣")]


def errors_of(reply: Any, status: int = 422) -> Any:
    assert reply.status_code == status, reply.text
    return reply.json()["errors"]


def listed(api: Any, path: str, key: str, version: str | None = None) -> list[dict[str, Any]]:
    reply = api.get(path, version=version)
    assert reply.status_code == 200, reply.text
    return reply.json()[key]


def sent_id(version: str, head_name: str, value: str) -> tuple[str, Any]:
    """A purchase item's id as ``version`` names and sends it."""
    if version == V11:
        return head_name, {"ecommerce": value}
    return head_name.replace("external_", "platform_"), value


# The rendering rule ------------------------------------------------------------------------

@pytest.mark.parametrize("stored, shown", [
    ("4501", 4501), ("0", 0), ("123456789012345678", 123456789012345678),
    ("1234567890123456789", "1234567890123456789"), ("007", "007"), ("-5", "-5"), ("12 ", "12 "),
    ("²", "²"), ("³⁴⁵", "³⁴⁵"), ("٣", "٣"), ("sku-1", "sku-1"), ("", ""), (None, None),
])
def test_2021_01_shows_an_id_as_a_number_only_when_it_is_a_plain_ascii_integer(stored, shown):
    assert platform_id(stored) == shown


# Where ids enter: 422 naming the field, nothing stored ------------------------------------

def discount_body(version: str, **extra: Any) -> dict[str, Any]:
    sent = {"code": "IDS", "value": "10", **extra}
    sent["value_type" if version == V11 else "discount_type"] = "percentage"
    if version == V01:
        sent["duration"] = "forever"
    return sent


@pytest.mark.parametrize("bad", BAD)
def test_a_discount_refuses_a_non_ascii_applies_to_id_and_stores_nothing(vapi, bad):
    reply = vapi.post("/discounts", json=discount_body(vapi.version, applies_to_id=bad))
    assert errors_of(reply) == {"applies_to_id": [NOT_ASCII]}
    assert listed(vapi, "/discounts", "discounts") == []


@pytest.mark.parametrize("bad", BAD)
def test_a_2021_11_discount_refuses_a_non_ascii_id_in_applies_to_ids_and_stores_nothing(api, bad):
    reply = api.post("/discounts", json=discount_body(V11, applies_to={"ids": [bad]}), version=V11)
    assert errors_of(reply) == {"applies_to": {"ids": {"0": [NOT_ASCII]}}}
    assert listed(api, "/discounts", "discounts", V01) == []


@pytest.mark.parametrize("version, field, value", [
    (V01, "platform_order_id", "²"), (V01, "platform_order_id", "٣"),
    (V11, "external_order_id", {"ecommerce": "³⁴⁵"}), (V11, "external_order_id", "²"),
])
def test_an_order_update_refuses_a_non_ascii_order_id_and_changes_nothing(api, version, field, value):
    order = make_orders(api)[0]
    assert errors_of(api.put(f"/orders/{order.id}", json={field: value}, version=version)) == {field: [NOT_ASCII]}
    shown = api.get(f"/orders/{order.id}", version=V01).json()["order"]
    assert (shown["platform_order_id"], shown["platform_id"]) == (None, None)


@pytest.mark.parametrize("head_name, bad", PURCHASE_IDS)
def test_a_subscription_create_refuses_a_non_ascii_platform_id_and_stores_nothing(vapi, head_name, bad):
    address = make_address(vapi)
    name, value = sent_id(vapi.version, head_name, bad)
    assert errors_of(vapi.post("/subscriptions", json=sub_body(vapi, address.id, **{name: value}))) == {
        name: [NOT_ASCII]}
    assert listed(vapi, "/subscriptions", "subscriptions") == []
    assert listed(vapi, "/charges", "charges") == []


@pytest.mark.parametrize("head_name, bad", PURCHASE_IDS[:2])
def test_a_subscription_update_refuses_a_non_ascii_platform_id_and_changes_nothing(vapi, head_name, bad):
    made = make_subscription(vapi, external_product_id="4501", external_variant_id="4502")
    name, value = sent_id(vapi.version, head_name, bad)
    assert errors_of(vapi.put(f"/subscriptions/{made.id}", json={name: value})) == {name: [NOT_ASCII]}
    shown = vapi.get(f"/subscriptions/{made.id}", version=V01).json()["subscription"]
    assert (shown["platform_product_id"], shown["platform_variant_id"]) == (4501, 4502)


@pytest.mark.parametrize("head_name, bad", PURCHASE_IDS)
def test_a_onetime_create_refuses_a_non_ascii_platform_id_and_stores_nothing(vapi, head_name, bad):
    name, value = sent_id(vapi.version, head_name, bad)
    assert errors_of(create_onetime(vapi, **{name: value})) == {name: [NOT_ASCII]}
    assert listed(vapi, "/onetimes", "onetimes") == []
    assert listed(vapi, "/charges", "charges") == []


def test_a_onetime_update_refuses_a_non_ascii_platform_id_and_changes_nothing(vapi):
    made = make_onetime(vapi, external_product_id="4501")
    name, value = sent_id(vapi.version, "external_product_id", "³⁴⁵")
    assert errors_of(vapi.put(f"/onetimes/{made.id}", json={name: value})) == {name: [NOT_ASCII]}
    assert vapi.get(f"/onetimes/{made.id}", version=V01).json()["onetime"]["platform_product_id"] == 4501


@pytest.mark.parametrize("bad", BAD)
def test_a_customer_refuses_a_non_ascii_platform_id_and_stores_nothing(vapi, bad):
    if vapi.version == V11:
        sent, errors = {"external_customer_id": {"ecommerce": bad}}, {"external_customer_id": {"ecommerce": [NOT_ASCII]}}
    else:
        sent, errors = {"platform_customer_id": bad}, {"platform_customer_id": [NOT_ASCII]}
    assert errors_of(vapi.post("/customers", json=customer_body(vapi.version, **sent))) == errors
    assert listed(vapi, "/customers", "customers") == []
    made = make_customer(vapi, external_customer_id="4501")
    assert errors_of(vapi.put(f"/customers/{made.id}", json=sent)) == errors
    assert vapi.get(f"/customers/{made.id}", version=V01).json()["customer"]["platform_customer_id"] == "4501"


@pytest.mark.parametrize("version, sent, errors", [
    (V11, product_body(external_product_id="²"), {"external_product_id": [NOT_ASCII]}),
    (V11, product_body(external_product_id={"ecommerce": "³⁴⁵"}), {"external_product_id": [NOT_ASCII]}),
    (V11, product_body(variants=[{"external_variant_id": "٣"}]),
     {"variants": {"0": {"external_variant_id": [NOT_ASCII]}}}),
    (V01, legacy_product_body(platform_product_id="²"), {"platform_product_id": [NOT_ASCII]}),
])
def test_a_product_refuses_a_non_ascii_external_id_and_stores_nothing(api, version, sent, errors):
    assert errors_of(api.post("/products", json=sent, version=version)) == errors
    assert listed(api, "/products", "products", V11) == []


# Rows from before the rule: every list renders them --------------------------------------

def old_rows(api: Any) -> None:
    """Ids the rule refuses, written past the API as rows from before it would be: a customer,
    a paid subscription (its order and next charge), a one-time item, a discount, and the
    platform order ids of the order and the paid charge."""
    customer = make_customer(api, external_customer_id="²")
    make_payment_method(api, customer)
    address = make_address(api, customer)
    make_orders(api, address, external_product_id="³⁴⁵", external_variant_id="٣")
    make_onetime(api, address, external_product_id="³⁴⁵", external_variant_id="٣")
    make_discount(api, applies_to_id="²")
    with api.db.write() as conn:
        conn.execute(update(orders_table).where(orders_table.c.store_id == api.store.id)
                     .values(external_order_id="²", external_order_number="³"))
        conn.execute(update(charges_table).where(charges_table.c.store_id == api.store.id,
                                                 charges_table.c.status == "success")
                     .values(external_order_id="²"))


def test_2021_01_lists_render_stored_non_ascii_ids_as_the_stored_strings(api):
    old_rows(api)
    for key in ("subscriptions", "onetimes"):
        [item] = listed(api, f"/{key}", key, V01)
        assert (item["platform_product_id"], item["platform_variant_id"]) == ("³⁴⁵", "٣")
    charges = listed(api, "/charges", "charges", V01)
    assert {c["status"] for c in charges} == {"SUCCESS", "QUEUED"}
    assert {c["platform_order_id"] for c in charges} == {"²", None}
    assert {(line["platform_product_id"], line["platform_variant_id"])
            for c in charges for line in c["line_items"]} == {("³⁴⁵", "٣")}
    [order] = listed(api, "/orders", "orders", V01)
    assert (order["platform_order_id"], order["platform_id"], order["platform_order_number"],
            order["platform_customer_id"]) == ("²", "²", None, "²")
    assert [(line["platform_product_id"], line["platform_variant_id"]) for line in order["line_items"]] == [
        ("³⁴⁵", "٣")]
    assert api.get(f"/orders/{order['id']}", version=V01).json()["order"] == order
    [discount] = listed(api, "/discounts", "discounts", V01)
    assert discount["applies_to_id"] == "²"
    [customer] = listed(api, "/customers", "customers", V01)
    assert customer["platform_customer_id"] == "²"


def test_2021_11_lists_render_stored_non_ascii_ids_as_the_stored_strings(api):
    old_rows(api)
    for key in ("subscriptions", "onetimes"):
        [item] = listed(api, f"/{key}", key, V11)
        assert (item["external_product_id"], item["external_variant_id"]) == ({"ecommerce": "³⁴⁵"},
                                                                              {"ecommerce": "٣"})
    charges = listed(api, "/charges", "charges", V11)
    assert {c["external_order_id"]["ecommerce"] for c in charges} == {"²", None}
    assert {(line["external_product_id"]["ecommerce"], line["platform_product_id"], line["platform_variant_id"])
            for c in charges for line in c["line_items"]} == {("³⁴⁵", "³⁴⁵", "٣")}
    [order] = listed(api, "/orders", "orders", V11)
    assert (order["external_order_id"], order["customer"]["external_customer_id"]) == (
        {"ecommerce": "²"}, {"ecommerce": "²"})
    assert [line["external_variant_id"] for line in order["line_items"]] == [{"ecommerce": "٣"}]
    [discount] = listed(api, "/discounts", "discounts", V11)
    assert discount["applies_to"]["ids"] == ["²"]
