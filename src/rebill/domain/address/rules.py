"""Validation of an address's location against the store (spec 01 Addresses create body,
spec 02 "Validation on create and update", decisions §4). Runs on the complete address
after an update is merged, so a create and an update obey the same rules."""

from __future__ import annotations

from typing import Any

from rebill.errors import ValidationFailed, add_error

from ..geo import COUNTRIES_REQUIRING_PROVINCE, country, find_province, zip_problem
from ..store.model import Store
from .verifier import AddressVerifier


def check_location(store: Store, verifier: AddressVerifier, values: dict[str, Any]) -> dict[str, Any]:
    """Returns ``values`` with the province normalized to its subdivision name."""
    errors: dict[str, list[str]] = {}
    code = (values.get("country_code") or "").upper()
    values = {**values, "country_code": code}
    if country(code) is None:
        add_error(errors, "country_code", "is not a valid country code")
        raise ValidationFailed(errors)
    # NOTE: spec 01 Addresses, the store must ship to the country.
    if code not in store.ships_to:
        add_error(errors, "country_code", "is not a country the store ships to")

    province = values.get("province")
    if code in COUNTRIES_REQUIRING_PROVINCE:
        # NOTE: decisions §4.1, a valid subdivision (code or name) is required.
        if not province or not province.strip():
            add_error(errors, "province", "is required for this country")
        else:
            found = find_province(code, province)
            if found is None:
                add_error(errors, "province", "is not a valid province or state of the country")
            else:
                values["province"] = found[1]

    if values.get("zip") is not None:
        values["zip"] = values["zip"].strip()
    problem = zip_problem(code, values.get("zip"))
    if problem:
        add_error(errors, "zip", problem)

    if code == "US" and not errors:
        # NOTE: spec 02, US addresses are also checked with the carrier address service.
        verdict = verifier.verify(address1=values["address1"], city=values["city"],
                                  province=values["province"], zip=values["zip"])
        for field, messages in verdict.errors.items():
            for message in messages:
                add_error(errors, field, message)
    if errors:
        raise ValidationFailed(errors)
    return values


def check_presentment_currency(store: Store, currency: str | None) -> str:
    """NOTE: spec 01, defaults to the store currency; must be one the store presents in."""
    if currency is None:
        return store.currency
    if currency.upper() not in store.currencies:
        raise ValidationFailed.field("presentment_currency", "is not a currency enabled for the store")
    return currency.upper()
