"""A long-running process keeps what it built at start out of Python's cycle collector.

A full (generation 2) collection walks every tracked object of the process. After its imports
and the app's construction a Rebill process holds 115,000-150,000 of them (SQLAlchemy's tables and
compiled constructs, the country and ZIP code data, Stripe's classes...), all alive until it
exits, and one full collection of them took 50-280 ms on the bench machine: about every 6,000
creates of a server (a pause of every request in flight) and every 1,200 charges of a billing run,
where they were 15 % of its CPU time (docs/performance.md, "The twelfth session").

`gc.freeze()` moves them to a permanent generation that collections skip, as the Python
documentation suggests for long-lived processes; what is made afterwards (about 6,000 objects
after a server's warm-up) is collected as before, and objects freed by their reference count are
freed either way. Called by the entry points of the processes, never by library code: a test
process that froze its fixtures would keep their cycles for good.
"""

from __future__ import annotations

import gc


def freeze() -> None:
    """Collect what is already garbage, then take everything alive out of future collections."""
    gc.collect()
    gc.freeze()
