"""The head (2021-11) request bodies (spec 01 Addresses; customers per the public 2021-11
contract: email, first and last name required)."""

from __future__ import annotations

from typing import Any

from rebill.api.fields import Field, Schema
from rebill.domain.address.merge import MAX_SOURCES as MAX_MERGE_SOURCES
from rebill.domain.customer.service import email_problem


def country_code(value: str) -> str:
    if len(value.strip()) != 2 or not value.strip().isalpha():
        raise ValueError("must be a 2-letter country code")
    return value.strip().upper()


def currency_code(value: str) -> str:
    if len(value.strip()) != 3 or not value.strip().isalpha():
        raise ValueError("must be a 3-letter currency code")
    return value.strip().upper()


# NOTE: spec 03, `order_attributes[].value` and `properties[].value` are in every reply: a
# `value` not sent is stored as null, never left out.
ATTRIBUTE = Schema(Field("name", "str", required=True, nullable=False),
                   Field("value", "str", max_length=4096, default=None))
SHIPPING_LINE = Schema(
    Field("code", "str"),
    # A shipping price is no discount: a negative one would take money off the charge outside
    # every discount rule (decisions §7.5), down to a free charge.
    # A zero is shown unsigned ("-0.00" was kept and shown so: found by an audit).
    Field("price", "decimal", required=True, nullable=False, convert=lambda price: price.copy_abs() if not price
          else price, check=lambda price: "must not be negative" if price < 0 else None),
    Field("title", "str"),
)
DISCOUNT_REF = Schema(Field("id", "int"), Field("code", "str"))

def _ecommerce_id(value: dict[str, Any]) -> Any:
    if "ecommerce" not in value:
        raise ValueError("must be an object with the key ecommerce")
    return value["ecommerce"]


CUSTOMER_CREATE = Schema(
    Field("email", "str", required=True, nullable=False, min_length=1, check=email_problem),
    Field("first_name", "str", required=True, nullable=False, min_length=1),
    Field("last_name", "str", required=True, nullable=False, min_length=1),
    Field("phone", "str", max_length=64),
    # `{"ecommerce": ...}` (spec 03), its id under the one rule of platform ids
    # (api/external_ids.py): a string or an integer (found by an audit: an integer answered 422
    # here alone). The key must be there: `{}` or `{"shopify": "5"}` answered 200 and wiped the
    # stored id (found by an audit); `{"ecommerce": null}` clears it.
    Field("external_customer_id", "object", items=Schema(Field("ecommerce", "external_id", max_length=64)),
          convert=_ecommerce_id),
    Field("tax_exempt", "bool", nullable=False),
    Field("accepts_marketing", "bool", nullable=False),
    Field("analytics_data", "object"),
)

ADDRESS_FIELDS = (
    Field("address1", "str", required=True, nullable=False, min_length=1),
    Field("address2", "str"),
    Field("city", "str", required=True, nullable=False, min_length=1),
    Field("company", "str"),
    Field("country_code", "str", required=True, nullable=False, convert=country_code),
    Field("first_name", "str", required=True, nullable=False, min_length=1),
    Field("last_name", "str", required=True, nullable=False, min_length=1),
    Field("order_attributes", "list", nullable=False, items=ATTRIBUTE),
    Field("order_note", "str", max_length=4096),
    Field("payment_method_id", "int"),
    # NOTE: spec 01, phone is required but may be the empty string.
    Field("phone", "str", required=True, nullable=False, max_length=64),
    Field("province", "str"),
    Field("shipping_lines_override", "list", items=SHIPPING_LINE),
    Field("zip", "str", max_length=32),
    Field("discounts", "list", nullable=False, items=DISCOUNT_REF),
)
ADDRESS_CREATE = Schema(
    Field("customer_id", "int", required=True, nullable=False),
    *ADDRESS_FIELDS,
    Field("presentment_currency", "str", convert=currency_code),
)
# NOTE: spec 01, the update takes the create fields but customer_id and presentment_currency;
# spec 02 (2021-01) takes every create field on update. One rule for both: the currency is fixed
# when the address is created, so the value it has is accepted and another answers 422 (not a
# 200 for a change never made; docs/api-choices.md).
ADDRESS_UPDATE = Schema(*ADDRESS_FIELDS, Field("presentment_currency", "str", nullable=False, convert=currency_code),
                        # Read-only: the address's own, sent back, passes (domain/address/service.update).
                        Field("customer_id", "int", nullable=False))

ADDRESS_VALIDATE = Schema(
    Field("address1", "str", required=True, nullable=False),
    Field("city", "str", required=True, nullable=False),
    Field("state", "str", required=True, nullable=False),
    Field("zipcode", "str", required=True, nullable=False),
)

SCHEMAS = {
    "customer.create": CUSTOMER_CREATE,
    "customer.update": CUSTOMER_CREATE,
    "address.create": ADDRESS_CREATE,
    "address.update": ADDRESS_UPDATE,
    "address_validation.verify": ADDRESS_VALIDATE,
}


# NOTE: spec 01 Addresses merge body; at most 10 source addresses (spec 01 Limits).
ADDRESS_REF = Schema(Field("id", "int", required=True, nullable=False))


ADDRESS_MERGE = Schema(
    Field("target_address", "object", required=True, nullable=False, items=ADDRESS_REF),
    Field("source_addresses", "list", required=True, nullable=False, items=ADDRESS_REF,
          min_items=1, max_items=MAX_MERGE_SOURCES),
    # null is taken as false, like an absent flag.
    Field("delete_source_addresses", "bool"),
    Field("next_charge_date", "date"),
)
SCHEMAS["address.merge"] = ADDRESS_MERGE
