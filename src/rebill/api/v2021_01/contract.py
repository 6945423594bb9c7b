"""The 2021-01 contract: the head through the change modules, with the list contracts of
spec 02 (filters, counts, include values), each written as its difference from the head."""

from dataclasses import replace

from rebill.api import query as q
from rebill.api.contract import ListContract, derive
from rebill.api.v2021_11.contract import VERSION as HEAD

from . import (
    batches,
    bundles,
    catalog,
    charges,
    checkouts,
    collections,
    discounts,
    metafields,
    orders,
    payment_methods,
    purchases,
    webhooks,
)
from .changes import CHANGES

FAMILIES = (catalog, purchases, charges, payment_methods, orders, metafields, discounts, webhooks,
            collections, batches, checkouts, bundles)

WINDOW = ("created_at_min", "created_at_max", "updated_at_min", "updated_at_max")


def _without(contract: ListContract, *names: str) -> dict[str, tuple[str, q.QueryParser]]:
    return {name: spec for name, spec in contract.filters.items() if name not in names}


_customers = HEAD.lists["customers"]
_addresses = HEAD.lists["addresses"]

LISTS = {
    # NOTE: spec 02 Customers list: `platform_customer_id` and `status`.
    "customers": replace(
        _customers,
        filters={**_without(_customers, "external_customer_id"),
                 "platform_customer_id": ("external_customer_id", q.text),
                 "status": ("status", q.choice("ACTIVE", "INACTIVE"))},
        includes=("addresses", "metafields", "payment_methods", "subscriptions", "referral_info"),
        # A count takes every filter of its list (spec 02 names the window and status; a client
        # counting what it lists expects the same answer, docs/api-choices.md).
        count_filters=(*_without(_customers, "external_customer_id"), "platform_customer_id", "status"),
    ),
    # NOTE: spec 02 Addresses list: no `is_active`.
    "addresses": replace(
        _addresses,
        filters=_without(_addresses, "is_active"),
        includes=("customer", "discount", "payment_methods", "subscriptions"),
        # A count takes every list filter (spec 02 names the window and discounts; `customer_id`
        # and `ids` too, docs/api-choices.md).
        count_filters=tuple(_without(_addresses, "is_active")),
    ),
}

for _family in FAMILIES:
    LISTS = {**LISTS, **_family.LISTS}

VERSION = derive(HEAD, name="2021-01", changes=CHANGES + tuple(c for f in FAMILIES for c in f.CHANGES), lists=LISTS,
                 created_status=200, deleted_status=200, cursor_in_body=False,
                 schemas={name: schema for f in FAMILIES for name, schema in f.SCHEMAS.items()})
# NOTE: spec 02, addresses are created under their customer (the id is in the path).
VERSION.schemas["address.create"] = VERSION.schemas["address.create"].without("customer_id")
# NOTE: decisions §5.16, bulk creates and one-time items name their address in the path.
VERSION.schemas["subscription.bulk_create"] = VERSION.schemas["subscription.create"].without("address_id")
VERSION.schemas["onetime.create"] = VERSION.schemas["onetime.create"].without("address_id")
# NOTE: decisions §2.9, statuses in upper case: in the messages that name one too.
VERSION.status_word = str.upper
