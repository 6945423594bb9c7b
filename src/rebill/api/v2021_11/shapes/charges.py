"""Head (2021-11) shape of `charge` (spec 01 Charge, decisions §5.9-§5.13, 03-real-fields
"charge (2021-11)"): what ``v2021_11/charges.py`` renders, for every charge route (get, list,
skip, unskip, process, capture, refund, apply/remove discount, change the date, skip by
address). 2021-01 derives its own through ``v2021_01/charges.py``."""

from __future__ import annotations

from rebill.api.shapes import (
    Shape,
    array,
    boolean,
    date,
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
from rebill.domain.charge.model import STATUSES
from rebill.domain.discount.model import TYPES
from rebill.domain.subscription.model import ONETIME, SUBSCRIPTION

from .customers import ATTRIBUTE

CHARGE_TYPES = ("checkout", "recurring")
PURCHASE_ITEM_TYPES = (SUBSCRIPTION, ONETIME)
# NOTE: decisions §5.9, the store's rate for the country, or the address's override.
SHIPPING_SOURCES = ("override", "store")
# A stored platform id as 2021-01 shows it (api/external_ids.py `platform_id`): an integer when
# it is one, else the stored string.
PLATFORM_ID = nullable({"type": ["integer", "string"]})

# The shipping address of a charge is its address's (domain/schedule/plan.py
# `shipping_address`), with `country` (the name of the code, null when the code is unknown).
shipping_address = obj({
    "address1": string(),
    "address2": nullable(string()),
    "city": string(),
    "company": nullable(string()),
    "country": nullable(string()),
    "country_code": string(),
    "first_name": string(),
    "last_name": string(),
    "phone": string(),
    "province": nullable(string()),
    "zip": nullable(string()),
})
# The billing address is the customer's 2021-01 billing address (or a checkout's) when it has a
# street, else the shipping address: only `address1` is sure to be set.
billing_address = obj({name: (string() if name == "address1" else nullable(string()))
                       for name in shipping_address["properties"]})

TAX_LINE = obj({"price": money(), "rate": decimal(), "title": string()})
# A line's tax line also says the tax of one unit (spec 01 line item).
LINE_TAX_LINE = obj({"price": money(), "rate": decimal(), "title": string(), "unit_price": money()})
# The sizes the catalog gave (null when it gave none) and `sort_order` (03-real-fields, schema
# only: the catalog keeps none).
IMAGES = obj({**{size: nullable(string()) for size in IMAGE_SIZES}, "sort_order": null()})
EXTERNAL_ID = obj({"ecommerce": nullable(string())})

line_item = obj({
    "external_product_id": EXTERNAL_ID,
    "external_variant_id": EXTERNAL_ID,
    "grams": nullable(integer()),
    "handle": null(),
    "images": IMAGES,
    "original_price": money(),
    "platform_product_id": PLATFORM_ID,
    "platform_variant_id": PLATFORM_ID,
    "price": money(),
    "properties": array(ATTRIBUTE),
    # A checkout's one-time line names no purchase item (decisions §7.3).
    "purchase_item_id": nullable(integer()),
    "purchase_item_type": enum(*PURCHASE_ITEM_TYPES),
    "quantity": integer(minimum=1),
    "sku": nullable(string()),
    "subscription_id": nullable(integer()),
    "tax_due": money(),
    "tax_lines": array(LINE_TAX_LINE),
    "taxable": boolean(),
    "taxable_amount": money(),
    "title": string(),
    "total_price": money(),
    "unit_price": money(),
    "unit_price_includes_tax": boolean(),
    "variant_title": nullable(string()),
})

shipping_line = obj({
    "code": nullable(string()),
    "price": money(),
    "retrieved_at": null(),
    "source": enum(*SHIPPING_SOURCES),
    "status": enum("active"),
    "tax_lines": array(TAX_LINE),
    "taxable": boolean(),
    "title": nullable(string()),
})

# NOTE: spec 01, one discount applies at a time: none or one element.
DISCOUNT = obj({"id": integer(), "code": string(), "value": decimal(), "value_type": enum(*TYPES)})

charge = obj({
    "id": integer(),
    "address_id": integer(),
    "analytics_data": obj({"utm_params": array()}),
    "billing_address": nullable(billing_address),
    "browser_ip": null(),
    "charge_attempts": integer(minimum=0),
    "client_details": obj({"browser_ip": null(), "user_agent": null()}),
    "created_at": datetime_offset(),
    "currency": string(minLength=3, maxLength=3),
    # A deleted customer's processed charges stay (money history): its fields are then null.
    "customer": obj({
        "id": integer(),
        "email": nullable(string()),
        "external_customer_id": EXTERNAL_ID,
        "hash": nullable(string()),
    }),
    "discounts": array(DISCOUNT, maxItems=1),
    "error": nullable(string()),
    "error_type": nullable(string()),
    "external_order_id": EXTERNAL_ID,
    "external_transaction_id": obj({"payment_processor": nullable(string())}),
    "external_variant_id_not_found": boolean(),
    "external_variant_not_found": null(),
    "has_uncommitted_changes": boolean(),
    "last_charge_attempt": nullable(datetime_offset()),
    "line_items": array(line_item),
    "merged_at": nullable(datetime_offset()),
    "note": nullable(string()),
    "order_attributes": array(ATTRIBUTE),
    "orders_count": integer(minimum=1),
    "original_scheduled_at": nullable(date()),
    "payment_processor": nullable(string()),
    "processed_at": nullable(datetime_offset()),
    # NOTE: spec 01 Charge, a date (03-real-fields saw a datetime; the seed wins).
    "retry_date": nullable(date()),
    "scheduled_at": date(),
    "shipping_address": shipping_address,
    "shipping_lines": array(shipping_line),
    "status": enum(*STATUSES),
    "subtotal_price": money(),
    "tags": string(),
    "tax_lines": array(TAX_LINE),
    "taxable": boolean(),
    "taxes_included": boolean(),
    "total_discounts": money(),
    "total_duties": money(),
    "total_line_items_price": money(),
    "total_price": money(),
    "total_refunds": money(),
    "total_tax": money(),
    "total_weight_grams": integer(minimum=0),
    "type": enum(*CHARGE_TYPES),
    "updated_at": datetime_offset(),
})

SHAPES: dict[str, Shape] = {"charge": charge}
