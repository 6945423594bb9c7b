"""The US address verifier of decisions §4.4 ("external carrier address service").

It is an interface so an operator can plug a real carrier service in; the default works
offline from the ``zipcodes`` package: the zip must exist and belong to the given state.
"""

from __future__ import annotations

import re
from typing import Protocol

import msgspec
import zipcodes

from ..geo import find_province

US_ZIP5 = re.compile(r"[0-9]{5}", re.ASCII)


class Verification(msgspec.Struct, kw_only=True):
    """What the carrier service says of a US address; errors are keyed by address field."""

    city: str | None
    province_code: str | None
    province_name: str | None
    zip: str
    errors: dict[str, list[str]]


class AddressVerifier(Protocol):
    def verify(self, *, address1: str, city: str, province: str, zip: str) -> Verification: ...


class OfflineZipVerifier:
    def verify(self, *, address1: str, city: str, province: str, zip: str) -> Verification:
        errors: dict[str, list[str]] = {}
        found = find_province("US", province) if province.strip() else None
        if found is None:
            errors["province"] = ["is not a United States state"]
        zip5 = zip.strip()[:5]
        # Only ASCII digits reach the zipcodes package: other digits make its native code panic.
        records = zipcodes.matching(zip5) if US_ZIP5.fullmatch(zip5) else []
        if not records:
            errors["zip"] = ["does not exist"]
        elif found is not None and all(r["state"] != found[0] for r in records):
            errors["zip"] = [f"does not belong to {found[1]}"]
        record = records[0] if records else None
        # The state the zip gives when the one sent is none: its code and its name together
        # (found by an audit: the code with a null name).
        shown = found or (find_province("US", record["state"]) if record else None)
        return Verification(
            city=record["city"] if record else None,
            province_code=shown[0] if shown else (record["state"] if record else None),
            province_name=shown[1] if shown else None,
            zip=zip.strip(),
            errors=errors,
        )
