"""Contract tests of one order: the body field by field in both versions, retrieve, tenancy,
scopes, the endpoints of one version, and the update (decisions §6.10, §6.12; 03-real-fields
"order (2021-11)", "order (2021-01)"; docs/api-choices.md, Orders).

Lists live in ``test_orders_list.py``; delay, change_date, clone and delete in
``test_orders_actions.py``; the helpers below are shared with them. Orders are real: a
subscription due today whose charge the billing run pays (``tests.builders.make_orders``).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from rebill.api.external_ids import platform_id
from rebill.domain.order import repository as order_repo
from rebill.models import charges as charges_table
from rebill.models import orders as orders_table
from tests.api.test_charges import make_product
from tests.api.test_charges_totals import set_rates
from tests.api.test_real_fields import ARR, BOOL, DT_NAIVE, DT_OFFSET, INT, NULL, NUM, OBJ, STR, assert_fields
from tests.builders import events_of, make_address, make_customer, make_orders, make_payment_method

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
NOT_IN_VERSION = {"errors": "This resource is not implemented in the requested API version"}
NEEDS_READ = {"errors": "This token lacks the scope this endpoint needs: read_orders"}
NEEDS_WRITE = {"errors": "This token lacks the scope this endpoint needs: write_orders"}
ADDRESS_KEYS = ("address1", "address2", "city", "company", "first_name", "last_name", "phone", "province", "zip")


# Helpers (imported by the other test_orders_* modules) --------------------------------------

def today(api: Any) -> date:
    return api.clock.now().date()


def prepaid(api: Any, address: Any = None, **overrides: Any) -> list[Any]:
    """The three orders of a prepaid charge paid today: every 7 days, 21 days a charge (day
    cadences keep the arithmetic free of month ends). The first is `success`, the others queued."""
    values = {"order_interval_unit": "day", "order_interval_frequency": 7, "charge_interval_frequency": 21,
              **overrides}
    return make_orders(api, address, **values)


def queued(api: Any, address: Any = None) -> Any:
    """A queued order: the second of a prepaid charge, dated a week from today."""
    return prepaid(api, address)[1]


def paid(api: Any, address: Any = None, **overrides: Any) -> Any:
    return make_orders(api, address, **overrides)[0]


def order(api: Any, order_id: int, version: str | None = None) -> dict[str, Any]:
    response = api.get(f"/orders/{order_id}", version=version)
    assert response.status_code == 200, response.text
    return response.json()["order"]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def set_order(api: Any, order_id: int, **values: Any) -> None:
    """Put an order into a state the API does not reach (cancelled, error)."""
    with api.db.write() as conn:
        conn.execute(update(orders_table).where(orders_table.c.id == order_id).values(**values))


def order_events(api: Any, order_id: int) -> list[str]:
    return [topic for topic, _ in events_of(api, order_id) if topic.startswith("order/")]


# Spec 03 order (2021-11) and order (2021-01), transcribed ------------------------------------

MONEY = {STR}  # spec 01 Conventions: money is a string (spec 03 also saw numbers); not original_price
ORDER_2021_11 = [
    ("id", {INT}), ("address_id", {INT}),
    ("billing_address", {OBJ}), *((f"billing_address.{k}", {STR, NULL}) for k in ADDRESS_KEYS),
    ("billing_address.country_code", {STR}),
    ("charge", {OBJ}), ("charge.external_transaction_id", {OBJ}),
    ("charge.external_transaction_id.payment_processor", {STR}), ("charge.id", {INT}),
    ("charge.payment_processor_name", {STR}), ("charge.status", {STR}),
    ("client_details", {OBJ}), ("client_details.browser_ip", {NULL}), ("client_details.user_agent", {NULL}),
    ("created_at", {DT_OFFSET}), ("currency", {STR}),
    ("customer", {OBJ}), ("customer.email", {STR}), ("customer.external_customer_id", {OBJ}),
    ("customer.external_customer_id.ecommerce", {STR, NULL}), ("customer.hash", {STR}), ("customer.id", {INT}),
    ("discounts", {ARR}), ("error", {NULL, STR}), ("external_cart_token", {NULL}),
    ("external_order_id", {OBJ}), ("external_order_id.ecommerce", {STR, NULL}),
    ("external_order_name", {OBJ}), ("external_order_name.ecommerce", {STR, NULL}),
    ("external_order_number", {OBJ}), ("external_order_number.ecommerce", {STR}),
    ("is_prepaid", {BOOL}), ("line_items", {ARR}),
    ("line_items[].external_inventory_policy", {STR}),
    ("line_items[].external_product_id", {OBJ}), ("line_items[].external_product_id.ecommerce", {STR, NULL}),
    ("line_items[].external_variant_id", {OBJ}), ("line_items[].external_variant_id.ecommerce", {STR, NULL}),
    ("line_items[].grams", {INT, NULL}), ("line_items[].handle", {NULL}), ("line_items[].images", {OBJ}),
    *((f"line_items[].images.{size}", {STR, NULL}) for size in ("large", "medium", "original", "small")),
    ("line_items[].original_price", {NUM}), ("line_items[].properties", {ARR}),
    ("line_items[].purchase_item_id", {INT}), ("line_items[].purchase_item_type", {STR}),
    ("line_items[].quantity", {INT}), ("line_items[].sku", {STR, NULL}), ("line_items[].tax_due", {STR}),
    ("line_items[].tax_lines", {ARR}), ("line_items[].taxable", {BOOL}), ("line_items[].taxable_amount", {STR}),
    ("line_items[].title", {STR}), ("line_items[].total_price", {STR}), ("line_items[].unit_price", {STR}),
    ("line_items[].unit_price_includes_tax", {BOOL}), ("line_items[].variant_title", {STR, NULL}),
    ("note", {NULL, STR}), ("order_attributes", {ARR}), ("processed_at", {DT_OFFSET}),
    ("scheduled_at", {DT_OFFSET}),
    ("shipping_address", {OBJ}), *((f"shipping_address.{k}", {STR, NULL}) for k in ADDRESS_KEYS),
    ("shipping_address.country_code", {STR}),
    ("shipping_lines", {ARR}), ("shipping_lines[].code", {STR}), ("shipping_lines[].price", {STR}),
    ("shipping_lines[].source", {STR}), ("shipping_lines[].tax_lines", {ARR}),
    ("shipping_lines[].taxable", {BOOL}), ("shipping_lines[].title", {STR}),
    ("status", {STR}), ("subtotal_price", MONEY), ("tags", {STR}), ("tax_lines", {ARR}),
    ("tax_lines[].price", {STR}), ("tax_lines[].rate", {STR}), ("tax_lines[].title", {STR}),
    ("taxable", {BOOL}), ("total_discounts", MONEY), ("total_duties", {STR}), ("total_line_items_price", MONEY),
    ("total_price", MONEY), ("total_refunds", {STR}), ("total_tax", {STR}), ("total_weight_grams", {INT}),
    ("type", {STR}), ("updated_at", {DT_OFFSET}),
]
ORDER_2021_01 = [
    ("id", {INT}), ("address_id", {INT}), ("address_is_active", {BOOL}),
    ("billing_address", {OBJ}), *((f"billing_address.{k}", {STR, NULL}) for k in ADDRESS_KEYS),
    ("billing_address.country", {STR}), ("browser_ip", {NULL}), ("charge_id", {INT}), ("charge_status", {STR}),
    ("created_at", {DT_NAIVE}), ("currency", {STR}),
    ("customer", {OBJ}), ("customer.accepts_marketing", {BOOL}), ("customer.email", {STR}),
    ("customer.first_name", {STR}), ("customer.last_name", {STR}), ("customer.phone", {NULL, STR}),
    ("customer.send_email_welcome", {BOOL}), ("customer.verified_email", {BOOL}),
    ("customer_id", {INT}), ("discount_codes", {ARR, NULL}), ("discount_codes[].amount", {STR}),
    ("discount_codes[].code", {STR}), ("discount_codes[].type", {STR}),
    ("email", {STR}), ("error", {NULL, STR}), ("first_name", {STR}), ("hash", {STR}), ("is_prepaid", {BOOL}),
    ("last_name", {STR}), ("line_items", {ARR}), ("line_items[].external_inventory_policy", {STR}),
    ("line_items[].images", {OBJ}),
    *((f"line_items[].images.{size}", {STR, NULL}) for size in ("large", "medium", "original", "small")),
    ("line_items[].original_price", {NUM}), ("line_items[].platform_product_id", {STR, INT, NULL}),
    ("line_items[].platform_variant_id", {STR, INT, NULL}), ("line_items[].price", MONEY),
    ("line_items[].product_title", {STR}), ("line_items[].properties", {ARR}), ("line_items[].quantity", {INT}),
    ("line_items[].sku", {STR, NULL}), ("line_items[].subscription_id", {INT}), ("line_items[].tax_lines", {ARR}),
    ("line_items[].title", {STR}), ("line_items[].variant_title", {STR, NULL}), ("line_items[].grams", {INT, NULL}),
    ("note", {NULL, STR}), ("note_attributes", {ARR}), ("payment_processor", {STR}),
    ("platform_cart_token", {NULL}), ("platform_customer_id", {STR, INT, NULL}), ("platform_id", {STR, NULL}),
    ("platform_order_id", {STR, INT, NULL}), ("platform_order_number", {INT}),
    ("processed_at", {DT_NAIVE}), ("scheduled_at", {DT_NAIVE}), ("shipped_date", {DT_NAIVE}),
    ("shipping_address", {OBJ}), *((f"shipping_address.{k}", {STR, NULL}) for k in ADDRESS_KEYS),
    ("shipping_address.country", {STR}), ("shipping_date", {DT_NAIVE}),
    ("shipping_lines", {ARR}), ("shipping_lines[].code", {STR}), ("shipping_lines[].price", {STR}),
    ("shipping_lines[].source", {STR}), ("shipping_lines[].title", {STR}),
    ("status", {STR}), ("subtotal_price", MONEY), ("tags", {STR}), ("tax_lines", {ARR}),
    ("total_discounts", MONEY), ("total_duties", MONEY), ("total_line_items_price", MONEY),
    ("total_price", MONEY), ("total_refunds", {NULL}), ("total_tax", MONEY), ("total_weight", {INT}),
    ("transaction_id", {STR, INT}), ("type", {STR}), ("updated_at", {DT_NAIVE}),
]
ORDER_FIELDS = {V11: ORDER_2021_11, V01: ORDER_2021_01}


def rich(api: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
    """A paid order of a catalog subscription with properties, rates, a note and a company."""
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5"}],
              tax=[{"country_code": "US", "rate": "0.1", "title": "US tax"}])
    customer = make_customer(api, external_customer_id="cust-77")
    make_payment_method(api, customer)
    address = make_address(api, customer, order_note="ring twice", company="ACME")
    product = make_product(api)
    first = paid(api, address, external_product_id=product, properties=[{"name": "grind", "value": "fine"}])
    item = api.get(f"/subscriptions/{first.line_items[0]['purchase_item_id']}", version=V11).json()["subscription"]
    return customer, address, first, item


# Body ------------------------------------------------------------------------------------------

def test_order_renders_every_spec_field_with_its_type_in_each_version(vapi):
    _, _, first, _ = rich(vapi)
    assert_fields(order(vapi, first.id), ORDER_FIELDS[vapi.version])


def test_a_queued_order_has_no_processing_time_yet(vapi):
    body = order(vapi, queued(vapi).id)
    assert body["processed_at"] is None
    if vapi.version == V01:
        assert body["shipped_date"] is None and body["status"] == "QUEUED"
    else:
        assert body["status"] == "queued"


def test_2021_11_order_values_field_by_field(api):
    customer, address, first, item = rich(api)
    body = order(api, first.id, V11)
    now = api.clock.now().replace(microsecond=0).isoformat()
    charge = api.get(f"/charges/{first.charge_id}", version=V11).json()["charge"]
    assert (body["id"], body["address_id"], body["status"], body["type"]) == (first.id, address.id, "success",
                                                                              "recurring")
    assert body["created_at"] == body["updated_at"] == body["processed_at"] == now
    assert body["scheduled_at"] == f"{today(api).isoformat()}T00:00:00+00:00"
    assert body["is_prepaid"] is False and body["currency"] == "USD"
    assert body["charge"] == {"id": first.charge_id, "status": "success", "payment_processor_name": "sandbox",
                              "external_transaction_id": charge["external_transaction_id"]}
    assert body["charge"]["external_transaction_id"]["payment_processor"].startswith("sbx_")
    assert body["customer"] == {"id": customer.id, "email": customer.email, "hash": customer.hash,
                                "external_customer_id": {"ecommerce": "cust-77"}}
    shipping = {"address1": "101 Market St", "address2": None, "city": "San Francisco", "company": "ACME",
                "country_code": "US", "first_name": "Ada", "last_name": "Lovelace", "phone": "+14155550100",
                "province": "California", "zip": "94105", "country": "United States"}
    assert body["shipping_address"] == body["billing_address"] == shipping
    assert (body["note"], body["order_attributes"], body["tags"], body["discounts"]) == ("ring twice", [], "", [])
    assert body["client_details"] == {"browser_ip": None, "user_agent": None}
    assert (body["error"], body["external_cart_token"]) == (None, None)
    for name in ("external_order_id", "external_order_name"):
        assert body[name] == {"ecommerce": None}
    assert body["external_order_number"] == {"ecommerce": "1"}  # the store's first order
    [line] = body["line_items"]
    assert line == {
        "external_inventory_policy": "decrement_obeying_policy",
        "external_product_id": {"ecommerce": item["external_product_id"]["ecommerce"]},
        "external_variant_id": {"ecommerce": item["external_variant_id"]["ecommerce"]}, "grams": 1000,
        "handle": None, "images": charge["line_items"][0]["images"], "original_price": 12.5,
        "properties": [{"name": "grind", "value": "fine"}], "purchase_item_id": item["id"],
        "purchase_item_type": "subscription", "quantity": 1, "sku": item["sku"], "tax_due": "1.25",
        "tax_lines": [{"price": "1.25", "rate": "0.1", "title": "US tax", "unit_price": "1.25"}], "taxable": True,
        "taxable_amount": "12.50", "title": "Coffee", "total_price": "12.50", "unit_price": "12.50",
        "unit_price_includes_tax": False, "variant_title": "1 lb",
        # 03-real-fields, schema only: the names 2021-01 gives them, and the sort orders.
        "platform_product_id": platform_id(item["external_product_id"]["ecommerce"]),
        "platform_variant_id": platform_id(item["external_variant_id"]["ecommerce"]), "price": "12.50",
        "subscription_id": item["id"], "sort_order": None}
    assert body["shipping_lines"] == [{"code": "std", "price": "5.00", "source": "store", "tax_lines": [],
                                       "taxable": False, "title": "Standard"}]
    assert body["tax_lines"] == [{"price": "1.25", "rate": "0.1", "title": "US tax", "code": None}]
    assert body["taxable"] is True
    assert body["subtotal_price"] == body["total_line_items_price"] == "12.50"
    assert (body["total_discounts"], body["total_tax"], body["total_refunds"], body["total_duties"]) == (
        "0.00", "1.25", "0.00", "0.00")
    assert body["total_price"] == charge["total_price"] == "18.75"  # 12.50 + 5.00 shipping + 1.25 tax
    assert body["total_weight_grams"] == 1000


def test_2021_01_order_values_field_by_field(api):
    customer, address, first, item = rich(api)
    body = order(api, first.id, V01)
    now = api.clock.now().replace(microsecond=0, tzinfo=None).isoformat()
    midnight = f"{today(api).isoformat()}T00:00:00"
    charge = api.get(f"/charges/{first.charge_id}", version=V01).json()["charge"]
    assert (body["status"], body["type"], body["charge_id"], body["charge_status"]) == (
        "SUCCESS", "RECURRING", first.charge_id, "SUCCESS")
    assert body["created_at"] == body["updated_at"] == body["processed_at"] == body["shipped_date"] == now
    assert body["scheduled_at"] == body["shipping_date"] == midnight
    assert (body["customer_id"], body["email"], body["hash"]) == (customer.id, customer.email, customer.hash)
    assert (body["first_name"], body["last_name"], body["platform_customer_id"]) == (
        customer.first_name, customer.last_name, "cust-77")
    assert body["customer"] == {"accepts_marketing": False, "email": customer.email, "first_name": "Ada",
                                "last_name": customer.last_name, "phone": None, "send_email_welcome": False,
                                "verified_email": False}
    assert body["address_is_active"] is True and body["is_prepaid"] is False
    assert (body["transaction_id"], body["payment_processor"]) == (charge["transaction_id"], "sandbox")
    assert (body["platform_order_id"], body["platform_id"], body["platform_order_number"]) == (None, None, 1)
    assert (body["browser_ip"], body["platform_cart_token"], body["total_refunds"]) == (None, None, None)
    assert body["note"] == "ring twice" and body["note_attributes"] == [] and "order_attributes" not in body
    assert body["shipping_address"]["country"] == "United States" and "country_code" not in body["shipping_address"]
    assert body["billing_address"] == body["shipping_address"] and body["discount_codes"] == []
    assert body["shipping_lines"] == [{"code": "std", "price": "5.00", "source": "store", "title": "Standard"}]
    assert (body["total_price"], body["total_tax"], body["total_weight"]) == ("18.75", "1.25", 1000)
    [line] = body["line_items"]
    assert (line["subscription_id"], line["price"], line["original_price"]) == (item["id"], "12.50", 12.5)
    assert (line["product_title"], line["title"], line["variant_title"]) == ("Coffee", "Coffee", "1 lb")
    assert line["platform_product_id"] == int(item["external_product_id"]["ecommerce"])
    assert line["external_inventory_policy"] == "decrement_obeying_policy" and line["grams"] == 1000
    for name in ("charge", "order_attributes", "external_order_id", "total_weight_grams", "processed_sort"):
        assert name not in body
    assert "purchase_item_id" not in line


def test_platform_ids_render_as_numbers_when_they_are_digits(api):
    first = paid(api)
    set_order(api, first.id, external_order_id="5001", external_order_name="#1001", external_order_number="1001")
    old = order(api, first.id, V01)
    assert (old["platform_order_id"], old["platform_id"], old["platform_order_number"]) == (5001, "5001", 1001)
    head = order(api, first.id, V11)
    assert (head["external_order_id"], head["external_order_name"], head["external_order_number"]) == (
        {"ecommerce": "5001"}, {"ecommerce": "#1001"}, {"ecommerce": "1001"})


def test_the_orders_of_a_prepaid_charge_are_one_order_interval_apart_and_only_the_first_is_processed(vapi):
    orders = prepaid(vapi)
    bodies = [order(vapi, o.id, V11) for o in orders]
    assert [b["status"] for b in bodies] == ["success", "queued", "queued"]
    assert [b["scheduled_at"][:10] for b in bodies] == [(today(vapi) + timedelta(days=7 * k)).isoformat()
                                                        for k in range(3)]
    assert all(b["is_prepaid"] is True and b["charge"]["id"] == orders[0].charge_id for b in bodies)
    assert [b["processed_at"] is None for b in bodies] == [False, True, True]


def test_a_prepaid_charge_with_other_items_delivers_them_once_and_the_prepaid_item_each_time(api):
    """Found by an audit: every order of a mixed charge carried every line, so a pay-as-you-go
    item paid once shipped three times (and again with its own next charge), a one-time item
    bought once shipped three times (decisions §5.4, §5.6)."""
    from tests.builders import make_onetime, make_subscription
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = make_address(api, customer)
    day = today(api)
    monthly = make_subscription(api, address, next_charge_scheduled_at=day, product_title="Coffee", price="5.00")
    once = make_onetime(api, address, next_charge_scheduled_at=day, product_title="Mug", price="7.00")
    orders = prepaid(api, address, product_title="Box", price="10.00")
    [box] = [line["purchase_item_id"] for line in orders[1].line_items]
    assert len(orders) == 3 and box not in (monthly.id, once.id)
    assert sorted(line["purchase_item_id"] for line in orders[0].line_items) == sorted([box, monthly.id, once.id])
    assert [[line["purchase_item_id"] for line in o.line_items] for o in orders[1:]] == [[box], [box]]
    # The filter by purchase item finds the orders that deliver it.
    for item_id, expected in ((once.id, [orders[0].id]), (box, [o.id for o in orders])):
        found = api.get("/orders", params={"purchase_item_id": item_id}, version=V11).json()["orders"]
        assert sorted(o["id"] for o in found) == sorted(expected)


def test_a_refund_of_the_charge_shows_in_the_charge_status_of_its_orders(vapi):
    first = paid(vapi)
    with vapi.db.write() as conn:
        conn.execute(update(charges_table).where(charges_table.c.id == first.charge_id).values(status="refunded"))
    body = order(vapi, first.id)
    if vapi.version == V11:
        assert body["charge"]["status"] == "refunded" and body["status"] == "success"
    else:
        assert body["charge_status"] == "REFUNDED" and body["status"] == "SUCCESS"


def test_an_order_stays_visible_after_its_charge_falls_out_of_sight(vapi):
    first = paid(vapi)
    vapi.clock.advance(days=91)
    assert vapi.get(f"/charges/{first.charge_id}").status_code == 404
    assert order(vapi, first.id)["id"] == first.id
    assert [o["id"] for o in vapi.get("/orders").json()["orders"]] == [first.id]


def test_an_order_outlives_its_customer_and_address(vapi):
    first = paid(vapi)
    subscription_id = first.line_items[0]["purchase_item_id"]
    cancelled = vapi.post(f"/subscriptions/{subscription_id}/cancel", json={"cancellation_reason": "moving"})
    assert cancelled.status_code == 200, cancelled.text
    assert vapi.delete(f"/customers/{first.customer_id}").status_code in (200, 204)
    body = order(vapi, first.id, V11)
    assert body["customer"] == {"id": first.customer_id, "email": None, "hash": None,
                                "external_customer_id": {"ecommerce": None}}
    assert body["shipping_address"]["address1"] == "101 Market St"
    assert order(vapi, first.id, V01)["address_is_active"] is False


# Retrieve: tenancy, scopes, versions -----------------------------------------------------------

@pytest.mark.parametrize("order_id", ["999999999", "0"])
def test_get_of_an_unknown_order_answers_404(vapi, order_id):
    response = vapi.get(f"/orders/{order_id}")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_get_of_another_stores_order_answers_404(vapi):
    theirs = paid(vapi.other_store())
    response = vapi.get(f"/orders/{theirs.id}")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_reading_orders_needs_read_orders_and_write_orders_includes_it(vapi):
    first = paid(vapi)
    token = vapi.token_with("read_subscriptions", "read_customers")
    for path in (f"/orders/{first.id}", "/orders"):
        response = vapi.get(path, token=token)
        assert (response.status_code, response.json()) == (403, NEEDS_READ)
    assert vapi.get(f"/orders/{first.id}", token=vapi.token_with("read_orders")).status_code == 200
    assert vapi.get("/orders", token=vapi.token_with("write_orders")).status_code == 200


def test_count_needs_read_orders(api):
    response = api.get("/orders/count", version=V01, token=api.token_with("read_customers"))
    assert (response.status_code, response.json()) == (403, NEEDS_READ)


def test_the_endpoints_of_one_version_answer_501_in_the_other(api):
    first = paid(api)
    for method, path, version in (
        ("GET", "/orders/count", V11),
        ("POST", f"/orders/{first.id}/change_date", V11),
        ("POST", f"/orders/{first.id}/clone", V01),
    ):
        response = api.request(method, path, json={"scheduled_at": str(today(api))}, version=version)
        assert (response.status_code, response.json()) == (501, NOT_IN_VERSION), (method, path)
    assert order_events(api, first.id) == ["order/created", "order/processed", "order/success"]


# Update ----------------------------------------------------------------------------------------

def test_update_changes_note_tags_and_order_attributes_and_records_one_event(api):
    first = paid(api)
    api.clock.advance(minutes=5)
    response = api.put(f"/orders/{first.id}", json={"note": "leave at door", "tags": "vip,gift",
                                                    "order_attributes": [{"name": "gift", "value": "yes"}]})
    assert response.status_code == 200, response.text
    body = response.json()["order"]
    assert (body["note"], body["tags"], body["order_attributes"]) == (
        "leave at door", "vip,gift", [{"name": "gift", "value": "yes"}])
    assert body["updated_at"] == api.clock.now().isoformat() != body["created_at"]
    assert order_events(api, first.id) == ["order/created", "order/processed", "order/success", "order/updated"]
    assert order(api, first.id) == body


def test_2021_01_update_takes_note_attributes_and_platform_order_id(api):
    first = paid(api)
    response = api.put(f"/orders/{first.id}", version=V01,
                       json={"note_attributes": [{"name": "gift", "value": "yes"}], "platform_order_id": 4501})
    assert response.status_code == 200, response.text
    body = response.json()["order"]
    assert body["note_attributes"] == [{"name": "gift", "value": "yes"}]
    assert (body["platform_order_id"], body["platform_id"]) == (4501, "4501")
    assert order(api, first.id, V11)["external_order_id"] == {"ecommerce": "4501"}


def test_2021_11_update_takes_the_external_order_id_nested_or_flat_and_null_clears_it(api):
    first = paid(api)
    body = api.put(f"/orders/{first.id}", json={"external_order_id": {"ecommerce": "77"}}).json()["order"]
    assert body["external_order_id"] == {"ecommerce": "77"}
    assert api.put(f"/orders/{first.id}", json={"external_order_id": "78"}).json()["order"]["external_order_id"] == {
        "ecommerce": "78"}
    cleared = api.put(f"/orders/{first.id}", json={"external_order_id": None}).json()["order"]
    assert cleared["external_order_id"] == {"ecommerce": None}


def test_the_platform_id_of_a_charges_first_order_is_the_charges_too(api):
    """Found by an audit: no charge ever showed its order's platform id, so the charges'
    `platform_order_id` filter and count found nothing. A prepaid charge's later orders keep
    theirs to themselves."""
    first, second, _ = prepaid(api)
    charge_id = first.charge_id
    assert api.put(f"/orders/{first.id}", version=V01, json={"platform_order_id": 450789469}).status_code == 200
    assert api.put(f"/orders/{second.id}", json={"external_order_id": {"ecommerce": "999"}}).status_code == 200
    assert api.get(f"/charges/{charge_id}").json()["charge"]["external_order_id"] == {"ecommerce": "450789469"}
    shown = api.get(f"/charges/{charge_id}", version=V01).json()["charge"]
    assert shown["platform_order_id"] == 450789469
    found = api.get("/charges", version=V01, params={"platform_order_id": "450789469"}).json()["charges"]
    assert [c["id"] for c in found] == [charge_id]
    assert api.get("/charges/count", version=V01, params={"platform_order_id": "450789469"}).json() == {"count": 1}
    assert api.get("/charges", params={"external_order_id": "999"}).json()["charges"] == []
    events = api.get("/events", params={"object_type": "charge", "object_id": charge_id}).json()["events"]
    assert any(e["verb"] == "updated" and e["updated_attributes"] == ["external_order_id"] for e in events)


def test_update_moves_the_date_of_a_queued_order_and_nothing_else(vapi):
    _, moving, third = prepaid(vapi)
    when = today(vapi) + timedelta(days=10)
    response = vapi.put(f"/orders/{moving.id}", json={"scheduled_at": when.isoformat()})
    assert response.status_code == 200, response.text
    assert order(vapi, moving.id, V11)["scheduled_at"] == f"{when.isoformat()}T00:00:00+00:00"
    assert order(vapi, third.id, V11)["scheduled_at"].startswith((today(vapi) + timedelta(days=14)).isoformat())


def test_2021_01_shipping_date_is_the_scheduled_date_under_its_old_name(api):
    moving = queued(api)
    when = (today(api) + timedelta(days=9)).isoformat()
    body = api.put(f"/orders/{moving.id}", json={"shipping_date": f"{when}T00:00:00"}, version=V01).json()["order"]
    assert body["scheduled_at"] == body["shipping_date"] == f"{when}T00:00:00"
    other = (today(api) + timedelta(days=11)).isoformat()
    response = api.put(f"/orders/{moving.id}", json={"scheduled_at": when, "shipping_date": other}, version=V01)
    assert errors_of(response) == {"shipping_date": ["conflicts with scheduled_at"]}


def test_only_a_queued_order_can_be_rescheduled(vapi):
    # 2021-01 names a status in upper case, in messages too (decisions §2.9).
    w = str.upper if vapi.version == "2021-01" else str
    first = paid(vapi)
    response = vapi.put(f"/orders/{first.id}", json={"scheduled_at": str(today(vapi) + timedelta(days=3)),
                                                     "note": "x"})
    assert errors_of(response) == {"status": [f"only a queued order can be rescheduled; this one is {w('success')}"]}
    assert order(vapi, first.id, V11)["note"] is None  # nothing of the body was written


def test_sending_back_the_orders_own_date_is_no_change_whatever_its_status(vapi):
    first = paid(vapi)
    response = vapi.put(f"/orders/{first.id}", json={"scheduled_at": str(today(vapi)), "note": "kept"})
    assert response.status_code == 200, response.text
    assert order(vapi, first.id, V11)["note"] == "kept"


def test_a_queued_order_cannot_move_into_the_past_but_may_move_to_today(vapi):
    moving = queued(vapi)
    response = vapi.put(f"/orders/{moving.id}", json={"scheduled_at": str(today(vapi) - timedelta(days=1))})
    assert errors_of(response) == {"scheduled_at": ["must not be in the past"]}
    assert vapi.put(f"/orders/{moving.id}", json={"scheduled_at": str(today(vapi))}).status_code == 200


def test_2021_01_a_past_shipping_date_is_named_as_sent(api):
    # Found by an audit: the rule named `scheduled_at`, which the caller had not sent.
    moving = queued(api)
    past = str(today(api) - timedelta(days=1))
    for body, name in (({"shipping_date": past, "note": "x"}, "shipping_date"), ({"scheduled_at": past}, "scheduled_at"),
                       ({"scheduled_at": past, "shipping_date": past}, "scheduled_at")):
        response = api.put(f"/orders/{moving.id}", json=body, version=V01)
        assert errors_of(response) == {name: ["must not be in the past"]}
    assert order(api, moving.id, V11)["note"] is None


@pytest.mark.parametrize("version, body, errors", [
    (V11, {"status": "cancelled", "total_price": "0.00", "note": 5},
     {"note": ["must be a string"], "status": ["is read-only"], "total_price": ["is read-only"]}),
    (V11, {"line_items": [], "charge": {"id": 1}, "customer": {}, "id": 3},
     {"charge": ["is read-only"], "customer": ["is read-only"], "id": ["is read-only"],
      "line_items": ["is read-only"]}),
    (V01, {"status": "CANCELLED", "charge_id": 1, "customer_id": 2, "shipped_date": "2030-01-01"},
     {"charge_id": ["is read-only"], "customer_id": ["is read-only"], "shipped_date": ["is read-only"],
      "status": ["is read-only"]}),
])
def test_read_only_fields_are_refused_by_name_with_the_other_problems(api, version, body, errors):
    first = paid(api)
    assert errors_of(api.put(f"/orders/{first.id}", json=body, version=version)) == errors
    assert order_events(api, first.id) == ["order/created", "order/processed", "order/success"]


@pytest.mark.parametrize("which", ["paid", "queued"])
def test_an_order_sent_back_as_shown_is_no_change_and_one_field_changed_is_that_change(vapi, which):
    """The echo rule (docs/api-choices.md): read-only fields sent as a GET shows them are no
    change, not refused (found by an audit: a whole order sent back answered 422 in both
    versions, so a client could not change its note that way; its `tags: ""` was a change)."""
    made = paid(vapi) if which == "paid" else queued(vapi)
    shown = order(vapi, made.id)
    before = order_events(vapi, made.id)
    vapi.clock.advance(seconds=1)
    reply = vapi.put(f"/orders/{made.id}", json=shown)
    assert reply.status_code == 200, reply.text
    assert reply.json()["order"] == shown and order_events(vapi, made.id) == before
    changed = vapi.put(f"/orders/{made.id}", json={**shown, "note": "Ring twice"})
    assert changed.status_code == 200, changed.text
    assert {k for k, v in changed.json()["order"].items() if shown[k] != v} == {"note", "updated_at"}
    # A read-only field sent with another value is still refused by name.
    other = "cancelled" if vapi.version == V11 else "CANCELLED"
    assert errors_of(vapi.put(f"/orders/{made.id}", json={**shown, "status": other})) == {
        "status": ["is read-only"], "updated_at": ["is read-only"]}


def test_every_field_of_the_body_is_either_writable_or_refused_as_read_only(vapi):
    from rebill.api.v2021_01 import orders as old
    from rebill.api.v2021_11 import orders as head
    module = head if vapi.version == V11 else old
    rendered = set(order(vapi, paid(vapi).id))
    assert rendered == set(module.WRITABLE) | module.READ_ONLY
    assert not set(module.WRITABLE) & module.READ_ONLY


@pytest.mark.parametrize("body, errors", [
    ({"scheduled_at": "soon"}, {"scheduled_at": ["must be a date (YYYY-MM-DD)"]}),
    ({"scheduled_at": None}, {"scheduled_at": ["cannot be null"]}),
    ({"note": ["x"], "tags": 7}, {"note": ["must be a string"], "tags": ["must be a string"]}),
    ({"note": "x" * 4097}, {"note": ["is too long (at most 4096 characters)"]}),
    ({"order_attributes": "gift"}, {"order_attributes": ["must be an array"]}),
    ({"order_attributes": None}, {"order_attributes": ["cannot be null"]}),
    ({"order_attributes": [{"value": "x"}]}, {"order_attributes": {"0": {"name": ["is required"]}}}),
    ({"shipping_address": "here"}, {"shipping_address": ["must be an object"]}),
    ({"shipping_address": None}, {"shipping_address": ["cannot be null"]}),
    ({"shipping_address": {"address1": "", "city": 5}},
     {"shipping_address": {"address1": ["cannot be blank"], "city": ["must be a string"]}}),
    ({"billing_address": {"country_code": "USA"}},
     {"billing_address": {"country_code": ["must be a 2-letter country code"]}}),
    ({"external_order_id": ["x"]}, {"external_order_id": ["must be a non-empty string or number"]}),
])
def test_update_refuses_wrongly_typed_fields_and_changes_nothing(api, body, errors):
    first = queued(api)
    assert errors_of(api.put(f"/orders/{first.id}", json=body)) == errors
    assert order_events(api, first.id) == ["order/created"]


def test_2021_01_field_errors_use_the_2021_01_names(api):
    first = paid(api)
    response = api.put(f"/orders/{first.id}", version=V01, json={
        "note_attributes": "x", "platform_order_id": [], "shipping_address": {"country": "Atlantis"}})
    assert errors_of(response) == {"note_attributes": ["must be an array"],
                                   "platform_order_id": ["must be a non-empty string or number"],
                                   "shipping_address": {"country": ["is not a known country"]}}


def test_a_shipping_address_is_merged_into_the_orders_copy_and_obeys_the_address_rules(api):
    first = paid(api)
    body = api.put(f"/orders/{first.id}", json={"shipping_address": {"address1": "9 Pine St", "province": "CA"}})
    assert body.status_code == 200, body.text
    shipping = body.json()["order"]["shipping_address"]
    # The rest of the copy stays; the province is normalized as on addresses (decisions §4.1).
    assert (shipping["address1"], shipping["city"], shipping["province"]) == ("9 Pine St", "San Francisco",
                                                                              "California")
    assert api.get(f"/addresses/{first.address_id}").json()["address"]["address1"] == "101 Market St"
    refused = api.put(f"/orders/{first.id}", json={"shipping_address": {"country_code": "BR", "zip": "01000-000"}})
    assert errors_of(refused) == {"shipping_address": {"country_code": ["is not a country the store ships to"],
                                                       "province": ["is required for this country"]}}
    bad_zip = api.put(f"/orders/{first.id}", json={"shipping_address": {"zip": "ABC"}})
    assert set(errors_of(bad_zip)) == {"shipping_address"} and "zip" in errors_of(bad_zip)["shipping_address"]
    assert order(api, first.id)["shipping_address"]["address1"] == "9 Pine St"


def test_2021_01_addresses_take_the_country_name_or_code(api):
    first = paid(api)
    response = api.put(f"/orders/{first.id}", version=V01, json={
        "shipping_address": {"country": "Canada", "province": "ON", "zip": "K1A 0B1", "city": "Ottawa"}})
    assert response.status_code == 200, response.text
    shipping = response.json()["order"]["shipping_address"]
    assert (shipping["country"], shipping["province"]) == ("Canada", "Ontario")
    assert order(api, first.id, V11)["shipping_address"]["country_code"] == "CA"
    conflict = api.put(f"/orders/{first.id}", version=V01, json={"billing_address": {"country": "Canada",
                                                                                      "country_code": "US"}})
    assert errors_of(conflict) == {"billing_address": {"country": ["conflicts with country_code"]}}


def test_a_billing_address_needs_a_valid_country_and_not_one_the_store_ships_to(api):
    first = paid(api)
    assert errors_of(api.put(f"/orders/{first.id}", json={"billing_address": {"country_code": "ZZ"}})) == {
        "billing_address": {"country_code": ["is not a valid country code"]}}
    response = api.put(f"/orders/{first.id}", json={"billing_address": {"country_code": "BR", "city": "Rio"}})
    assert response.status_code == 200, response.text
    assert response.json()["order"]["billing_address"]["country_code"] == "BR"


def test_an_update_that_changes_nothing_records_no_event_and_keeps_updated_at(vapi):
    first = paid(vapi)
    before = order(vapi, first.id)
    vapi.clock.advance(minutes=5)
    for body in ({}, {"note": None, "tags": None}, {"unknown_field": 1}):
        response = vapi.put(f"/orders/{first.id}", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["order"] == before
    assert order_events(vapi, first.id) == ["order/created", "order/processed", "order/success"]


def test_update_of_an_unknown_or_another_stores_order_answers_404(vapi):
    theirs = paid(vapi.other_store())
    for order_id in (theirs.id, 999999999):
        response = vapi.put(f"/orders/{order_id}", json={"note": "mine now"})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    with vapi.db.read() as conn:
        assert order_repo.get(conn, theirs.store_id, theirs.id).note is None


def test_update_needs_write_orders(vapi):
    first = paid(vapi)
    for scopes in (("read_orders",), ("write_subscriptions", "write_customers")):
        response = vapi.put(f"/orders/{first.id}", json={"note": "x"}, token=vapi.token_with(*scopes))
        assert (response.status_code, response.json()) == (403, NEEDS_WRITE)
    assert order(vapi, first.id, V11)["note"] is None


def test_update_refuses_a_body_that_is_not_an_object(vapi):
    first = paid(vapi)
    response = vapi.put(f"/orders/{first.id}", json=["note"])
    assert (response.status_code, response.json()) == (415, {"errors": "The request body must be a JSON object"})


@pytest.mark.parametrize("how", ["billing_run", "process_endpoint"])
def test_a_prepaid_charge_paid_late_processes_the_orders_whose_date_has_come(api, how):
    api = api.other_store(plan_tier="premium_a")  # the process endpoint's tier
    """Found by an audit: a prepaid charge paid ten days after its date left its second order
    (dated day 7) queued until the next billing run, a day late on a test clock."""
    from rebill.domain.billing import run as billing
    from rebill.domain.payment.sandbox import SandboxGateway
    from tests.builders import charges_of, make_subscription
    customer = make_customer(api)
    make_payment_method(api, customer)
    address = make_address(api, customer)
    start = today(api)
    make_subscription(api, address, next_charge_scheduled_at=start, order_interval_unit="day",
                      order_interval_frequency=7, charge_interval_frequency=21)
    [charge] = charges_of(api, address.id)
    api.clock.advance(timedelta(days=10))
    if how == "billing_run":
        [done] = billing.process(api.db, SandboxGateway(api.db, api.clock.now), api.store, [charge.id], api.clock.now())
        assert done.status == "success", done
    else:
        reply = api.post(f"/charges/{charge.id}/process", json={}, version=V11)
        assert reply.status_code == 200 and reply.json()["charge"]["status"] == "success", reply.text
    with api.db.read() as conn:
        made = order_repo.of_charge(conn, api.store.id, charge.id)
    bodies = [order(api, o.id, V11) for o in made]
    assert [(b["scheduled_at"][:10], b["status"]) for b in bodies] == [
        (start.isoformat(), "success"), ((start + timedelta(days=7)).isoformat(), "success"),
        ((start + timedelta(days=14)).isoformat(), "queued")]
    assert [b["processed_at"] is None for b in bodies] == [False, False, True]
    second = bodies[1]["id"]
    assert {("order/processed", second), ("order/success", second)} <= set(events_of(api, second))
