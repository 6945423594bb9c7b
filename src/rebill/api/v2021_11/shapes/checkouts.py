"""Head (2021-11) shapes of `checkout`, `checkout_charge` and `shipping_rate` (spec 02 Checkout,
its line item, shipping rate object and charge result; decisions §7.7 items 1-6, 14-15;
03-real-fields "checkout (2021-01)", in 2021-11's conventions): what ``v2021_11/checkouts.py``
renders. 2021-01 derives its own through ``v2021_01/checkouts.py``."""

from __future__ import annotations

from rebill.api.shapes import (
    Shape,
    array,
    boolean,
    datetime_offset,
    decimal,
    enum,
    integer,
    money,
    null,
    nullable,
    obj,
    string,
)
from rebill.domain.catalog.model import IMAGE_SIZES
from rebill.domain.charge.model import STATUSES as CHARGE_STATUSES
from rebill.domain.checkout.model import ADDRESS_FIELDS, ONETIME, PAYMENT_TYPES, SUBSCRIPTION
from rebill.domain.discount.model import TYPES as DISCOUNT_TYPES
from rebill.domain.schedule.dates import UNITS

from .customers import ANALYTICS, ATTRIBUTE

# Spec 02 Checkout `billing_address`, `shipping_address`: each field as sent (a partial
# shipping address has only its country and zip, decisions §7.7.4).
ADDRESS = obj({name: nullable(string()) for name in ADDRESS_FIELDS})
EXTERNAL_ID = obj({"ecommerce": nullable(string())})
# A tax line of the checkout (the store's tax rate, schedule/plan.py): `rate` a fraction.
TAX_LINE = obj({"price": money(), "rate": decimal(), "title": string()})

_nullable_int = nullable(integer())
_unit = nullable(enum(*UNITS))

line_item = obj({
    "charge_interval_frequency": _nullable_int,
    "cutoff_day_of_month": _nullable_int,
    "cutoff_day_of_week": _nullable_int,
    "expire_after_specific_number_of_charges": _nullable_int,
    # NOTE: decisions §7.7.1, a line names a catalog product and variant: never null.
    "external_product_id": obj({"ecommerce": string()}),
    "external_variant_id": obj({"ecommerce": string()}),
    "first_recurring_charge_delay": _nullable_int,
    "fulfillment_service": string(),
    "grams": _nullable_int,
    "handle": nullable(string()),
    "image": nullable(string()),
    "images": obj({size: nullable(string()) for size in IMAGE_SIZES}),
    "line_price": nullable(money()),
    "order_day_of_month": _nullable_int,
    "order_day_of_week": _nullable_int,
    "order_interval_frequency": _nullable_int,
    "order_interval_unit": _unit,
    "order_interval_unit_type": _unit,
    "original_price": money(),
    "price": money(),
    "product_id": string(),
    "product_type": nullable(string()),
    "properties": array(ATTRIBUTE),
    "quantity": integer(minimum=1),
    "recurring_price": nullable(money()),
    "requires_shipping": boolean(),
    "sku": nullable(string()),
    "subscription_id": _nullable_int,
    "tax_code": null(),
    "taxable": boolean(),
    "title": string(),
    "type": enum(SUBSCRIPTION, ONETIME),
    "variant_id": string(),
    "variant_title": nullable(string()),
    "vendor": nullable(string()),
})

# NOTE: decisions §7.7.15, a known code that does not apply is kept, `applicable` false with
# its reason; a code whose discount was deleted since shows no value.
APPLIED_DISCOUNT = obj({
    "amount": money(),
    "applicable": boolean(),
    "non_applicable_reason": nullable(string()),
    "value": nullable(decimal()),
    "value_type": nullable(enum(*DISCOUNT_TYPES)),
})

checkout = obj({
    "id": integer(),
    "token": string(),
    "analytics_data": ANALYTICS,
    "applied_discount": nullable(APPLIED_DISCOUNT),
    "billing_address": nullable(ADDRESS),
    "buyer_accepts_marketing": boolean(),
    "charge_id": _nullable_int,
    "completed_at": nullable(datetime_offset()),
    "created_at": datetime_offset(),
    "currency": string(minLength=3, maxLength=3),
    "discount_code": nullable(string()),
    "email": nullable(string()),
    "external_checkout_id": EXTERNAL_ID,
    "external_checkout_source": nullable(string()),
    "external_customer_id": EXTERNAL_ID,
    "line_items": array(line_item),
    "note": nullable(string()),
    "order_attributes": array(ATTRIBUTE),
    "payment_processor": nullable(string()),
    "payment_processor_customer_id": nullable(string()),
    "payment_processor_transaction_id": nullable(string()),
    "phone": nullable(string()),
    "requires_shipping": boolean(),
    "shipping_address": nullable(ADDRESS),
    # NOTE: spec 02 Checkout, present once the shipping address is set.
    "shipping_address_validations": nullable(obj({"country_is_supported": boolean(), "ups": boolean()})),
    # NOTE: spec 02 Checkout, an array; `shipping_rate` the applied rate's name.
    # The store's rates always have a code and a title (store/rates.py).
    "shipping_line": array(obj({"code": string(), "price": money(), "title": string()})),
    "shipping_rate": nullable(string()),
    "subtotal_price": money(),
    "tax_lines": array(TAX_LINE),
    "taxes_included": boolean(),
    "total_price": money(),
    "total_tax": money(),
    "updated_at": datetime_offset(),
})

# NOTE: spec 02 Checkouts charge result, answered once the checkout is paid (a declined payment
# is a 422): its charge, the payment as asked (`payment_type` a card when not said) and `status`,
# the status of the charge it made (`success`, or `pending` for an authorization awaiting its
# capture). `payment_processor_customer_id` stays null: the sandbox gateway keeps no processor
# customer.
checkout_charge = obj({
    "authorization_token": nullable(string()),
    "charge_id": integer(),
    "free": boolean(),
    "payment_processor": string(),
    "payment_processor_customer_id": nullable(string()),
    "payment_processor_transaction_id": nullable(string()),
    "payment_token": string(),
    "payment_type": enum(*PAYMENT_TYPES),
    "status": enum(*CHARGE_STATUSES),
})

# NOTE: spec 02 shipping rate object; `checkout` the totals the rate gives the checkout.
shipping_rate = obj({
    "checkout": obj({"subtotal_price": money(), "total_price": money(), "total_tax": money()}),
    "code": string(),
    "delivery_range": null(),
    "description": null(),
    "handle": string(),
    "name": string(),
    "phone_required": boolean(),
    "price": money(),
    "tax_lines": array(TAX_LINE),
    "title": string(),
})

SHAPES: dict[str, Shape] = {
    "checkout": checkout,
    "checkout_charge": checkout_charge,
    "shipping_rate": shipping_rate,
}
