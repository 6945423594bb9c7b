"""The API versions this service speaks (spec 01 Versioning)."""

from .contract import Version
from .v2021_01.contract import VERSION as V2021_01
from .v2021_11.contract import VERSION as V2021_11

VERSIONS: dict[str, Version] = {v.name: v for v in (V2021_01, V2021_11)}
