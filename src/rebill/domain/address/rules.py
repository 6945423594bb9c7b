"""Validation of an address's location against the store (spec 01 Addresses create body,
spec 02 "Validation on create and update", decisions §4). Runs on the complete address
after an update is merged, so a create and an update obey the same rules."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

from rebill.errors import ValidationFailed, add_error

from ..geo import (
    COUNTRIES_NOT_REQUIRING_ZIP,
    COUNTRIES_REQUIRING_PROVINCE,
    country,
    find_province,
    subdivisions,
    zip_problem,
)
from ..store.model import Store
from .verifier import AddressVerifier

# The ISO 3166-2 names carry words that the names clients send leave out: generic words of a
# kind of subdivision (`Beijing Shi`, `Guangdong Sheng`, `Wilayah Persekutuan Kuala Lumpur`,
# `Jakarta Raya`) and a second name in brackets (`Barcelona [Barcelona]`).
_GENERIC = re.compile(r"^(wilayah persekutuan) | (sheng|shi|zizhiqu|huizu zizhiqu|zhuangzu zizhiqu|uygur zizhiqu|"
                      r"sar|raya)$")
_BRACKETS = re.compile(r"^(.*?)\s*\[(.*)\]$")
# English names that are no spelling of the ISO one, for the countries of decisions §4.1
# (the subdivision codes of ISO 3166-2).
_ENGLISH = {
    "AE": {"abu dhabi": "AZ", "dubai": "DU", "sharjah": "SH", "ajman": "AJ", "fujairah": "FU",
           "ras al khaimah": "RK", "umm al quwain": "UQ"},
    "CN": {"inner mongolia": "NM", "tibet": "XZ"},
    "MY": {"penang": "07", "malacca": "04", "labuan": "15", "putrajaya": "16"},
    "ID": {"dki jakarta": "JK"},
}


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.strip())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).casefold().split())


@lru_cache(maxsize=64)
def _common_names(code: str) -> dict[str, tuple[str, str]]:
    """Folded common name -> (short code, name) for the subdivisions of a country, besides the
    codes and ISO names that ``geo.find_province`` already knows."""
    by_code = {short: (short, name) for short, name in subdivisions(code).values()}
    names: dict[str, tuple[str, str]] = {}
    for short, name in by_code.values():
        folded = _fold(name)
        bracketed = _BRACKETS.match(folded)
        for key in ([bracketed[1], bracketed[2]] if bracketed else [folded]):
            names.setdefault(_GENERIC.sub("", key), (short, name))
    for alias, short in _ENGLISH.get(code, {}).items():
        if short in by_code:
            names.setdefault(alias, by_code[short])
    return names


def province_of(code: str, given: str) -> tuple[str, str] | None:
    """NOTE: decisions §4.1, (code, name) of the subdivision given by code, ISO name or common
    name (`Beijing`, `Dubai`), else None."""
    return find_province(code, given) or _common_names(code).get(_fold(given))


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
            found = province_of(code, province)
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


def check_zip_follows_country(current_country: str | None, current_zip: str | None, sent: dict[str, Any]) -> None:
    """NOTE: spec 01 Addresses update, a country change needs a zip change in the same request;
    into a country without postal codes (decisions §4.2) a zip sent empty or null is that change,
    even from another such country (found by an audit: it was refused as the same). An address
    and an order's shipping address (order/service.py) obey it alike."""
    new = (sent.get("country_code") or "").upper()
    if not new or new == (current_country or "").upper():
        return  # no country change (an unknown or missing one is check_location's to refuse)
    given = (sent.get("zip") or "").strip()
    no_zip = new in COUNTRIES_NOT_REQUIRING_ZIP and "zip" in sent and not given
    if "zip" not in sent or (given == (current_zip or "").strip() and not no_zip):
        raise ValidationFailed.field("zip", "must be changed when the country changes")


def check_presentment_currency(store: Store, currency: str | None) -> str:
    """NOTE: spec 01, defaults to the store currency; must be one the store presents in."""
    if currency is None:
        return store.currency
    if currency.upper() not in store.currencies:
        raise ValidationFailed.field("presentment_currency", "is not a currency enabled for the store")
    return currency.upper()
