"""No input reaches a 500 (docs/api-choices.md, Hardening): property-based tests at the edge.

Every registered operation (``rebill.app.RESOURCES``, read when the tests run, so endpoints added
later are covered without touching this file) gets arbitrary bytes as a body, arbitrary query
strings, and JSON values of every kind in every field its version's schemas know. Whatever comes
back is below 500 and, when it is an error, in the one error shape of decisions §2.2:
``{"errors": str}`` or ``{"errors": {field: [str, ...] | {...}}}``. Both databases, as every API
test (the ``api`` fixture).
"""

from __future__ import annotations

import base64
import re
from datetime import timezone
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from rebill.api.fields import Field, Schema
from rebill.api.routing import Operation
from rebill.api.versions import VERSIONS
from rebill.app import RESOURCES
from rebill.models import metadata
from tests.builders import make_address, make_customer

# The file runs in about 15-20 s of CPU per database: a few hundred requests for the body
# property, 6-12 per operation and version for the others (derandomized: the same cases every
# run). The suite's time is kept well under CI's 15 minutes; schemathesis covers the same
# operations from their documents (tests/fuzz/), and `make fuzz` far longer.
_COMMON = {"deadline": None, "database": None, "derandomize": True,
           "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large]}
PROPERTY = settings(max_examples=300, **_COMMON)
PER_WRITE = settings(max_examples=12, **_COMMON)
PER_OPERATION = settings(max_examples=6, **_COMMON)
PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")
LIST_PARAMS = ("limit", "page", "cursor", "page_info", "sort_by", "include")


def _operations() -> list[Operation]:
    return [op for module in RESOURCES for op in module.endpoints.operations]


def _schemas(version: str) -> list[tuple[str, Schema]]:
    return sorted(VERSIONS[version].schemas.items(), key=lambda item: item[0])


def _field_names(schema: Schema) -> set[str]:
    names = set()
    for field in schema.fields:
        names.add(field.name)
        if isinstance(field.items, Schema):
            names |= _field_names(field.items)
    return names


ALL_FIELD_NAMES = sorted({name for version in VERSIONS for _, schema in _schemas(version)
                          for name in _field_names(schema)})
QUERY_NAMES = sorted({*LIST_PARAMS, *(name for version in VERSIONS.values() for contract in version.lists.values()
                                      for name in contract.filters)})

# Values -----------------------------------------------------------------------------------------

TEXT = st.text(max_size=12) | st.sampled_from(["", " ", "US", "CA", "GB", "JP", "94105", "a@example.com", "USD",
                                               "JPY", "true", "0", "-1", "1e400", "\x00", "٣", "²", "null"])
NUMBERS = (st.integers() | st.integers(min_value=-(10**40), max_value=10**40)
           | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0, -1, 2**63, 2**63 - 1, 10**400]))
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON = st.recursive(SCALARS, lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(TEXT | st.sampled_from(ALL_FIELD_NAMES), children, max_size=3), max_leaves=8)
DECIMAL_TEXT = (st.decimals(min_value=-(10**13), max_value=10**13, allow_nan=False, allow_infinity=False,
                            places=3).map(str)
                | st.sampled_from(["0", "12.50", "999999999999.99", "999999999999.995", "1e3", "1_000", "-0"]))


# Likely values by a word of the field's name: only a bias towards bodies that pass validation
# and reach the domain; every other field and value is still drawn.
HINTS = {
    "email": st.from_regex(r"[a-z]{1,8}@example\.com", fullmatch=True),
    "country": st.sampled_from(["US", "CA", "GB", "JP", "United States", "ZZ"]),
    "zip": st.sampled_from(["94105", "K1A 0B1", "SW1A 1AA", "100-0001", "00000"]),
    "province": st.sampled_from(["CA", "ON", "California", "Tokyo", "XX"]),
    "state": st.sampled_from(["CA", "NY", "XX"]),
    "currency": st.sampled_from(["USD", "JPY", "KWD", "EUR", "XXX"]),
    "phone": st.sampled_from(["", "+14155550100"]),
}
NAMES = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)


def _plausible(field: Field, ids: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    """A value of the field's own kind, so that bodies get past validation into the domain."""
    kind = field.kind
    if field.choices:
        return st.sampled_from(sorted(field.choices))
    if kind == "str":
        hint = next((h for word, h in HINTS.items() if word in field.name), None)
        return hint if hint is not None else NAMES
    if kind == "int":
        return ids | st.integers(min_value=-1, max_value=2**63) | ids.map(str)
    if kind == "bool":
        return st.booleans()
    if kind in ("decimal", "money"):
        return DECIMAL_TEXT | st.floats(min_value=-1e13, max_value=1e13) | st.integers(-10, 10**13)
    if kind == "date":
        return st.dates().map(lambda d: d.isoformat())
    if kind == "object":
        if isinstance(field.items, Schema):
            return _body(field.items, ids, "plausible")
        return st.dictionaries(NAMES, NAMES | st.integers() | st.booleans(), max_size=3)
    if kind == "list":
        if isinstance(field.items, Schema):
            return st.lists(_body(field.items, ids, "plausible"), max_size=3)
        if isinstance(field.items, str):
            return st.lists(_plausible(Field("item", field.items), ids), max_size=3)
        return st.lists(JSON, max_size=3)
    return JSON


def _body(schema: Schema, ids: st.SearchStrategy[int], mode: str) -> st.SearchStrategy[dict[str, Any]]:
    """``plausible``: every required field of its kind, the others of their kind, null or left
    out; ``arbitrary``: any JSON, null or nothing in every field."""
    def value(field: Field) -> st.SearchStrategy[Any]:
        if mode != "plausible":
            return st.none() | JSON | st.just(...)
        if field.required:
            return _plausible(field, ids)
        return _plausible(field, ids) | (st.none() if field.nullable else st.nothing()) | st.just(...)
    parts = {field.name: value(field) for field in schema.fields}
    return st.fixed_dictionaries(parts).map(lambda body: {k: v for k, v in body.items() if v is not ...})


@st.composite
def _fields_body(draw: Any, version: str, path: str, ids: st.SearchStrategy[int]) -> dict[str, Any]:
    """A body for one of the version's schemas (most often one named after the path's
    resource), with every field plausible, all but one plausible, or every field arbitrary."""
    schemas = _schemas(version)
    own = [s for name, s in schemas if name.split(".")[0].split("_")[0] in path]
    schema = draw(st.sampled_from(own) if own and draw(st.integers(0, 3)) else st.sampled_from([s for _, s in schemas]))
    mode = draw(st.sampled_from(["plausible", "one_bad", "arbitrary"]))
    body = draw(_body(schema, ids, "arbitrary" if mode == "arbitrary" else "plausible"))
    if mode == "one_bad" and schema.fields:
        field = draw(st.sampled_from(schema.fields))
        body[field.name] = draw(JSON)
    extra = draw(st.dictionaries(st.sampled_from(ALL_FIELD_NAMES) | TEXT, JSON, max_size=2))
    return {**extra, **body}


def _cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(value)).rstrip(b"=").decode()


def _query(ids: st.SearchStrategy[int]) -> st.SearchStrategy[list[tuple[str, str]]]:
    boundary = st.lists(JSON | st.datetimes(timezones=st.just(timezone.utc)).map(lambda d: d.isoformat())
                        | st.sampled_from(["0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00"]), max_size=4)
    cursor = (st.builds(lambda r, q, p: _cursor({"r": r, "q": q, "p": p}),
                        st.sampled_from(["customers", "customers 2021-11 /customers", "addresses 2021-01 /addresses",
                                         "x"]),
                        st.dictionaries(st.sampled_from(QUERY_NAMES), TEXT, max_size=3), boundary)
              | JSON.map(_cursor) | TEXT)
    sorts = st.sampled_from(sorted({f"{s}-{d}" for v in VERSIONS.values() for c in v.lists.values()
                                    for s in c.sorts for d in ("asc", "desc")}))
    value = (TEXT | ids.map(str) | st.integers().map(str) | st.dates().map(str) | sorts | cursor
             | st.lists(ids.map(str), max_size=4).map(",".join) | st.text(max_size=40))
    return st.lists(st.tuples(st.sampled_from(QUERY_NAMES) | TEXT, value), max_size=4)


RAW_BODIES = (st.binary(max_size=64)
              | JSON.map(msgspec.json.encode)
              | st.text(max_size=40).map(str.encode)
              | st.builds(lambda n, b: b * n, st.integers(0, 2000), st.sampled_from([b"[", b"{", b'{"a":', b"]", b'"']))
              | st.sampled_from([b"", b"{}", b"[]", b"null", b'{"a": 1e400}', b'{"a": "\xff"}', b"\xff\xfe",
                                 b'{"a": ' + b"9" * 5000 + b"}", b'{"a": "\\ud800"}']))

# Checks ----------------------------------------------------------------------------------------


def _field_errors(errors: Any) -> bool:
    return isinstance(errors, dict) and bool(errors) and all(
        isinstance(key, str) and (
            (isinstance(messages, list) and bool(messages) and all(isinstance(m, str) for m in messages))
            or _field_errors(messages))
        for key, messages in errors.items())


def _check(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what} -> {response.status_code} {response.text[:300]}"
    if response.status_code == 204:
        assert response.content == b"", what
        return
    body = response.json()
    if response.status_code >= 400:
        assert isinstance(body, dict) and set(body) == {"errors"}, f"{what} -> {body!r}"[:500]
        errors = body["errors"]
        assert (isinstance(errors, str) and errors) or _field_errors(errors), f"{what} -> {body!r}"[:500]


# Targets ---------------------------------------------------------------------------------------


def _table_for(param: str) -> Any:
    """``customer_id`` -> the ``customers`` table, if there is one."""
    stem = param.removesuffix("_id")
    for name in (f"{stem}s", f"{stem}es", f"{stem[:-1]}ies"):
        if name in metadata.tables:
            return metadata.tables[name]
    return None


@pytest.fixture
def known(api: Any) -> dict[str, list[int]]:
    """Ids of real rows for every path parameter: the test store's own rows first, then any
    other store's (which must answer 404, decisions §1.1)."""
    customer = make_customer(api)
    make_address(api, customer)
    other = api.other_store()
    make_address(other, make_customer(other))
    found: dict[str, list[int]] = {}
    names = {name for op in _operations() for name in PARAM.findall(op.path)}
    with api.db.read() as conn:
        for name in sorted(names):
            table = _table_for(name)
            if table is None:
                continue
            stmt = select(table.c.id)
            if "store_id" in table.c:
                stmt = stmt.order_by((table.c.store_id == api.store.id).desc(), table.c.id.desc())
            found[name] = [row.id for row in conn.execute(stmt.limit(6))]
    return found


def _ids(known: dict[str, list[int]]) -> st.SearchStrategy[int]:
    every = sorted({i for ids in known.values() for i in ids})
    return (st.sampled_from(every) if every else st.nothing()) | st.integers(1, 10**18 - 1)


def _path(draw: Any, known: dict[str, list[int]], operation: Operation) -> str:
    """The operation's path with each parameter an id of a real row (of its own table if one
    is found by name, else of any) or a random one. A delete gets random ids only, so that the
    rows stay for the other examples."""
    def fill(match: re.Match[str]) -> str:
        if operation.method == "DELETE":
            return str(draw(st.integers(1, 10**18 - 1)))
        real = known.get(match[1]) or sorted({i for ids in known.values() for i in ids})
        return str(draw(st.sampled_from(real) | st.integers(1, 10**18 - 1) if real else st.integers(1, 10**18 - 1)))
    return PARAM.sub(fill, operation.path)


def _cases(*methods: str) -> list[Any]:
    """One case per operation and version, read from the route table at collection."""
    return [pytest.param(op, version, id=f"{op.method} {op.path} {version}")
            for op in _operations() if op.method in methods for version in sorted(op.versions)]


# Properties ------------------------------------------------------------------------------------


def test_the_route_table_is_read_from_the_registered_resources():
    """The properties below cover whatever ``RESOURCES`` registers, writes included."""
    operations = _operations()
    assert {op.method for op in operations} >= {"GET", "POST", "PUT", "DELETE"}
    assert all(op.path.startswith("/") for op in operations)
    assert len(_cases("POST", "PUT")) >= len([op for op in operations if op.method in ("POST", "PUT")])


@PROPERTY
@given(data=st.data())
def test_arbitrary_bytes_as_the_body_of_any_write_never_answer_5xx(api, known, data):
    """The body is read before any handler runs: one property over all writes at random."""
    operation, version = data.draw(st.sampled_from([case.values for case in _cases("POST", "PUT")]))
    path = _path(data.draw, known, operation)
    raw = data.draw(RAW_BODIES)
    response = api.request(operation.method, path, content=raw, version=version,
                           headers={"Content-Type": "application/json"})
    _check(response, f"{operation.method} {path} ({version}) body={raw[:200]!r}")


@pytest.mark.parametrize("operation,version", _cases("POST", "PUT"))
@PER_WRITE
@given(data=st.data())
def test_arbitrary_json_in_every_field_of_every_write_never_answers_5xx(api, known, operation, version, data):
    path = _path(data.draw, known, operation)
    body = data.draw(_fields_body(version, path, _ids(known)))
    raw = msgspec.json.encode(body)
    response = api.request(operation.method, path, content=raw, version=version,
                           headers={"Content-Type": "application/json"})
    _check(response, f"{operation.method} {path} ({version}) body={raw[:300]!r}")


@pytest.mark.parametrize("operation,version", _cases("GET", "DELETE", "POST", "PUT"))
@PER_OPERATION
@given(data=st.data())
def test_arbitrary_query_strings_on_every_operation_never_answer_5xx(api, known, operation, version, data):
    path = _path(data.draw, known, operation)
    params = data.draw(_query(_ids(known)))
    response = api.request(operation.method, path, params=params, version=version, content=b"{}")
    _check(response, f"{operation.method} {path} ({version}) params={params!r}"[:500])
