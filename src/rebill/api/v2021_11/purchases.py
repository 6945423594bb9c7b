"""The head (2021-11) contract of subscriptions and one-time items (decisions §5.1-§5.6, §5.16):
serializers, request schemas and list contracts of the family, merged by contract.py."""

from __future__ import annotations

from rebill.api.contract import ListContract, Serializer
from rebill.api.fields import Schema

SERIALIZERS: dict[str, Serializer] = {}
SCHEMAS: dict[str, Schema] = {}
LISTS: dict[str, ListContract] = {}
