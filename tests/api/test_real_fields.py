"""Fidelity to real clients (issue 7): every field path of spec 03 (`03-real-fields.md`) is
rendered with an allowed JSON type, per version and resource, so that clients with strict
response models accept our replies. Decisions win where they speak: §2.4 narrows 2021-11
datetimes to `+00:00` and 2021-01 ones to naive.

The expected lists below are transcribed from spec 03 (the table rows, then its "schema only"
paths, whose types are ours). ``null`` is added where the value can be empty (spec 03: "Null is a
legal value for any field that can be empty"); never for ids, flags, counts or timestamps.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from msgspec.structs import replace

from rebill.api.v2021_11.serializers import store_domain, timezone_label
from rebill.domain.store import service as store_service
from tests.builders import make_address, make_customer

V01, V11 = "2021-01", "2021-11"
OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")

STR, INT, BOOL, OBJ, ARR, NULL = "string", "integer", "boolean", "object", "array", "null"
NUM = "number"  # spec 03's JSON number: an integer or one with a fraction
DT_OFFSET, DT_NAIVE = "datetime-offset", "datetime-naive"


# The walker -------------------------------------------------------------------------------

def json_types(value: Any) -> set[str]:
    """The spec 03 type names a JSON value satisfies."""
    if value is None:
        return {NULL}
    if isinstance(value, bool):
        return {BOOL}
    if isinstance(value, int):
        return {INT, NUM}
    if isinstance(value, float):
        return {NUM}
    if isinstance(value, str):
        found = {STR}
        if OFFSET.match(value):
            found.add(DT_OFFSET)
        if NAIVE.match(value):
            found.add(DT_NAIVE)
        return found
    if isinstance(value, list):
        return {ARR}
    if isinstance(value, dict):
        return {OBJ}
    return {type(value).__name__}


def _values_at(node: Any, parts: list[str], where: str) -> list[tuple[str, Any]]:
    """Every (concrete path, value) that ``parts`` reaches from ``node``; a missing key yields
    (path, KeyError). A null parent ends the walk: the parent's own entry says if null is allowed."""
    if not parts:
        return [(where, node)]
    head, rest = parts[0], parts[1:]
    each = head.endswith("[]")
    key = head[:-2] if each else head
    here = f"{where}.{key}" if where else key
    if not isinstance(node, dict) or key not in node:
        return [(here, KeyError(key))]
    value = node[key]
    if value is None:
        return [] if rest or each else [(here, None)]
    if not each:
        return _values_at(value, rest, here)
    if not isinstance(value, list):
        return [(here, TypeError(f"{here} is not an array"))]
    found: list[tuple[str, Any]] = []
    for index, item in enumerate(value):
        found.extend(_values_at(item, rest, f"{here}[{index}]"))
    return found


def field_problems(body: dict[str, Any], expected: list[tuple[str, set[str]]]) -> list[str]:
    """What in ``body`` breaks ``expected`` [(path, allowed types)]: missing keys and values of
    another type. Paths: `a.b` is key b of object a, `a[].b` key b of each element of array a."""
    problems = []
    for path, allowed in expected:
        for where, value in _values_at(body, path.split("."), ""):
            if isinstance(value, Exception):
                problems.append(f"{where}: missing ({value})")
            elif not json_types(value) & allowed:
                problems.append(f"{where}: {value!r} is {sorted(json_types(value))}, not one of {sorted(allowed)}")
    return problems


def assert_fields(body: dict[str, Any], expected: list[tuple[str, set[str]]]) -> None:
    problems = field_problems(body, expected)
    assert not problems, "\n".join(problems)


def test_the_walker_reports_missing_and_mistyped_paths():
    body = {"a": 1, "b": True, "c": {"d": None}, "e": [{"f": "x"}, {"g": 1}], "h": None}
    expected = [("a", {INT}), ("b", {INT}), ("c.d", {STR}), ("e[].f", {STR}), ("h.i", {STR}), ("z", {STR})]
    assert field_problems(body, expected) == [
        "b: True is ['boolean'], not one of ['integer']",
        "c.d: None is ['null'], not one of ['string']",
        "e[1].f: missing ('f')",
        "z: missing ('z')",
    ]
    assert field_problems({"n": "12.50", "i": 1.5}, [("n", {NUM}), ("i", {INT})]) == [
        "n: '12.50' is ['string'], not one of ['number']", "i: 1.5 is ['number'], not one of ['integer']"]
    assert not field_problems({"n": 12.5, "m": 12}, [("n", {NUM}), ("m", {NUM})])
    assert field_problems({"t": "2022-03-10T12:13:28+00:00"}, [("t", {DT_NAIVE})])
    assert not field_problems({"t": "2022-03-10T12:13:28"}, [("t", {DT_NAIVE})])
    assert not field_problems({"e": []}, [("e[].f", {STR})])


# Spec 03, transcribed ---------------------------------------------------------------------

UTM = ("utm_campaign", "utm_content", "utm_data_source", "utm_medium", "utm_source", "utm_term", "utm_timestamp")

CUSTOMER_2021_11 = [
    ("analytics_data", {OBJ}),
    ("analytics_data.utm_params", {ARR}),
    ("apply_credit_to_next_checkout_charge", {BOOL}),
    ("apply_credit_to_next_recurring_charge", {BOOL}),
    ("created_at", {DT_OFFSET}),  # spec 03: offset or naive; decisions §2.4: offset
    ("email", {STR}),
    ("external_customer_id", {OBJ}),
    ("external_customer_id.ecommerce", {STR, NULL}),
    ("first_charge_processed_at", {DT_OFFSET, NULL}),
    ("first_name", {STR}),
    ("has_payment_method_in_dunning", {BOOL}),
    ("has_valid_payment_method", {BOOL}),
    ("hash", {STR}),
    ("id", {INT}),
    ("last_name", {STR}),
    ("phone", {STR, NULL}),
    ("subscriptions_active_count", {INT}),
    ("subscriptions_total_count", {INT}),
    ("tax_exempt", {BOOL}),
    ("updated_at", {DT_OFFSET}),
    # Schema only.
    *[(f"analytics_data.utm_params[].{name}", {STR, NULL}) for name in UTM],
    ("braintree_customer_token", {STR, NULL}),
    ("paypal_customer_token", {STR, NULL}),
]

CUSTOMER_2021_01 = [
    ("analytics_data", {OBJ}),
    ("analytics_data.utm_params", {ARR}),
    ("billing_address1", {STR, NULL}),  # null: a customer made in 2021-11 has no billing address
    ("billing_address2", {STR, NULL}),
    ("billing_city", {STR, NULL}),
    ("billing_company", {STR, NULL}),
    ("billing_country", {STR, NULL}),
    ("billing_phone", {STR, NULL}),
    ("billing_province", {STR, NULL}),
    ("billing_zip", {STR, NULL}),
    ("created_at", {DT_NAIVE}),
    ("email", {STR}),
    ("first_charge_processed_at", {DT_NAIVE, NULL}),
    ("first_name", {STR}),
    ("has_card_error_in_dunning", {BOOL}),
    ("has_valid_payment_method", {BOOL}),
    ("hash", {STR}),
    ("id", {INT}),
    ("last_name", {STR}),
    ("number_active_subscriptions", {INT}),
    ("number_subscriptions", {INT}),
    ("platform_customer_id", {STR, NULL}),
    ("processor_type", {STR, NULL}),
    ("reason_payment_method_not_valid", {STR, NULL}),
    ("status", {STR}),
    ("stripe_customer_token", {STR, NULL}),
    ("updated_at", {DT_NAIVE}),
    # Schema only.
    ("braintree_customer_token", {STR, NULL}),
    ("paypal_customer_token", {STR, NULL}),
]

SHOP_2021_01 = [
    ("allow_customers_to_skip_delivery", {INT}),
    ("checkout_logo_url", {STR}),  # spec 03 saw only null; issue 15: a string, "" until set
    ("created_at", {DT_NAIVE}),  # spec 03: string; decisions §2.4: naive
    ("currency", {STR}),
    ("customer_portal_domain", {STR}),
    ("disabled_currencies_historical", {ARR}),
    ("domain", {STR}),
    ("email", {STR}),
    ("enabled_presentment_currencies", {ARR}),
    ("enabled_presentment_currencies_symbols", {ARR}),
    ("enabled_presentment_currencies_symbols[].currency", {STR}),
    ("enabled_presentment_currencies_symbols[].location", {STR}),
    ("enabled_presentment_currencies_symbols[].suffix", {STR}),
    ("enabled_presentment_currencies_symbols[].symbol", {STR}),
    ("external_platform", {STR}),
    ("iana_timezone", {STR}),
    ("id", {INT}),
    ("my_platform_domain", {STR}),
    ("name", {STR}),
    ("payment_processor", {STR}),
    ("platform_domain", {STR}),
    ("shop_email", {STR}),
    ("shop_phone", {STR}),
    ("subscriptions_enabled", {INT}),
    ("test_mode", {BOOL}),
    ("timezone", {STR}),
    ("updated_at", {DT_NAIVE}),
]

# Spec 03's store (2021-01) table is the shop's plus `checkout_platform`.
STORE_2021_01 = [*SHOP_2021_01, ("checkout_platform", {STR})]

# Spec 03 store (2021-11): schema only; the types are ours.
STORE_2021_11 = [
    ("checkout_logo_url", {STR}),  # issue 15: strings, "" until set (decisions §1.6)
    ("checkout_platform", {STR}),
    ("created_at", {DT_OFFSET}),
    ("currency", {STR}),
    ("customer_portal_base_url", {STR}),
    ("default_api_version", {STR}),
    ("email", {STR}),
    ("external_platform", {STR}),
    ("id", {INT}),
    ("identifier", {STR}),
    ("merchant_portal_base_url", {STR}),
    ("name", {STR}),
    ("phone", {STR}),
    ("timezone", {OBJ}),
    ("timezone.iana_name", {STR}),
    ("timezone.iana_timezone", {STR}),
    ("timezone.name", {STR}),
    ("updated_at", {DT_OFFSET}),
    ("weight_unit", {STR}),
]

# Decisions §1.5 and §5.16 (not in spec 03): the emails are strings, never null.
TOKEN_INFORMATION = [
    ("name", {STR}),
    ("contact_email", {STR}),
    ("scopes", {ARR}),
    ("client", {OBJ}),
    ("client.name", {STR}),
    ("client.contact_email", {STR}),
]

CUSTOMERS = {V11: CUSTOMER_2021_11, V01: CUSTOMER_2021_01}


# Customers --------------------------------------------------------------------------------

UTM_ENTRY = {name: f"{name}-value" for name in UTM}


def _customer_records(api: Any, version: str) -> list[dict[str, Any]]:
    """One customer made in each version (2021-01 ones have a billing address, 2021-11 ones
    none), one with UTM parameters, one with every optional field set; each as the create reply,
    the retrieve reply and the list row, all in ``version``."""
    v01_body = {"billing_address1": "101 Market St", "billing_city": "San Francisco",
                "billing_country": "United States", "billing_first_name": "Ada", "billing_last_name": "Lovelace",
                "billing_province": "CA", "billing_zip": "94105"}
    bodies = [
        (V11, {}),
        (V11, {"phone": "+14155550100", "external_customer_id": {"ecommerce": "5501"}, "tax_exempt": True,
               "analytics_data": {"utm_params": [UTM_ENTRY]}}),
        (V11, {"analytics_data": {"landing_page": "/"}}),
        (V01, v01_body),
        (V01, {**v01_body, "billing_address2": "Suite 5", "billing_company": "ACME", "billing_phone": "+1415555",
               "platform_customer_id": "7", "processor_type": "stripe", "phone": "+14155550100"}),
    ]
    records = []
    for n, (made_in, extra) in enumerate(bodies):
        body = {"email": f"real{n}-{made_in}@example.com", "first_name": "Ada", "last_name": "Lovelace", **extra}
        response = api.post("/customers", json=body, version=made_in)
        assert response.status_code in (200, 201), response.text
        customer_id = response.json()["customer"]["id"]
        if made_in == version:
            records.append(response.json()["customer"])
        records.append(api.get(f"/customers/{customer_id}", version=version).json()["customer"])
    listed = api.get("/customers", version=version, params={"limit": 250})
    assert listed.status_code == 200, listed.text
    records.extend(listed.json()["customers"])
    return records


def test_customer_renders_every_real_field(vapi):
    records = _customer_records(vapi, vapi.version)
    assert len(records) >= 10
    for record in records:
        assert_fields(record, CUSTOMERS[vapi.version])


def test_customer_utm_params_are_rendered_as_sent(vapi):
    _customer_records(vapi, vapi.version)
    rows = vapi.get("/customers", params={"email": f"real1-{V11}@example.com"}).json()["customers"]
    assert [row["analytics_data"] for row in rows] == [{"utm_params": [UTM_ENTRY]}]


def test_customer_analytics_data_without_utm_params_gets_an_empty_array(vapi):
    response = vapi.post("/customers", version=V11, json={"email": "landing@example.com", "first_name": "A",
                                                          "last_name": "B", "analytics_data": {"landing_page": "/"}})
    customer = vapi.get(f"/customers/{response.json()['customer']['id']}").json()["customer"]
    assert customer["analytics_data"] == {"landing_page": "/", "utm_params": []}


def test_customer_2021_11_credit_flags_are_false_and_processor_tokens_null(api):
    customer = make_customer(api)
    record = api.get(f"/customers/{customer.id}", version=V11).json()["customer"]
    assert record["apply_credit_to_next_checkout_charge"] is False
    assert record["apply_credit_to_next_recurring_charge"] is False
    assert record["braintree_customer_token"] is None and record["paypal_customer_token"] is None
    # Our own extra fields stay (docs/api-choices.md, Customers).
    assert record["orders_count"] == 0


def test_customer_2021_01_has_processor_tokens_and_no_2021_11_fields(api):
    customer = make_customer(api)
    record = api.get(f"/customers/{customer.id}", version=V01).json()["customer"]
    for token in ("stripe_customer_token", "braintree_customer_token", "paypal_customer_token"):
        assert record[token] is None
    assert (record["platform_customer_id"], record["processor_type"], record["reason_payment_method_not_valid"]) \
        == (None, None, None)
    assert record["status"] == "INACTIVE"
    assert not {"apply_credit_to_next_checkout_charge", "apply_credit_to_next_recurring_charge",
                "external_customer_id", "tax_exempt", "orders_count"} & set(record)


def test_customer_embedded_by_include_has_every_real_field(vapi):
    make_address(vapi)
    rows = vapi.get("/addresses", params={"include": "customer"}).json()["addresses"]
    assert rows
    for row in rows:
        assert_fields(row["include"]["customer"], CUSTOMERS[vapi.version])


# Stores -----------------------------------------------------------------------------------

STORE_SETTINGS = [
    {},
    {"email": "owner@example.com", "currency": "EUR", "presentment_currencies": ["USD", "GBP", "JPY", "BTN"],
     "timezone": "America/New_York", "checkout_platform": "platform_s_hosted", "sandbox": False},
    {"timezone": "Australia/Sydney", "checkout_platform": "platform_b_hosted", "presentment_currencies": ["CAD"]},
    # A zone the tz database does not know (stores create refuses one; a row written before
    # that check, or a tz database that lost it, may still hold it): rendered all the same.
    {"timezone": "Not/AZone", "checkout_platform": "platform_s_checkout"},
]


def _store_with(api, settings):
    from sqlalchemy import update

    from rebill.models import stores
    zone = settings.get("timezone")
    if zone != "Not/AZone":
        return api.other_store(**settings)
    other = api.other_store(**{k: v for k, v in settings.items() if k != "timezone"})
    with api.db.write() as conn:
        conn.execute(update(stores).where(stores.c.id == other.store.id).values(timezone=zone))
    return other


@pytest.mark.parametrize("settings", STORE_SETTINGS)
def test_store_2021_11_renders_every_real_field(api, settings):
    other = _store_with(api, settings)
    response = other.get("/store", version=V11)
    assert response.status_code == 200, response.text
    assert_fields(response.json()["store"], STORE_2021_11)


@pytest.mark.parametrize("settings", STORE_SETTINGS)
def test_shop_2021_01_renders_every_real_field_of_shop_and_store(api, settings):
    other = _store_with(api, settings)
    response = other.get("/shop", version=V01)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"shop", "store"}
    assert_fields(body["shop"], SHOP_2021_01)
    assert_fields(body["store"], STORE_2021_01)
    assert len(body["shop"]["enabled_presentment_currencies_symbols"]) \
        == len(body["shop"]["enabled_presentment_currencies"])


def test_store_2021_11_values(api):
    other = api.other_store(email="owner@example.com", timezone="Europe/Paris", checkout_platform="platform_s_hosted")
    store = other.get("/store", version=V11).json()["store"]
    domain = store_domain(other.store)
    assert domain == f"{other.store.name}.rebill.test"
    assert store["identifier"] == domain
    assert store["customer_portal_base_url"] == f"https://{domain}/portal"
    assert store["merchant_portal_base_url"] == f"https://{domain}/merchant"
    assert store["external_platform"] == "platform_s"
    assert (store["checkout_logo_url"], store["email"], store["phone"]) == ("", "owner@example.com", "")
    assert store["timezone"] == {"iana_name": "Europe/Paris", "iana_timezone": "Europe/Paris",
                                 "name": "(GMT+01:00) Europe/Paris"}
    # The head names only: the 2021-01 shop fields stay out.
    assert not {"domain", "iana_timezone", "test_mode", "shop_email"} & set(store)


def test_shop_2021_01_values(api):
    other = api.other_store(email="owner@example.com", currency="EUR", presentment_currencies=["USD", "BTN"],
                            timezone="America/New_York", sandbox=False)
    shop = other.get("/shop", version=V01).json()["shop"]
    domain = f"{other.store.name}.rebill.test"
    assert (shop["domain"], shop["my_platform_domain"], shop["platform_domain"], shop["customer_portal_domain"]) \
        == (domain, domain, domain, domain)
    assert shop["timezone"] == "(GMT-05:00) America/New_York"
    assert shop["iana_timezone"] == "America/New_York"
    assert (shop["shop_email"], shop["email"]) == ("owner@example.com", "owner@example.com")
    assert shop["shop_phone"] == shop["phone"] == ""
    assert shop["test_mode"] is False
    assert shop["subscriptions_enabled"] == 1 and type(shop["subscriptions_enabled"]) is int
    assert shop["allow_customers_to_skip_delivery"] == 1 and type(shop["allow_customers_to_skip_delivery"]) is int
    assert shop["enabled_presentment_currencies_symbols"] == [
        {"currency": "BTN", "location": "before", "suffix": "", "symbol": "BTN"},  # not in the table: the code
        {"currency": "EUR", "location": "before", "suffix": "", "symbol": "€"},
        {"currency": "USD", "location": "before", "suffix": "", "symbol": "$"},
    ]
    assert shop["disabled_currencies_historical"] == []
    assert shop["payment_processor"] == "sandbox"
    assert shop["external_platform"] == "custom"
    assert shop["checkout_logo_url"] == ""
    assert NAIVE.match(shop["created_at"]) and NAIVE.match(shop["updated_at"])
    # 2021-11 names stay out of 2021-01.
    assert not {"identifier", "customer_portal_base_url", "merchant_portal_base_url"} & set(shop)


def test_sandbox_store_is_in_test_mode(api):
    assert api.get("/shop", version=V01).json()["shop"]["test_mode"] is api.store.sandbox is True


@pytest.mark.parametrize("name,domain", [
    ("default", "default.rebill.test"),
    ("My Shop", "my-shop.rebill.test"),
    ("  Ünïcode & Co.  ", "n-code-co.rebill.test"),
    ("x" * 80, "x" * 63 + ".rebill.test"),
    ("!!!", "store-42.rebill.test"),
])
def test_store_domain_is_derived_from_the_name(api, name, domain):
    assert store_domain(replace(api.store, name=name, id=42)) == domain


@pytest.mark.parametrize("zone,label", [
    ("UTC", "(GMT+00:00) UTC"),
    ("Europe/Paris", "(GMT+01:00) Europe/Paris"),
    ("Europe/Dublin", "(GMT+00:00) Europe/Dublin"),  # negative daylight saving in the zone database
    ("America/Los_Angeles", "(GMT-08:00) America/Los_Angeles"),
    ("America/St_Johns", "(GMT-03:30) America/St_Johns"),
    ("Australia/Sydney", "(GMT+10:00) Australia/Sydney"),  # daylight saving in January
    ("Asia/Kolkata", "(GMT+05:30) Asia/Kolkata"),
    ("Not/AZone", "Not/AZone"),
    ("", ""),
])
def test_timezone_label_shows_the_standard_offset(zone, label):
    assert timezone_label(zone, 2026) == label


# Token information ------------------------------------------------------------------------

def _token(api: Any, **kw: Any) -> str:
    with api.db.write() as conn:
        return store_service.create_token(conn, api.clock.now(), store=api.store, **kw)


def test_token_information_without_any_email_has_empty_strings(vapi):
    assert vapi.store.email == ""
    response = vapi.get("/token_information")
    assert response.status_code == 200, response.text
    info = response.json()["token_information"]
    assert_fields(info, TOKEN_INFORMATION)
    assert info["contact_email"] == ""
    assert info["client"] == {"name": "tests", "contact_email": ""}


def test_token_information_uses_the_store_email(api, version):
    other = api.other_store(email="owner@example.com")
    info = other.get("/token_information", version=version).json()["token_information"]
    assert_fields(info, TOKEN_INFORMATION)
    assert info["contact_email"] == "owner@example.com"
    assert info["client"] == {"name": "tests", "contact_email": "owner@example.com"}


def test_token_information_prefers_the_tokens_own_contact_email_at_the_top(api, version):
    other = api.other_store(email="owner@example.com")
    token = _token(other, name="integration", contact_email="dev@example.com", client_name="Some App")
    info = other.get("/token_information", token=token, version=version).json()["token_information"]
    assert_fields(info, TOKEN_INFORMATION)
    assert info["name"] == "integration"
    assert info["contact_email"] == "dev@example.com"
    # Decisions §5.16: the client is the token's name and the store's email.
    assert info["client"] == {"name": "integration", "contact_email": "owner@example.com"}
