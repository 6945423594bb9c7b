"""Helpers shared by the address contract tests (no tests here).

Bodies, creation in either version, event and list helpers, and a fixture-free way to
move the shared frozen clock and put it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from rebill.domain.address import service as address_service
from rebill.domain.address.model import AddressCreate
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.domain.unit import Unit
from tests.builders import events_of

V01, V11 = "2021-01", "2021-11"
NOT_FOUND = {"errors": "Not Found"}
NOT_IN_VERSION = 501

OFFSET_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$")
NAIVE_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")


def us_fields(**overrides: Any) -> dict[str, Any]:
    """A valid US location plus names and phone, without customer_id (both versions)."""
    return {"address1": "101 Market St", "city": "San Francisco", "country_code": "US", "province": "CA",
            "zip": "94105", "first_name": "Ada", "last_name": "Lovelace", "phone": "+14155550100",
            **overrides}


def create(api: Any, customer: Any, version: str | None = None, **fields: Any) -> Any:
    """POST the address through the create endpoint of ``version`` (default: the api's).

    Fields whose value is ``...`` are left out of the body."""
    version = version or api.version
    if version == V11:
        fields = {"customer_id": customer.id, **fields}
    body = {k: v for k, v in us_fields(**fields).items() if v is not ...}
    if version == V11:
        return api.post("/addresses", json=body, version=V11)
    return api.post(f"/customers/{customer.id}/addresses", json=body, version=V01)


def created(api: Any, customer: Any, version: str | None = None, **fields: Any) -> dict[str, Any]:
    response = create(api, customer, version, **fields)
    expected = 201 if (version or api.version) == V11 else 200
    assert response.status_code == expected, response.text
    return response.json()["address"]


def fmt11(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S+00:00")


def fmt01(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def address_events(api: Any, address_id: int | None = None) -> list[tuple[str, int]]:
    return [(t, i) for t, i in events_of(api, address_id) if t.startswith("address/")]


def ids(response: Any, plural: str = "addresses") -> list[int]:
    assert response.status_code == 200, response.text
    return [row["id"] for row in response.json()[plural]]


def bulk_addresses(api: Any, customer: Any, n: int, **overrides: Any) -> list[int]:
    """``n`` addresses created through the domain service in one transaction (fast)."""
    values = {"customer_id": customer.id, **us_fields(**overrides)}
    made = []
    with api.db.write() as conn:
        unit = Unit(conn, api.store, api.clock.now())
        for _ in range(n):
            made.append(address_service.create(unit, OfflineZipVerifier(), AddressCreate(**values)).id)
    return made


@contextmanager
def clock_kept(api: Any) -> Iterator[Any]:
    """Lets a test move the session's frozen clock and puts it back afterwards."""
    start = api.clock.now()
    try:
        yield api.clock
    finally:
        api.clock.set(start)


def link_targets(header: str) -> dict[str, str]:
    """rel -> URL of a Link header."""
    found = re.findall(r'<([^>]+)>;\s*rel="([a-z]+)"', header)
    return {rel: url for url, rel in found}
