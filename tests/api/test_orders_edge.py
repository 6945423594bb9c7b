"""No input reaches a 500 on the order endpoints with real orders of the caller's store (the
shared property tests of ``test_edge_properties.py`` rarely find one): arbitrary JSON in every
field of every order write, and arbitrary query strings on every order operation."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.api.test_edge_properties import (
    PER_OPERATION,
    PER_WRITE,
    _cases,
    _check,
    _fields_body,
    _ids,
    _path,
    _query,
)
from tests.api.test_orders import prepaid


def _order_cases(*methods: str) -> list[Any]:
    return [case for case in _cases(*methods) if case.values[0].path.startswith("/orders")]


@pytest.fixture
def real(api: Any) -> dict[str, list[int]]:
    """A paid order and two queued ones (prepaid), so the bodies reach the order's rules."""
    return {"order_id": [o.id for o in prepaid(api)]}


@pytest.mark.parametrize("operation,version", _order_cases("POST", "PUT"))
@PER_WRITE
@given(data=st.data())
def test_arbitrary_json_in_every_field_of_an_order_write_never_answers_5xx(api, real, operation, version, data):
    path = _path(data.draw, real, operation)
    body = data.draw(_fields_body(version, path, _ids(real)))
    raw = msgspec.json.encode(body)
    response = api.request(operation.method, path, content=raw, version=version,
                           headers={"Content-Type": "application/json"})
    _check(response, f"{operation.method} {path} ({version}) body={raw[:300]!r}")


@pytest.mark.parametrize("operation,version", _order_cases("GET", "DELETE", "POST", "PUT"))
@PER_OPERATION
@given(data=st.data())
def test_arbitrary_query_strings_on_every_order_operation_never_answer_5xx(api, real, operation, version, data):
    path = _path(data.draw, real, operation)
    params = data.draw(_query(_ids(real)))
    response = api.request(operation.method, path, params=params, version=version, content=b"{}")
    _check(response, f"{operation.method} {path} ({version}) params={params!r}"[:500])
