"""The store's shipping and tax rates for an address (decisions §5.9).

Store settings (``stores.shipping_rates``, ``stores.tax_rates``; docs/api-choices.md):

- a shipping rate is ``{"code", "title", "price", "country_codes": [...], "currency"}``; it
  applies to an address in one of ``country_codes`` (absent or empty: every country) and, when
  ``currency`` is given, to charges in that currency only. A rate for the country wins over a
  rate for every country, and then a rate in the charge's currency over one naming none; the
  first listed wins among equals.
- a tax rate is ``{"country_code", "province", "rate", "title"}``; a rate for the address's
  province (by name or code) wins over the country's rate (``province`` absent or null).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..geo import find_province


def applicable(rates: list[dict[str, Any]], country_code: str, currency: str) -> list[dict[str, Any]]:
    """Every rate for an address in ``country_code`` charged in ``currency``, in the order they
    win: the country's own rates, then those for every country; within each, the rates priced in
    ``currency`` before those that name no currency (found by an audit: a plain `5.00` listed
    first beat a rate of `700` yen for a yen charge, which paid 5 yen); each in listed order (a
    checkout lists them all, decisions §7.7.5)."""
    tiers: tuple[list[dict[str, Any]], ...] = ([], [], [], [])
    for rate in rates:
        named = rate.get("currency")
        if named and named != currency:
            continue
        countries = rate.get("country_codes") or []
        if country_code in countries or not countries:
            tiers[(0 if countries else 2) + (0 if named else 1)].append(rate)
    return [rate for tier in tiers for rate in tier]


def shipping_line(rates: list[dict[str, Any]], country_code: str, currency: str) -> dict[str, Any] | None:
    found = applicable(rates, country_code, currency)
    return found[0] if found else None


def tax_rate(rates: list[dict[str, Any]], country_code: str, province: str | None) -> dict[str, Any] | None:
    mine = [rate for rate in rates if rate.get("country_code") == country_code]
    # The address's province is looked up only when a rate names one: every charge of a plan
    # asks, and most stores have no provincial rate.
    own = (find_province(country_code, province)
           if province and any(rate.get("province") for rate in mine) else None)
    country_rate = None
    for rate in mine:
        # A blank province is the country's rate too (stores whose rates were set before the
        # command line stored a blank one as none).
        wanted = rate.get("province") or None
        if wanted is None:
            country_rate = country_rate or rate
        elif own is not None and find_province(country_code, wanted) == own:
            return rate
        elif own is None and province and wanted.strip().casefold() == province.strip().casefold():
            return rate
    return country_rate


def rate_value(rate: dict[str, Any] | None) -> Decimal | None:
    return Decimal(str(rate["rate"])) if rate else None


def rate_text(rate: dict[str, Any]) -> str:
    """A tax line's `rate` as a decimal string in positional form: a rate stored as `0E-7` or
    `1E-8` (how Python writes some small decimals) renders `0.0000000`, `0.00000001`."""
    return format(Decimal(str(rate["rate"])), "f")
