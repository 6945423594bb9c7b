"""How a background job tells of its failure. A database busy (SQLite's write lock held by
another process past its busy timeout) or away is a warning of one line: the job's next tick
or look meets it no more, and the database says what is still to do (found by an audit and a
review: each such failure was an ERROR with a traceback, one every half second from the
webhook deliverer). Anything else is an error with its traceback."""

from __future__ import annotations

import logging

from rebill.db.engine import unavailable


def log_failure(logger: logging.Logger, what: str, exc: BaseException) -> None:
    busy = getattr(exc, "busy", None)  # a billing run's stores failed (scheduler.StoresFailed), each told
    if isinstance(busy, bool):
        (logger.warning if busy else logger.error)("%s: %s", what, exc)
    elif unavailable(exc):
        logger.warning("%s: the database was busy or unreachable (%s); the next try goes on", what,
                       str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    else:
        logger.error("%s failed", what, exc_info=exc)
