"""Contract tests of collections and their products (issue 15, 03-real-fields "collection",
decisions §7.7 item 13; docs/api-choices.md, Collections): every endpoint in the versions that
have it (2021-11 all, 2021-01 list and get; the others 501), success bodies field by field, the
list's paging, sorts and filter, bad input with the exact error bodies, products outside the
catalog, unknown and other stores' ids, scopes and events; a 2021-01 product's
`include=collections` and webhook payloads; discounts for a collection. Both databases (the
`api` fixture)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from rebill.domain.collection import repository as collections
from rebill.domain.schedule.audit import differences
from rebill.domain.unit import Unit
from rebill.models import events, webhook_payloads
from tests.api.test_products import make_product
from tests.api.test_real_fields import DT_NAIVE, DT_OFFSET, INT, STR, assert_fields
from tests.api.test_review_lists import _walk
from tests.builders import charges_of, concurrently, events_of, make_address, make_discount, make_subscription

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
NOT_HERE = {"errors": "This resource is not implemented in the requested API version"}
SORT_ORDERS = "created-asc, created-desc, id-asc, id-desc, title-asc, title-desc"


def collection_events(api: Any, collection_id: int) -> list[tuple[str, int]]:
    """The collection's events (another resource may have the same id)."""
    return [(t, i) for t, i in events_of(api, collection_id) if t.startswith("collection/")]


def errors_of(response: Any, status: int = 422) -> Any:
    assert response.status_code == status, response.text
    return response.json()["errors"]


def create(api: Any, **overrides: Any) -> dict[str, Any]:
    response = api.post("/collections", json={"title": "Coffee", **overrides}, version=V11)
    assert response.status_code == 201, response.text
    return response.json()["collection"]


def fetch(api: Any, collection_id: int, version: str = V11) -> dict[str, Any]:
    response = api.get(f"/collections/{collection_id}", version=version)
    assert response.status_code == 200, response.text
    return response.json()["collection"]


def refs(*external_ids: Any) -> dict[str, Any]:
    return {"collection_products": [{"external_product_id": e} for e in external_ids]}


def add(api: Any, collection_id: int, *external_ids: Any) -> list[dict[str, Any]]:
    response = api.post(f"/collections/{collection_id}/collection_products-bulk", json=refs(*external_ids),
                        version=V11)
    assert response.status_code == 201, response.text
    return response.json()["collection_products"]


def members(api: Any, collection_id: int) -> list[str]:
    response = api.get("/collection_products", params={"collection_id": collection_id, "limit": 250}, version=V11)
    assert response.status_code == 200, response.text
    return [row["external_product_id"] for row in response.json()["collection_products"]]


def stamp(api: Any, naive: bool = False) -> str:
    return api.clock.now().strftime("%Y-%m-%dT%H:%M:%S") + ("" if naive else "+00:00")


# Create, get, update, delete (2021-11) ----------------------------------------------------


def test_create_answers_201_with_every_field(api):
    made = create(api, description="Roasted weekly", sort_order="title-asc")
    assert made == {"id": made["id"], "created_at": stamp(api), "description": "Roasted weekly", "name": "Coffee",
                    "sort_order": "title-asc", "title": "Coffee", "type": "manual", "updated_at": stamp(api)}
    assert fetch(api, made["id"]) == made


def test_create_defaults_an_empty_description_and_the_id_asc_sort_order(api):
    made = create(api)
    assert (made["description"], made["sort_order"]) == ("", "id-asc")
    assert create(api, description=None)["description"] == ""


def test_real_fields_of_both_versions(api):
    made = create(api)
    expected = {"created_at": {DT_OFFSET}, "description": {STR}, "id": {INT}, "name": {STR}, "sort_order": {STR},
                "title": {STR}, "type": {STR}, "updated_at": {DT_OFFSET}}
    assert_fields(fetch(api, made["id"]), list(expected.items()))
    old = {**expected, "created_at": {DT_NAIVE}, "updated_at": {DT_NAIVE}}
    assert_fields(fetch(api, made["id"], V01), list(old.items()))


def test_2021_01_gets_the_same_collection_with_naive_datetimes(api):
    made = create(api, description="d")
    assert fetch(api, made["id"], V01) == {**made, "created_at": stamp(api, naive=True),
                                           "updated_at": stamp(api, naive=True)}


def test_create_records_collection_created(api):
    made = create(api)
    assert collection_events(api, made["id"]) == [("collection/created", made["id"])]


def test_create_without_a_title_names_it(api):
    assert errors_of(api.post("/collections", json={}, version=V11)) == {"title": ["is required"]}
    assert errors_of(api.post("/collections", json={"title": None}, version=V11)) == {"title": ["is required"]}


def test_create_with_wrongly_typed_fields_names_each(api):
    sent = {"title": 5, "description": ["x"], "sort_order": "price-asc"}
    assert errors_of(api.post("/collections", json=sent, version=V11)) == {
        "title": ["must be a string"], "description": ["must be a string"],
        "sort_order": [f"must be one of: {SORT_ORDERS}"]}
    sent = {"title": "  ", "description": "d" * 4097, "sort_order": None}
    assert errors_of(api.post("/collections", json=sent, version=V11)) == {
        "title": ["cannot be blank"], "description": ["is too long (at most 4096 characters)"],
        "sort_order": ["cannot be null"]}  # optional, never null (found by an audit: "is required")
    assert errors_of(api.post("/collections", json={"title": "t" * 256}, version=V11)) == {
        "title": ["is too long (at most 255 characters)"]}


def test_a_body_that_is_not_an_object_answers_415(api):
    response = api.post("/collections", json=["Coffee"], version=V11)
    assert response.status_code == 415


def test_update_changes_the_fields_sent_and_records_them(api):
    made = create(api, description="old")
    api.clock.advance(minutes=5)
    response = api.put(f"/collections/{made['id']}", json={"title": "Tea", "sort_order": "created-desc"}, version=V11)
    assert response.status_code == 200, response.text
    assert response.json()["collection"] == {**made, "title": "Tea", "name": "Tea", "sort_order": "created-desc",
                                             "updated_at": stamp(api)}
    with api.db.read() as conn:
        [changed] = conn.execute(select(events.c.updated_attributes).where(
            events.c.resource_id == made["id"], events.c.topic == "collection/updated")).scalars()
    assert changed == ["sort_order", "title"]


def test_an_update_that_changes_nothing_records_nothing(api):
    made = create(api, description="same")
    api.clock.advance(minutes=5)
    response = api.put(f"/collections/{made['id']}", json={"title": "Coffee", "description": "same"}, version=V11)
    assert response.json()["collection"] == made
    assert collection_events(api, made["id"]) == [("collection/created", made["id"])]


def test_update_refuses_null_and_bad_values(api):
    made = create(api)
    assert errors_of(api.put(f"/collections/{made['id']}", json={"title": None, "sort_order": "nope"},
                             version=V11)) == {"title": ["cannot be null"],
                                               "sort_order": [f"must be one of: {SORT_ORDERS}"]}
    response = api.put(f"/collections/{made['id']}", json={"description": None}, version=V11)
    assert response.status_code == 200 and response.json()["collection"]["description"] == ""


def test_delete_answers_204_and_the_collection_is_gone_with_its_products(api):
    made = create(api)
    make_product(api, "c-1")
    add(api, made["id"], "c-1")
    response = api.delete(f"/collections/{made['id']}", version=V11)
    assert (response.status_code, response.content) == (204, b"")
    assert api.get(f"/collections/{made['id']}", version=V11).json() == NOT_FOUND
    assert members(api, made["id"]) == []
    assert collection_events(api, made["id"])[-1] == ("collection/deleted", made["id"])
    assert api.delete(f"/collections/{made['id']}", version=V11).status_code == 404


@pytest.mark.parametrize("method, path", [
    ("GET", "/collections/{id}"), ("PUT", "/collections/{id}"), ("DELETE", "/collections/{id}"),
    ("POST", "/collections/{id}/collection_products-bulk"), ("DELETE", "/collections/{id}/collection_products-bulk"),
])
def test_unknown_and_other_stores_collections_answer_404(api, method, path):
    make_product(api, "p-1")
    theirs = create(api.other_store())["id"]
    for collection_id in (theirs, 999999999):
        body = {"title": "x", **refs("p-1")} if method != "GET" else None
        response = api.request(method, path.format(id=collection_id), json=body, version=V11)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_an_id_too_long_for_an_id_is_an_unknown_path(api):
    assert api.get("/collections/1234567890123456789", version=V11).status_code == 404


@pytest.mark.parametrize("method, path", [
    ("POST", "/collections"), ("PUT", "/collections/1"), ("DELETE", "/collections/1"),
    ("GET", "/collection_products"), ("POST", "/collections/1/collection_products-bulk"),
    ("DELETE", "/collections/1/collection_products-bulk"),
])
def test_2021_01_has_list_and_get_only(api, method, path):
    response = api.request(method, path, json={"title": "x"}, version=V01)
    assert (response.status_code, response.json()) == (501, NOT_HERE)


# Scopes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("method, path, scope", [
    ("GET", "/collections", "read_products"), ("GET", "/collections/{id}", "read_products"),
    ("POST", "/collections", "write_products"), ("PUT", "/collections/{id}", "write_products"),
    ("DELETE", "/collections/{id}", "write_products"), ("GET", "/collection_products", "read_products"),
    ("POST", "/collections/{id}/collection_products-bulk", "write_products"),
    ("DELETE", "/collections/{id}/collection_products-bulk", "write_products"),
])
def test_a_token_without_the_scope_gets_403(api, method, path, scope):
    collection_id = create(api)["id"]
    token = api.token_with("read_customers")
    response = api.request(method, path.format(id=collection_id), json={}, token=token, version=V11)
    assert (response.status_code, response.json()) == (
        403, {"errors": f"This token lacks the scope this endpoint needs: {scope}"})


def test_read_products_reads_but_does_not_write(api):
    collection_id = create(api)["id"]
    token = api.token_with("read_products")
    assert api.get(f"/collections/{collection_id}", token=token, version=V01).status_code == 200
    assert api.get("/collection_products", params={"collection_id": collection_id}, token=token,
                   version=V11).status_code == 200
    assert api.put(f"/collections/{collection_id}", json={"title": "x"}, token=token, version=V11).status_code == 403


# The list ----------------------------------------------------------------------------------


def _ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.text
    return [row["id"] for row in response.json()["collections"]]


def test_the_list_is_newest_first_and_answers_each_version_shape(api):
    first, second = create(api, title="B")["id"], create(api, title="A")["id"]
    assert create(api.other_store())["id"]  # another store's is never listed
    reply = api.get("/collections", version=V11)
    assert _ids(reply) == [second, first]
    assert (reply.json()["next_cursor"], reply.json()["previous_cursor"]) == (None, None)
    old = api.get("/collections", version=V01)
    assert _ids(old) == [second, first] and set(old.json()) == {"collections"}
    assert old.json()["collections"][0]["created_at"] == stamp(api, naive=True)


def test_sorts_by_id_title_and_created_both_ways(api):
    c = create(api, title="Cherry")["id"]
    api.clock.advance(seconds=1)
    a = create(api, title="apple")["id"]
    api.clock.advance(seconds=1)
    b = create(api, title="Banana")["id"]
    expected = {"id-asc": [c, a, b], "id-desc": [b, a, c], "created-asc": [c, a, b], "created-desc": [b, a, c]}
    for sort, ids in expected.items():
        for version in (V01, V11):
            assert _ids(api.get("/collections", params={"sort_by": sort}, version=version)) == ids, sort
    # Title order is the database's own: compare with Python's order of the same titles per
    # database rule (byte order on SQLite, the collation on PostgreSQL) through the pairs that
    # both agree on.
    titled = _ids(api.get("/collections", params={"sort_by": "title-asc"}, version=V11))
    assert titled.index(b) < titled.index(c)  # Banana < Cherry in every collation
    assert _ids(api.get("/collections", params={"sort_by": "title-desc"}, version=V11)) == titled[::-1]


def test_a_bad_sort_names_the_allowed_values(api):
    allowed = "id-asc, id-desc, title-asc, title-desc, created-asc, created-desc"
    assert errors_of(api.get("/collections", params={"sort_by": "updated_at-asc"}, version=V11)) == {
        "sort_by": [f"Invalid value: updated_at-asc. Must be one of {allowed}"]}


def test_the_title_filter_selects_exact_titles(api):
    tea = create(api, title="Tea")["id"]
    create(api, title="Teas")
    create(api, title="tea")
    for version in (V01, V11):
        assert _ids(api.get("/collections", params={"title": "Tea"}, version=version)) == [tea]
    assert _ids(api.get("/collections", params={"title": "Nope"}, version=V11)) == []


@pytest.mark.parametrize("sort", ["id-desc", "title-asc", "title-desc", "created-asc"])
def test_cursors_walk_every_row_once_in_each_sort(vapi, sort):
    for title in ("Same", "Same", "Other", "Same", "Zed"):
        create(vapi, title=title)
    whole = _ids(vapi.get("/collections", params={"sort_by": sort, "limit": 250}))
    assert len(whole) == 5
    assert _walk(vapi, "collections", {"sort_by": sort}, vapi.version) == whole


def test_a_cursor_keeps_the_filter_and_a_bad_cursor_answers_422(api):
    for _ in range(3):
        create(api, title="Kept")
    create(api, title="Dropped")
    assert len(_walk(api, "collections", {"title": "Kept"}, V11)) == 3
    assert errors_of(api.get("/collections", params={"cursor": "nope"}, version=V11)) == {
        "cursor": ["Invalid value"]}
    reply = api.get("/collections", params={"limit": 1}, version=V11)
    cursor = reply.json()["next_cursor"]
    assert errors_of(api.get("/collections", params={"cursor": cursor, "title": "x"}, version=V11)) == {
        "title": ["cannot be combined with cursor; only limit can"]}


def test_a_title_cursor_with_a_boundary_that_is_no_text_is_invalid(api):
    import base64
    for boundary in ([5, 1, False], ["a\x00", 1, False], ["a" * 5000, 1, False]):
        payload = msgspec.json.encode({"r": "collections 2021-11 /collections", "q": {"sort_by": "title-asc"},
                                       "p": boundary})
        cursor = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        assert errors_of(api.get("/collections", params={"cursor": cursor}, version=V11)) == {
            "cursor": ["Invalid value"]}


def test_limit_and_page_follow_the_shared_rules(api):
    assert errors_of(api.get("/collections", params={"limit": 251}, version=V11)) == {
        "limit": ["must be an integer from 1 to 250"]}
    ids = [create(api, title=f"C{n}")["id"] for n in range(3)]
    assert _ids(api.get("/collections", params={"limit": 2, "page": 2}, version=V11)) == [ids[0]]


# Products in a collection ------------------------------------------------------------------


def test_bulk_add_answers_201_with_the_rows_of_the_products_sent(api):
    made = create(api)
    make_product(api, "p-1")
    make_product(api, "p-2")
    rows = add(api, made["id"], "p-2", "p-1")
    assert rows == [
        {"id": rows[0]["id"], "collection_id": made["id"], "external_product_id": "p-2", "created_at": stamp(api),
         "updated_at": stamp(api)},
        {"id": rows[1]["id"], "collection_id": made["id"], "external_product_id": "p-1", "created_at": stamp(api),
         "updated_at": stamp(api)},
    ]
    assert_fields(rows[0], [("id", {INT}), ("collection_id", {INT}), ("external_product_id", {STR}),
                            ("created_at", {DT_OFFSET}), ("updated_at", {DT_OFFSET})])
    assert members(api, made["id"]) == ["p-2", "p-1"]


def test_bulk_add_takes_numbers_and_nested_ids_and_each_product_once(api):
    made = create(api)
    make_product(api, "4501")
    make_product(api, "4502")
    rows = add(api, made["id"], 4501, {"ecommerce": "4502"}, "4501")
    assert [row["external_product_id"] for row in rows] == ["4501", "4502"]
    assert members(api, made["id"]) == ["4501", "4502"]


def test_adding_products_already_in_the_collection_changes_nothing(api):
    made = create(api)
    make_product(api, "p-1")
    first = add(api, made["id"], "p-1")
    api.clock.advance(minutes=1)
    assert add(api, made["id"], "p-1") == first
    assert fetch(api, made["id"])["updated_at"] == made["updated_at"]
    assert collection_events(api, made["id"]) == [("collection/created", made["id"]), ("collection/updated", made["id"])]


def test_a_change_of_products_is_a_collection_update(api):
    made = create(api)
    make_product(api, "p-1")
    api.clock.advance(minutes=1)
    add(api, made["id"], "p-1")
    assert fetch(api, made["id"])["updated_at"] == stamp(api)
    with api.db.read() as conn:
        changed = conn.execute(select(events.c.topic, events.c.updated_attributes).where(
            events.c.resource_id == made["id"], events.c.topic.like("collection/%")).order_by(events.c.id)).all()
    assert [tuple(row) for row in changed] == [("collection/created", None),
                                               ("collection/updated", ["collection_products"])]


def test_a_product_outside_the_catalog_answers_422_naming_it_and_nothing_is_added(api):
    made = create(api)
    make_product(api, "p-1")
    make_product(api.other_store(), "theirs")
    response = api.post(f"/collections/{made['id']}/collection_products-bulk", json=refs("p-1", "nope", "theirs"),
                        version=V11)
    assert errors_of(response) == {"collection_products": {
        "1": {"external_product_id": ["product nope is not in the catalog"]},
        "2": {"external_product_id": ["product theirs is not in the catalog"]}}}
    assert members(api, made["id"]) == []
    assert collection_events(api, made["id"]) == [("collection/created", made["id"])]


@pytest.mark.parametrize("body, errors", [
    ({}, {"collection_products": ["is required"]}),
    ({"collection_products": None}, {"collection_products": ["is required"]}),
    ({"collection_products": "p-1"}, {"collection_products": ["must be an array"]}),
    ({"collection_products": []}, {"collection_products": ["cannot be empty"]}),
    ({"collection_products": ["p-1"]}, {"collection_products": {"0": ["must be an object"]}}),
    ({"collection_products": [{}]}, {"collection_products": {"0": {"external_product_id": ["is required"]}}}),
    ({"collection_products": [{"external_product_id": True}, {"external_product_id": "x" * 65},
                              {"external_product_id": " "}, {"external_product_id": "²"}]},
     {"collection_products": {"0": {"external_product_id": ["must be a non-empty string or number"]},
                              "1": {"external_product_id": ["is too long (at most 64 characters)"]},
                              "2": {"external_product_id": ["must be a non-empty string or number"]},
                              "3": {"external_product_id": ["must contain only printable ASCII characters"]}}}),
    ({"collection_products": [{"external_product_id": "p"}] * 251},
     {"collection_products": ["has too many items (at most 250)"]}),
])
@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_bad_bulk_bodies_name_each_problem(api, method, body, errors):
    made = create(api)
    response = api.request(method, f"/collections/{made['id']}/collection_products-bulk", json=body, version=V11)
    assert errors_of(response) == errors


def test_bulk_delete_answers_204_and_passes_over_products_not_in_the_collection(api):
    made = create(api)
    for key in ("p-1", "p-2", "p-3"):
        make_product(api, key)
    add(api, made["id"], "p-1", "p-2", "p-3")
    response = api.delete(f"/collections/{made['id']}/collection_products-bulk", json=refs("p-1", "p-3", "nope"),
                          version=V11)
    assert (response.status_code, response.content) == (204, b"")
    assert members(api, made["id"]) == ["p-2"]
    again = api.delete(f"/collections/{made['id']}/collection_products-bulk", json=refs("p-1"), version=V11)
    assert again.status_code == 204
    assert [t for t, _ in collection_events(api, made["id"])] == ["collection/created", "collection/updated",
                                                         "collection/updated"]


def test_concurrent_adds_of_one_product_make_one_row_and_no_error(api):
    made = create(api)
    make_product(api, "p-1")
    path = f"/collections/{made['id']}/collection_products-bulk"
    replies = concurrently(api, [("POST", path, refs("p-1"))] * 6)
    assert [reply.status_code for reply in replies] == [201] * 6
    assert len({reply.json()["collection_products"][0]["id"] for reply in replies}) == 1
    assert members(api, made["id"]) == ["p-1"]


def test_a_product_deleted_while_it_joins_a_collection_is_either_in_it_or_gone(api):
    made = create(api)
    product = make_product(api, "p-1")
    path = f"/collections/{made['id']}/collection_products-bulk"
    replies = concurrently(api, [("POST", path, refs("p-1")), ("DELETE", "/products/p-1", None)])
    assert replies[1].status_code == 204, replies[1].text
    assert replies[0].status_code in (201, 422), replies[0].text
    assert members(api, made["id"]) == []
    assert api.get(f"/products/{product.id}", version=V01).status_code == 404


def test_collection_products_needs_a_collection_id_of_the_right_type(api):
    assert errors_of(api.get("/collection_products", version=V11)) == {"collection_id": ["is required"]}
    assert errors_of(api.get("/collection_products", params={"collection_id": "x"}, version=V11)) == {
        "collection_id": ["Invalid integer: x"]}


def test_collection_products_of_an_unknown_or_another_stores_collection_are_none(api):
    other = api.other_store()
    theirs = create(other)["id"]
    make_product(other, "p-1")
    add(other, theirs, "p-1")
    assert members(api, theirs) == []
    assert members(api, 999999999) == []


def test_collection_products_page_with_cursors_and_sort_both_ways(api):
    made = create(api)
    keys = [f"p-{n}" for n in range(5)]
    for key in keys:
        make_product(api, key)
    rows = add(api, made["id"], *keys)
    seen: list[str] = []
    params: dict[str, Any] = {"collection_id": made["id"], "limit": 2}
    while True:
        reply = api.get("/collection_products", params=params, version=V11).json()
        seen += [row["external_product_id"] for row in reply["collection_products"]]
        if not reply["next_cursor"]:
            break
        params = {"limit": 2, "cursor": reply["next_cursor"]}
    assert seen == keys
    reply = api.get("/collection_products", params={"collection_id": made["id"], "sort_by": "id-desc"}, version=V11)
    assert [row["id"] for row in reply.json()["collection_products"]] == [row["id"] for row in rows][::-1]


def test_a_product_deleted_from_the_catalog_leaves_its_collections(api):
    first, second = create(api)["id"], create(api, title="Two")["id"]
    product = make_product(api, "p-1")
    make_product(api, "p-2")
    add(api, first, "p-1", "p-2")
    add(api, second, "p-1")
    assert api.delete(f"/products/{product.id}", version=V01).status_code == 200
    assert members(api, first) == ["p-2"] and members(api, second) == []
    assert collection_events(api, second)[-1] == ("collection/updated", second)


# What the bundle variants use ----------------------------------------------------------------


def test_the_domain_answers_which_products_a_collection_holds(api):
    first, second = create(api)["id"], create(api, title="Two")["id"]
    theirs = create(api.other_store())["id"]
    make_product(api, "p-1")
    make_product(api, "p-2")
    add(api, first, "p-1", "p-2")
    with api.db.read() as conn:
        assert collections.external_product_ids_of(conn, api.store.id, [first, second, theirs]) == {
            first: frozenset({"p-1", "p-2"}), second: frozenset(), theirs: frozenset()}
        assert collections.contains(conn, api.store.id, first, "p-1")
        assert not collections.contains(conn, api.store.id, second, "p-1")
        assert collections.existing(conn, api.store.id, [first, second, theirs, 999999]) == {first, second}


# include=collections and webhook payloads (2021-01 products) ---------------------------------


def _legacy_product(api: Any, platform_id: int) -> int:
    reply = api.post("/products", json={"platform_product_id": platform_id, "title": "Tea"}, version=V01)
    assert reply.status_code == 200, reply.text
    return int(reply.json()["product"]["id"])


def test_a_2021_01_product_includes_its_collections(api):
    product_id = _legacy_product(api, 8001)
    bare = _legacy_product(api, 8002)
    first, second = create(api, title="One")["id"], create(api, title="Two")["id"]
    add(api, second, "8001")
    add(api, first, "8001")
    reply = api.get(f"/products/{product_id}", params={"include": "collections"}, version=V01)
    assert reply.status_code == 200, reply.text
    assert reply.json()["product"]["include"] == {"collections": [fetch(api, first, V01), fetch(api, second, V01)]}
    listed = api.get("/products", params={"include": "collections"}, version=V01).json()["products"]
    assert {p["id"]: len(p["include"]["collections"]) for p in listed} == {product_id: 2, bare: 0}


def test_a_product_list_with_collections_issues_the_same_statements_for_2_and_6_rows(api):
    from tests.api.test_includes_query_count import counting

    def statements(store: Any, rows: int) -> int:
        collection_id = create(store)["id"]
        for n in range(rows):
            _legacy_product(store, 8300 + n)
            add(store, collection_id, str(8300 + n))
        with counting(store.db) as seen:
            reply = store.get("/products", params={"include": "collections", "limit": 250}, version=V01)
        assert reply.status_code == 200 and len(reply.json()["products"]) == rows
        return len(seen)

    few, many = statements(api, 2), statements(api.other_store(), 6)
    assert few == many and few > 0


def test_2021_11_products_take_no_include(api):
    make_product(api, "p-1")
    assert errors_of(api.get("/products/p-1", params={"include": "collections"}, version=V11)) == {
        "include": ["Invalid value: collections. This resource takes no include values"]}


def test_a_2021_01_product_webhook_with_collections_carries_them(api):
    product_id = _legacy_product(api, 8101)
    collection_id = create(api, title="Teas")["id"]
    add(api, collection_id, "8101")
    reply = api.post("/webhooks", json={"address": "https://example.com/hooks", "topic": "product/updated",
                                        "included_objects": ["collections"]}, version=V01)
    assert reply.status_code == 200, reply.text
    assert api.put(f"/products/{product_id}", json={"title": "Green tea"}, version=V01).status_code == 200
    with api.db.read() as conn:
        [body] = conn.execute(select(webhook_payloads.c.body).where(webhook_payloads.c.store_id == api.store.id)
                              ).scalars()
    expected = api.get(f"/products/{product_id}", params={"include": "collections"}, version=V01).json()
    assert msgspec.json.decode(body) == expected
    assert expected["product"]["include"]["collections"] == [fetch(api, collection_id, V01)]


# Discounts for a collection -------------------------------------------------------------------


def _queued(api: Any, address_id: int) -> Any:
    [charge] = [c for c in charges_of(api, address_id) if c.status == "queued"]
    return charge


def _consistent(api: Any, address_id: int) -> None:
    with api.db.read() as conn:
        assert differences(Unit(conn, api.store, api.clock.now()), [address_id]) == []


def _two_lines(api: Any) -> Any:
    """An address whose queued charge has a line of product p-in (12.50) and one of p-out (8.00)."""
    make_product(api, "p-in")
    make_product(api, "p-out")
    address = make_address(api)
    when = api.clock.now().date() + timedelta(days=10)
    make_subscription(api, address, external_product_id="p-in", price=Decimal("12.50"), next_charge_scheduled_at=when)
    make_subscription(api, address, external_product_id="p-out", price=Decimal("8.00"), next_charge_scheduled_at=when)
    return address


def test_a_2021_01_code_for_a_collection_discounts_the_lines_of_its_products(api):
    collection_id = create(api)["id"]
    address = _two_lines(api)
    add(api, collection_id, "p-in")
    reply = api.post("/discounts", json={"code": "COLL50", "discount_type": "percentage", "value": "50",
                                         "applies_to_id": collection_id,
                                         "applies_to_resource": "platform_collection_id", "duration": "forever"}, version=V01)
    assert reply.status_code == 200, reply.text
    discount_id = reply.json()["discount"]["id"]
    assert api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id},
                    version=V01).status_code == 200
    charge = _queued(api, address.id)
    assert (charge.total_discounts, charge.total_price) == (Decimal("6.25"), Decimal("14.25"))
    _consistent(api, address.id)


def test_a_2021_11_code_for_a_collection_follows_the_collections_products(api):
    collection_id = create(api)["id"]
    address = _two_lines(api)
    reply = api.post("/discounts", json={"code": "COLL10", "value_type": "percentage", "value": "10",
                                         "applies_to": {"resource": "collection", "ids": [collection_id]}},
                     version=V11)
    assert reply.status_code == 201, reply.text
    discount_id = reply.json()["discount"]["id"]
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}, version=V11)
    # Empty collection: no line matches, so the charge carries no code (decisions §7.5).
    assert (_queued(api, address.id).discount_id, _queued(api, address.id).total_discounts) == (None, 0)
    add(api, collection_id, "p-out")
    charge = _queued(api, address.id)
    assert (charge.discount_id, charge.total_discounts, charge.total_price) == (
        discount_id, Decimal("0.80"), Decimal("19.70"))
    _consistent(api, address.id)
    add(api, collection_id, "p-in")
    assert _queued(api, address.id).total_discounts == Decimal("2.05")
    api.delete(f"/collections/{collection_id}/collection_products-bulk", json=refs("p-out"), version=V11)
    assert _queued(api, address.id).total_discounts == Decimal("1.25")
    _consistent(api, address.id)
    api.delete(f"/collections/{collection_id}", version=V11)
    assert (_queued(api, address.id).discount_id, _queued(api, address.id).total_discounts) == (None, 0)
    _consistent(api, address.id)


def _collection_code_on_two_lines(api: Any) -> tuple[int, Any]:
    """An address of two lines (p-in, p-out, both in a collection) holding a 10 % code for the
    collection: its collection's id and the address."""
    collection_id = create(api)["id"]
    address = _two_lines(api)
    add(api, collection_id, "p-in", "p-out")
    discount_id = make_discount(api, value="10", applies_to_id=str(collection_id),
                                applies_to_resource="platform_collection_id")
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}, version=V11)
    return collection_id, address


def test_a_product_leaving_the_catalog_leaves_the_collections_discount(api):
    collection_id, address = _collection_code_on_two_lines(api)
    assert _queued(api, address.id).total_discounts == Decimal("2.05")
    product_id = api.get("/products/p-out", version=V11).json()["product"]["id"]
    assert api.delete(f"/products/{product_id}", version=V01).status_code == 200
    assert _queued(api, address.id).total_discounts == Decimal("1.25")
    _consistent(api, address.id)


def test_a_collection_code_applied_to_a_charge_with_no_line_of_it_is_refused(api):
    collection_id = create(api)["id"]
    address = _two_lines(api)
    other = create(api, title="Other")["id"]
    add(api, other, "p-in")
    discount_id = make_discount(api, applies_to_id=str(collection_id), applies_to_resource="platform_collection_id")
    charge = _queued(api, address.id)
    assert errors_of(api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id})) == {
        "discount_id": ["discount applies to no line of this charge"]}
    add(api, collection_id, "p-in")
    assert api.post(f"/charges/{charge.id}/apply_discount", json={"discount_id": discount_id}).status_code == 200
    assert _queued(api, address.id).total_discounts == Decimal("1.25")


def test_a_code_naming_another_stores_collection_matches_nothing(api):
    other = api.other_store()
    theirs = create(other)["id"]
    make_product(other, "p-in")
    add(other, theirs, "p-in")
    address = _two_lines(api)
    discount_id = make_discount(api, applies_to_id=str(theirs), applies_to_resource="platform_collection_id")
    api.post(f"/addresses/{address.id}/apply_discount", json={"discount_id": discount_id}, version=V11)
    assert _queued(api, address.id).total_discounts == 0


def test_a_charge_in_retry_follows_its_codes_collection(api):
    """Found by an audit: a product taken out of the code's collection left the charges in
    retry with their discount on it until an unrelated edit recomputed them."""
    from sqlalchemy import update

    from rebill.models import charges
    collection_id, address = _collection_code_on_two_lines(api)
    charge_id = _queued(api, address.id).id
    with api.db.write() as conn:  # its payment failed (as the billing run records it)
        conn.execute(update(charges).where(charges.c.id == charge_id).values(status="error", retry_date=None))
    api.delete(f"/collections/{collection_id}/collection_products-bulk", json=refs("p-out"), version=V11)
    [retrying] = [c for c in charges_of(api, address.id) if c.id == charge_id]
    assert (retrying.status, retrying.total_discounts) == ("error", Decimal("1.25"))
