"""When a discount may be applied (spec 02 Discount, Charges rule 2, Discount application
endpoints; decisions §7.5). Every refusal is a 422 naming the field the caller used and why."""

from __future__ import annotations

from typing import Any

from rebill.errors import Conflict, ValidationFailed

from ..checkout import repository as checkouts
from ..customer import repository as customers
from ..unit import Unit
from . import repository
from .model import ENABLED, FIRST_TIME, FULLY_DISABLED, channels, ended


def resolve(unit: Unit, field: str, discount_id: int | None, code: str | None, *,
            customer_id: int | None = None) -> Any:
    """NOTE: spec 02, `discount_id` wins when both are sent; unknown: 422 naming the field.
    Share-locked: an apply and a full disable of the code never interleave (found by an audit:
    a disable racing applies left the fully disabled code on addresses and queued charges).
    Applied for ``customer_id``, a code with a per-customer rule first takes the customer's lock
    (which ``refusal`` needs), then the code's: the order a checkout's payment takes them in
    (checkout/charge.py ``complete``), so that the two never wait for each other (found by a
    review: the other order deadlocked)."""
    if customer_id is not None:
        peek = repository.find(unit.conn, unit.store_id, discount_id=discount_id, code=code)
        if peek is not None and (peek.once_per_customer or peek.first_time_customer_restriction == FIRST_TIME):
            customers.exists_in_store(unit.conn, unit.store_id, customer_id, lock="update")
    row = repository.find(unit.conn, unit.store_id, discount_id=discount_id, code=code, share=True)
    if row is None:
        raise ValidationFailed.field(field, "discount not found")
    return row


def uses(unit: Unit, row: Any) -> int:
    """NOTE: decisions §7.5, the code's uses a `usage_limit` counts: `times_used`, and the
    authorized charges carrying it, whose captures will count theirs (found by an audit: a
    one-use code applied to a second checkout while the first one's payment waited for its
    capture, and both were captured with it)."""
    if row.usage_limit is None or row.times_used >= row.usage_limit:
        return row.times_used
    return row.times_used + repository.authorized_uses(unit.conn, unit.store_id, row.id, unit.now)


def refusal(unit: Unit, row: Any, *, customer_id: int | None, currency: str, except_address: int | None = None,
            channel: str = "api") -> str | None:
    """Why the code cannot be applied now for this customer, or None. A buyer who is no
    customer yet (``customer_id`` None, a checkout) has used nothing and holds nothing."""
    if row.status == FULLY_DISABLED:
        return "discount is fully disabled"
    if row.status != ENABLED:
        return "discount is disabled"
    if ended(row, unit.now):
        return "discount has ended"
    if row.starts_at is not None and row.starts_at > unit.now:
        return "discount has not started yet"
    # NOTE: spec 02 Discount channel_settings, this API is the `api` channel; a checkout is
    # the `checkout_page` channel (docs/api-choices.md, Checkouts).
    if not channels(row.channel_settings)[channel]["can_apply"]:
        return "discount cannot be applied through the API" if channel == "api" else \
            f"discount cannot be applied through the {channel.replace('_', ' ')}"
    if row.usage_limit is not None and uses(unit, row) >= row.usage_limit:
        return "discount has reached its usage limit"
    if row.discount_type == "fixed_amount" and currency != unit.store.currency:
        return f"a fixed amount discount applies only to charges in {unit.store.currency}"
    if row.prerequisite_subtotal_min is not None and currency != unit.store.currency:
        # Its minimum is an amount of the store's currency too (decisions §7.5), which a subtotal
        # in another cannot be measured against (found by an audit: 60 JPY met a 50.00 USD minimum).
        return f"a discount with a minimum subtotal applies only to charges in {unit.store.currency}"
    if customer_id is None:
        return None
    per_customer = row.once_per_customer or row.first_time_customer_restriction == FIRST_TIME
    if per_customer and channel == "api":
        # The customer's lock (``resolve`` took it already): two applications to two of its
        # addresses at once run one after the other, so the second sees the first (PostgreSQL;
        # SQLite serializes writers). A checkout's pricing takes none: its payment holds the
        # code (checkout/charge.py ``_hold_code``), and a read must not wait for a writer.
        customers.exists_in_store(unit.conn, unit.store_id, customer_id, lock="update")
    if row.once_per_customer and \
            repository.customer_holds(unit.conn, unit.store_id, customer_id, row.id, unit.now,
                                      except_address=except_address):
        return "discount can be used once per customer"
    if row.first_time_customer_restriction == FIRST_TIME and has_paid(unit, customer_id):
        return "discount is for first-time customers only"
    if per_customer and channel == "api":
        # A checkout of the customer's e-mail being paid with the code now is a use in flight
        # (as checkout/charge.py `_hold_code` counts it among checkouts): once recorded, this
        # application is refused (found by an audit: an address apply racing such a checkout
        # both took a once-per-customer code, and the address's renewal used it again).
        customer = customers.get(unit.conn, unit.store_id, customer_id)
        if customer is not None and (customer.email or "").strip().lower() in checkouts.live_claims_with_code(
                unit.conn, unit.store_id, row.id, 0):
            raise Conflict("A checkout of this customer is being charged with this discount code; "
                           "try again in a moment")
    return None


def has_paid(unit: Unit, customer_id: int) -> bool:
    """NOTE: decisions §7.5 first_time_customer_restriction, whether the customer has paid."""
    customer = customers.get(unit.conn, unit.store_id, customer_id)
    # A captured charge leaves `first_charge_processed_at` unset: the charges tell too.
    return customer is not None and (customer.first_charge_processed_at is not None
                                     or repository.customer_paid(unit.conn, unit.store_id, customer_id))


def check(unit: Unit, row: Any, field: str, **kw: Any) -> None:
    problem = refusal(unit, row, **kw)
    if problem:
        raise ValidationFailed.field(field, problem)
