"""Countries, subdivisions and postal-code rules of decisions §4.1-§4.3.

Country and subdivision data come from ``pycountry`` (ISO 3166-1 and 3166-2); nothing here
is a hand-kept list except the sets that decisions §4 fixes as choices.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import pycountry

from .money import NO_MINOR_UNIT

# NOTE: decisions §4.1 (choice) COUNTRIES_REQUIRING_PROVINCE.
COUNTRIES_REQUIRING_PROVINCE = frozenset(
    "US CA AU BR MX IN IT ES JP CN AR MY ID IE AE".split()
)
# NOTE: decisions §4.2 (choice) COUNTRIES_NOT_REQUIRING_ZIP: countries with no postal codes.
COUNTRIES_NOT_REQUIRING_ZIP = frozenset(
    """AE AG AN AO AW BF BI BJ BO BS BW BZ CD CF CG CI CK CM DJ DM ER FJ GA GD GH GM GN GQ GY HK
    JM KE KI KM KN KP LC ML MO MR MS MU MW NA NR NU QA RW SB SC SL SO SR ST SY TF TK TL TO TT TV
    TZ UG VU YE ZW""".split()
)
# NOTE: decisions §4.3 (choice).
UNITED_STATES_ZIP_REGEX = re.compile(r"^\d{5}(-\d{4})?$", re.ASCII)
UNITED_KINGDOM_ZIP_REGEX = re.compile(
    r"^(GIR ?0AA|[A-PR-UWYZ]([0-9]{1,2}|[A-HK-Y][0-9][0-9ABEHMNPRV-Y]?|[0-9][A-HJKPS-UW]) ?[0-9][ABD-HJLNP-UW-Z]{2})$",
    re.IGNORECASE | re.ASCII,
)


def _fold(text: str) -> str:
    """Case- and accent-insensitive key: 'Québec' and 'quebec' match."""
    decomposed = unicodedata.normalize("NFKD", text.strip())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


@lru_cache(maxsize=512)
def is_currency(code: str) -> bool:
    """An ISO 4217 currency code (upper case, as stored) that money is kept in: not one of the
    codes with no minor unit (gold, `XXX`...; found by an audit: they were taken, as 2-digit)."""
    return len(code) == 3 and code.isascii() and code.isupper() and code not in NO_MINOR_UNIT \
        and pycountry.currencies.get(alpha_3=code) is not None


def country(code: str) -> "pycountry.db.Country | None":
    if len(code) != 2:
        return None
    return pycountry.countries.get(alpha_2=code.upper())


@lru_cache(maxsize=1)
def _country_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for entry in pycountry.countries:
        for attr in ("name", "official_name", "common_name"):
            value = getattr(entry, attr, None)
            if value:
                names.setdefault(_fold(value), entry.alpha_2)
    return names


def country_code_for_name(name: str) -> str | None:
    """A country name (2021-01 ``country``) or an alpha-2 code to the alpha-2 code."""
    if len(name.strip()) == 2 and country(name.strip()):
        return name.strip().upper()
    return _country_names().get(_fold(name))


def country_name(code: str) -> str | None:
    entry = country(code)
    return entry.name if entry else None


@lru_cache(maxsize=256)
def subdivisions(code: str) -> dict[str, tuple[str, str]]:
    """Folded code or name -> (short code, name) for every subdivision of the country."""
    index: dict[str, tuple[str, str]] = {}
    for sub in pycountry.subdivisions.get(country_code=code.upper()) or []:
        short = sub.code.split("-", 1)[1]
        value = (short, sub.name)
        for key in (sub.code, short, sub.name):
            index.setdefault(_fold(key), value)
    return index


def find_province(country_code: str, province: str) -> tuple[str, str] | None:
    """(code, name) of a subdivision given by code ('CA', 'US-CA') or name, else None."""
    return subdivisions(country_code).get(_fold(province))


def zip_problem(country_code: str, zip_code: str | None) -> str | None:
    """The message for a zip that breaks the rules of decisions §4.2-§4.3, else None."""
    value = (zip_code or "").strip()
    if not value:
        if country_code in COUNTRIES_NOT_REQUIRING_ZIP:
            return None
        return "is required for this country"
    # fullmatch: "$" alone would let a trailing newline through.
    if country_code == "US" and not UNITED_STATES_ZIP_REGEX.fullmatch(value):
        return "is not a valid United States zip code"
    if country_code == "GB" and not UNITED_KINGDOM_ZIP_REGEX.fullmatch(value):
        return "is not a valid United Kingdom postcode"
    return None
