"""Head (2021-11) shapes of the store (decisions §1.6, 03-real-fields "store"), the login
probe, token information, the shipping countries of 2021-01's `/shop`, the test clock's answer
and `{"count": n}`: what ``v2021_11/serializers.py`` and ``resources/store.py`` render."""

from __future__ import annotations

from rebill.api.shapes import array, boolean, date, datetime_offset, integer, obj, string

store = obj({
    "id": integer(),
    "name": string(),
    "checkout_logo_url": string(),
    "checkout_platform": string(),
    "currency": string(minLength=3, maxLength=3),
    "customer_portal_base_url": string(),
    "default_api_version": string(),
    "email": string(),
    "enabled_presentment_currencies": array(string()),
    "external_platform": string(),
    "identifier": string(),
    "merchant_portal_base_url": string(),
    "phone": string(),
    "plan_tier": string(),
    "sandbox": boolean(),
    "ships_to_countries": array(string()),
    "timezone": obj({"iana_name": string(), "iana_timezone": string(), "name": string()}),
    "weight_unit": string(),
    "created_at": datetime_offset(),
    "updated_at": datetime_offset(),
})

# `GET /`: the login probe (decisions §1.5).
root = obj({"message": string(), "store": string(), "api_version": string()})

# `GET /token_information` (decisions §1.5, §5.16): emails are "" when there is none.
token_information = obj({
    "name": string(),
    "contact_email": string(),
    "scopes": array(string()),
    "client": obj({"name": string(), "contact_email": string()}),
})

# `GET /shop/shipping_countries` (2021-01): a country the store ships to and its provinces.
shipping_country = obj({
    "code": string(),
    "name": string(),
    "provinces": array(obj({"code": string(), "name": string()})),
})

# `POST /store/clock/advance` (a Rebill extension): the store's new time and what the run did.
store_clock = obj({
    # The store's clock in UTC as every datetime of the version; `today` is its date in its zone.
    "now": datetime_offset(),
    "today": date(),
    "processed": integer(minimum=0),
    "paid": integer(minimum=0),
    "pending": integer(minimum=0),
    "failed": integer(minimum=0),
})

count = obj({"count": integer(minimum=0)})

SHAPES = {
    "store": store,
    "root": root,
    "token_information": token_information,
    "shipping_country": shipping_country,
    "store_clock": store_clock,
    "count": count,
}
