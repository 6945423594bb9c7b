"""How 2021-01 differs from the head for charges (spec 01 Charge, decisions §5.9-§5.13):
change modules, list contracts and the schemas of 2021-01-only endpoints, merged by contract.py."""

from __future__ import annotations

from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema

CHANGES: tuple[Change, ...] = ()
LISTS: dict[str, ListContract] = {}
SCHEMAS: dict[str, Schema] = {}
