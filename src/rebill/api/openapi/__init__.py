"""The OpenAPI 3.1 document of each API version (issue 17, docs/openapi.md), generated from the
contracts the dispatcher uses (``build.py``), served at `GET /openapi.json` (``http/docs.py``)
and written by `rebill openapi`. Made once per process and version, on first use."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from rebill.api.versions import VERSIONS

NEWEST = max(VERSIONS)


def operations() -> list[Any]:
    """The route table, as the app builds it."""
    from rebill.app import RESOURCES  # the app imports the HTTP edge, which serves the document
    return [op for module in RESOURCES for op in module.endpoints.operations]


@lru_cache(maxsize=None)
def document(version: str) -> dict[str, Any]:
    """The document of ``version`` (a name of ``VERSIONS``). Callers must not change it."""
    from .build import Builder
    return Builder(VERSIONS[version], operations()).document()


@lru_cache(maxsize=None)
def encoded(version: str) -> bytes:
    return msgspec.json.encode(document(version))
