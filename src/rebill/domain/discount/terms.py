"""What a discount does to one planned charge: which lines it applies to, its minimum, and how
many more new queued charges of an address may carry it (decisions §7.5). Pure: the plan
(``domain/schedule/plan.py``) calls it with rows read by the reconciler."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from ..charge.totals import DiscountInput, discount_amount
from ..money import quantize
from .model import COLLECTION, FOREVER, PRODUCT, SINGLE_USE, value_text


@dataclass(frozen=True)
class Terms:
    id: int
    code: str
    kind: str
    value: Decimal
    shown: str  # the value as a charge shows it
    product_type: str
    applies_to_id: str | None
    applies_to_resource: str | None
    minimum: Decimal | None
    currency: str
    # A code for a collection: the external ids of the collection's products, read with the
    # code (``inputs.collection_products``); None for any other code.
    products: frozenset[str] | None = None

    @classmethod
    def of(cls, row: Any, currency: str, products: frozenset[str] | None = None) -> "Terms":
        return cls(id=row.id, code=row.code, kind=row.discount_type, value=row.value,
                   shown=value_text(row.discount_type, row.value, currency),
                   product_type=row.applies_to_product_type, applies_to_id=row.applies_to_id,
                   applies_to_resource=row.applies_to_resource,
                   minimum=None if row.prerequisite_subtotal_min is None
                   else quantize(row.prerequisite_subtotal_min, currency),
                   currency=currency, products=products)

    def eligible(self, item: Any) -> bool:
        """NOTE: spec 02 Discount `applies_to_product_type`, `applies_to_id`/`_resource`."""
        if self.product_type == "SUBSCRIPTION" and item.kind != "subscription":
            return False
        if self.product_type == "ONETIME" and item.kind != "onetime":
            return False
        if self.applies_to_id is None:
            return True
        if self.applies_to_resource == COLLECTION:
            # NOTE: spec 02 Discount `applies_to_id` names a collection: the lines of the
            # products in it (docs/api-choices.md, Discounts).
            return item.external_product_id in (self.products or ())
        return self.applies_to_resource == PRODUCT and item.external_product_id == self.applies_to_id

    def offer(self, items: list[Any], line_totals: list[Decimal],
              shipping: Decimal | None = None) -> DiscountInput | None:
        """The input of ``totals.compute``, or None when the charge qualifies for nothing (it
        takes 0, carries no code and counts no use: ``refusal`` says why)."""
        reason, flags = self._qualify(items, line_totals, "charge", shipping)
        if reason is not None:
            return None
        return DiscountInput(self.kind, self.value, None if all(flags) else flags)

    def refusal(self, items: list[Any], line_totals: list[Decimal], what: str,
                shipping: Decimal | None = None) -> str | None:
        """Why a charge (or a checkout: ``what``) of these items qualifies for nothing, or None:
        the one rule of the plan, of applying a code to a charge and of a checkout's code.
        ``shipping``: what the charge's shipping costs, when it is known."""
        return self._qualify(items, line_totals, what, shipping)[0]

    def _qualify(self, items: list[Any], line_totals: list[Decimal], what: str,
                 shipping: Decimal | None = None) -> tuple[str | None, tuple[bool, ...]]:
        flags = tuple(self.eligible(item) for item in items)
        # A shipping code too: its `applies_to_*` say which charges it frees (decisions §7.5).
        if not any(flags):
            return f"discount applies to no line of this {what}", flags
        # Nothing to ship, no shipping to take off: the code is not spent on it (found by a review).
        if self.kind == "shipping" and not any(item.requires_shipping for item in items):
            return f"the {what} has nothing to ship", flags
        # Nor when its shipping costs nothing (an address's empty or free override, a country
        # with no rate): found by an audit, a single-use shipping code was spent on 0.00.
        if self.kind == "shipping" and shipping is not None and shipping <= 0:
            return f"the {what} has no shipping to take off", flags
        eligible = sum((t for t, ok in zip(line_totals, flags) if ok), Decimal(0))
        # Nor when what it would take rounds to nothing: the lines it applies to cost nothing
        # (found by an audit: a single-use code was spent on a free sample's charge, and the
        # next one took nothing off), or its share of them or of the shipping is under half a
        # cent (an audit: 15 % of 0.01).
        if self.kind != "shipping" and discount_amount(self.kind, self.value, eligible, self.currency) <= 0:
            return f"the {what} has no amount to take off", flags
        if self.kind == "shipping" and shipping is not None \
                and discount_amount("percentage", self.value, shipping, self.currency) <= 0:
            return f"the {what} has no amount to take off", flags
        if self.minimum is not None and eligible < self.minimum:
            return f"the {what}'s subtotal {eligible} is below the discount's minimum {self.minimum}", flags
        return None, flags

    def line(self) -> dict[str, Any]:
        return {"id": self.id, "code": self.code, "value": self.shown, "value_type": self.kind}


def line_totals(items: list[Any], currency: str) -> list[Decimal]:
    """What each item's line costs before a discount (a prepaid line pays every order of its
    charge): what ``offer`` and ``refusal`` measure a code's eligible subtotal on."""
    return [quantize(i.price * i.orders_per_charge * i.quantity, currency) for i in items]


def allowed_uses(row: Any) -> int | None:
    """NOTE: spec 02 Discount `duration`: forever is unlimited, single_use one charge,
    usage_limit N the first use plus N re-applications (decisions §7.5)."""
    if row.duration == FOREVER:
        return None
    if row.duration == SINGLE_USE:
        return 1
    return 1 + int(row.duration_usage_limit or 0)


@dataclass
class AddressDiscounts:
    """The discount inputs of one address's plan."""

    address: Terms | None = None
    remaining: int | None = None  # new queued charges that may still carry `address`; None: no end
    by_date: dict[date, Terms] = field(default_factory=dict)  # applied to the queued charge of a date
    bases: dict[date, str | None] = field(default_factory=dict)  # what each of those charges was made of
    dropped: set[date] = field(default_factory=set)  # charge codes whose charge was regenerated
    # Dates of authorized charges awaiting capture: a code applied to one stays its own.
    pending: set[date] = field(default_factory=set)

    def for_charge(self, when: date, basis: str | None = None) -> tuple[Terms | None, bool]:
        """The terms for the queued charge of ``when`` and whether they are the address's.
        NOTE: spec 02 Charges rule 2, a code applied to the charge alone goes when the charge is
        regenerated into something else (``basis`` differs from the one it was applied to)."""
        if when in self.by_date and when not in self.pending:
            known = self.bases.get(when)
            if known is None or basis is None or known == basis:
                return self.by_date[when], False
            self.dropped.add(when)
            return None, False
        if self.address is not None and (self.remaining is None or self.remaining > 0):
            return self.address, True
        return None, False

    def used_one(self) -> None:
        if self.remaining is not None:
            self.remaining -= 1


def basis_of(items: list[Any], address: Any) -> str:
    """What a charge is made of, as far as a charge-level code is concerned: its items (id,
    quantity, price, variant) and where it goes. A regeneration that changes it drops the code."""
    parts = sorted((i.id, i.quantity, str(i.price), i.orders_per_charge, i.external_variant_id) for i in items)
    where = (address.address1, address.address2, address.city, address.province, address.zip, address.country_code)
    return hashlib.sha256(repr((parts, where)).encode()).hexdigest()[:32]
