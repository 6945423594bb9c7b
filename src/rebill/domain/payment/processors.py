"""Which processor pays a store's charges, and its settings (issue 16).

A store chooses the sandbox (the default: no row) or Stripe with its own secret key, webhook
signing secret, authorize-only and API host (``rebill stores processor``). The keys are kept
encrypted (``vault.py``); ``ProcessorSettings`` is what may be shown of them, ``StripeAccount``
the decrypted keys, which only the Stripe client and the webhook endpoint use.

``gateway_for`` builds the one gateway every caller uses (the server, the command line, the
jobs): a router that sends each call to the processor of the store it names (``router.py``).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, delete, func, insert, select

from rebill.errors import ValidationFailed
from rebill.models import charges, checkouts, processor_endpoints, store_processors, stores

from ..store.model import Store
from .vault import Vault, VaultError

SANDBOX, STRIPE = "sandbox", "stripe"
# NOTE: issue 16, secret keys (sk_) and restricted keys (rk_) of either mode.
TEST_PREFIXES, LIVE_PREFIXES = ("sk_test_", "rk_test_"), ("sk_live_", "rk_live_")
# Where Stripe sends a store's events (http/processor_events.py), followed by the store's key.
EVENTS_PATH = "/processors/stripe/events/"


@dataclass(frozen=True, slots=True)
class ProcessorSettings:
    """A store's processor as it may be shown: never a key, only whether there is one."""

    processor: str = SANDBOX
    authorize_only: bool = False
    api_base: str | None = None
    key_mode: str | None = None  # test | live
    has_webhook_secret: bool = False
    updated_at: datetime | None = None
    # The key of the store's webhook address, `/processors/stripe/events/{endpoint_key}`: not a
    # secret (it is in the URL Stripe calls; the signature is what is checked), but random, so
    # the address names no store and cannot be guessed from one.
    endpoint_key: str | None = None

    @property
    def endpoint_path(self) -> str | None:
        return f"{EVENTS_PATH}{self.endpoint_key}" if self.endpoint_key else None


@dataclass(frozen=True, slots=True)
class StripeAccount:
    """A Stripe store's decrypted settings. The keys stay out of every repr."""

    store_id: int
    secret_key: str = field(repr=False)
    webhook_secret: str | None = field(repr=False)
    authorize_only: bool
    api_base: str | None

    @property
    def fingerprint(self) -> str:
        """Changes whenever a setting does (a cached client is then built again), and tells
        nothing of the key."""
        parts = (self.secret_key, self.webhook_secret or "", str(self.authorize_only), self.api_base or "")
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def settings(conn: Connection, store_id: int) -> ProcessorSettings:
    row = _row(conn, store_id)
    if row is None:
        return ProcessorSettings()
    return ProcessorSettings(row["processor"], row["authorize_only"], row["api_base"], row["key_mode"],
                             row["webhook_secret"] is not None, row["updated_at"], endpoint_key(conn, store_id))


def processor_of(conn: Connection, store_id: int) -> str:
    """The store's processor alone (what a charge records), in one primary-key read."""
    return conn.execute(select(store_processors.c.processor)
                        .where(store_processors.c.store_id == store_id)).scalar() or SANDBOX


def endpoint_key(conn: Connection, store_id: int) -> str | None:
    """The key of the store's webhook address, None before it first chose Stripe."""
    return conn.execute(select(processor_endpoints.c.key)
                        .where(processor_endpoints.c.store_id == store_id)).scalar()


def store_of_endpoint(conn: Connection, key: str) -> int | None:
    """The store whose webhook address has ``key``, if any."""
    return conn.execute(select(processor_endpoints.c.store_id).where(processor_endpoints.c.key == key)).scalar()


def _ensure_endpoint(conn: Connection, store_id: int, now: datetime) -> None:
    """The store's endpoint key, made once: kept across `--sandbox` and back, and across new keys,
    so the endpoint set up in Stripe's Dashboard keeps its address."""
    if endpoint_key(conn, store_id) is None:
        # 24 random bytes, URL-safe: 32 characters of [A-Za-z0-9_-].
        conn.execute(insert(processor_endpoints).values(store_id=store_id, key=secrets.token_urlsafe(24),
                                                        created_at=now))


def stripe_account(conn: Connection, store_id: int, vault: Vault) -> StripeAccount | None:
    """The store's Stripe settings, decrypted; None for a store on the sandbox. Raises
    VaultError when the keys cannot be read (REBILL_SECRET_KEY missing or another one)."""
    row = _row(conn, store_id)
    if row is None or row["processor"] != STRIPE:
        return None
    webhook = row["webhook_secret"]
    return StripeAccount(store_id, vault.decrypt(row["secret_key"]), vault.decrypt(webhook) if webhook else None,
                         row["authorize_only"], row["api_base"])


def _settled(conn: Connection, store_id: int, chosen: str) -> None:
    """A store changes processor only with no payment in flight: a charge or checkout claimed
    (a payment, capture or refund asked and not yet recorded, or whose answer was lost) is
    finished by asking the processor that was asked, with the same key. Found by an audit: a
    Stripe payment declined, its answer lost, was asked again of the sandbox after the switch,
    which "paid" it. Another Stripe key counts too (found by a review): idempotency keys are
    the account's. The store's row is locked first: a refund or capture checks the processor
    under the same lock, in the transaction that claims its charge (billing/money_back.py)."""
    conn.execute(select(stores.c.id).where(stores.c.id == store_id).with_for_update())
    current = processor_of(conn, store_id)
    if current == chosen == SANDBOX:
        return
    waiting = sum(conn.execute(select(func.count()).select_from(table).where(
        table.c.store_id == store_id, table.c.claimed_by.is_not(None))).scalar() or 0 for table in (charges, checkouts))
    if waiting:
        raise ValidationFailed.field("processor", f"{waiting} payment(s) of the store wait for the answer of "
                                                  f"{current}: run `rebill bill` until they are settled, then "
                                                  "change the processor")


def choose_sandbox(conn: Connection, store: Store, now: datetime) -> ProcessorSettings:
    """The sandbox gateway again; the Stripe keys are forgotten."""
    _settled(conn, store.id, SANDBOX)
    conn.execute(delete(store_processors).where(store_processors.c.store_id == store.id))
    return ProcessorSettings()


def choose_stripe(conn: Connection, store: Store, now: datetime, vault: Vault, *, secret_key: str,
                  webhook_secret: str | None, authorize_only: bool, api_base: str | None) -> ProcessorSettings:
    secret_key, webhook_secret = secret_key.strip(), (webhook_secret or "").strip() or None
    # Found by an audit: a key with a line break or a space inside was taken, and every call
    # then failed as "Stripe could not be reached" (the HTTP library refused the header).
    if any(c.isspace() for c in secret_key):
        raise ValidationFailed.field("secret_key", "has a space or a line break inside: the file must hold the key alone")
    if webhook_secret is not None and any(c.isspace() for c in webhook_secret):
        raise ValidationFailed.field("webhook_secret", "has a space or a line break inside: the file must hold the "
                                                       "secret alone")
    mode = _key_mode(secret_key)
    if mode == "live" and not vault.ready:
        raise ValidationFailed.field("secret_key", "a live key is stored only encrypted: set REBILL_SECRET_KEY "
                                                   "(a Fernet key) first; the key was not saved")
    if mode == "live" and store.sandbox:
        # NOTE: issue 16, a sandbox store moves its own clock (decisions §6.11): with a live
        # key a clock advance would take real money ahead of its date.
        raise ValidationFailed.field("secret_key", "a sandbox store takes a test key (sk_test_...), not a live one")
    if webhook_secret is not None and not webhook_secret.startswith("whsec_"):
        raise ValidationFailed.field("webhook_secret", "is not a Stripe webhook signing secret (whsec_...)")
    api_base = _api_base(api_base)
    try:
        values: dict[str, Any] = {
            "processor": STRIPE, "secret_key": vault.encrypt(secret_key),
            "webhook_secret": vault.encrypt(webhook_secret) if webhook_secret else None,
            "key_mode": mode, "authorize_only": authorize_only, "api_base": api_base, "updated_at": now}
    except VaultError as exc:
        # NOTE: issue 16, no key is ever kept in plain text, a test key neither (docs/payments.md).
        raise ValidationFailed.field("secret_key", f"{exc}; the key was not saved") from None
    _settled(conn, store.id, STRIPE)
    conn.execute(delete(store_processors).where(store_processors.c.store_id == store.id))
    conn.execute(insert(store_processors).values(store_id=store.id, **values))
    _ensure_endpoint(conn, store.id, now)
    return settings(conn, store.id)


def gateway_for(db: Any, now: Callable[[], datetime], *, secret_key: str | None = None,
                timeout: float = 30.0) -> Any:
    """The gateway of every caller: the sandbox for stores without a processor, each Stripe
    store's own client otherwise (``router.ProcessorRouter``)."""
    from .router import ProcessorRouter
    return ProcessorRouter(db, now, Vault(secret_key), timeout=timeout)


def _row(conn: Connection, store_id: int) -> Any:
    return conn.execute(select(store_processors).where(store_processors.c.store_id == store_id)).mappings().first()


def _key_mode(key: str) -> str:
    if key.startswith(LIVE_PREFIXES):
        return "live"
    if key.startswith(TEST_PREFIXES):
        return "test"
    raise ValidationFailed.field("secret_key", "is not a Stripe secret key (sk_test_..., sk_live_..., or a "
                                               "restricted rk_ key)")


def _api_base(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationFailed.field("api_base", "must be an http(s) address, e.g. https://api.stripe.com")
    return url.strip().rstrip("/")
