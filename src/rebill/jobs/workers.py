"""What a job runner calls itself in the claims it makes (`claimed_by`, 64 characters)."""

from __future__ import annotations

import os
import socket
import uuid

# A host's name may take 64 characters itself (a container's often does): it is cut, and the
# process id and a random part keep every runner's name its own.
HOST_CHARACTERS = 40


def worker_name() -> str:
    """`<host>:<pid>:<random>`, at most 61 characters, never another runner's."""
    return f"{socket.gethostname()[:HOST_CHARACTERS]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
