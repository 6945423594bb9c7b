"""The 2021-01 contract: the head through the change modules, with its own list contracts
(spec 02 filters, counts, sorting and include tables)."""

from rebill.api import query as q
from rebill.api.contract import ListContract, derive
from rebill.api.v2021_11.contract import VERSION as HEAD

from .changes import CHANGES

_status = q.choice("ACTIVE", "INACTIVE")

LISTS = {
    "customers": ListContract(
        plural="customers",
        kind="customer",
        filters={
            **q.window("created_at", "updated_at"),
            "email": ("email", q.text),
            "hash": ("hash", q.text),
            "ids": ("ids", q.ids),
            "platform_customer_id": ("external_customer_id", q.text),
            "status": ("status", _status),
        },
        sorts=("id", "created_at", "updated_at"),
        default_sort="id-desc",
        includes=("addresses", "metafields", "payment_methods", "subscriptions", "referral_info"),
        count_filters=("created_at_min", "created_at_max", "updated_at_min", "updated_at_max", "status"),
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
        },
        sorts=("id", "updated_at"),
        default_sort="id-desc",
        includes=("customer", "discount", "payment_methods", "subscriptions"),
        count_filters=("created_at_min", "created_at_max", "updated_at_min", "updated_at_max",
                       "discount_code", "discount_id"),
    ),
}

VERSION = derive(HEAD, name="2021-01", changes=CHANGES, lists=LISTS, created_status=200, cursor_in_body=False)
# NOTE: spec 02, addresses are created under their customer (the id is in the path).
VERSION.schemas["address.create"] = VERSION.schemas["address.create"].without("customer_id")
