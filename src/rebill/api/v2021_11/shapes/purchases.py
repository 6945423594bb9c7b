"""Head (2021-11) shapes of `subscription` and `onetime` (decisions §5.1, §5.4-§5.6, §5.16,
03-real-fields "subscription (2021-11)", "onetime (2021-11)"): what ``v2021_11/purchases.py``
renders. 2021-01 derives its own through ``v2021_01/purchases.py``. The bulk replies of 2021-01
(`{"subscriptions": [...]}`) are ``listed`` subscriptions: no shape of their own."""

from __future__ import annotations

from rebill.api.shapes import (
    array,
    boolean,
    date,
    datetime_offset,
    enum,
    integer,
    money,
    nullable,
    obj,
    string,
)
from rebill.domain.schedule.dates import UNITS
from rebill.domain.subscription.intervals import MAX_CHARGES, MAX_FREQUENCY
from rebill.domain.subscription.model import ACTIVE, CANCELLED, EXPIRED

from .customers import ANALYTICS, ATTRIBUTE, EXTERNAL_ID

FREQUENCY = integer(minimum=1, maximum=MAX_FREQUENCY)

# What both kinds of purchase item render (``_common``).
_COMMON = {
    "id": integer(),
    "address_id": integer(),
    "customer_id": integer(),
    "created_at": datetime_offset(),
    # NOTE: decisions §5.16, nested `{"ecommerce": ...}`; an item made without one shows null.
    "external_product_id": EXTERNAL_ID,
    "external_variant_id": EXTERNAL_ID,
    "presentment_currency": string(minLength=3, maxLength=3),
    "price": money(),
    "product_title": string(),
    "properties": array(ATTRIBUTE),
    "quantity": integer(minimum=1),
    "sku": nullable(string()),
    "sku_override": boolean(),
    "updated_at": datetime_offset(),
    "variant_title": nullable(string()),
}

subscription = obj({
    **_COMMON,
    "analytics_data": ANALYTICS,
    "cancellation_reason": nullable(string()),
    "cancellation_reason_comments": nullable(string()),
    "cancelled_at": nullable(datetime_offset()),
    "charge_interval_frequency": FREQUENCY,
    "cutoff_day_of_month": nullable(integer(minimum=0, maximum=31)),
    "cutoff_day_of_week": nullable(integer(minimum=0, maximum=6)),
    "expire_after_specific_number_of_charges": nullable(integer(minimum=1, maximum=MAX_CHARGES)),
    "has_queued_charges": boolean(),
    "is_prepaid": boolean(),
    "is_skippable": boolean(),
    "is_swappable": boolean(),
    "max_retries_reached": boolean(),
    # NOTE: decisions §5.1, a date; null once cancelled or expired.
    "next_charge_scheduled_at": nullable(date()),
    "order_day_of_month": nullable(integer(minimum=1, maximum=31)),
    # NOTE: decisions §5.1, 0 = Monday.
    "order_day_of_week": nullable(integer(minimum=0, maximum=6)),
    "order_interval_frequency": FREQUENCY,
    # NOTE: decisions §5.16, lower case in both versions.
    "order_interval_unit": enum(*UNITS),
    "plan_id": nullable(integer()),
    "status": enum(ACTIVE, CANCELLED, EXPIRED),
})

onetime = obj({
    **_COMMON,
    "is_cancelled": boolean(),
    # NOTE: 03-real-fields, a one-time item's next date is a datetime (midnight UTC).
    "next_charge_scheduled_at": datetime_offset(),
})

SHAPES = {"subscription": subscription, "onetime": onetime}
