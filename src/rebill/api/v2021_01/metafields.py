"""How 2021-01 differs from the head for metafields (spec 02 Metafield, 03-real-fields
"metafield (2021-01)"): naive datetimes, and `/metafields/count` with the list's filters.
Merged by ``contract.py``."""

from __future__ import annotations

from dataclasses import replace

from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema
from rebill.api.v2021_11 import metafields as head

from .changes import NaiveDatetimes


class MetafieldNaiveDatetimes(NaiveDatetimes):
    """Metafield datetimes render naive in UTC (decisions §2.4)."""

    kinds = ("metafield",)


CHANGES: tuple[Change, ...] = (MetafieldNaiveDatetimes(),)
LISTS: dict[str, ListContract] = {
    # NOTE: decisions §7.6, `/metafields/count` takes the list's filters.
    "metafields": replace(head.LISTS["metafields"], count_filters=tuple(head.FILTERS)),
}
SCHEMAS: dict[str, Schema] = {}
