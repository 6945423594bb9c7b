"""How 2021-01 differs from the head for bundle variants (a Rebill extension; docs/api-choices.md,
Bundles): the version's own names for platform ids and its naive datetimes. Bundle selections
are 2021-11 only (spec 01). Merged by ``contract.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.external_ids import platform_id
from rebill.api.fields import Schema
from rebill.api.v2021_11 import bundles as head

from .changes import NaiveDatetimes

KINDS = ("bundle_variant",)
_IDS = {"external_product_id": "platform_product_id", "external_variant_id": "platform_variant_id"}
# A platform id as 2021-01 shows it: an integer when it is one, else the stored string.
PLATFORM_ID: sh.Shape = {"type": ["integer", "string"]}


class BundleVariantNaiveDatetimes(NaiveDatetimes):
    """Bundle variant datetimes render naive in UTC (decisions §2.4)."""

    kinds = KINDS


class BundleVariantPlatformIds(Change):
    """Bundle variants name the catalog variant by `platform_product_id`/`platform_variant_id`
    (2021-01's flat platform ids, an integer when the id is one) instead of `external_*_id`."""

    kinds = KINDS

    def request(self, schema: Schema) -> Schema:
        return schema.renamed(**_IDS)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for head_name, old in _IDS.items():
            data[old] = platform_id(data.pop(head_name))
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        for head_name, old in _IDS.items():
            sh.replace(sh.rename(shape, head_name, old), old, PLATFORM_ID)
        return shape

    def error_names(self) -> dict[str, str]:
        return dict(_IDS)


_variants = head.LISTS["bundle_variants"]

CHANGES: tuple[Change, ...] = (BundleVariantPlatformIds(), BundleVariantNaiveDatetimes())
LISTS: dict[str, ListContract] = {
    "bundle_variants": replace(_variants, filters={
        **{name: spec for name, spec in _variants.filters.items() if name not in _IDS},
        **{old: _variants.filters[head_name] for head_name, old in _IDS.items()}}),
}
SCHEMAS: dict[str, Schema] = {}
