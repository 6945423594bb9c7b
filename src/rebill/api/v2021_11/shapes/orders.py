"""Head (2021-11) shape of `order` (decisions §6.10, §6.12, 03-real-fields "order (2021-11)"):
what ``v2021_11/orders.py`` renders, for every order route (get, list, update, delay, clone;
2021-01's change_date). 2021-01 derives its own through ``v2021_01/orders.py``."""

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
    number,
    obj,
    string,
)
from rebill.domain.catalog.model import IMAGE_SIZES
from rebill.domain.charge.model import STATUSES as CHARGE_STATUSES
from rebill.domain.discount.model import TYPES as DISCOUNT_TYPES
from rebill.domain.order.model import STATUSES
from rebill.domain.schedule.plan import ADDRESS_FIELDS
from rebill.domain.subscription.model import ONETIME, SUBSCRIPTION

from .customers import ATTRIBUTE

ECOMMERCE = obj({"ecommerce": nullable(string())})
# NOTE: decisions §2.9, 2021-11 enums are lower case; an order's type is its charge's.
TYPES = ("checkout", "recurring")
ITEM_TYPES = (SUBSCRIPTION, ONETIME)

# An order's copy of where it goes: the address it shipped to (a checkout's may have no
# country yet: `country_code` "" and `country` null; an update may clear `phone`), with
# `country` (03-real-fields, schema only) by name.
shipping_address = obj({
    "address1": string(),
    "address2": nullable(string()),
    "city": string(),
    "company": nullable(string()),
    "country": nullable(string()),
    "country_code": string(maxLength=2),
    "first_name": string(),
    "last_name": string(),
    "phone": nullable(string()),
    "province": nullable(string()),
    "zip": nullable(string()),
})
# Who pays: the customer's billing details (a street at least) or the shipping address. The
# column is nullable: an order of a charge kept without one shows null.
billing_address = nullable(obj({
    "address1": string(),
    **{name: nullable(string()) for name in ADDRESS_FIELDS if name != "address1"},
    "country": nullable(string()),
}))

# Tax lines (domain/schedule/plan.py): a line item's with its `unit_price`, the order's with
# `code` (03-real-fields, schema only: none is kept, null), a shipping line's (none so far).
TAX = obj({"price": money(), "rate": decimal(), "title": string()})
LINE_TAX = obj({"price": money(), "rate": decimal(), "title": string(), "unit_price": money()})
ORDER_TAX = obj({"price": money(), "rate": decimal(), "title": string(), "code": null()})
# The catalog's image sizes (each may be missing from a variant's images) and `sort_order`
# (03-real-fields, schema only: null).
IMAGES = obj({"sort_order": null()}, {size: nullable(string()) for size in IMAGE_SIZES})
# The purchase item a line delivers: a checkout's one-time line names none.
PURCHASE_ITEM = nullable(integer())
PLATFORM_ID = nullable({"type": ["integer", "string"]})

line_item = obj({
    "external_inventory_policy": string(),
    "external_product_id": ECOMMERCE,
    "external_variant_id": ECOMMERCE,
    "grams": nullable(integer()),
    "handle": null(),
    "images": IMAGES,
    # NOTE: 03-real-fields, a number (the one amount of an order seen as a number alone).
    "original_price": number(),
    # NOTE: 03-real-fields, schema only: the 2021-01 names of the ids, the unit price and the item.
    "platform_product_id": PLATFORM_ID,
    "platform_variant_id": PLATFORM_ID,
    "price": money(),
    "properties": array(ATTRIBUTE),
    "purchase_item_id": PURCHASE_ITEM,
    "purchase_item_type": enum(*ITEM_TYPES),
    "quantity": integer(),
    "sku": nullable(string()),
    "sort_order": null(),
    "subscription_id": PURCHASE_ITEM,
    "tax_due": money(),
    "tax_lines": array(LINE_TAX),
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
    "source": enum("override", "store"),
    "tax_lines": array(TAX),
    "taxable": boolean(),
    "title": nullable(string()),
})

# The discount lines the charge carried (kept after the discount is deleted, decisions §7.5).
discount_line = obj({"id": integer(), "code": string(), "value": string(), "value_type": enum(*DISCOUNT_TYPES)})

order = obj({
    "id": integer(),
    "address_id": integer(),
    "billing_address": billing_address,
    # A clone has no charge (decisions §6.12); an order outlives its charge (outer join: the
    # joined fields are null when it is gone).
    "charge": nullable(obj({
        "id": integer(),
        "external_transaction_id": obj({"payment_processor": nullable(string())}),
        "payment_processor_name": nullable(string()),
        "status": nullable(enum(*CHARGE_STATUSES)),
    })),
    "client_details": obj({"browser_ip": null(), "user_agent": null()}),
    "created_at": datetime_offset(),
    "currency": string(minLength=3, maxLength=3),
    # An order outlives its customer too: what is joined from it is null when it is gone.
    "customer": obj({
        "id": integer(),
        "email": nullable(string()),
        "external_customer_id": ECOMMERCE,
        "hash": nullable(string()),
    }),
    "discounts": array(discount_line),
    "error": nullable(string()),
    "external_cart_token": null(),
    "external_order_id": ECOMMERCE,
    "external_order_name": ECOMMERCE,
    # NOTE: 03-real-fields, a string, never null: the platform's number, else the store's own.
    "external_order_number": obj({"ecommerce": string()}),
    "is_prepaid": boolean(),
    "line_items": array(line_item),
    "note": nullable(string()),
    "order_attributes": array(ATTRIBUTE),
    "processed_at": nullable(datetime_offset()),
    # NOTE: 03-real-fields, a datetime (a charge's is a date).
    "scheduled_at": datetime_offset(),
    "shipping_address": shipping_address,
    "shipping_lines": array(shipping_line),
    "status": enum(*STATUSES),
    "subtotal_price": money(),
    "tags": string(),
    "tax_lines": array(ORDER_TAX),
    "taxable": boolean(),
    "total_discounts": money(),
    "total_duties": money(),
    "total_line_items_price": money(),
    "total_price": money(),
    "total_refunds": money(),
    "total_tax": money(),
    "total_weight_grams": integer(minimum=0),
    "type": enum(*TYPES),
    "updated_at": datetime_offset(),
})

SHAPES: dict[str, Shape] = {"order": order}
