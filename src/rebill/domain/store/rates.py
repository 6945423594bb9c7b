"""Changing a store's shipping rates, tax rates and ``taxes_included`` (decisions §5.9), an
operator action (``rebill stores rates``). Every queued charge of the store depends on them,
so the change replans every address of the store in the same transaction, and recomputes its
charges in retry (docs/api-choices.md, "A subscription that a charge in retry holds")."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import Connection, update

from rebill.errors import ValidationFailed, add_error
from rebill.models import stores

from ..charge import errored
from ..geo import country, find_province, subdivisions
from ..money import places_problem
from ..unit import Unit
from . import repository
from .model import Store


def _amount(value: Any, *, rate: bool) -> str | None:
    """The number in positional form (`1e-8` is `0.00000001`, never `1E-8`: how it is stored
    and shown), or None when it is no finite number in range."""
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    # `-0` is refused as the API refuses `-0.00` (found by an audit: charges showed "-0.00").
    if not number.is_finite() or number.is_signed() or (rate and number >= 1) or abs(number) >= 10**12:
        return None
    return format(number, "f")


def check_shipping(rates: list[dict[str, Any]], store: Store) -> list[dict[str, Any]]:
    """A rate naming a currency applies to charges in it, one naming none to charges in any
    currency of the store, as written (charge/rates.py): its price must be exact in each."""
    errors: dict[str, Any] = {}
    clean = []
    for index, rate in enumerate(rates):
        price = _amount(rate.get("price"), rate=False)
        countries = [c.upper() for c in rate.get("country_codes") or []]
        named = str(rate.get("currency") or "").strip().upper() or None
        if named is not None and named not in store.currencies:
            add_error(errors, f"{index}.currency", f"must be one of the store's currencies: "
                                                   f"{', '.join(sorted(store.currencies))}")
        elif price is None:
            add_error(errors, f"{index}.price", "must be a non-negative amount")
        else:
            # Never rounded silently when a charge is priced (found by audits: 5.005 was 5.01,
            # and a rate of 4.99 with no currency was 5 on a charge in yen, 0.40 free shipping).
            for currency in [named] if named else [store.currency, *sorted(store.presentment_currencies)]:
                if problem := places_problem(Decimal(price), currency):
                    add_error(errors, f"{index}.price", problem + ("" if named else (
                        "; a rate that names no currency applies in every currency of the store: "
                        "give this one a currency, and another rate for " + currency)))
                    break
        if any(country(c) is None for c in countries):
            add_error(errors, f"{index}.country_codes", "must be 2-letter country codes")
        clean.append({"code": rate.get("code") or "standard", "title": rate.get("title") or "Shipping",
                      "price": price, "country_codes": countries, "currency": named})
    if errors:
        raise ValidationFailed({"shipping_rates": errors})
    return clean


def _province_key(code: str, province: str | None) -> str | None:
    """The province as a rate names it, whatever the name given (its ISO code when known)."""
    if province is None:
        return None
    found = find_province(code, province) if country(code) is not None else None
    return found[0] if found is not None else province.casefold()


def check_tax(rates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    errors: dict[str, Any] = {}
    clean = []
    seen: set[tuple[str, str | None]] = set()
    for index, rate in enumerate(rates):
        value = _amount(rate.get("rate"), rate=True)
        code = str(rate.get("country_code") or "").upper()
        if value is None:
            add_error(errors, f"{index}.rate", "must be a fraction from 0 to 1 (0.0725 for 7.25 %)")
        if country(code) is None:
            add_error(errors, f"{index}.country_code", "must be a 2-letter country code")
        # A blank province (`US:0.0725::US tax` on the command line) is the whole country's rate.
        province = str(rate.get("province") or "").strip() or None
        if province and country(code) is not None and subdivisions(code) and find_province(code, province) is None:
            # A rate no address could match (found by an audit: `US:0.0725:XX` was kept). A
            # country without subdivision data takes any name, as its addresses do.
            add_error(errors, f"{index}.province", f"is not a province of {code}")
        where = (code, _province_key(code, province))
        if where in seen:
            # Which of the two would apply? Refused (found by audits: `CA` and `ca`, then `CA`
            # and `California` or `US-CA`, one province under two names, the first one winning).
            add_error(errors, f"{index}.province", "a rate for this country and province is given already")
        seen.add(where)
        clean.append({"country_code": code, "province": province, "rate": value,
                      "title": rate.get("title") or "Tax"})
    if errors:
        raise ValidationFailed({"tax_rates": errors})
    return clean


def update_rates(conn: Connection, unit_now: Any, store: Store, *, shipping_rates: list[dict[str, Any]] | None = None,
                 tax_rates: list[dict[str, Any]] | None = None, taxes_included: bool | None = None) -> Store:
    values: dict[str, Any] = {}
    if shipping_rates is not None:
        values["shipping_rates"] = check_shipping(shipping_rates, store)
    if tax_rates is not None:
        values["tax_rates"] = check_tax(tax_rates)
    if taxes_included is not None:
        values["taxes_included"] = taxes_included
    if values:
        conn.execute(update(stores).where(stores.c.id == store.id).values(**values, updated_at=unit_now))
    fresh = repository.get(conn, store.id)
    assert fresh is not None
    if values:
        # Only the operator's command line changes rates (`rebill stores rates`): the replan's
        # events are the command line's.
        # Its charges in retry too: billed with the rates of the day of their retry.
        errored.follow(Unit(conn, fresh, unit_now, origin="cli"))
    return fresh
