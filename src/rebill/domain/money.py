"""Exact money: Decimal amounts rendered with the currency's minor digits (decisions §2.7)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

# ISO 4217 currencies whose minor unit is not 2 digits (found by an audit: the 4-digit units of
# account CLF and UYW were taken as 2-digit, and `1.2345` refused).
_ZERO = frozenset("BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF".split())
_THREE = frozenset("BHD IQD JOD KWD LYD OMR TND".split())
_FOUR = frozenset("CLF UYW".split())
# ISO 4217 codes with no minor unit at all ("N.A."): precious metals, funds codes, testing and
# "no currency". No amount is kept in them; a store does not take them (domain/geo.is_currency).
NO_MINOR_UNIT = frozenset("XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU XTS XUA XXX".split())


def minor_digits(currency: str) -> int:
    code = currency.upper()
    return 0 if code in _ZERO else 3 if code in _THREE else 4 if code in _FOUR else 2


# The exponent of each number of minor digits, built once: quantize runs for every line and
# total of every charge planned (about 30 a subscription create).
_EXPONENTS = {digits: Decimal(1).scaleb(-digits) for digits in (0, 2, 3, 4)}


def quantize(amount: Decimal, currency: str) -> Decimal:
    return amount.quantize(_EXPONENTS[minor_digits(currency)], rounding=ROUND_HALF_UP)


def format_amount(amount: Decimal, currency: str) -> str:
    """``Decimal('12.5'), 'USD'`` -> ``'12.50'``; ``'JPY'`` -> ``'13'``."""
    return str(quantize(amount, currency))


# A percentage (a plan's discount, decisions §5.8; a discount code's) has at most two places.
PERCENT_PLACES = 2


def decimal_places(amount: Decimal) -> int:
    """The places ``amount`` needs: trailing zeros do not count (`10.50` has two)."""
    exponent = amount.normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def places_problem(amount: Decimal, currency: str) -> str | None:
    """NOTE: issue 7 hardening, money has at most the currency's minor digits: a price is
    never rounded silently."""
    digits = minor_digits(currency)
    if decimal_places(amount) > digits:
        return f"has too many decimal places for {currency.upper()} (at most {digits})"
    return None
