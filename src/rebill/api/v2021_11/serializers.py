"""The head (2021-11) response shapes: domain objects to JSON-ready dicts.

Datetimes carry ``+00:00`` and no fractions (decisions §2.4); money is a string with the
currency's minor digits (decisions §2.7).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from rebill.domain import analytics
from rebill.domain.address.model import Address
from rebill.domain.customer.model import Customer
from rebill.domain.store.model import Store

_encode = msgspec.json.Encoder().encode
_UTC = timezone.utc


def ts(value: datetime | None) -> str | None:
    """``YYYY-MM-DDTHH:MM:SS+00:00``. msgspec writes a UTC datetime as ``"YYYY-MM-DDTHH:MM:SS
    [.ffffff]Z"`` (a four-digit year, so the first 19 characters are always date and time);
    that slice costs a sixth of ``isoformat``, and every resource renders two or three."""
    if value is None:
        return None
    if value.tzinfo is not _UTC:  # domain datetimes are UTC already; this keeps ts honest
        value = value.astimezone(_UTC)
    return _encode(value)[1:20].decode() + "+00:00"


# Spec 03: `analytics_data.utm_params` is an array, also when the client sent none.
_analytics = analytics.shown


def customer(c: Customer) -> dict[str, Any]:
    """The public 2021-11 customer with every field of spec 03 (docs/api-choices.md, Customers)."""
    return {
        "id": c.id,
        "analytics_data": _analytics(c.analytics_data),
        # NOTE: spec 03 customer (2021-11). Store credit does not exist yet: nothing to apply.
        "apply_credit_to_next_checkout_charge": False,
        "apply_credit_to_next_recurring_charge": False,
        # NOTE: spec 03 schema only; processor tokens live on payment methods (decisions §6.1):
        # the default method's, when it is that processor's.
        "braintree_customer_token": c.customer_token("braintree"),
        "created_at": ts(c.created_at),
        "email": c.email,
        "external_customer_id": {"ecommerce": c.external_customer_id},
        "first_charge_processed_at": ts(c.first_charge_processed_at),
        "first_name": c.first_name,
        "has_payment_method_in_dunning": c.has_payment_method_in_dunning,
        "has_valid_payment_method": c.has_valid_payment_method,
        "hash": c.hash,
        "last_name": c.last_name,
        "orders_count": c.orders_count,
        "paypal_customer_token": c.customer_token("paypal"),
        "phone": c.phone,
        "subscriptions_active_count": c.subscriptions_active_count,
        "subscriptions_total_count": c.subscriptions_total_count,
        "tax_exempt": c.tax_exempt,
        "updated_at": ts(c.updated_at),
    }


def address(a: Address) -> dict[str, Any]:
    discounts = []
    if a.discount is not None:
        d = a.discount
        discounts.append({"id": d.id, "code": d.code, "value": d.value, "value_type": d.value_type})
    return {
        "id": a.id,
        "address1": a.address1,
        "address2": a.address2,
        "city": a.city,
        "company": a.company,
        "country_code": a.country_code,
        "created_at": ts(a.created_at),
        "customer_id": a.customer_id,
        "discounts": discounts,
        "first_name": a.first_name,
        "last_name": a.last_name,
        "order_attributes": a.order_attributes,
        "order_note": a.order_note,
        "payment_method_id": a.payment_method_id,
        "phone": a.phone,
        "presentment_currency": a.presentment_currency,
        "province": a.province,
        "shipping_lines_conserved": a.shipping_lines_conserved,
        "shipping_lines_override": a.shipping_lines_override,
        "updated_at": ts(a.updated_at),
        "zip": a.zip,
    }


_NOT_IN_HOST = re.compile(r"[^a-z0-9]+")
STORE_DOMAIN_SUFFIX = "rebill.test"
# NOTE: spec 03 store, `external_platform` names the e-commerce platform behind the checkout
# platform, with the neutral `platform_*` names of the spec README.
EXTERNAL_PLATFORMS = {"platform_b_hosted": "platform_b", "platform_s_hosted": "platform_s",
                      "platform_s_checkout": "platform_s", "custom": "custom"}


def store_domain(s: Store) -> str:
    """``<name>.rebill.test``: the store name as a host label (lower case, every run of other
    characters one ``-``, at most 63 characters); ``store-<id>`` when nothing is left."""
    label = _NOT_IN_HOST.sub("-", s.name.lower()).strip("-")[:63].strip("-") or f"store-{s.id}"
    return f"{label}.{STORE_DOMAIN_SUFFIX}"


@lru_cache(maxsize=512)
def timezone_label(iana_name: str, year: int) -> str:
    """``(GMT+01:00) Europe/Paris``: the zone's standard offset (the smaller of its offsets on
    1 January and 1 July of ``year``, so daylight saving never shows), then its IANA name. A
    name the zone database does not know is shown as it is."""
    try:
        zone = ZoneInfo(iana_name)
    except (ZoneInfoNotFoundError, ValueError):
        return iana_name
    offsets = [datetime(year, month, 1, tzinfo=_UTC).astimezone(zone).utcoffset() for month in (1, 7)]
    minutes = int(min(o for o in offsets if o is not None).total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    return f"(GMT{sign}{hours:02d}:{minutes:02d}) {iana_name}"


def store(s: Store) -> dict[str, Any]:
    """Decisions §1.6, with every field of spec 03 store (2021-11) (docs/api-choices.md, Stores)."""
    domain = store_domain(s)
    return {
        "id": s.id,
        "name": s.name,
        # NOTE: decisions §1.6, the contact settings are strings, `""` until set (issue 15).
        "checkout_logo_url": s.checkout_logo_url,
        "checkout_platform": s.checkout_platform,
        "currency": s.currency,
        "customer_portal_base_url": f"https://{domain}/portal",
        "default_api_version": s.default_api_version,
        "email": s.email,
        "enabled_presentment_currencies": sorted(s.currencies),
        "external_platform": EXTERNAL_PLATFORMS.get(s.checkout_platform, s.checkout_platform),
        "identifier": domain,
        "merchant_portal_base_url": f"https://{domain}/merchant",
        "phone": s.phone,
        "plan_tier": s.plan_tier,
        "sandbox": s.sandbox,
        "ships_to_countries": list(s.ships_to),
        "timezone": {"iana_name": s.timezone, "iana_timezone": s.timezone,
                     "name": timezone_label(s.timezone, s.updated_at.year)},
        "weight_unit": s.weight_unit,
        "created_at": ts(s.created_at),
        "updated_at": ts(s.updated_at),
    }


def store_clock(answer: dict[str, Any]) -> dict[str, Any]:
    """A test clock advance's answer: the store's clock (a datetime, rendered as every
    datetime of the version is; found by an audit: it carried the store's own offset) and its
    date in the store's timezone, with the billing figures of the walk."""
    return {"now": ts(answer["now"]), **{k: v for k, v in answer.items() if k != "now"}}


SERIALIZERS = {
    "customer": customer,
    "address": address,
    "store": store,
    "store_clock": store_clock,
}
