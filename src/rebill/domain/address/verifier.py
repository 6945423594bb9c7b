"""The US address verifier of decisions §4.4 ("external carrier address service").

It is an interface so an operator can plug a real carrier service in; the default works
offline from the ``zipcodes`` package: the zip must exist and belong to the given state.
"""

from __future__ import annotations

from typing import Protocol

import msgspec
import zipcodes

from ..geo import find_province


class Verification(msgspec.Struct, kw_only=True):
    city: str | None
    state: str | None
    state_name: str | None
    zipcode: str
    errors: dict[str, list[str]]


class AddressVerifier(Protocol):
    def verify(self, *, address1: str, city: str, state: str, zipcode: str) -> Verification: ...


class OfflineZipVerifier:
    def verify(self, *, address1: str, city: str, state: str, zipcode: str) -> Verification:
        errors: dict[str, list[str]] = {}
        province = find_province("US", state) if state.strip() else None
        if province is None:
            errors["state"] = ["is not a United States state"]
        zip5 = zipcode.strip()[:5]
        records = zipcodes.matching(zip5) if zip5.isdigit() and len(zip5) == 5 else []
        if not records:
            errors["zipcode"] = ["does not exist"]
        elif province is not None and all(r["state"] != province[0] for r in records):
            errors["zipcode"] = [f"does not belong to {province[1]}"]
        record = records[0] if records else None
        return Verification(
            city=record["city"] if record else None,
            state=province[0] if province else (record["state"] if record else None),
            state_name=province[1] if province else None,
            zipcode=zipcode.strip(),
            errors=errors,
        )
