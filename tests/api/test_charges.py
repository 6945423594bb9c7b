"""Contract tests of one charge: the body field by field in both versions, retrieve, tenancy,
scopes, the 90-day visibility, the endpoints of one version, and moving a charge's date
(spec 01 Charge, spec 02 Charge and Charges, 03-real-fields charge, decisions §5.9-§5.13,
§6.9).

Lists live in ``test_charges_list.py``, skips in ``test_charges_skip.py``, amounts in
``test_charges_totals.py``; the helpers below are shared with them.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from rebill.api.external_ids import platform_id
from rebill.domain.schedule.dates import add_interval
from rebill.models import charges as charges_table
from tests.api.test_real_fields import ARR, BOOL, DT_NAIVE, DT_OFFSET, INT, NULL, OBJ, STR, assert_fields
from tests.builders import (
    charges_of,
    events_of,
    make_address,
    make_customer,
    make_onetime,
    make_subscription,
)

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
NOT_IN_VERSION = {"errors": "This resource is not implemented in the requested API version"}
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
ADDRESS_KEYS = {"address1", "address2", "city", "company", "first_name", "last_name", "phone", "province", "zip"}


# Helpers (imported by the other test_charges_* modules) ------------------------------------

def today(api: Any) -> date:
    return api.clock.now().date()


def days(api: Any, n: int) -> date:
    return today(api) + timedelta(days=n)


def weekly(api: Any, address: Any = None, *, on: int = 7, **overrides: Any) -> Any:
    """A subscription charged every 7 days, first ``on`` days from today (day cadences keep
    date arithmetic free of month ends, whatever the shared clock says)."""
    values = {"order_interval_unit": "day", "charge_interval_frequency": 7, "order_interval_frequency": 7,
              "next_charge_scheduled_at": days(api, on), **overrides}
    return make_subscription(api, address, **values)


def stored(api: Any, address_id: int, status: str | None = None) -> list[Any]:
    return [c for c in charges_of(api, address_id) if status is None or c.status == status]


def only(api: Any, address_id: int, status: str = "queued") -> Any:
    found = stored(api, address_id, status)
    assert len(found) == 1, found
    return found[0]


def charge(api: Any, charge_id: int, version: str | None = None) -> dict[str, Any]:
    response = api.get(f"/charges/{charge_id}", version=version)
    assert response.status_code == 200, response.text
    return response.json()["charge"]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def set_charge(api: Any, charge_id: int, **values: Any) -> None:
    """Put a charge into a state the API cannot reach yet (processed, failed)."""
    with api.db.write() as conn:
        conn.execute(update(charges_table).where(charges_table.c.id == charge_id).values(**values))


def lines(body: dict[str, Any], key: str = "purchase_item_id") -> list[int]:
    return [line[key] for line in body["line_items"]]


def make_product(api: Any, **variant: Any) -> str:
    """A catalog product with one variant; returns its external id."""
    n = next(_products)
    values = {"external_variant_id": f"v{n}", "title": "1 kg", "price": "20.00", "sku": f"SKU{n}", "grams": 1000,
              "taxable": True, "image": f"https://img.test/{n}.png", **variant}
    response = api.post("/products", json={"external_product_id": f"{9000 + n}", "title": "Beans",
                                           "variants": [values]}, version=V11)
    assert response.status_code == 201, response.text
    return f"{9000 + n}"


_products = iter(range(1, 10**6))


# Spec 01 + 03 charge (2021-11), spec 02 + 03 charge (2021-01), transcribed ----------------

# 03 lists `retry_date` as a datetime; spec 01 says a date and wins. `scheduled_at` is a date.
CHARGE_2021_11 = [
    ("id", {INT}), ("address_id", {INT}),
    ("analytics_data", {OBJ}), ("analytics_data.utm_params", {ARR}),
    ("billing_address", {OBJ}), ("billing_address.address1", {STR}), ("billing_address.address2", {STR, NULL}),
    ("billing_address.city", {STR}), ("billing_address.company", {STR, NULL}),
    ("billing_address.country_code", {STR}), ("billing_address.first_name", {STR}),
    ("billing_address.last_name", {STR}), ("billing_address.phone", {STR, NULL}),
    ("billing_address.province", {STR, NULL}), ("billing_address.zip", {STR}),
    ("charge_attempts", {INT}),
    ("client_details", {OBJ}), ("client_details.browser_ip", {NULL}), ("client_details.user_agent", {NULL}),
    ("created_at", {DT_OFFSET}), ("currency", {STR}),
    ("customer", {OBJ}), ("customer.email", {STR}), ("customer.external_customer_id", {OBJ}),
    ("customer.external_customer_id.ecommerce", {STR, NULL}), ("customer.hash", {STR}), ("customer.id", {INT}),
    ("discounts", {ARR}), ("error", {STR, NULL}), ("error_type", {STR, NULL}),
    ("external_order_id", {OBJ}), ("external_order_id.ecommerce", {STR, NULL}),
    ("external_transaction_id", {OBJ}), ("external_transaction_id.payment_processor", {STR, NULL}),
    ("external_variant_id_not_found", {BOOL}), ("external_variant_not_found", {NULL, BOOL}),
    ("has_uncommitted_changes", {BOOL}), ("last_charge_attempt", {DT_OFFSET, NULL}),
    ("line_items", {ARR}),
    ("line_items[].external_product_id", {OBJ}), ("line_items[].external_product_id.ecommerce", {STR, NULL}),
    ("line_items[].external_variant_id", {OBJ}), ("line_items[].external_variant_id.ecommerce", {STR, NULL}),
    ("line_items[].grams", {INT, NULL}), ("line_items[].handle", {NULL}), ("line_items[].images", {OBJ}),
    ("line_items[].images.large", {STR, NULL}), ("line_items[].images.medium", {STR, NULL}),
    ("line_items[].images.original", {STR, NULL}), ("line_items[].images.small", {STR, NULL}),
    ("line_items[].original_price", {STR}), ("line_items[].properties", {ARR}),
    ("line_items[].purchase_item_id", {INT}), ("line_items[].purchase_item_type", {STR}),
    ("line_items[].quantity", {INT}), ("line_items[].sku", {STR, NULL}), ("line_items[].tax_due", {STR}),
    ("line_items[].tax_lines", {ARR}), ("line_items[].taxable", {BOOL}), ("line_items[].taxable_amount", {STR}),
    ("line_items[].title", {STR}), ("line_items[].total_price", {STR}), ("line_items[].unit_price", {STR}),
    ("line_items[].unit_price_includes_tax", {BOOL}), ("line_items[].variant_title", {STR, NULL}),
    ("merged_at", {DT_OFFSET, NULL}), ("note", {STR, NULL}), ("order_attributes", {ARR}),
    ("orders_count", {INT}), ("original_scheduled_at", {STR, NULL}), ("payment_processor", {STR, NULL}),
    ("processed_at", {DT_OFFSET, NULL}), ("retry_date", {STR, NULL}), ("scheduled_at", {STR}),
    ("shipping_address", {OBJ}), ("shipping_address.address1", {STR}), ("shipping_address.address2", {STR, NULL}),
    ("shipping_address.city", {STR}), ("shipping_address.company", {STR, NULL}),
    ("shipping_address.country_code", {STR}), ("shipping_address.first_name", {STR}),
    ("shipping_address.last_name", {STR}), ("shipping_address.phone", {STR}),
    ("shipping_address.province", {STR, NULL}), ("shipping_address.zip", {STR}),
    ("shipping_lines", {ARR}), ("shipping_lines[].code", {STR}), ("shipping_lines[].price", {STR}),
    ("shipping_lines[].retrieved_at", {NULL}), ("shipping_lines[].source", {STR}),
    ("shipping_lines[].status", {STR}), ("shipping_lines[].tax_lines", {ARR}),
    ("shipping_lines[].taxable", {BOOL}), ("shipping_lines[].title", {STR}),
    ("status", {STR}), ("subtotal_price", {STR}), ("tags", {STR}), ("tax_lines", {ARR}),
    ("tax_lines[].price", {STR}), ("tax_lines[].rate", {STR}), ("tax_lines[].title", {STR}),
    ("taxable", {BOOL}), ("taxes_included", {BOOL}), ("total_discounts", {STR}), ("total_duties", {STR}),
    ("total_line_items_price", {STR}), ("total_price", {STR}), ("total_refunds", {STR}), ("total_tax", {STR}),
    ("total_weight_grams", {INT}), ("type", {STR}), ("updated_at", {DT_OFFSET}),
]

CHARGE_2021_01 = [
    ("id", {INT}), ("address_id", {INT}), ("analytics_data", {OBJ}), ("analytics_data.utm_params", {ARR}),
    ("billing_address", {OBJ}), *((f"billing_address.{k}", {STR, NULL}) for k in sorted(ADDRESS_KEYS)),
    ("billing_address.country", {STR}), ("browser_ip", {NULL}),
    ("client_details", {OBJ}), ("client_details.browser_ip", {NULL}), ("client_details.user_agent", {NULL}),
    ("created_at", {DT_NAIVE}), ("customer_hash", {STR}), ("customer_id", {STR}),
    ("discount_codes", {ARR}), ("discount_codes[].amount", {STR}), ("discount_codes[].code", {STR}),
    ("discount_codes[].type", {STR}), ("email", {STR}), ("error", {STR, NULL}), ("error_type", {STR, NULL}),
    ("first_name", {STR}), ("has_uncommited_changes", {BOOL}), ("last_charge_attempt_date", {DT_NAIVE, NULL}),
    ("last_name", {STR}), ("line_items", {ARR}), ("line_items[].grams", {INT, NULL}),
    ("line_items[].images", {OBJ}), ("line_items[].original_price", {STR}), ("line_items[].price", {STR}),
    ("line_items[].properties", {ARR}), ("line_items[].quantity", {INT}),
    ("line_items[].platform_product_id", {INT, STR, NULL}), ("line_items[].platform_variant_id", {INT, STR, NULL}),
    ("line_items[].sku", {STR, NULL}), ("line_items[].subscription_id", {INT}), ("line_items[].title", {STR}),
    ("line_items[].variant_title", {STR, NULL}), ("note", {STR, NULL}), ("note_attributes", {ARR}),
    ("number_times_tried", {INT}), ("platform_order_id", {INT, NULL}), ("platform_variant_id_not_found", {INT}),
    ("processed_at", {DT_NAIVE, NULL}), ("processor_name", {STR, NULL}), ("retry_date", {STR, NULL}),
    ("scheduled_at", {DT_NAIVE}), ("shipments_count", {INT}), ("shipping_address", {OBJ}),
    *((f"shipping_address.{k}", {STR, NULL}) for k in sorted(ADDRESS_KEYS)), ("shipping_address.country", {STR}),
    ("shipping_lines", {ARR}), ("shipping_lines[].code", {STR}), ("shipping_lines[].price", {STR}),
    ("shipping_lines[].title", {STR}), ("status", {STR}), ("sub_total", {STR}), ("subtotal_price", {STR}),
    ("tags", {STR, ARR}), ("tax_lines", {ARR}), ("total_discounts", {STR}), ("total_line_items_price", {STR}),
    ("total_price", {STR}), ("total_refunds", {STR}), ("total_tax", {STR}), ("total_weight", {INT}),
    ("transaction_id", {STR, NULL}), ("type", {STR}), ("updated_at", {DT_NAIVE}),
]
CHARGE_FIELDS = {V11: CHARGE_2021_11, V01: CHARGE_2021_01}


def _rich_charge(api: Any) -> tuple[Any, Any, Any, Any]:
    """A queued charge with a catalog subscription and a one-time item, rates and a shipping line."""
    from tests.api.test_charges_totals import set_rates
    set_rates(api, shipping=[{"code": "std", "title": "Standard", "price": "5"}],
              tax=[{"country_code": "US", "rate": "0.1", "title": "US tax"}])
    customer = make_customer(api, external_customer_id="cust-77")
    address = make_address(api, customer, order_note="ring twice", company="ACME")
    product = make_product(api)
    sub = weekly(api, address, external_product_id=product, properties=[{"name": "grind", "value": "fine"}])
    onetime = make_onetime(api, address, next_charge_scheduled_at=days(api, 7))
    return customer, address, sub, onetime


# Body --------------------------------------------------------------------------------------

def test_charge_renders_every_spec_field_with_its_type_in_each_version(vapi):
    _, address, _, _ = _rich_charge(vapi)
    body = charge(vapi, only(vapi, address.id).id)
    assert_fields(body, CHARGE_FIELDS[vapi.version])
    listed = vapi.get("/charges", params={"address_id": address.id}).json()["charges"]
    assert listed == [body]


def test_2021_11_charge_values_field_by_field(api):
    customer, address, sub, onetime = _rich_charge(api)
    row = only(api, address.id)
    body = charge(api, row.id, V11)
    now = api.clock.now().replace(microsecond=0).isoformat()
    assert (body["id"], body["address_id"]) == (row.id, address.id)
    assert body["status"] == "queued" and body["type"] == "recurring"
    assert body["scheduled_at"] == days(api, 7).isoformat() and DATE.match(body["scheduled_at"])
    assert body["created_at"] == body["updated_at"] == now
    assert body["currency"] == "USD"
    assert body["customer"] == {"id": customer.id, "email": customer.email, "hash": customer.hash,
                                "external_customer_id": {"ecommerce": "cust-77"}}
    shipping = {"address1": "101 Market St", "address2": None, "city": "San Francisco", "company": "ACME",
                "country_code": "US", "first_name": "Ada", "last_name": "Lovelace", "phone": "+14155550100",
                "province": "California", "zip": "94105", "country": "United States"}
    assert body["shipping_address"] == shipping
    assert body["billing_address"] == shipping  # no 2021-01 billing address: a copy of the shipping one
    assert body["browser_ip"] is None  # 03-real-fields, schema only
    assert body["note"] == "ring twice" and body["order_attributes"] == []
    assert body["tags"] == "" and body["discounts"] == []
    assert body["analytics_data"] == {"utm_params": []}
    assert body["client_details"] == {"browser_ip": None, "user_agent": None}
    assert body["external_order_id"] == {"ecommerce": None}
    assert body["external_transaction_id"] == {"payment_processor": None}
    assert (body["error"], body["error_type"], body["charge_attempts"], body["retry_date"]) == (None, None, 0, None)
    assert (body["processed_at"], body["merged_at"], body["last_charge_attempt"]) == (None, None, None)
    assert body["has_uncommitted_changes"] is False and "has_uncommited_changes" not in body
    assert body["external_variant_id_not_found"] is False
    assert body["orders_count"] == 1 and body["total_weight_grams"] == 1000
    first, second = body["line_items"]
    assert first == {
        "purchase_item_id": sub.id, "purchase_item_type": "subscription",
        "external_product_id": {"ecommerce": sub.external_product_id},
        "external_variant_id": {"ecommerce": sub.external_variant_id}, "grams": 1000, "handle": None,
        "images": {**{size: sub.images["small"] for size in ("large", "medium", "original", "small")},
                   "sort_order": None},
        "original_price": "12.50", "properties": [{"name": "grind", "value": "fine"}], "quantity": 1,
        "sku": sub.sku, "tax_due": "1.25",
        "tax_lines": [{"price": "1.25", "rate": "0.1", "title": "US tax", "unit_price": "1.25"}],
        "taxable": True, "taxable_amount": "12.50", "title": "Coffee", "total_price": "12.50",
        "unit_price": "12.50", "unit_price_includes_tax": False, "variant_title": "1 lb",
        # 03-real-fields, schema only: the names 2021-01 gives them.
        "platform_product_id": platform_id(sub.external_product_id),
        "platform_variant_id": platform_id(sub.external_variant_id), "price": "12.50", "subscription_id": sub.id}
    assert (second["purchase_item_id"], second["purchase_item_type"]) == (onetime.id, "onetime")
    assert second["images"] == {"large": None, "medium": None, "original": None, "small": None, "sort_order": None}
    assert body["shipping_lines"] == [{"code": "std", "price": "5.00", "retrieved_at": None, "source": "store",
                                       "status": "active", "tax_lines": [], "taxable": False, "title": "Standard"}]
    assert body["tax_lines"] == [{"price": "2.05", "rate": "0.1", "title": "US tax"}]
    assert (body["taxable"], body["taxes_included"]) == (True, False)
    assert body["subtotal_price"] == body["total_line_items_price"] == "20.50"
    assert (body["total_discounts"], body["total_tax"], body["total_refunds"], body["total_duties"]) == (
        "0.00", "2.05", "0.00", "0.00")
    assert body["total_price"] == "27.55"  # 20.50 + 5.00 shipping + 2.05 tax


def test_2021_01_charge_values_field_by_field(api):
    customer, address, sub, onetime = _rich_charge(api)
    row = only(api, address.id)
    body = charge(api, row.id, V01)
    now = api.clock.now().replace(microsecond=0, tzinfo=None).isoformat()
    assert body["status"] == "QUEUED" and body["type"] == "RECURRING"
    assert body["scheduled_at"] == f"{days(api, 7).isoformat()}T00:00:00"
    assert body["created_at"] == body["updated_at"] == now
    assert body["customer_id"] == str(customer.id)
    assert (body["customer_hash"], body["email"]) == (customer.hash, customer.email)
    assert (body["first_name"], body["last_name"]) == (customer.first_name, customer.last_name)
    assert body["has_uncommited_changes"] is False and "has_uncommitted_changes" not in body
    assert body["note_attributes"] == [] and "order_attributes" not in body
    assert body["number_times_tried"] == 0 and "charge_attempts" not in body
    assert (body["platform_order_id"], body["transaction_id"], body["processor_name"]) == (None, None, None)
    assert body["platform_variant_id_not_found"] == 0
    assert body["shipments_count"] == 0 and body["total_weight"] == 1000
    assert body["discount_codes"] == []
    assert body["shipping_address"]["country"] == "United States" and "country_code" not in body["shipping_address"]
    assert body["billing_address"] == body["shipping_address"]
    assert body["shipping_lines"] == [{"code": "std", "price": "5.00", "title": "Standard"}]
    assert body["sub_total"] == body["subtotal_price"] == "20.50"
    assert (body["total_tax"], body["total_price"]) == ("2.05", "27.55")
    first, second = body["line_items"]
    assert first["subscription_id"] == sub.id and first["price"] == "12.50"
    assert first["platform_product_id"] == int(sub.external_product_id)
    assert first["platform_variant_id"] == sub.external_variant_id  # "v1": not digits, stays a string
    assert (first["sku"], first["grams"], first["title"], first["variant_title"]) == (sub.sku, 1000, "Coffee", "1 lb")
    assert first["properties"] == [{"name": "grind", "value": "fine"}]
    assert (second["subscription_id"], second["price"], second["platform_product_id"]) == (onetime.id, "8.00", None)
    for name in ("customer", "purchase_item_id", "external_order_id", "merged_at", "orders_count"):
        assert name not in body and name not in first


def test_2021_01_billing_address_is_the_customers_own_when_it_has_one(api):
    response = api.post("/customers", version=V01, json={
        "email": "bill@example.com", "first_name": "Bo", "last_name": "Biller", "billing_address1": "1 Bill St",
        "billing_city": "Austin", "billing_country": "United States", "billing_first_name": "Bo",
        "billing_last_name": "Biller", "billing_province": "TX", "billing_zip": "73301"})
    assert response.status_code == 200, response.text
    from rebill.domain.customer import repository as customers
    with api.db.read() as conn:
        found = customers.get(conn, api.store.id, response.json()["customer"]["id"])
    address = make_address(api, found)
    weekly(api, address)
    body = charge(api, only(api, address.id).id, V01)
    assert body["billing_address"]["address1"] == "1 Bill St"
    assert body["billing_address"]["country"] == "United States"
    assert body["shipping_address"]["address1"] == "101 Market St"


def test_has_uncommitted_changes_is_true_while_a_regeneration_is_deferred(vapi):
    address = make_address(vapi)
    sub = weekly(vapi, address)
    if vapi.version == V11:
        response = vapi.put(f"/subscriptions/{sub.id}", params={"commit": "false"}, json={"quantity": 2})
    else:
        response = vapi.put(f"/subscriptions/{sub.id}", json={"quantity": 2, "commit_update": False})
    assert response.status_code == 200, response.text
    name = "has_uncommitted_changes" if vapi.version == V11 else "has_uncommited_changes"
    body = charge(vapi, only(vapi, address.id).id)
    assert body[name] is True
    assert body["line_items"][0]["quantity"] == 1  # not regenerated yet


def test_processed_charge_shows_its_processing_fields(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    when = vapi.clock.now().replace(microsecond=0)
    set_charge(vapi, row.id, status="success", processed_at=when, external_order_id="5001",
               external_transaction_id="txn_1", payment_processor="sandbox", charge_attempts=1,
               last_charge_attempt=when)
    body = charge(vapi, row.id)
    if vapi.version == V11:
        assert body["status"] == "success" and body["processed_at"] == when.isoformat()
        assert body["external_order_id"] == {"ecommerce": "5001"}
        assert body["external_transaction_id"] == {"payment_processor": "txn_1"}
        assert (body["payment_processor"], body["charge_attempts"]) == ("sandbox", 1)
        assert body["last_charge_attempt"] == when.isoformat()
    else:
        naive = when.replace(tzinfo=None).isoformat()
        assert body["status"] == "SUCCESS" and body["processed_at"] == naive
        assert (body["platform_order_id"], body["transaction_id"]) == (5001, "txn_1")
        assert (body["processor_name"], body["number_times_tried"]) == ("sandbox", 1)
        assert body["last_charge_attempt_date"] == naive


def test_failed_charge_shows_error_error_type_and_retry_date(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    set_charge(vapi, row.id, status="error", error="Card declined", error_type="CARD_DECLINED",
               charge_attempts=2, retry_date=days(vapi, 8))
    body = charge(vapi, row.id)
    assert (body["error"], body["error_type"], body["retry_date"]) == (
        "Card declined", "CARD_DECLINED", days(vapi, 8).isoformat())
    assert body["status"] == ("error" if vapi.version == V11 else "ERROR")


# Retrieve: visibility, tenancy, scopes --------------------------------------------------------

def test_a_processed_charge_more_than_90_days_old_is_not_found(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    set_charge(vapi, row.id, status="success", processed_at=vapi.clock.now() - timedelta(days=90, seconds=1))
    assert vapi.get(f"/charges/{row.id}").json() == NOT_FOUND
    assert vapi.get(f"/charges/{row.id}").status_code == 404
    assert row.id not in [c["id"] for c in vapi.get("/charges", params={"address_id": address.id}).json()["charges"]]


def test_a_processed_charge_exactly_90_days_old_is_still_visible(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    set_charge(vapi, row.id, status="refunded", processed_at=vapi.clock.now() - timedelta(days=90))
    assert vapi.get(f"/charges/{row.id}").status_code == 200


def test_an_old_failed_charge_stays_visible(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    set_charge(vapi, row.id, status="error", processed_at=vapi.clock.now() - timedelta(days=400))
    assert vapi.get(f"/charges/{row.id}").status_code == 200


@pytest.mark.parametrize("charge_id", ["999999999", "0"])
def test_get_of_an_unknown_charge_answers_404(vapi, charge_id):
    response = vapi.get(f"/charges/{charge_id}")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_get_of_another_stores_charge_answers_404(vapi):
    other = vapi.other_store()
    address = make_address(other)
    weekly(other, address)
    response = vapi.get(f"/charges/{only(other, address.id).id}")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_reading_charges_needs_read_orders(vapi):
    address = make_address(vapi)
    weekly(vapi, address)
    row = only(vapi, address.id)
    token = vapi.token_with("read_subscriptions", "read_customers")
    needs = {"errors": "This token lacks the scope this endpoint needs: read_orders"}
    for path in (f"/charges/{row.id}", "/charges"):
        response = vapi.get(path, token=token)
        assert (response.status_code, response.json()) == (403, needs)
    assert vapi.get(f"/charges/{row.id}", token=vapi.token_with("read_orders")).status_code == 200
    assert vapi.get(f"/charges/{row.id}", token=vapi.token_with("write_orders")).status_code == 200


def test_the_endpoints_of_one_version_answer_501_in_the_other(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    for method, path, version in (
        ("GET", "/charges/count", V11),
        ("POST", f"/charges/{row.id}/change_next_charge_date", V11),
        ("PUT", f"/charges/{row.id}/change_next_charge_date", V11),
        ("POST", f"/addresses/{address.id}/charges/skip", V01),
    ):
        response = api.request(method, path, json={}, version=version)
        assert (response.status_code, response.json()) == (501, NOT_IN_VERSION), (method, path)


# change_next_charge_date (2021-01, POST and PUT) -------------------------------------------

MOVE_METHODS = ("POST", "PUT")


def move(api: Any, charge_id: int, when: Any, method: str = "POST") -> Any:
    return api.request(method, f"/charges/{charge_id}/change_next_charge_date",
                       json={"next_charge_date": str(when)}, version=V01)


@pytest.mark.parametrize("method", MOVE_METHODS)
def test_moving_a_charge_to_a_free_date_keeps_its_id_and_moves_every_item(api, method):
    address = make_address(api)
    first, second = weekly(api, address), weekly(api, address)
    row = only(api, address.id)
    response = move(api, row.id, days(api, 10), method)
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert body["id"] == row.id and body["status"] == "QUEUED"
    assert body["scheduled_at"] == f"{days(api, 10).isoformat()}T00:00:00"
    assert sorted(lines(body, "subscription_id")) == [first.id, second.id]
    head = charge(api, row.id, V11)
    assert (head["scheduled_at"], head["original_scheduled_at"]) == (days(api, 10).isoformat(),
                                                                    days(api, 7).isoformat())
    assert head["merged_at"] is None
    for sub in (first, second):
        got = api.get(f"/subscriptions/{sub.id}").json()["subscription"]
        assert got["next_charge_scheduled_at"] == days(api, 10).isoformat()
    assert [c.scheduled_at for c in stored(api, address.id)] == [days(api, 10)]
    assert ("charge/updated", row.id) in events_of(api, row.id)
    assert ("subscription/updated", first.id) in events_of(api, first.id)


@pytest.mark.parametrize("method", MOVE_METHODS)
def test_moving_onto_a_date_with_a_queued_charge_merges_into_that_one(api, method):
    address = make_address(api)
    early = weekly(api, address, on=5)
    late = weekly(api, address, on=9)
    moved, target = stored(api, address.id, "queued")
    response = move(api, moved.id, days(api, 9), method)
    assert response.status_code == 200, response.text
    body = response.json()["charge"]
    assert body["id"] == target.id
    assert sorted(lines(body, "subscription_id")) == [early.id, late.id]
    head = charge(api, target.id, V11)
    assert head["merged_at"] == api.clock.now().replace(microsecond=0).isoformat()
    assert api.get(f"/charges/{moved.id}").status_code == 404
    assert ("charge/deleted", moved.id) in events_of(api, moved.id)
    assert [c.id for c in stored(api, address.id)] == [target.id]


def test_moving_to_the_same_date_changes_nothing(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    before = events_of(api)
    response = move(api, row.id, days(api, 7))
    assert response.status_code == 200 and response.json()["charge"]["id"] == row.id
    assert events_of(api) == before


def test_moving_to_today_is_allowed_and_to_yesterday_is_not(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    assert errors_of(move(api, row.id, days(api, -1))) == {"next_charge_date": ["must not be in the past"]}
    response = move(api, row.id, today(api))
    assert response.status_code == 200, response.text


def test_moving_does_not_merge_with_another_address(api):
    customer = make_customer(api)
    home, work = make_address(api, customer), make_address(api, customer, address1="5 Work Rd")
    weekly(api, home, on=5)
    weekly(api, work, on=9)
    row = only(api, home.id)
    body = move(api, row.id, days(api, 9)).json()["charge"]
    assert body["id"] == row.id and body["address_id"] == home.id
    assert len(stored(api, work.id)) == 1


def test_only_a_queued_charge_can_be_moved(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    assert api.post(f"/charges/{row.id}/skip", json={}, version=V01).status_code == 200
    assert errors_of(move(api, row.id, days(api, 10))) == {
        "status": ["only a queued charge can be moved; this one is SKIPPED"]}  # 2021-01: upper case


@pytest.mark.parametrize("body, errors", [
    ({}, {"next_charge_date": ["is required"]}),
    ({"next_charge_date": None}, {"next_charge_date": ["is required"]}),
    ({"next_charge_date": "soon"}, {"next_charge_date": ["must be a date (YYYY-MM-DD)"]}),
    ({"next_charge_date": 20300101}, {"next_charge_date": ["must be a date (YYYY-MM-DD)"]}),
    ({"next_charge_date": "2030-02-30"}, {"next_charge_date": ["must be a date (YYYY-MM-DD)"]}),
])
@pytest.mark.parametrize("method", MOVE_METHODS)
def test_change_next_charge_date_refuses_bad_bodies(api, method, body, errors):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    response = api.request(method, f"/charges/{row.id}/change_next_charge_date", json=body, version=V01)
    assert errors_of(response) == errors


def test_change_next_charge_date_accepts_a_datetime(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    response = api.post(f"/charges/{row.id}/change_next_charge_date", version=V01,
                        json={"next_charge_date": f"{days(api, 12).isoformat()}T00:00:00"})
    assert response.status_code == 200, response.text
    assert response.json()["charge"]["scheduled_at"].startswith(days(api, 12).isoformat())


def test_change_next_charge_date_of_unknown_or_foreign_charges_answers_404(api):
    other = api.other_store()
    address = make_address(other)
    weekly(other, address)
    for charge_id in (only(other, address.id).id, 999999999):
        response = move(api, charge_id, days(api, 10))
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert len(stored(other, address.id)) == 1 and only(other, address.id).scheduled_at == days(api, 7)


def test_change_next_charge_date_needs_write_subscriptions(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    for scopes in (("read_orders", "write_orders"), ("read_subscriptions",)):
        response = api.post(f"/charges/{row.id}/change_next_charge_date", version=V01,
                            json={"next_charge_date": str(days(api, 10))}, token=api.token_with(*scopes))
        assert (response.status_code, response.json()) == (
            403, {"errors": "This token lacks the scope this endpoint needs: write_subscriptions"})
    assert only(api, address.id).scheduled_at == days(api, 7)


def test_change_next_charge_date_refuses_a_body_that_is_not_an_object(api):
    address = make_address(api)
    weekly(api, address)
    row = only(api, address.id)
    response = api.post(f"/charges/{row.id}/change_next_charge_date", json=["x"], version=V01)
    assert (response.status_code, response.json()) == (415, {"errors": "The request body must be a JSON object"})


def test_moving_a_monthly_charge_makes_its_day_the_new_anchor(api):
    address = make_address(api)
    sub = make_subscription(api, address, next_charge_scheduled_at=days(api, 3))
    row = only(api, address.id)
    target = days(api, 5)
    assert move(api, row.id, target).status_code == 200
    skipped = api.post(f"/charges/{row.id}/skip", json={}).json()["charge"]
    assert skipped["scheduled_at"] == target.isoformat()
    got = api.get(f"/subscriptions/{sub.id}").json()["subscription"]["next_charge_scheduled_at"]
    assert got == add_interval(target, "month", 1, target.day).isoformat()
