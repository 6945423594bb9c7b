"""How 2021-01 differs from the head for collections (03-real-fields "collection (2021-01)"):
naive datetimes. 2021-01 lists and reads collections only (issue 15); its list takes the head's
filter and sorts. Merged by ``contract.py``."""

from __future__ import annotations

from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema
from rebill.api.v2021_11 import collections as head

from .changes import NaiveDatetimes


class CollectionNaiveDatetimes(NaiveDatetimes):
    """Collection datetimes render naive in UTC (decisions §2.4)."""

    kinds = ("collection", "collection_product")


CHANGES: tuple[Change, ...] = (CollectionNaiveDatetimes(),)
LISTS: dict[str, ListContract] = {"collections": head.LISTS["collections"]}
SCHEMAS: dict[str, Schema] = {}
