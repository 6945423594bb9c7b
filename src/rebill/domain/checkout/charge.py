"""Charging a checkout (spec 02 Checkouts charge, decisions §7.3, §7.7.6), in the billing
engine's shape: claim (one transaction: the checkout is checked, priced again and held),
pay through the gateway outside any transaction, record (one transaction).

- The payment's idempotency key is the checkout's and the attempt's
  (`rebill-checkout-{id}-attempt-{n}`): a declined attempt leaves the checkout open and the
  next one (another token) is another payment, while the same attempt asked again after a
  crash is the same payment to the processor.
- A success records everything at once, with its events: the customer (found by e-mail or
  made), the token kept as its payment method, the address, one subscription per subscription
  line, the charge of type checkout, its order, the first queued charges, and the checkout's
  `completed_at` and `charge_id`. A decline records nothing but the release of the claim.
- A claim whose answer was never recorded (the process died, or the processor did not answer)
  holds the checkout: 409 meanwhile, and once it is stale the next charge request, or else the
  billing run (``finish_abandoned``), asks again with that attempt's own key and records it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.exc import DBAPIError

from rebill import failpoints
from rebill.db.engine import Database, retryable
from rebill.errors import Conflict, NotFound, ServiceError, ServiceUnavailable, ValidationFailed

from .. import claimed_keys
from ..address import repository as addresses
from ..address import service as address_service
from ..address.model import AddressCreate
from ..address.verifier import AddressVerifier, Verification
from ..billing.outcome import count_use, make_orders
from ..charge import repository as charges
from ..charge.model import PENDING, SUCCESS, Charge
from ..customer import activity
from ..customer import repository as customers
from ..customer import service as customer_service
from ..customer.model import CustomerCreate
from ..discount import repository as discounts
from ..discount import rules as discount_rules
from ..discount.model import FIRST_TIME, FULLY_DISABLED
from ..money import minor_digits
from ..payment.gateway import AUTHORIZED, Gateway, GatewayUnavailable, Payment, Result, processor_name
from ..payment_method import repository as payment_methods
from ..payment_method import service as payment_method_service
from ..payment_method.model import PaymentMethodCreate
from ..schedule.reconcile import replan
from ..store.model import Store
from ..subscription import repository as items
from ..subscription import service as subscription_service
from ..subscription.model import EXPIRED, SUBSCRIPTION, PurchaseItem, SubscriptionCreate
from ..unit import KeyTakenOver, Unit, before_the_call
from . import lines as checkout_lines
from . import pricing, repository, service
from .model import ChargeRequest, Checkout, CheckoutCharge

# The `source.origin` of what a checkout's payment records outside a request (the billing run
# finishing an abandoned one); inside a request the request's token is the source (domain/unit.py).
ORIGIN = "checkout"
RECORD_TRIES = 4


class _Verified:
    """The carrier check of a US shipping address was made before the payment (``ready``):
    recording a payment never asks it again, so an answer there can never undo one."""

    def verify(self, *, address1: str, city: str, province: str, zip: str) -> Verification:
        return Verification(city=city, province_code=None, province_name=None, zip=zip, errors={})


VERIFIED = _Verified()


def idempotency_key(checkout_id: int, attempt: int) -> str:
    return f"rebill-checkout-{checkout_id}-attempt-{attempt}"


def charge(db: Database, gateway: Gateway, verifier: AddressVerifier, store: Store, token: str, request: ChargeRequest,
           now: datetime) -> CheckoutCharge:
    service.require_platform(store)
    for _ in range(2):
        run = uuid.uuid4().hex
        with before_the_call(), db.write() as conn:
            checkout, attempt, taken_over = _claim(Unit(conn, store, now, origin=ORIGIN), verifier, token, run,
                                                   request)
            claimed_keys.note(conn, run)
        result = _pay(db, gateway, store, checkout, attempt, run)
        done = _record(db, store, token, run, attempt, result, now, processor_name(gateway, store.id),
                       checkout.claimed_by if taken_over else None)
        if not taken_over:
            if not result.succeeded:
                # NOTE: decisions §7.7.6, the processor's reason; the checkout stays open.
                raise ValidationFailed.field("payment_token", result.error or "the payment processor refused")
            return done
        if result.succeeded:
            if (attempt["payment_token"], attempt["payment_processor"]) == (request.payment_token,
                                                                         request.payment_processor):
                return done  # this request again: its first try died after the processor answered
            raise Conflict("An earlier payment of this checkout that had not answered has now been completed")
        # The abandoned attempt was refused: nothing was paid, and this request pays now.
    raise Conflict("The checkout is being charged by another request")


def _claim(unit: Unit, verifier: AddressVerifier, token: str, run: str,
           request: ChargeRequest) -> tuple[Checkout, dict[str, Any], bool]:
    """Holds the checkout for one attempt: (the checkout, the attempt, whether it is an
    abandoned attempt taken over). The checkout is checked and priced again first: a 422
    comes before any money moves, never after."""
    checkout = repository.get(unit.conn, unit.store_id, token, lock=True)
    if checkout is None:
        raise NotFound()
    if checkout.completed_at is not None:
        raise ValidationFailed.field("completed_at", "the checkout is completed and cannot be charged again")
    stale = unit.now - repository.STALE_AFTER
    if checkout.claimed_by is not None:
        if checkout.claimed_at is not None and checkout.claimed_at > stale:
            raise Conflict("The checkout is being charged by another request")
        assert checkout.payment is not None
        repository.claim(unit.conn, unit.store_id, checkout.id, run, unit.now, repository.STALE_AFTER, {})
        return checkout, checkout.payment, True
    state = ready(unit, verifier, checkout)
    _hold_code(unit, checkout, state)
    # Priced again as things are now: what differs is a change of the checkout like any write's
    # (kept even if the payment is declined), with its event and `updated_at`.
    before = {name: getattr(checkout, name) for name in service.WRITTEN}
    changed = {name: value for name, value in state.items() if before[name] != value}
    attempt = {
        "number": checkout.charge_attempts + 1,
        "payment_processor": request.payment_processor,
        "payment_token": request.payment_token,
        "payment_type": request.payment_type or "CREDIT_CARD",
        "amount_minor": int(state["total_price"].scaleb(minor_digits(checkout.currency))),
        "currency": checkout.currency,
    }
    repository.claim(unit.conn, unit.store_id, checkout.id, run, unit.now, repository.STALE_AFTER,
                     {**state, **({"updated_at": unit.now} if changed else {}),
                      "charge_attempts": attempt["number"], "payment": attempt})
    if changed:
        unit.record("checkout/updated", checkout.id, changed=service.changed_names(before, changed))
    return checkout, attempt, False


def _hold_code(unit: Unit, checkout: Checkout, state: dict[str, Any]) -> None:
    """NOTE: decisions §7.5, `usage_limit`, `once_per_customer` and
    `first_time_customer_restriction` hold for checkouts charged at the same moment too (found
    by audits: on PostgreSQL, concurrent charges each saw the code unused, or their new
    customer unpaid, and all took it). A use is counted when a payment is recorded; until then
    the live claims of other checkouts with the code count as uses, and as payments of their
    e-mail's customer. The code's row lock makes claims with one code queue for this look. One
    that would go past the limit answers 409: once the other payments are recorded, a new try
    prices the checkout as it then is (without the code, if it is used up), as one after the
    other they would have been."""
    applied = (state["pricing"] or {}).get("applied_discount") or {}
    if checkout.discount_id is None or not applied.get("applicable"):
        return
    row = discounts.get(unit.conn, unit.store_id, checkout.discount_id, lock=True)
    if row is None:
        return
    others = repository.live_claims_with_code(unit.conn, unit.store_id, checkout.discount_id, checkout.id)
    mine = (checkout.email or "").strip().lower()
    per_customer = row.once_per_customer or row.first_time_customer_restriction == FIRST_TIME
    if (row.usage_limit is not None and discount_rules.uses(unit, row) + len(others) >= row.usage_limit) or \
            (per_customer and (mine in others or _customer_took(unit, checkout, row))):
        raise Conflict("Another checkout is being charged with this discount code; try again in a moment")


def _customer_took(unit: Unit, checkout: Checkout, row: Any) -> bool:
    """Whether the customer of the checkout's e-mail now stands where the code refuses it (holds
    or used a once-per-customer code; has paid, for a first-time customers' code), read after
    the code's lock: the pricing before it looked when no such customer existed yet, and a
    checkout of that e-mail recorded since made one (found by an audit: five checkouts of a new
    e-mail charged at once, two took a once-per-customer code)."""
    customer_id = service.customer_of(unit, checkout.email)
    if customer_id is None:
        return False
    if row.once_per_customer and discounts.customer_holds(unit.conn, unit.store_id, customer_id, row.id, unit.now):
        return True
    return row.first_time_customer_restriction == FIRST_TIME and discount_rules.has_paid(unit, customer_id)


def ready(unit: Unit, verifier: AddressVerifier, checkout: Checkout) -> dict[str, Any]:
    """NOTE: spec 02 Checkouts, processing needs an email, line items and a complete shipping
    address (422 naming each); the checkout priced again as it is now (rates, the code)."""
    errors: dict[str, Any] = {}
    if not checkout.email:
        errors["email"] = [service.SOON]
    elif problem := customer_service.email_problem(checkout.email):
        # Checked before any money moves: the customer the payment makes takes this e-mail.
        errors["email"] = [problem]
    if not checkout.line_items:
        errors["line_items"] = [service.SOON]
    address, validations = checkout.shipping_address, None
    if address is None:
        errors["shipping_address"] = [service.SOON]
    else:
        checked = ValidationFailed.collect(errors, service.check_shipping, unit, verifier, address, partial=False)
        if checked is not None:
            address, validations = checked
    ValidationFailed.collect(errors, service.check_currency, unit, checkout.currency)
    ValidationFailed.collect(errors, checkout_lines.check_before_payment, checkout.line_items, unit.today)
    if errors:
        raise ValidationFailed(errors)
    state = {name: getattr(checkout, name) for name in service.WRITTEN}
    state["shipping_address"] = address
    state.update(service.priced(unit, state, validations))
    return {name: state[name] for name in ("shipping_address", "pricing", "taxes_included",
                                           "subtotal_price", "total_discounts", "total_shipping", "total_tax",
                                           "total_price")}


def _pay(db: Database, gateway: Gateway, store: Store, checkout: Checkout, attempt: dict[str, Any],
         run: str) -> Result:
    payment = Payment(store_id=store.id, idempotency_key=idempotency_key(checkout.id, attempt["number"]),
                      reference=f"checkout {checkout.token}", amount_minor=attempt["amount_minor"],
                      currency=attempt["currency"], customer_token=None,
                      payment_method_token=attempt["payment_token"],
                      # As the billing run names a method's type (found by an audit: a PayPal
                      # checkout asked Stripe for a card payment).
                      payment_type=attempt.get("payment_type"))
    try:
        result = gateway.charge(payment)
    except GatewayUnavailable:
        # Nothing is known: the claim stays, and the attempt is asked again with its key.
        raise ServiceUnavailable() from None
    except Exception:
        with db.write() as conn:
            repository.release(conn, store.id, checkout.id, run)
        raise
    failpoints.hit("checkout.after_gateway")
    return result


def _record(db: Database, store: Store, token: str, run: str, attempt: dict[str, Any], result: Result,
            now: datetime, processor: str, finishing: str | None = None) -> CheckoutCharge:
    """``processor``: the processor that took the payment, which its charge records;
    ``finishing``: the stale claim this payment took over, whose request's key it marks when
    the payment went through (domain/claimed_keys.py)."""
    for tries in range(1, RECORD_TRIES + 1):
        try:
            with db.write() as conn:
                unit = Unit(conn, store, now, origin=ORIGIN)
                checkout = repository.get(conn, store.id, token, lock=True)
                if checkout is None or checkout.claimed_by != run:
                    raise Conflict("The checkout's payment was taken over by another request")
                if result.succeeded:
                    complete(unit, checkout, attempt, result, processor)
                    claimed_keys.finished(conn, [finishing])
                else:
                    repository.release(conn, store.id, checkout.id, run)
                return answer(unit, token)
        except DBAPIError as exc:
            # PostgreSQL gave the record up for a concurrent transaction's sake: nothing of it
            # was kept and the answer is in hand, so it is recorded again.
            if tries == RECORD_TRIES or not retryable(exc):
                raise
        except ValidationFailed as exc:
            # Another checkout of the same e-mail made its customer at the same moment: the
            # next try finds that customer (PostgreSQL; SQLite serializes writers).
            if tries == RECORD_TRIES or exc.errors != {"email": ["has already been taken"]}:
                raise
    raise AssertionError("unreachable")


def answer(unit: Unit, token: str) -> CheckoutCharge:
    checkout = service.get(unit, token)
    status = None
    if checkout.charge_id is not None:
        found = charges.get(unit.conn, unit.store_id, checkout.charge_id, unit.now)
        status = found.status if found is not None else SUCCESS
    return CheckoutCharge(checkout, status)


# Recording a success -----------------------------------------------------------------------

def complete(unit: Unit, checkout: Checkout, attempt: dict[str, Any], result: Result, processor: str) -> None:
    """NOTE: decisions §7.3, §7.7: everything a paid checkout makes, in this one transaction."""
    authorized = result.outcome == AUTHORIZED
    customer_id = _customer(unit, checkout)
    # A checkout of 0 tried no card (found by an audit: a declining token was shown `valid`); an
    # authorization is the card's yes, as for a renewal (outcome.py; found by an audit: a
    # checkout authorized, then captured, left its method `unvalidated` for good).
    method_id = _method(unit, customer_id, attempt, valid=result.asked)
    address = _address(unit, checkout, customer_id, method_id)
    held = _subscriptions(unit, checkout, address.id)
    by_line = dict(held)
    charge = _insert_charge(unit, checkout, attempt, result, processor, customer_id, address.id, method_id,
                            [by_line.get(i) for i in range(len(checkout.line_items))])
    unit.record("charge/created", charge.id)
    if not authorized:
        count_use(unit, charge)
        make_orders(unit, charge, [item for _, item in held], captured=False)
        unit.record("charge/paid", charge.id)
    # NOTE: decisions §7.7.3, the subscriptions' first queued charges, planned from their dates.
    replan(unit, [address.id])
    shown = [{**line, "subscription_id": by_line[i].id if i in by_line else None}
             for i, line in enumerate(checkout.line_items)]
    repository.save(unit.conn, unit.store_id, checkout.id, {
        "line_items": shown, "customer_id": customer_id, "charge_id": charge.id, "completed_at": unit.now,
        "payment_processor": attempt["payment_processor"], "payment_type": attempt["payment_type"],
        "payment_token": attempt["payment_token"], "payment_processor_transaction_id": result.transaction_id,
        "claimed_by": None, "claimed_at": None, "payment": None, "updated_at": unit.now})
    unit.record("checkout/processed", checkout.id, customer_id=customer_id)


def _names(checkout: Checkout) -> dict[str, Any]:
    """The buyer's names and phone: the billing address's, else the shipping address's."""
    shipping = checkout.shipping_address or {}
    billing = checkout.billing_address or {}
    first = billing.get("first_name") if billing.get("first_name") and billing.get("last_name") else None
    return {"first_name": first or shipping["first_name"],
            "last_name": billing["last_name"] if first else shipping["last_name"],
            "phone": checkout.phone or shipping.get("phone") or billing.get("phone")}


def _customer(unit: Unit, checkout: Checkout) -> int:
    """NOTE: decisions §7.3, the customer of the checkout's e-mail, made when there is none."""
    assert checkout.email is not None
    found = service.customer_of(unit, checkout.email)
    # Held against its delete until the payment is recorded; one deleted since it was found is
    # none (found by an audit on PostgreSQL: a delete at that moment made the record of a
    # captured payment answer 422 `customer not found`, the checkout left to the billing run).
    # The update lock _method takes next anyway: a share lock here, upgraded there by two
    # checkouts of one customer at once, deadlocked them.
    if found is not None and customers.exists_in_store(unit.conn, unit.store_id, found, lock="update"):
        return found
    billing = checkout.billing_address or {}
    created = customer_service.create(unit, CustomerCreate(
        email=checkout.email, **_names(checkout), external_customer_id=checkout.external_customer_id,
        accepts_marketing=checkout.buyer_accepts_marketing, analytics_data=checkout.analytics_data,
        **{f"billing_{name}": billing.get(name) for name in ("address1", "address2", "city", "company",
                                                              "country_code", "first_name", "last_name", "phone",
                                                              "province", "zip")}))
    return created.id


def _method(unit: Unit, customer_id: int, attempt: dict[str, Any], *, valid: bool) -> int:
    """NOTE: decisions §7.7.6, the token that paid is kept as the customer's payment method (the
    one already holding it, when the customer has one), `valid` once it has paid."""
    token, processor = attempt["payment_token"], attempt["payment_processor"]
    # The customer's lock before its methods are read (as a method's create takes it): two
    # checkouts of one customer paid with one token at once keep one method, not two (found
    # by an audit on PostgreSQL).
    customers.exists_in_store(unit.conn, unit.store_id, customer_id, lock="update")
    kept = next((m for m in payment_methods.of_customers(unit.conn, unit.store_id, [customer_id])
                 if m.processor_payment_method_token == token and m.processor_name == processor), None)
    if kept is None:
        kept = payment_method_service.create(unit, PaymentMethodCreate(
            customer_id=customer_id, payment_type=attempt["payment_type"], processor_payment_method_token=token,
            processor_name=processor))
    if valid and kept.status != "valid":
        payment_methods.update_payment_method(unit.conn, unit.store_id, kept.id, {
            "status": "valid", "status_reason": None, "updated_at": unit.now})
    return kept.id


def _address(unit: Unit, checkout: Checkout, customer_id: int, method_id: int) -> Any:
    """The address the checkout ships to, paid by the kept method (decisions §7.7.6) and
    holding the checkout's code when it applied, so its renewals carry it (decisions §7.5)."""
    shipping = checkout.shipping_address or {}
    address = address_service.create(unit, VERIFIED, AddressCreate(
        customer_id=customer_id, address1=shipping["address1"], address2=shipping.get("address2"),
        city=shipping["city"], company=shipping.get("company"), country_code=shipping["country_code"],
        first_name=shipping["first_name"], last_name=shipping["last_name"],
        phone=shipping.get("phone") or checkout.phone or "", province=shipping.get("province"),
        zip=shipping.get("zip"), order_note=checkout.note, order_attributes=checkout.note_attributes,
        payment_method_id=method_id, presentment_currency=checkout.currency))
    code = checkout.pricing.get("discount_id")
    # Read under the code's share lock, which a full disable waits for or has released (found by
    # an audit on PostgreSQL: a code fully disabled while the payment was in flight, when no
    # address held it yet, stayed on the new address, and its renewals took it): a code fully
    # disabled since is the payment's alone. One merely disabled stays, as on every address that
    # held it then (decisions §7.5), as paid first and disabled after it would have.
    row = discounts.find(unit.conn, unit.store_id, discount_id=code, share=True) if code is not None else None
    if row is not None and row.status != FULLY_DISABLED:
        addresses.update_address(unit.conn, unit.store_id, address.id, address.lock_version, {"discount_id": code})
    return address


def _subscriptions(unit: Unit, checkout: Checkout, address_id: int) -> list[tuple[int, PurchaseItem]]:
    """One subscription per subscription line (decisions §7.3), its first charge being the
    checkout's: counted, and its next one ``first_recurring_date`` (decisions §7.7.3)."""
    made = []
    for index, line in enumerate(checkout.line_items):
        if line["type"] != SUBSCRIPTION:
            continue
        item = subscription_service.create(unit, SubscriptionCreate(
            address_id=address_id, external_product_id=line["product_id"], external_variant_id=line["variant_id"],
            product_title=line["title"], variant_title=line["variant_title"], sku=line["sku"],
            price=pricing.line_price(line, checkout.currency), quantity=line["quantity"],
            properties=line["properties"],
            next_charge_scheduled_at=checkout_lines.first_recurring_date(line, unit.today),
            analytics_data=checkout.analytics_data,
            **{name: line[name] for name in ("charge_interval_frequency", "order_interval_frequency",
                                             "order_interval_unit", "order_day_of_month", "order_day_of_week",
                                             "cutoff_day_of_month", "cutoff_day_of_week",
                                             "expire_after_specific_number_of_charges")}), replan_now=False)
        changes: dict[str, Any] = {"charges_count": 1, "last_charge_date": unit.today}
        if item.expire_after_specific_number_of_charges == 1:
            # NOTE: decisions §5.5, its one charge was the checkout's.
            changes.update(status=EXPIRED, next_charge_scheduled_at=None)
        items.update_item(unit.conn, unit.store_id, item.id, item.lock_version, changes)
        if item.expire_after_specific_number_of_charges == 1:
            activity.refresh(unit, item.customer_id)
        made.append((index, items.many(unit.conn, unit.store_id, [item.id])[item.id]))
    return made


def _insert_charge(unit: Unit, checkout: Checkout, attempt: dict[str, Any], result: Result, processor: str,
                   customer_id: int, address_id: int, method_id: int,
                   subscriptions: list[PurchaseItem | None]) -> Charge:
    """The charge of type checkout (decisions §7.3): the checkout's pricing as it was paid, each
    subscription line naming its subscription; a one-time line names no purchase item."""
    priced = checkout.pricing
    lines = [{**line, "purchase_item_id": item.id if item is not None else None}
             for line, item in zip(priced["line_items"], subscriptions)]
    authorized = result.outcome == AUTHORIZED
    values = {
        "store_id": unit.store_id, "customer_id": customer_id, "address_id": address_id,
        "scheduled_at": unit.today, "status": PENDING if authorized else SUCCESS, "type": "checkout",
        "currency": checkout.currency, "line_items": lines, "shipping_lines": priced["shipping_lines"],
        "tax_lines": priced["tax_lines"], "discounts": priced["discounts"], "discount_id": priced["discount_id"],
        "billing_address": priced["billing_address"], "shipping_address": priced["shipping_address"],
        "order_attributes": checkout.note_attributes, "note": checkout.note, "tags": None,
        "taxable": priced["taxable"], "taxes_included": checkout.taxes_included,
        "subtotal_price": checkout.subtotal_price, "total_discounts": checkout.total_discounts,
        "total_line_items_price": checkout.subtotal_price, "total_tax": checkout.total_tax,
        "total_shipping": checkout.total_shipping, "total_price": checkout.total_price,
        "total_refunds": Decimal(0), "total_weight_grams": priced["total_weight_grams"],
        "orders_count": priced["orders_count"], "processed_at": unit.now, "error": None, "error_type": None,
        "charge_attempts": attempt["number"], "retry_date": None, "last_charge_attempt": unit.now,
        "external_order_id": None, "external_transaction_id": result.transaction_id,
        # The processor that took the money (`sandbox` or `stripe`), as a renewal's charge records
        # it; the checkout keeps the label its client sent (found by an audit: the charge said
        # `stripe` for a sandbox payment).
        "payment_processor": processor, "has_uncommitted_changes": False, "merged_at": None,
        "original_scheduled_at": None, "lock_version": 1, "payment_method_id": method_id,
        "authorized_at": unit.now if authorized else None, "claimed_by": None, "claimed_at": None,
        "upcoming_told_for": None, "analytics_data": checkout.analytics_data,
        "created_at": unit.now, "updated_at": unit.now,
    }
    charge_id = charges.insert_many(unit.conn, [values])[0]
    charges.change_items(unit.conn, unit.store_id, [(charge_id, item.id) for item in subscriptions if item], [])
    found = charges.get(unit.conn, unit.store_id, charge_id, unit.now)
    assert found is not None
    return found


# The billing run's part ----------------------------------------------------------------------

def finish_abandoned(db: Database, gateway: Gateway, store: Store, now: datetime) -> int:
    """Checkout payments whose claim went stale with no answer recorded: each asked again with
    its own attempt's key and recorded (decisions §6.5: money the processor may have moved is
    never left unrecorded). The billing run calls it; returns how many it finished."""
    with db.read() as conn:
        tokens = repository.abandoned(conn, store.id, now - repository.STALE_AFTER)
    finished = 0
    for token in tokens:
        run = uuid.uuid4().hex
        try:
            with db.write() as conn:
                checkout = repository.get(conn, store.id, token, lock=True)
                if checkout is None or checkout.claimed_by is None or checkout.payment is None or \
                        checkout.completed_at is not None or checkout.claimed_at is None or \
                        checkout.claimed_at > now - repository.STALE_AFTER:
                    continue
                repository.claim(conn, store.id, checkout.id, run, now, repository.STALE_AFTER, {})
                attempt = checkout.payment
            result = _pay(db, gateway, store, checkout, attempt, run)
            _record(db, store, token, run, attempt, result, now, processor_name(gateway, store.id),
                    checkout.claimed_by)
            finished += result.succeeded
        except KeyTakenOver:  # the request running this (a clock advance) lost its key: it stops
            raise
        except ServiceError:  # no answer again, or a request took it meanwhile: the next run
            continue
    return finished
