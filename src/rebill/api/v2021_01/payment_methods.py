"""How 2021-01 differs from the head for payment methods (spec 02 Payment source, decisions
§6.1, §6.12): 2021-01 has no `/payment_methods`, only the deprecated payment sources of a
customer, derived from the head payment method. Merged by ``contract.py``."""

from __future__ import annotations

from typing import Any

from rebill.api import query as q
from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema
from rebill.api.listing import parse_filters
from rebill.domain.payment_method.model import USABLE

# NOTE: spec 02 Payment source `payment_type` (`credit`, `debit`, `paypal`, `apple_pay`); the
# types spec 02 does not name are the head's in lower case.
OLD_TYPES = {"CREDIT_CARD": "credit", "PAYPAL": "paypal", "APPLE_PAY": "apple_pay", "GOOGLE_PAY": "google_pay",
             "SEPA_DEBIT": "sepa_debit"}
OLD_TYPE_VALUES = tuple(dict.fromkeys(("credit", "debit", *OLD_TYPES.values())))
OLD_BILLING = ("address1", "address2", "city", "company", "country", "first_name", "last_name", "phone",
               "province", "zip")


def _payment_type(head: str, details: dict[str, Any]) -> str:
    if head == "CREDIT_CARD" and details.get("funding_type") == "debit":
        return "debit"
    return OLD_TYPES.get(head, head.lower())


def _cardholder(details: dict[str, Any], billing: dict[str, Any]) -> str | None:
    if details.get("cardholder_name"):
        return str(details["cardholder_name"])
    name = " ".join(part for part in (billing.get("first_name"), billing.get("last_name")) if part)
    return name or None


class PaymentSourceOldShape(Change):
    """Payment methods are shown as payment sources: `card_*` fields from `payment_details`,
    `payment_token`, a lower-case `payment_type`, `status` `active` or `failed` (lower case,
    decisions §6.12), the customer's `has_card_error_in_dunning`, and a billing address with
    its `id` and `country` name."""

    kinds = ("payment_source",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        details, billing = data["payment_details"], data["billing_address"]
        return {
            "id": data["id"],
            # A billing address lives on its payment method and has no id of its own.
            "billing_address": {"id": data["id"], **{name: billing[name] for name in OLD_BILLING}},
            "card_brand": details.get("brand"),
            "card_exp_month": details.get("exp_month"),
            "card_exp_year": details.get("exp_year"),
            "card_last4": details.get("last4"),
            "cardholder_name": _cardholder(details, billing),
            "customer_id": data["customer_id"],
            "has_card_error_in_dunning": data["has_payment_method_in_dunning"],
            "payment_token": data["processor_payment_method_token"],
            "payment_type": _payment_type(data["payment_type"], details),
            "processor_name": data["processor_name"],
            "status": "active" if data["status"] in USABLE else "failed",
            "status_reason": data["status_reason"],
        }

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        props = shape["properties"]
        billing, details = props["billing_address"]["properties"], props["payment_details"]["properties"]
        return sh.obj({
            "id": props["id"],
            "billing_address": sh.obj({"id": sh.integer(), **{name: billing[name] for name in OLD_BILLING}}),
            **{f"card_{name}": details[name] for name in ("brand", "exp_month", "exp_year", "last4")},
            "cardholder_name": sh.nullable(sh.string()),
            "customer_id": props["customer_id"],
            "has_card_error_in_dunning": props["has_payment_method_in_dunning"],
            "payment_token": props["processor_payment_method_token"],
            "payment_type": sh.enum(*OLD_TYPE_VALUES),
            "processor_name": props["processor_name"],
            "status": sh.enum("active", "failed"),
            "status_reason": props["status_reason"],
        })


CHANGES: tuple[Change, ...] = (PaymentSourceOldShape(),)

# NOTE: spec 02 Customers, `GET /customers/{customer_id}/payment_sources` query: each filter
# selects the sources whose field (as rendered above) has that value; text matches without
# regard to case or the spaces around it. The list has no paging (docs/api-choices.md), so the
# filters run on the rendered sources.
SOURCE_FILTERS: dict[str, tuple[str, q.QueryParser]] = {
    "cardholder_name": ("cardholder_name", q.text),
    "card_brand": ("card_brand", q.text),
    "card_exp_month": ("card_exp_month", q.integer),
    "card_exp_year": ("card_exp_year", q.integer),
    "card_last4": ("card_last4", q.text),
    "customer_id": ("customer_id", q.integer),
    "has_card_error_in_dunning": ("has_card_error_in_dunning", q.boolean),
    "payment_type": ("payment_type", q.choice(*OLD_TYPE_VALUES, loose=True)),
    "processor_name": ("processor_name", q.text),
    "status": ("status", q.choice("active", "failed", loose=True)),
    "status_reason": ("status_reason", q.text),
}


def _same(shown: Any, wanted: Any) -> bool:
    if isinstance(wanted, bool):
        return shown is wanted
    if isinstance(wanted, int):
        try:
            return shown is not None and not isinstance(shown, bool) and int(str(shown).strip()) == wanted
        except ValueError:
            return False
    return isinstance(shown, str) and shown.strip().casefold() == wanted.strip().casefold()


def select_sources(sources: list[dict[str, Any]], params: dict[str, str]) -> list[dict[str, Any]]:
    """The rendered payment sources that every filter of ``params`` selects (422 for a bad
    value, naming each; unknown parameters are ignored, as on every list)."""
    wanted = parse_filters(SOURCE_FILTERS, params)
    return [s for s in sources if all(_same(s.get(name), value) for name, value in wanted.items())]


LISTS: dict[str, ListContract] = {}
SCHEMAS: dict[str, Schema] = {}
