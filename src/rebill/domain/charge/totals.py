"""Every amount of a charge, computed in one place (decisions §5.9, design guide "Money is
computed once"): line totals, the discount, shipping, tax and the total, each rounded half
up to the currency's minor units. Pure: no I/O, Decimal only.

- A line costs unit price x quantity; the subtotal is the sum of the lines (decisions §5.9).
- A percentage discount takes ``value`` % of the eligible lines, rounded once; a fixed amount
  takes ``value`` once per charge; neither touches shipping, and neither takes more than the
  eligible lines cost, so the total never goes below zero (decisions §7.5). A `shipping`
  discount takes ``value`` % of the shipping lines and no more than they cost.
- The discount is shared among the eligible lines in proportion to their totals (largest
  remainder, in minor units), so each line's taxable amount is what it really costs.
- Tax is ``rate`` x each taxable line's discounted amount, rounded per line; with taxes
  included the tax is the part of that amount the rate accounts for (amount x rate / (1 +
  rate)) and is not added to the total. Shipping is not taxed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from ..money import minor_digits, quantize

ZERO = Decimal(0)


@dataclass(frozen=True)
class LineInput:
    unit_price: Decimal
    quantity: int
    taxable: bool


@dataclass(frozen=True)
class DiscountInput:
    kind: str  # percentage | fixed_amount | shipping
    value: Decimal
    # Per line, whether the discount applies to it (decisions §7.5 `applies_to_*`); None: all.
    eligible: tuple[bool, ...] | None = None


@dataclass(frozen=True)
class LineAmounts:
    total_price: Decimal
    discount: Decimal
    taxable_amount: Decimal
    tax_due: Decimal
    # The tax of one unit (a tax line's `unit_price`), rounded once from the unit's own amount:
    # the line's rounded tax over its quantity rounds twice (found by an audit: 1733 x 2 at 10 %
    # in JPY showed 174 for 173.3).
    unit_tax: Decimal = ZERO


@dataclass(frozen=True)
class Totals:
    lines: list[LineAmounts]
    total_line_items_price: Decimal
    subtotal_price: Decimal
    total_discounts: Decimal
    total_shipping: Decimal
    total_tax: Decimal
    total_price: Decimal


def discount_amount(kind: str, value: Decimal, eligible: Decimal, currency: str) -> Decimal:
    if eligible <= 0:
        return ZERO
    if kind == "percentage":
        taken = quantize(eligible * value / 100, currency)
    else:
        taken = quantize(value, currency)
    return min(taken, eligible)


def share(amount: Decimal, weights: list[Decimal], currency: str) -> list[Decimal]:
    """``amount`` split in proportion to ``weights`` in whole minor units; the rounding
    remainder goes to the largest fractional parts, so the shares add up exactly."""
    if amount == 0:  # no discount: most charges
        return [ZERO for _ in weights]
    total = sum(weights, ZERO)
    if total == 0:
        return [ZERO for _ in weights]
    unit = Decimal(1).scaleb(-minor_digits(currency))
    exact = [amount * w / total for w in weights]
    floors = [e.quantize(unit, rounding=ROUND_FLOOR) for e in exact]
    left = int((amount - sum(floors, ZERO)) / unit)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - floors[i]), i))
    for i in order[:left]:
        floors[i] += unit
    return floors


def _tax(amount: Decimal, rate: Decimal, taxes_included: bool, currency: str) -> Decimal:
    return quantize(amount * rate / (1 + rate) if taxes_included else amount * rate, currency)


def compute(lines: list[LineInput], *, currency: str, discount: DiscountInput | tuple[str, Decimal] | None,
            shipping: list[Decimal], tax_rate: Decimal | None, taxes_included: bool) -> Totals:
    totals = [quantize(line.unit_price * line.quantity, currency) for line in lines]
    line_sum = sum(totals, ZERO)
    total_shipping = quantize(sum(shipping, ZERO), currency)
    if isinstance(discount, tuple):
        discount = DiscountInput(discount[0], discount[1])
    taken = shipping_off = ZERO
    weights = totals
    if discount is not None and discount.kind == "shipping":
        # NOTE: decisions §7.5, value % off the shipping lines (100 = free shipping).
        shipping_off = min(quantize(total_shipping * discount.value / 100, currency), total_shipping)
    elif discount is not None:
        if discount.eligible is not None:
            weights = [t if ok else ZERO for t, ok in zip(totals, discount.eligible)]
        taken = discount_amount(discount.kind, discount.value, sum(weights, ZERO), currency)
    shares = share(taken, weights, currency)
    rate = tax_rate or ZERO
    amounts = []
    for line, total, off in zip(lines, totals, shares):
        base = total - off
        if not line.taxable or rate == 0:
            amounts.append(LineAmounts(total, off, base if line.taxable else ZERO, ZERO))
            continue
        amounts.append(LineAmounts(total, off, base, _tax(base, rate, taxes_included, currency),
                                   _tax(base / line.quantity, rate, taxes_included, currency)
                                   if line.quantity else ZERO))
    total_tax = sum((a.tax_due for a in amounts), ZERO)
    total = line_sum - taken + total_shipping - shipping_off + (ZERO if taxes_included else total_tax)
    return Totals(
        lines=amounts,
        total_line_items_price=line_sum,
        subtotal_price=line_sum,
        total_discounts=taken + shipping_off,
        total_shipping=total_shipping,
        total_tax=quantize(total_tax, currency),
        total_price=max(quantize(total, currency), ZERO),
    )
