"""Amounts as Stripe counts them. Rebill's gateway speaks ISO 4217 minor units
(domain/money.py); Stripe's API has decimals of its own for a few currencies
(stripe.com/docs/currencies): its zero-decimal list takes MGA whole (ISO: two decimals), and
ISK stays two-decimal at Stripe (100 = 1 króna, whole krónur only) where ISO gives it none.
Found by an audit: 1000 ISK went to Stripe as 10 kr, 5000.00 MGA as 500000 ariary. Its
three-decimal currencies take amounts whose last decimal is 0 only."""

from __future__ import annotations

from ..money import minor_digits

# NOTE: stripe.com/docs/currencies, "Zero-decimal currencies" and "Three-decimal currencies";
# every other currency has two decimals in Stripe's API.
_ZERO = frozenset("BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF UGX VND VUV XAF XOF XPF".split())
_THREE = frozenset("BHD JOD KWD OMR TND".split())


class NotInStripeUnits(ValueError):
    """An amount with a fraction Stripe's units of its currency cannot hold (0.50 MGA)."""


def _shift(currency: str) -> int:
    code = currency.upper()
    stripe = 0 if code in _ZERO else 3 if code in _THREE else 2
    return stripe - minor_digits(code)


def to_stripe(amount_minor: int, currency: str) -> int:
    """ISO minor units -> Stripe's; raises NotInStripeUnits when they cannot say it exactly."""
    shift = _shift(currency)
    if shift >= 0:
        amount = amount_minor * 10**shift
    else:
        amount, rest = divmod(amount_minor, 10**-shift)
        if rest:
            raise NotInStripeUnits(f"Stripe takes {currency.upper()} in whole units; {amount_minor} minor units are not")
    if currency.upper() in _THREE and amount % 10:
        # NOTE: stripe.com/docs/currencies, "Three-decimal currencies": a charge's amount must
        # end in 0 (5.124 KWD is refused; 5.120 is taken).
        raise NotInStripeUnits(f"Stripe takes {currency.upper()} amounts in tens of its minor units "
                               f"(the last of three decimals 0); {amount} is not")
    return amount


def from_stripe(amount: int, currency: str) -> int:
    """Stripe's units -> ISO minor units (a fraction of one, which Stripe never sends for a
    currency Rebill holds whole, is cut off)."""
    shift = _shift(currency)
    return amount // 10**shift if shift >= 0 else amount * 10**-shift
