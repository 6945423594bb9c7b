"""The 2021-11 contract: the head every older version derives from."""

from rebill.api import query as q
from rebill.api.contract import ListContract, Version

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
from .parsers import SCHEMAS
from .serializers import SERIALIZERS
from .shapes import SHAPES

# Each family of resources keeps its serializers, schemas and lists in its own module.
FAMILIES = (catalog, purchases, charges, payment_methods, orders, metafields, discounts, webhooks,
            collections, batches, checkouts, bundles)

# NOTE: spec 01 Sorting and Including related objects (2021-11 tables).
LISTS = {
    "customers": ListContract(
        plural="customers",
        kind="customer",
        filters={
            **q.window("created_at", "updated_at"),
            "email": ("email", q.text),
            "external_customer_id": ("external_customer_id", q.text),
            "hash": ("hash", q.text),
            "ids": ("ids", q.ids),
        },
        sorts=("id", "created_at", "updated_at"),
        default_sort="id-desc",
        includes=("addresses", "metafields", "payment_methods", "subscriptions"),
    ),
    "addresses": ListContract(
        plural="addresses",
        kind="address",
        filters={
            **q.window("created_at", "updated_at"),
            "customer_id": ("customer_id", q.integer),
            "discount_code": ("discount_code", q.text),
            "discount_id": ("discount_id", q.integer),
            "ids": ("ids", q.ids),
            "is_active": ("is_active", q.boolean),
        },
        sorts=("id", "updated_at"),
        default_sort="id-desc",
        includes=("charge_activities", "customer", "discount", "payment_methods", "subscriptions"),
    ),
}

for _family in FAMILIES:
    SERIALIZERS = {**SERIALIZERS, **_family.SERIALIZERS}
    SCHEMAS = {**SCHEMAS, **_family.SCHEMAS}
    LISTS = {**LISTS, **_family.LISTS}

VERSION = Version(
    name="2021-11",
    serializers=SERIALIZERS,
    schemas=SCHEMAS,
    lists=LISTS,
    created_status=201,
    deleted_status=204,
    cursor_in_body=True,
    shape_source=lambda: SHAPES,
)
