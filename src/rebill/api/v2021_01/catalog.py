"""How 2021-01 differs from the head for products and plans (decisions §5.7, §5.8, §5.16):
change modules, list contracts and the schemas of 2021-01-only endpoints, merged by contract.py.

2021-01 has no plan endpoints (spec 01 Plans are 2021-11). Its deprecated product endpoints
(spec 01 and 02 Versioning) show a product with the purchase options its plans give
(`subscription_defaults`, spec 03 product (2021-01)) and write those options as plans."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rebill.api import query as q
from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.external_ids import platform_id
from rebill.api.fields import Field, Schema
from rebill.api.v2021_11.catalog import IMAGES_FIELD, CatalogSchema, in_path, one_of
from rebill.api.v2021_11.catalog import LISTS as HEAD_LISTS
from rebill.api.v2021_11.shapes.catalog import DAYS, FREQUENCY
from rebill.domain.catalog.derived import derive
from rebill.domain.catalog.model import DISCOUNT_TYPES, IMAGE_SIZES, INTERVAL_UNITS
from rebill.domain.catalog.purchase_options import STOREFRONT

from .changes import NaiveDatetimes


def _number(amount: Decimal | None) -> int | float:
    """NOTE: spec 03 product (2021-01), `discount_amount` is a JSON number (0 for none). Only
    the rendering goes through float: the amount has at most two places and twelve digits,
    which a float's shortest repr gives back exactly."""
    if amount is None:
        return 0
    return int(amount) if amount == amount.to_integral_value() else float(amount)


class ProductNaiveDatetimes(NaiveDatetimes):
    """Product datetimes render naive (decisions §2.4)."""

    kinds = ("product",)


class ProductPlatformIds(Change):
    """Products carry the flat `platform_product_id` and its older copy `product_id` (integers
    for numeric platform ids) instead of `external_product_id`."""

    kinds = ("product",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        # NOTE: spec 03 product (2021-01), integers; a custom platform's id stays a string.
        data["platform_product_id"] = data["product_id"] = platform_id(data.pop("external_product_id"))
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        # NOTE: spec 03 product (2021-01), integers; a custom platform's id stays a string.
        platform = {"type": ["integer", "string"]}
        return sh.add(sh.drop(shape, "external_product_id"), {"platform_product_id": platform, "product_id": platform})

    def error_names(self) -> dict[str, str]:
        return {"external_product_id": "platform_product_id"}


class ProductPurchaseOptions(Change):
    """Products show how they may be bought as `subscription_defaults`, and the subscription
    discount as `discount_amount` (a number, 0 for none) and `discount_type`, all read from the
    product's plans (which the 2021-11 plan endpoints replace)."""

    kinds = ("product",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        derived = derive(obj.plans)
        o = derived.options
        data["discount_amount"] = _number(derived.discount_amount)
        data["discount_type"] = derived.discount_type or "percentage"
        data["subscription_defaults"] = {
            "apply_cutoff_date_to_checkout": o.apply_cutoff_date_to_checkout,
            "charge_interval_frequency": o.charge_interval_frequency,
            "cutoff_day_of_month": o.cutoff_day_of_month,
            "cutoff_day_of_week": o.cutoff_day_of_week,
            "expire_after_specific_number_of_charges": o.expire_after_specific_number_of_charges,
            # NOTE: 03-real-fields product (2021-01), schema only: the product's handle, and the
            # first of the order frequencies (the one a storefront offers first), null without.
            "handle": data.get("handle"),
            "order_interval_frequency": (o.order_interval_frequency_options or [None])[0],
            # Not kept by the catalog (docs/api-choices.md, Products and plans).
            "modifiable_properties": [],
            "number_charges_until_expiration": o.expire_after_specific_number_of_charges,
            "order_day_of_month": o.order_day_of_month,
            "order_day_of_week": o.order_day_of_week,
            # Strings, as the real service sends them.
            "order_interval_frequency_options": [str(f) for f in o.order_interval_frequency_options],  # type: ignore[union-attr]
            "order_interval_unit": o.order_interval_unit,
            "storefront_purchase_options": o.storefront_purchase_options,
        }
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        # The first recurring plan's preferences (its bounds), null where the product has none.
        frequency, limit = sh.nullable(FREQUENCY), sh.nullable(sh.integer(minimum=1))
        defaults = sh.obj({
            "apply_cutoff_date_to_checkout": sh.boolean(),
            "charge_interval_frequency": frequency,
            **DAYS,
            "expire_after_specific_number_of_charges": limit,
            "handle": sh.nullable(sh.string()),
            "order_interval_frequency": frequency,
            "modifiable_properties": sh.array(sh.string()),
            "number_charges_until_expiration": limit,
            "order_interval_frequency_options": sh.array(sh.string(pattern=r"^[0-9]+$")),
            "order_interval_unit": sh.nullable(sh.enum(*INTERVAL_UNITS)),
            "storefront_purchase_options": sh.enum(*STOREFRONT),
        })
        # NOTE: spec 03 product (2021-01), `discount_amount` is a JSON number, 0 for none.
        return sh.add(shape, {"discount_amount": sh.number(minimum=0), "discount_type": sh.enum(*DISCOUNT_TYPES),
                              "subscription_defaults": defaults})


class ProductWithoutVariants(Change):
    """Products show no variants, vendor, product type, description or shipping and tax flags
    (the platform's product keeps them); they show `collection_id` (null)."""

    kinds = ("product",)
    HEAD_ONLY = ("variants", "vendor", "product_type", "description", "requires_shipping", "taxable")

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for name in self.HEAD_ONLY:
            data.pop(name, None)
        data["collection_id"] = None
        # NOTE: 03-real-fields product (2021-01), `images` is an object of the four sizes: every
        # one shown, null when not given (found by an audit: only the sizes given were there).
        data["images"] = {size: (data.get("images") or {}).get(size) for size in IMAGE_SIZES}
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        shape = sh.replace(shape, "images", sh.obj({size: sh.nullable(sh.string()) for size in IMAGE_SIZES}))
        return sh.add(sh.drop(shape, *self.HEAD_ONLY), {"collection_id": sh.null()})


CHANGES: tuple[Change, ...] = (ProductNaiveDatetimes(), ProductPlatformIds(), ProductPurchaseOptions(),
                               ProductWithoutVariants())

_products = HEAD_LISTS["products"]
LISTS: dict[str, ListContract] = {
    # NOTE: spec 02 Sorting (Product: id, created_at, updated_at, title), Include (collections,
    # metafields) and Cursor paging (`platform_product_ids` is a filter of /products).
    "products": ListContract(
        plural="products",
        kind="product",
        filters={
            **q.window("created_at", "updated_at"),
            "ids": ("ids", q.ids),
            "platform_product_ids": ("external_product_ids", _products.filters["external_product_ids"][1]),
        },
        sorts=("id", "created_at", "updated_at", "title"),
        default_sort="id-desc",
        includes=("collections", "metafields"),
        text_sorts=("title",),
    ),
}

SUBSCRIPTION_DEFAULTS = Schema(
    Field("storefront_purchase_options", "str", nullable=False, convert=lambda v: v.strip().lower(),
          check=one_of(STOREFRONT)),
    Field("order_interval_unit", "str", max_length=16),
    Field("order_interval_frequency_options", "list", nullable=False, items="int"),
    Field("charge_interval_frequency", "int"),
    Field("order_day_of_month", "int"),
    Field("order_day_of_week", "int"),
    Field("cutoff_day_of_month", "int"),
    Field("cutoff_day_of_week", "int"),
    Field("expire_after_specific_number_of_charges", "int"),
    # The deprecated name of the same limit (spec 03 shows both).
    Field("number_charges_until_expiration", "int", key="expire_after_specific_number_of_charges"),
    Field("apply_cutoff_date_to_checkout", "bool", nullable=False),
)
PRODUCT_FIELDS = (
    Field("title", "str", nullable=False, min_length=1),
    Field("handle", "str"),
    IMAGES_FIELD,
    # A number or a string; the domain checks it against the type and the store currency.
    Field("discount_amount", "money", decimals=None),
    Field("discount_type", "str", convert=lambda v: v.strip().lower(), check=one_of(DISCOUNT_TYPES)),
    Field("subscription_defaults", "object", nullable=False, items=SUBSCRIPTION_DEFAULTS),
)

SCHEMAS: dict[str, Schema] = {
    # NOTE: decisions §5.16, the 2021-01 product body.
    "product_v1.create": CatalogSchema(
        Field("platform_product_id", "str", key="external_product_id", required=True, nullable=False,
              min_length=1, max_length=64, check=in_path),
        *PRODUCT_FIELDS),
    "product_v1.update": CatalogSchema(*PRODUCT_FIELDS),
}
