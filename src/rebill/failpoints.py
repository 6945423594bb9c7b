"""Named points where a test can make this process die as a crash would (SIGKILL: no
cleanup, no rollback, no flushing), to prove that a restart finishes the work exactly once
(tests/scenarios/test_billing_crash.py), loses no webhook delivery
(tests/scenarios/test_webhook_crash.py), or runs no async batch task twice
(tests/scenarios/test_async_batch_crash.py). ``REBILL_FAILPOINT=name`` arms one point; without it
``hit`` costs one dictionary look-up. ``REBILL_FAILPOINT_SIGNAL=SIGSTOP`` freezes the process
there instead, as a paused machine would, with its transaction open and its locks held
(tests/scenarios/test_frozen_worker.py); SIGCONT lets it go on."""

from __future__ import annotations

import os
import signal
import threading


def hit(name: str) -> None:
    if os.environ.get("REBILL_FAILPOINT") == name:
        # To this thread, not the process: either signal stops (or ends) every thread, but one
        # sent to the process may be taken by another thread while this one runs on for a few
        # statements (a COMMIT among them: the frozen worker's test saw its chunk committed).
        # Sent to this thread, it acts as the call returns.
        signal.pthread_kill(threading.get_ident(), signal.Signals[os.environ.get("REBILL_FAILPOINT_SIGNAL", "SIGKILL")])
