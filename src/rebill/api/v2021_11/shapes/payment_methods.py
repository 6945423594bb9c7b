"""Head (2021-11) shapes of `payment_method` (decisions §6.1, §6.12, 03-real-fields
"payment_method (2021-11)") and of `payment_source`, the head form the deprecated 2021-01
payment sources are derived from: what ``v2021_11/payment_methods.py`` renders. 2021-01 derives
its own through ``v2021_01/payment_methods.py`` (the sources) and ``v2021_01/changes.py``
(naive datetimes)."""

from __future__ import annotations

from rebill.api.shapes import (
    any_object,
    boolean,
    datetime_offset,
    enum,
    integer,
    nullable,
    obj,
    string,
)
from rebill.api.v2021_11.payment_methods import BILLING_FIELDS, CARD_DETAILS
from rebill.domain.payment_method.model import PAYMENT_TYPES, STATUSES

# Every field of the stored address, null when not given; `country` (the name of `country_code`),
# `company_name` (= `company`) and `name` (the first and last names) are shown on every record
# (03-real-fields has them on some records only).
_billing = {name: nullable(string()) for name in (*BILLING_FIELDS, "country", "company_name", "name")}
# The body's country is converted to its upper-case 2-letter code.
_billing["country_code"] = nullable(string(minLength=2, maxLength=2))
BILLING_ADDRESS = obj(_billing)

# NOTE: 03-real-fields payment_method (2021-11): the card fields are on every record (null when
# unknown); the others only when the client (or Stripe, issue 16) gave them.
_card = {"brand": nullable(string()), "exp_month": nullable(integer(minimum=1, maximum=12)),
         "exp_year": nullable(integer()), "last4": nullable(string())}
PAYMENT_DETAILS = obj(
    {name: _card[name] for name in CARD_DETAILS},
    {"cardholder_name": nullable(string()), "funding_type": nullable(string()),
     "paypal_email": nullable(string()), "wallet_type": nullable(string())},
)

payment_method = obj({
    "id": integer(),
    "customer_id": integer(),
    "billing_address": BILLING_ADDRESS,
    "created_at": datetime_offset(),
    # A customer's first method becomes its default (decisions §6.12): never null here.
    "default": boolean(),
    "payment_details": PAYMENT_DETAILS,
    "payment_type": enum(*PAYMENT_TYPES),
    "processor_customer_token": nullable(string()),
    "processor_name": string(),
    "processor_payment_method_token": nullable(string()),
    "status": enum(*STATUSES),
    "status_reason": nullable(string()),
    "updated_at": datetime_offset(),
    # NOTE: 03-real-fields, on every record: empty unless `include` asks (the document puts the
    # includable records in it).
    "include": any_object(),
})

# Not rendered in 2021-11 (spec 02: the payment sources are 2021-01's alone): the method with its
# customer's dunning flag, which 2021-01 turns into the old shape.
payment_source = obj({**payment_method["properties"], "has_payment_method_in_dunning": boolean()})

SHAPES = {
    "payment_method": payment_method,
    "payment_source": payment_source,
}
