"""How a background job tells of its failure. A database busy (SQLite's write lock held by
another process past its busy timeout) or away is a warning of one line: the job's next tick
or look meets it no more, and the database says what is still to do (found by an audit and a
review: each such failure was an ERROR with a traceback, one every half second from the
webhook deliverer). Anything else is an error with its traceback."""

from __future__ import annotations

import logging

from rebill.db.engine import unavailable


class StoresFailed(Exception):
    """Some stores of a billing run failed (each logged); the others were billed
    (``processed`` charges). ``busy``: every failure was the database busy or away."""

    def __init__(self, store_ids: list[int], processed: int, busy: bool = False) -> None:
        super().__init__(f"the billing run of {len(store_ids)} store(s) failed: {store_ids}; "
                         f"{processed} charge(s) of the others processed")
        self.store_ids, self.processed, self.busy = store_ids, processed, busy


def busy(exc: BaseException) -> bool:
    """Whether a job's failure was the database's, busy or away (told as one warning line)."""
    return exc.busy if isinstance(exc, StoresFailed) else unavailable(exc)


def log_failure(logger: logging.Logger, what: str, exc: BaseException) -> None:
    if isinstance(exc, StoresFailed):  # each store's failure was told already, with its own
        if not exc.busy:  # the database's, each a warning line already: no second line
            logger.error("%s: %s", what, exc)
    elif unavailable(exc):
        logger.warning("%s: the database was busy or unreachable (%s); the next try goes on", what,
                       str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    else:
        logger.error("%s failed", what, exc_info=exc)
