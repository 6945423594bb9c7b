"""Head (2021-11) shapes of customers and addresses (spec 01, 03-real-fields "customer
(2021-11)" and "address (2021-11)"), of the address check of 2021-01 and of the delivery
schedule: what ``v2021_11/serializers.py`` and ``resources/customers.py``, ``addresses.py``
render. 2021-01 derives its own through ``v2021_01/changes.py``."""

from __future__ import annotations

from rebill.api.shapes import (
    any_object,
    array,
    boolean,
    date,
    datetime_offset,
    integer,
    money,
    nullable,
    obj,
    string,
)
from rebill.domain.customer.model import BILLING_FIELDS
from rebill.domain.schedule.plan import ADDRESS_FIELDS

# NOTE: 03-real-fields, `analytics_data.utm_params` is an array; the rest is the client's own.
ANALYTICS = {"type": "object", "properties": {"utm_params": array()}, "required": ["utm_params"]}
EXTERNAL_ID = obj({"ecommerce": nullable(string())})

customer = obj({
    "id": integer(),
    "analytics_data": ANALYTICS,
    "apply_credit_to_next_checkout_charge": boolean(),
    "apply_credit_to_next_recurring_charge": boolean(),
    "braintree_customer_token": nullable(string()),
    "created_at": datetime_offset(),
    "email": string(),
    "external_customer_id": EXTERNAL_ID,
    "first_charge_processed_at": nullable(datetime_offset()),
    "first_name": string(),
    "has_payment_method_in_dunning": boolean(),
    "has_valid_payment_method": boolean(),
    "hash": string(),
    "last_name": string(),
    "orders_count": integer(minimum=0),
    "paypal_customer_token": nullable(string()),
    "phone": nullable(string()),
    "subscriptions_active_count": integer(minimum=0),
    "subscriptions_total_count": integer(minimum=0),
    "tax_exempt": boolean(),
    "updated_at": datetime_offset(),
})

# An order attribute as the client sent it: `value` may be null or left out.
ATTRIBUTE = obj({"name": string(), "value": nullable(string())})
SHIPPING_LINE = obj({"code": nullable(string()), "price": money(), "title": nullable(string())})
DISCOUNT_REF = obj({"id": integer(), "code": string(), "value": string(), "value_type": string()})

address = obj({
    "id": integer(),
    "address1": string(),
    "address2": nullable(string()),
    "city": string(),
    "company": nullable(string()),
    "country_code": string(minLength=2, maxLength=2),
    "created_at": datetime_offset(),
    "customer_id": integer(),
    # NOTE: spec 01, one discount applies at a time: none or one element.
    "discounts": array(DISCOUNT_REF, maxItems=1),
    "first_name": string(),
    "last_name": string(),
    "order_attributes": array(ATTRIBUTE),
    "order_note": nullable(string()),
    "payment_method_id": nullable(integer()),
    "phone": string(),
    "presentment_currency": string(minLength=3, maxLength=3),
    "province": nullable(string()),
    "shipping_lines_conserved": array(SHIPPING_LINE),
    "shipping_lines_override": nullable(array(SHIPPING_LINE)),
    "updated_at": datetime_offset(),
    "zip": nullable(string()),
})

# `POST /addresses/validate` (2021-01, spec 02): the verifier's verdict, `errors` by field.
address_validation = obj({
    "city": nullable(string()),
    "errors": {"type": "object", "additionalProperties": {"anyOf": [string(), array(string())]}},
    "state": nullable(string()),
    "state_name": nullable(string()),
    "zipcode": nullable(string()),
})

# `GET /customers/{id}/delivery_schedule` (decisions §5.15, 03-real-fields "delivery_schedule").
_EXTERNAL = obj({"ecommerce": nullable(string())})
_line = obj({
    "external_product_id": _EXTERNAL,
    "external_variant_id": _EXTERNAL,
    "images": any_object(),
    "is_skippable": boolean(),
    "is_skipped": boolean(),
    "plan_type": string(),
    "product_title": string(),
    "properties": array(ATTRIBUTE),
    "quantity": integer(),
    "subscription_id": nullable(integer()),  # none for a checkout's one-time line (docs/api-choices.md)
    "subtotal_price": money(),
    "unit_price": money(),
    "variant_title": nullable(string()),
})
_payment_method = nullable(obj({
    "id": integer(),
    "billing_address": obj({name: nullable(string()) for name in BILLING_FIELDS}),
    "payment_details": any_object(),
}))
_order = obj({
    # NOTE: spec 03, a projected order has no id yet; a prepaid charge's later order, paid and
    # stored, has its own (docs/api-choices.md).
    "id": nullable(integer()),
    "address_id": integer(),
    "charge_id": nullable(integer()),
    "currency": string(),
    "line_items": array(_line),
    "payment_method": _payment_method,
    "shipping_address": obj({name: nullable(string()) for name in ADDRESS_FIELDS}),
    "total_price": money(),
})
delivery_schedule = obj({
    "customer": obj({"id": integer(), "email": string(), "first_name": string(), "last_name": string()}),
    "deliveries": array(obj({"date": date(), "orders": array(_order)})),
})

SHAPES = {
    "customer": customer,
    "address": address,
    "address_validation": address_validation,
    "delivery_schedule": delivery_schedule,
}
