"""Contract tests of GET /customers (filters, sorting, include, paging) and GET /customers/count
(2021-01 only), in both API versions (spec 01 Sorting/Including/Pagination, spec 02 Customers,
decisions §2.5-§2.6, §3)."""

from __future__ import annotations

from datetime import time, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.api.test_customers import V01, V11, create, errors_of, lenient, set_columns, stamp
from tests.builders import make_address, make_customer, make_payment_method


def ids_of(response) -> list[int]:
    assert response.status_code == 200, response.text
    return [c["id"] for c in response.json()["customers"]]


def listed(api, **params) -> list[int]:
    return ids_of(api.get("/customers", params=params))


def made_over_time(api, n: int = 3, seconds: int = 60):
    """``n`` customers created ``seconds`` apart; returns [(customer, created time)]."""
    made = []
    for i in range(n):
        if i:
            api.clock.advance(seconds=seconds)
        made.append((create(api), api.clock.now()))
    return made


# Shape and tenancy -----------------------------------------------------------------------

def test_list_in_2021_11_carries_both_cursors_in_the_body(api):
    create(api)
    body = api.get("/customers", version=V11).json()
    assert set(body) == {"customers", "next_cursor", "previous_cursor"}
    assert body["next_cursor"] is None and body["previous_cursor"] is None


def test_list_in_2021_01_carries_only_the_records(api):
    api.version = V01
    create(api)
    response = api.get("/customers")
    assert set(response.json()) == {"customers"}
    assert "link" not in response.headers


def test_listed_records_are_the_same_as_retrieved_ones(vapi):
    mine = create(vapi)
    assert vapi.get("/customers").json()["customers"] == [mine]


def test_list_shows_only_the_callers_store(vapi):
    mine = create(vapi)
    other = vapi.other_store()
    theirs = create(other)
    assert listed(vapi) == [mine["id"]]
    assert listed(other) == [theirs["id"]]
    assert listed(vapi, ids=f"{mine['id']},{theirs['id']}") == [mine["id"]]


def test_an_empty_store_lists_no_customers(vapi):
    assert listed(vapi) == []


# Filters -----------------------------------------------------------------------------------

def test_email_filter_returns_the_customer_with_that_email(vapi):
    create(vapi, email="one@example.com")
    two = create(vapi, email="two@example.com")
    create(vapi.other_store(), email="two@example.com")
    assert listed(vapi, email="two@example.com") == [two["id"]]
    assert listed(vapi, email="three@example.com") == []


def test_hash_filter_returns_the_customer_with_that_hash(vapi):
    create(vapi)
    two = create(vapi)
    assert listed(vapi, hash=two["hash"]) == [two["id"]]
    assert listed(vapi, hash="0" * 24) == []


def test_ids_filter_returns_exactly_those_customers(vapi):
    one, two, three = create(vapi), create(vapi), create(vapi)
    assert listed(vapi, ids=f"{one['id']},{three['id']}") == [three["id"], one["id"]]
    assert listed(vapi, ids=str(two["id"])) == [two["id"]]
    assert listed(vapi, ids="987654321") == []


@pytest.mark.parametrize("value", ["1,abc", "abc", "1.5", "1;2", "0x10"])
def test_ids_filter_with_a_non_integer_answers_422(vapi, value):
    create(vapi)
    errors = errors_of(vapi.get("/customers", params={"ids": value}))
    assert set(errors) == {"ids"}
    assert len(errors["ids"]) == 1 and isinstance(errors["ids"][0], str)


def test_ids_filter_with_an_out_of_range_integer_matches_nothing_or_answers_422(vapi):
    api = lenient(vapi)
    create(api)
    response = api.get("/customers", params={"ids": "99999999999999999999"})
    assert response.status_code in (200, 422), response.text
    if response.status_code == 200:
        assert response.json()["customers"] == []
    else:
        assert set(response.json()["errors"]) == {"ids"}


def test_external_customer_id_filter_in_2021_11(api):
    create(api, external_customer_id={"ecommerce": "E-1"})
    two = create(api, external_customer_id={"ecommerce": "E-2"})
    create(api)
    assert listed(api, external_customer_id="E-2") == [two["id"]]
    assert listed(api, external_customer_id="E-3") == []


def test_platform_customer_id_filter_in_2021_01(api):
    api.version = V01
    create(api, platform_customer_id="P-1")
    two = create(api, platform_customer_id="P-2")
    create(api)
    assert listed(api, platform_customer_id="P-2") == [two["id"]]
    assert listed(api, platform_customer_id="P-3") == []


def test_status_filter_in_2021_01_selects_active_or_inactive(api):
    api.version = V01
    active, inactive = create(api), create(api)
    set_columns(api, active["id"], status="active")
    assert api.get(f"/customers/{active['id']}").json()["customer"]["status"] == "ACTIVE"
    assert listed(api, status="ACTIVE") == [active["id"]]
    assert listed(api, status="INACTIVE") == [inactive["id"]]


def test_status_filter_in_2021_01_refuses_other_values(api):
    api.version = V01
    errors = errors_of(api.get("/customers", params={"status": "SLEEPING"}))
    assert set(errors) == {"status"}


def test_filters_combine_with_and(vapi):
    one = create(vapi, email="one@example.com")
    two = create(vapi, email="two@example.com")
    assert listed(vapi, email="one@example.com", ids=str(two["id"])) == []
    assert listed(vapi, email="one@example.com", ids=f"{one['id']},{two['id']}") == [one["id"]]


def test_created_at_window_selects_by_creation_time(vapi):
    (c1, t1), (c2, t2), (c3, t3) = made_over_time(vapi)
    half = timedelta(seconds=30)
    assert listed(vapi, created_at_min=stamp(V11, t2 - half)) == [c3["id"], c2["id"]]
    assert listed(vapi, created_at_max=stamp(V11, t2 + half)) == [c2["id"], c1["id"]]
    assert listed(vapi, created_at_min=stamp(V11, t2 - half), created_at_max=stamp(V11, t2 + half)) == [c2["id"]]
    assert listed(vapi, created_at_min=stamp(V11, t3 + half)) == []


def test_updated_at_window_selects_by_update_time_not_creation_time(vapi):
    c1, c2, c3 = create(vapi), create(vapi), create(vapi)
    start = vapi.clock.now()
    vapi.clock.advance(seconds=60)
    vapi.put(f"/customers/{c1['id']}", json={"first_name": "First"})
    vapi.clock.advance(seconds=60)
    vapi.put(f"/customers/{c2['id']}", json={"first_name": "Second"})
    at = lambda seconds: stamp(V11, start + timedelta(seconds=seconds))  # noqa: E731
    assert listed(vapi, updated_at_min=at(30)) == [c2["id"], c1["id"]]
    assert listed(vapi, updated_at_max=at(90)) == [c3["id"], c1["id"]]
    assert listed(vapi, updated_at_min=at(30), updated_at_max=at(90)) == [c1["id"]]
    assert listed(vapi, created_at_min=at(30)) == []


DATETIME_FORMATS = {
    "T, no zone": "%Y-%m-%dT%H:%M:%S",
    "space, no zone": "%Y-%m-%d %H:%M:%S",
    "Z": "%Y-%m-%dT%H:%M:%SZ",
    "+00:00": "%Y-%m-%dT%H:%M:%S+00:00",
    "+0000": "%Y-%m-%dT%H:%M:%S+0000",
    "space and Z": "%Y-%m-%d %H:%M:%SZ",
    "space and +00:00": "%Y-%m-%d %H:%M:%S+00:00",
}


@pytest.mark.parametrize("fmt", DATETIME_FORMATS.values(), ids=DATETIME_FORMATS.keys())
def test_datetime_filters_accept_each_documented_format_as_utc(vapi, fmt):
    (c1, _), (c2, t2), (c3, _) = made_over_time(vapi)
    low, high = (t2 - timedelta(seconds=30)).strftime(fmt), (t2 + timedelta(seconds=30)).strftime(fmt)
    assert listed(vapi, created_at_min=low) == [c3["id"], c2["id"]]
    assert listed(vapi, created_at_max=high) == [c2["id"], c1["id"]]
    assert listed(vapi, updated_at_min=low, updated_at_max=high) == [c2["id"]]


def test_datetime_filters_accept_a_bare_date_as_midnight_utc(vapi):
    if vapi.clock.now().time() == time(0):  # keep both customers off the midnight boundary
        vapi.clock.advance(seconds=1)
    first = create(vapi)
    vapi.clock.advance(days=1)
    second = create(vapi)
    day = vapi.clock.now().date().isoformat()
    assert listed(vapi, created_at_min=day) == [second["id"]]
    assert listed(vapi, created_at_max=day) == [first["id"]]
    assert listed(vapi, updated_at_min=day) == [second["id"]]


@pytest.mark.parametrize("param", ["created_at_min", "created_at_max", "updated_at_min", "updated_at_max"])
@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "2026-01-15T25:00:00", "15/01/2026",
                                   "2026-01-15T12:00:00 UTC"])
def test_a_bad_datetime_filter_answers_422_with_the_documented_message(vapi, param, value):
    response = vapi.get("/customers", params={param: value})
    assert response.status_code == 422
    assert response.json() == {
        "errors": {param: [f"Invalid date: {value}. Must be a valid ISO-8601 datetime string"]}}


def test_every_bad_filter_is_named_at_once(vapi):
    errors = errors_of(vapi.get("/customers", params={"ids": "x", "updated_at_max": "never"}))
    assert set(errors) == {"ids", "updated_at_max"}


def test_unknown_query_parameters_are_ignored(vapi):
    mine = create(vapi)
    assert listed(vapi, colour="teal") == [mine["id"]]


# Sorting -----------------------------------------------------------------------------------

def test_default_sort_is_id_descending(vapi):
    made = [create(vapi)["id"] for _ in range(3)]
    assert listed(vapi) == sorted(made, reverse=True)


def test_sort_by_id_ascending_and_descending(vapi):
    made = [create(vapi)["id"] for _ in range(3)]
    assert listed(vapi, sort_by="id-asc") == sorted(made)
    assert listed(vapi, sort_by="id-desc") == sorted(made, reverse=True)


def test_sort_by_created_at_follows_creation_time_not_id(vapi):
    c1, c2, c3 = create(vapi), create(vapi), create(vapi)
    now = vapi.clock.now()
    set_columns(vapi, c1["id"], created_at=now - timedelta(hours=1))
    set_columns(vapi, c2["id"], created_at=now - timedelta(hours=3))
    set_columns(vapi, c3["id"], created_at=now - timedelta(hours=2))
    assert listed(vapi, sort_by="created_at-asc") == [c2["id"], c3["id"], c1["id"]]
    assert listed(vapi, sort_by="created_at-desc") == [c1["id"], c3["id"], c2["id"]]


def test_sort_by_updated_at_follows_update_time_not_id(vapi):
    c1, c2, c3 = create(vapi), create(vapi), create(vapi)
    vapi.clock.advance(seconds=60)
    vapi.put(f"/customers/{c1['id']}", json={"first_name": "First"})
    vapi.clock.advance(seconds=60)
    vapi.put(f"/customers/{c2['id']}", json={"first_name": "Second"})
    assert listed(vapi, sort_by="updated_at-asc") == [c3["id"], c1["id"], c2["id"]]
    assert listed(vapi, sort_by="updated_at-desc") == [c2["id"], c1["id"], c3["id"]]


def test_equal_sort_values_are_ordered_by_id_in_the_same_direction(vapi):
    c1, c2, c3 = create(vapi), create(vapi), create(vapi)  # same second
    assert listed(vapi, sort_by="created_at-asc") == [c1["id"], c2["id"], c3["id"]]
    assert listed(vapi, sort_by="created_at-desc") == [c3["id"], c2["id"], c1["id"]]


@pytest.mark.parametrize("value", ["email-asc", "hash-desc", "id", "id-up", "ID-ASC", "-asc", "created_at-",
                                   "processed_at-asc", "scheduled_at-desc"])
def test_a_sort_outside_the_customer_table_answers_422(vapi, value):
    errors = errors_of(vapi.get("/customers", params={"sort_by": value}))
    assert set(errors) == {"sort_by"}
    assert len(errors["sort_by"]) == 1 and isinstance(errors["sort_by"][0], str)


# Include -----------------------------------------------------------------------------------

def test_include_addresses_embeds_each_customers_addresses(vapi):
    with_two, without = make_customer(vapi), make_customer(vapi)
    a1, a2 = make_address(vapi, with_two), make_address(vapi, with_two)
    records = {c["id"]: c for c in vapi.get("/customers", params={"include": "addresses"}).json()["customers"]}
    assert sorted(a["id"] for a in records[with_two.id]["include"]["addresses"]) == sorted([a1.id, a2.id])
    assert records[without.id]["include"] == {"addresses": []}
    embedded = records[with_two.id]["include"]["addresses"][0]
    assert embedded == vapi.get(f"/addresses/{embedded['id']}").json()["address"]


def test_included_addresses_take_the_callers_version_shape(vapi):
    customer = make_customer(vapi)
    make_address(vapi, customer)
    record = vapi.get(f"/customers/{customer.id}", params={"include": "addresses"}).json()["customer"]
    address = record["include"]["addresses"][0]
    assert address["customer_id"] == customer.id
    if vapi.version == V01:
        assert address["country"] == "United States"
        assert "order_attributes" not in address
    else:
        assert address["country_code"] == "US"
        assert "country" not in address


def test_include_payment_methods_embeds_each_customers_payment_methods(vapi):
    with_one, without = make_customer(vapi), make_customer(vapi)
    pm = make_payment_method(vapi, with_one)
    records = {c["id"]: c for c in
               vapi.get("/customers", params={"include": "payment_methods"}).json()["customers"]}
    methods = records[with_one.id]["include"]["payment_methods"]
    assert [m["id"] for m in methods] == [pm]
    assert methods[0]["customer_id"] == with_one.id
    assert records[without.id]["include"] == {"payment_methods": []}


def test_include_takes_several_values_on_a_single_customer(vapi):
    customer = make_customer(vapi)
    address = make_address(vapi, customer)
    pm = make_payment_method(vapi, customer)
    response = vapi.get(f"/customers/{customer.id}", params={"include": "addresses,payment_methods"})
    assert response.status_code == 200, response.text
    embedded = response.json()["customer"]["include"]
    assert set(embedded) == {"addresses", "payment_methods"}
    assert [a["id"] for a in embedded["addresses"]] == [address.id]
    assert [m["id"] for m in embedded["payment_methods"]] == [pm]


def test_without_include_records_carry_no_include_key(vapi):
    customer = make_customer(vapi)
    make_address(vapi, customer)
    assert "include" not in vapi.get(f"/customers/{customer.id}").json()["customer"]
    assert "include" not in vapi.get("/customers").json()["customers"][0]


@pytest.mark.parametrize("value,message", [
    ("bogus", "Invalid value: bogus"),
    ("addresses,bogus", "Invalid value: bogus"),
    ("customer", "Invalid value: customer"),
    ("charges", "Invalid value: charges"),
])
@pytest.mark.parametrize("where", ["list", "one"])
def test_an_unknown_or_not_yet_available_include_value_answers_422_naming_it(vapi, value, message, where):
    customer = make_customer(vapi)
    path = "/customers" if where == "list" else f"/customers/{customer.id}"
    errors = errors_of(vapi.get(path, params={"include": value}))
    assert set(errors) == {"include"}
    assert len(errors["include"]) == 1 and errors["include"][0].startswith(message)


def test_referral_info_is_a_2021_01_include_value_only(api):
    customer = make_customer(api)
    for version in (V01, V11):
        errors = errors_of(api.get(f"/customers/{customer.id}", params={"include": "referral_info"},
                                   version=version))
        assert set(errors) == {"include"}


# Paging ------------------------------------------------------------------------------------

def test_limit_caps_the_page_size(vapi):
    made = [create(vapi)["id"] for _ in range(3)]
    assert listed(vapi, limit=2) == sorted(made, reverse=True)[:2]


@pytest.mark.parametrize("value", ["0", "251", "-1", "abc", "2.5"])
def test_a_limit_outside_1_to_250_answers_422(vapi, value):
    assert set(errors_of(vapi.get("/customers", params={"limit": value}))) == {"limit"}


def test_page_numbers_walk_the_list(vapi):
    made = sorted((create(vapi)["id"] for _ in range(3)), reverse=True)
    assert listed(vapi, limit=2, page=2) == made[2:]
    assert set(errors_of(vapi.get("/customers", params={"page": "101"}))) == {"page"}


def test_cursors_walk_forward_and_back_keeping_the_sort_in_2021_11(api):
    made = sorted(create(api)["id"] for _ in range(3))
    first = api.get("/customers", params={"limit": 2, "sort_by": "id-asc"}).json()
    assert [c["id"] for c in first["customers"]] == made[:2]
    assert first["previous_cursor"] is None and first["next_cursor"]
    second = api.get("/customers", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [c["id"] for c in second["customers"]] == made[2:]
    assert second["next_cursor"] is None and second["previous_cursor"]
    back = api.get("/customers", params={"limit": 2, "cursor": second["previous_cursor"]}).json()
    assert [c["id"] for c in back["customers"]] == made[:2]


def test_a_cursor_keeps_the_filters_of_the_first_request(api):
    wanted = sorted(create(api, external_customer_id={"ecommerce": "X"})["id"] for _ in range(3))
    create(api)
    first = api.get("/customers", params={"limit": 2, "external_customer_id": "X"}).json()
    second = api.get("/customers", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [c["id"] for c in first["customers"] + second["customers"]] == sorted(wanted, reverse=True)


def test_a_cursor_with_another_filter_or_garbage_answers_422(api):
    for _ in range(2):
        create(api)
    cursor = api.get("/customers", params={"limit": 1}).json()["next_cursor"]
    mixed = api.get("/customers", params={"cursor": cursor, "email": "a@example.com"})
    assert set(errors_of(mixed)) == {"email"}
    garbage = api.get("/customers", params={"cursor": "not-a-cursor"})
    assert garbage.status_code == 422
    assert garbage.json() == {"errors": {"cursor": ["Invalid value"]}}


def test_a_cursor_is_never_much_longer_than_the_request_it_came_from(api):
    """Found by an audit: `ids` padded with 50,000 commas (accepted: empty elements are
    skipped) made a 68 KB cursor, past the 64 KiB a request line may have: the next page could
    not be asked for. A long cursor is deflated (api/listing.py)."""
    made = sorted(create(api)["id"] for _ in range(3))
    ids = ",".join(map(str, made)) + "," * 15_000  # 45 KB as sent, each comma %2C
    first = api.get("/customers", params={"limit": 2, "ids": ids, "sort_by": "id-asc"}).json()
    cursor = first["next_cursor"]
    assert len(cursor) < 2_000, len(cursor)
    second = api.get("/customers", params={"limit": 2, "cursor": cursor}).json()
    assert [c["id"] for c in first["customers"] + second["customers"]] == made
    back = api.get("/customers", params={"limit": 2, "cursor": second["previous_cursor"]}).json()
    assert [c["id"] for c in back["customers"]] == made[:2]
    # A short one stays as it was (plain JSON, no deflating on the common path).
    import base64
    plain = api.get("/customers", params={"limit": 1}).json()["next_cursor"]
    assert base64.urlsafe_b64decode(plain + "=" * (-len(plain) % 4)).startswith(b"{")


@pytest.mark.parametrize("payload", [
    b"z" + __import__("zlib").compress(b"{" + b" " * 1_000_000 + b"}"),  # inflates past its bound
    b"z" + __import__("zlib").compress(b'{"r": "customers"}')[:-4],  # cut short
    b"z" + b"not deflated at all",
])
def test_a_deflated_cursor_that_is_a_bomb_or_broken_answers_422(api, payload):
    import base64
    cursor = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
    response = api.get("/customers", params={"cursor": cursor})
    assert response.status_code == 422 and response.json() == {"errors": {"cursor": ["Invalid value"]}}


def test_a_cursor_of_another_resource_answers_422(api):
    customer = make_customer(api)
    for _ in range(2):
        make_address(api, customer)
    cursor = api.get("/addresses", params={"limit": 1}).json()["next_cursor"]
    assert cursor
    response = api.get("/customers", params={"cursor": cursor})
    assert response.json() == {"errors": {"cursor": ["Invalid value"]}}


def test_2021_01_pages_through_a_link_header_with_page_info(api):
    api.version = V01
    made = sorted((create(api)["id"] for _ in range(3)), reverse=True)
    first = api.get("/customers", params={"limit": 2})
    assert ids_of(first) == made[:2]
    link = first.headers["link"]
    assert 'rel="next"' in link and 'rel="previous"' not in link
    url = link.split(";")[0].strip("<>")
    assert url.startswith("http://rebill.test/customers?")
    query = parse_qs(urlsplit(url).query)
    second = api.get("/customers", params={"limit": query["limit"][0], "page_info": query["page_info"][0]})
    assert ids_of(second) == made[2:]
    assert 'rel="previous"' in second.headers["link"] and 'rel="next"' not in second.headers["link"]


# Count (2021-01) ---------------------------------------------------------------------------

def test_count_answers_501_in_2021_11(api):
    create(api)
    response = api.get("/customers/count", version=V11)
    assert response.status_code == 501
    assert isinstance(response.json()["errors"], str)


def test_count_counts_the_callers_customers_in_2021_01(api):
    api.version = V01
    assert api.get("/customers/count").json() == {"count": 0}
    for _ in range(3):
        create(api)
    create(api.other_store())
    response = api.get("/customers/count")
    assert response.status_code == 200
    assert response.json() == {"count": 3}


def test_count_honours_the_status_filter(api):
    api.version = V01
    active = create(api)
    create(api), create(api)
    set_columns(api, active["id"], status="active")
    assert api.get("/customers/count", params={"status": "ACTIVE"}).json() == {"count": 1}
    assert api.get("/customers/count", params={"status": "INACTIVE"}).json() == {"count": 2}
    assert set(errors_of(api.get("/customers/count", params={"status": "active!"}))) == {"status"}


def test_count_honours_the_created_and_updated_windows(api):
    api.version = V01
    (c1, _), (c2, t2), _ = made_over_time(api)
    half = timedelta(seconds=30)
    count = lambda **p: api.get("/customers/count", params=p).json()["count"]  # noqa: E731
    assert count(created_at_min=stamp(V01, t2 - half)) == 2
    assert count(created_at_max=stamp(V01, t2 - half)) == 1
    assert count(created_at_min=stamp(V01, t2 - half), created_at_max=stamp(V01, t2 + half)) == 1
    api.clock.advance(seconds=600)
    api.put(f"/customers/{c1['id']}", json={"first_name": "Later"})
    later = api.clock.now()
    assert count(updated_at_min=stamp(V01, later - half)) == 1
    assert count(updated_at_max=stamp(V01, later - half)) == 2


def test_count_refuses_a_bad_datetime(api):
    response = api.get("/customers/count", params={"created_at_min": "soon"}, version=V01)
    assert response.status_code == 422
    assert response.json() == {
        "errors": {"created_at_min": ["Invalid date: soon. Must be a valid ISO-8601 datetime string"]}}
