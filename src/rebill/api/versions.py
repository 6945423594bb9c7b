"""The API versions this service speaks (spec 01 Versioning)."""

from .contract import Version
from .v2021_01.contract import VERSION as V2021_01
from .v2021_11.contract import VERSION as V2021_11

VERSIONS: dict[str, Version] = {v.name: v for v in (V2021_01, V2021_11)}
# When no store is known (401, 426 before auth, a request the HTTP parser refuses), responses
# name the oldest version, the default of new stores (decisions §1.3, §2.8).
FALLBACK_VERSION = "2021-01"
