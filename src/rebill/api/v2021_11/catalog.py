"""The head (2021-11) contract of products and plans (decisions §5.7, §5.8, §5.16):
serializers, request schemas and list contracts of the family, merged by contract.py.

Products are keyed by `external_product_id`, a plain string here (decisions §5.16: it is the
catalog's own key and appears in paths); plans nest it as `{"ecommerce": ...}` like
subscriptions do. Either form, or a number, is accepted on input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebill.api import query as q
from rebill.api.contract import ListContract, Serializer
from rebill.api.external_ids import problem as id_problem
from rebill.api.fields import Field, Schema
from rebill.domain.catalog.model import CHANNELS, DISCOUNT_TYPES, IMAGE_SIZES, PLAN_TYPES, PREFERENCES, Plan, Product
from rebill.domain.catalog.rules import MAX_INT32

from .purchases import cadence
from .serializers import ts

# Keys whose value is an external id, and lists of them (decisions §5.16).
ID_KEYS = ("external_product_id", "external_variant_id", "platform_product_id")
ID_LISTS = ("external_variant_ids",)
NESTED = ("variants",)


def _plain(value: Any) -> Any:
    if isinstance(value, dict) and "ecommerce" in value:
        value = value["ecommerce"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        # Trimmed, as every other external id is (api/fields.py "external_id"): a product kept
        # as " 6002 " could be named by no subscription, collection or filter (found by an audit).
        return value.strip()
    return value


def plain_ids(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body with every external id as a plain string: `{"ecommerce": "7001"}`, `7001` and
    `" 7001 "` all become `"7001"` (other types are left for the schema to refuse)."""
    clean = dict(body)
    for key in ID_KEYS:
        if key in clean:
            clean[key] = _plain(clean[key])
    for key in ID_LISTS:
        if isinstance(clean.get(key), list):
            clean[key] = [_plain(v) for v in clean[key]]
    for key in NESTED:
        if isinstance(clean.get(key), list):
            clean[key] = [plain_ids(v) if isinstance(v, dict) else v for v in clean[key]]
    return clean


class CatalogSchema(Schema):
    """A schema whose external ids may come nested or as numbers (see ``plain_ids``)."""

    def parse(self, body: Mapping[str, Any], *, partial: bool = False) -> dict[str, Any]:
        return super().parse(plain_ids(body), partial=partial)


def in_path(value: str) -> str | None:
    """NOTE: a product's external id is a path segment (`/products/{external_product_id}`)."""
    return "must not contain '/'" if "/" in value else id_problem(value)


def one_of(allowed: tuple[str, ...]) -> Any:
    def check(value: str) -> str | None:
        return None if value in allowed else f"must be one of: {', '.join(allowed)}"
    return check


def _lower(value: str) -> str:
    return value.strip().lower()


def _grams(value: int) -> str | None:
    # Copied to subscriptions' 32-bit column.
    return "must not be negative" if value < 0 else "is out of range" if value > MAX_INT32 else None


# Serializers -----------------------------------------------------------------------------


def _price(value: Any) -> str | None:
    # Stored with the store currency's minor digits (decisions §2.7), so shown as stored.
    return None if value is None else str(value)


def product(p: Product) -> dict[str, Any]:
    """The catalog product (docs/api-choices.md, Products and plans)."""
    return {
        "id": p.id,
        "external_product_id": p.external_product_id,
        "title": p.title,
        "handle": p.handle,
        "product_type": p.product_type,
        "vendor": p.vendor,
        "description": p.description,
        "images": p.images,
        "requires_shipping": p.requires_shipping,
        "taxable": p.taxable,
        "variants": [{
            "external_variant_id": v.external_variant_id,
            "title": v.title,
            "price": _price(v.price),
            "sku": v.sku,
            "grams": v.grams,
            "requires_shipping": v.requires_shipping,
            "taxable": v.taxable,
            "image": v.image,
        } for v in p.variants],
        "created_at": ts(p.created_at),
        "updated_at": ts(p.updated_at),
    }


def plan(p: Plan) -> dict[str, Any]:
    """Decisions §5.8 with every field of spec 03 plan (2021-11)."""
    channels = p.channel_settings or {}
    prefs = p.subscription_preferences
    return {
        "id": p.id,
        "title": p.title,
        "type": p.type,
        "external_product_id": {"ecommerce": p.external_product_id},
        "external_variant_ids": p.external_variant_ids,
        "has_variant_restrictions": bool(p.external_variant_ids),
        "discount_amount": _price(p.discount_amount),
        "discount_type": p.discount_type,
        "channel_settings": {c: {"display": bool(channels.get(c, {}).get("display", True))} for c in CHANNELS},
        "sort_order": p.sort_order,
        "subscription_preferences": None if prefs is None else {name: prefs.get(name) for name in PREFERENCES},
        # NOTE: spec 03 schema only. Platform selling plans are not modelled: nothing links to one.
        "external_plan_group_id": None,
        "external_plan_id": None,
        "external_plan_name": None,
        # A deleted plan is gone (decisions §5.16), so no plan shown has been deleted.
        "deleted_at": None,
        "created_at": ts(p.created_at),
        "updated_at": ts(p.updated_at),
    }


SERIALIZERS: dict[str, Serializer] = {"product": product, "plan": plan}


# Request bodies --------------------------------------------------------------------------

# A size sent null is no image of that size: the 2021-01 product shows every size, null when
# not given, and a client sends that back (found by an audit: 422 `cannot be null`).
IMAGES = Schema(*(Field(size, "str", max_length=2048) for size in IMAGE_SIZES))


def _given_sizes(images: dict[str, Any]) -> dict[str, Any] | None:
    """The sizes given; none given is no image (found by an audit: the 2021-01 product of no
    image sent back as shown stored `{}` for null, an update and a `product/updated`)."""
    return {size: url for size, url in images.items() if url is not None} or None


IMAGES_FIELD = Field("images", "object", items=IMAGES, convert=_given_sizes)


VARIANT = Schema(
    Field("external_variant_id", "str", required=True, nullable=False, min_length=1, max_length=64,
          check=id_problem),
    Field("title", "str"),
    # The store currency's minor digits are checked by the domain.
    Field("price", "money", decimals=None),
    Field("sku", "str"),
    Field("grams", "int", check=_grams),
    Field("requires_shipping", "bool"),
    Field("taxable", "bool"),
    Field("image", "str", max_length=2048),
)
PRODUCT_FIELDS = (
    Field("title", "str", required=True, nullable=False, min_length=1),
    Field("handle", "str"),
    Field("product_type", "str"),
    Field("vendor", "str"),
    Field("description", "str", max_length=4096),
    IMAGES_FIELD,
    Field("requires_shipping", "bool", nullable=False),
    Field("taxable", "bool", nullable=False),
    Field("variants", "list", nullable=False, items=VARIANT),
)
EXTERNAL_PRODUCT_ID = Field("external_product_id", "str", required=True, nullable=False, min_length=1,
                            max_length=64, check=in_path)

PREFERENCES_SCHEMA = Schema(
    cadence("charge_interval_frequency"),
    # Any case in, lower case out (decisions §5.16); the domain checks the value.
    Field("interval_unit", "str", max_length=16),
    cadence("order_interval_frequency"),
    cadence("order_day_of_month"),
    cadence("order_day_of_week"),
    cadence("cutoff_day_of_month"),
    cadence("cutoff_day_of_week"),
    cadence("expire_after_specific_number_of_charges"),
    Field("apply_cutoff_date_to_checkout", "bool", nullable=False),
)
CHANNEL = Schema(Field("display", "bool", nullable=False))
CHANNEL_SETTINGS = Schema(*(Field(channel, "object", nullable=False, items=CHANNEL) for channel in CHANNELS))
PLAN_FIELDS = (
    Field("title", "str", required=True, nullable=False, min_length=1),
    Field("type", "str", required=True, nullable=False, convert=_lower, check=one_of(PLAN_TYPES)),
    Field("discount_amount", "money", decimals=None),
    Field("discount_type", "str", convert=_lower, check=one_of(DISCOUNT_TYPES)),
    Field("channel_settings", "object", items=CHANNEL_SETTINGS),
    Field("sort_order", "int", nullable=False),
    Field("subscription_preferences", "object", items=PREFERENCES_SCHEMA),
    # `[]` for none: a null is refused on create and update alike (found by an audit: an update
    # took it as `[]`, a create answered `cannot be null`).
    Field("external_variant_ids", "list", items="str", nullable=False),
)

SCHEMAS: dict[str, Schema] = {
    "product.create": CatalogSchema(EXTERNAL_PRODUCT_ID, *PRODUCT_FIELDS),
    # The external id is the product's key: an update does not move it.
    "product.update": CatalogSchema(*PRODUCT_FIELDS),
    "plan.create": CatalogSchema(EXTERNAL_PRODUCT_ID, *PLAN_FIELDS),
    "plan.update": CatalogSchema(Field("external_product_id", "str", nullable=False, min_length=1, max_length=64),
                                 *PLAN_FIELDS),
    # A bulk update item names its plan (required: checked with the item, partial otherwise).
    "plan.bulk_update": CatalogSchema(Field("id", "int", nullable=False),
                                      Field("external_product_id", "str", nullable=False, min_length=1,
                                            max_length=64),
                                      *PLAN_FIELDS),
}


# Lists -----------------------------------------------------------------------------------


@q.typed(type="array", items={"type": "string"}, minItems=1, maxItems=q.MAX_IDS)
def external_ids(value: str) -> list[str]:
    """Comma-separated external ids (strings: they need not be numbers)."""
    parts = [p.strip() for p in q.text(value).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"Invalid value: {value}. Must be comma-separated ids")
    if len(parts) > q.MAX_IDS:  # as sent, repeats included, as the document's maxItems counts
        raise ValueError(f"Invalid value: at most {q.MAX_IDS} ids at a time")
    return list(dict.fromkeys(parts))


LISTS: dict[str, ListContract] = {
    # NOTE: spec 01 Sorting has no Product row; id, created_at and updated_at as for customers.
    "products": ListContract(
        plural="products",
        kind="product",
        filters={
            **q.window("created_at", "updated_at"),
            "ids": ("ids", q.ids),
            "external_product_ids": ("external_product_ids", external_ids),
        },
        sorts=("id", "created_at", "updated_at"),
        default_sort="id-desc",
    ),
    # NOTE: spec 01 Sorting, Plan: id-desc by default, id and updated_at; decisions §5.8 filters.
    "plans": ListContract(
        plural="plans",
        kind="plan",
        filters={
            **q.window("updated_at"),
            "ids": ("ids", q.ids),
            "external_product_id": ("external_product_id", q.text),
            "type": ("type", q.choice(*PLAN_TYPES)),
        },
        sorts=("id", "updated_at"),
        default_sort="id-desc",
    ),
}
