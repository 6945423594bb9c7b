"""The head (2021-11) response shapes: domain objects to JSON-ready dicts.

Datetimes carry ``+00:00`` and no fractions (decisions §2.4); money is a string with the
currency's minor digits (decisions §2.7).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec

from rebill.domain.address.model import Address
from rebill.domain.customer.model import Customer
from rebill.domain.discount.model import Discount
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


def customer(c: Customer) -> dict[str, Any]:
    return {
        "id": c.id,
        "analytics_data": c.analytics_data or {"utm_params": []},
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


def payment_method(row: Any) -> dict[str, Any]:
    """Decisions §6.1; the resource gets its endpoints with the payments issue."""
    return {
        "id": row.id,
        "customer_id": row.customer_id,
        "billing_address": row.billing_address,
        "created_at": ts(row.created_at),
        "default": row.is_default,
        "payment_details": row.payment_details or {},
        "payment_type": row.payment_type,
        "processor_customer_token": row.processor_customer_token,
        "processor_name": row.processor_name,
        "processor_payment_method_token": row.processor_payment_method_token,
        "status": row.status,
        "status_reason": row.status_reason,
        "updated_at": ts(row.updated_at),
    }


def discount(d: Discount) -> dict[str, Any]:
    """The stored discount (decisions §7.1); the full contract lands with the discounts issue."""
    return {
        "id": d.id,
        "code": d.code,
        "value": d.value,
        "value_type": d.value_type,
        "status": d.status,
        "starts_at": ts(d.starts_at),
        "ends_at": ts(d.ends_at),
        "created_at": ts(d.created_at),
        "updated_at": ts(d.updated_at),
    }


def store(s: Store) -> dict[str, Any]:
    """Decisions §1.6."""
    return {
        "id": s.id,
        "name": s.name,
        "email": s.email,
        "phone": s.phone,
        "currency": s.currency,
        "enabled_presentment_currencies": sorted(s.currencies),
        "checkout_platform": s.checkout_platform,
        "default_api_version": s.default_api_version,
        "plan_tier": s.plan_tier,
        "sandbox": s.sandbox,
        "ships_to_countries": list(s.ships_to),
        "timezone": {"iana_name": s.timezone, "name": s.timezone},
        "weight_unit": s.weight_unit,
        "created_at": ts(s.created_at),
        "updated_at": ts(s.updated_at),
    }


SERIALIZERS = {
    "customer": customer,
    "address": address,
    "payment_method": payment_method,
    "discount": discount,
    "store": store,
}
