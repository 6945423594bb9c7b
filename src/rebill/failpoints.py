"""Named points where a test can make this process die as a crash would (SIGKILL: no
cleanup, no rollback, no flushing), to prove that a restart finishes the work exactly once
(tests/scenarios/test_billing_crash.py), loses no webhook delivery
(tests/scenarios/test_webhook_crash.py), or runs no async batch task twice
(tests/scenarios/test_async_batch_crash.py). ``REBILL_FAILPOINT=name`` arms one point; without it
``hit`` costs one dictionary look-up."""

from __future__ import annotations

import os
import signal


def hit(name: str) -> None:
    if os.environ.get("REBILL_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
