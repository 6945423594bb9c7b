"""How 2021-01 differs from the head for products and plans (decisions §5.7, §5.8, §5.16):
change modules, list contracts and the schemas of 2021-01-only endpoints, merged by contract.py."""

from __future__ import annotations

from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema

CHANGES: tuple[Change, ...] = ()
LISTS: dict[str, ListContract] = {}
SCHEMAS: dict[str, Schema] = {}
