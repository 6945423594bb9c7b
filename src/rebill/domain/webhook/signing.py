"""The two signatures of a delivery (decisions §8.3), both keyed with the store's client
secret in its Standard Webhooks form (`whsec_` and base64):

- `X-Service-Hmac-Sha256`: the hex SHA-256 of the whole secret string followed by the raw body
  (what clients of the real service verify);
- the Standard Webhooks headers `webhook-id`, `webhook-timestamp`, `webhook-signature`, made
  by the maintained `standardwebhooks` library. For 24 hours after a rotation the signature
  carries one entry per secret, the new one first (Standard Webhooks lets a receiver accept
  any of several); the SHA-256 header uses the new secret alone.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any

from standardwebhooks.webhooks import Webhook as StandardWebhook

# NOTE: issue 14, both secrets sign for 24 hours after a rotation.
OVERLAP = timedelta(hours=24)


def sha256_header(secret: str, body: bytes) -> str:
    return hashlib.sha256(secret.encode() + body).hexdigest()


def secrets_signing(store: Any, real_now: datetime) -> list[str]:
    """The secrets that sign now: the current one, and the previous one within 24 hours of
    its rotation (real time, not a test clock: signatures are about real receivers)."""
    found = [store.client_secret]
    rotated = store.client_secret_rotated_at
    if store.previous_client_secret and rotated is not None and real_now - rotated < OVERLAP:
        found.append(store.previous_client_secret)
    return found


def headers(secrets: list[str], message_id: str, body: bytes, topic: str, sent_at: datetime) -> dict[str, str]:
    """Every header a delivery carries besides the content type. ``sent_at`` is the real time
    of this attempt (a receiver checks `webhook-timestamp` against its own clock)."""
    text = body.decode()
    at = sent_at.astimezone(timezone.utc)
    signatures = [StandardWebhook(secret).sign(message_id, at, text) for secret in secrets]
    return {
        "X-Service-Topic": topic,
        "X-Service-Hmac-Sha256": sha256_header(secrets[0], body),
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
