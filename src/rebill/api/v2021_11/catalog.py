"""The head (2021-11) contract of products and plans (decisions §5.7, §5.8, §5.16):
serializers, request schemas and list contracts of the family, merged by contract.py."""

from __future__ import annotations

from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Schema

SERIALIZERS: dict[str, Serializer] = {}
SCHEMAS: dict[str, Schema] = {}
LISTS: dict[str, ListContract] = {}
