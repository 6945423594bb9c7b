"""A store's payment processor (issue 16): which one pays its charges, and for Stripe the
store's own keys, encrypted (domain/payment/vault.py). One row per store that chose; a store
without one is served by the sandbox gateway (decisions §6.2)."""

from sqlalchemy import Boolean, Column, ForeignKey, String, Table, Text

from .base import IdType, UtcDateTime, metadata

store_processors = Table(
    "store_processors",
    metadata,
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), primary_key=True,
           autoincrement=False),
    Column("processor", String(16), nullable=False),  # sandbox | stripe
    # Fernet tokens of the secret key (sk_...) and the webhook signing secret (whsec_...);
    # never the plain text, never shown.
    Column("secret_key", Text, nullable=True),
    Column("webhook_secret", Text, nullable=True),
    Column("key_mode", String(8), nullable=True),  # test | live: what the key's prefix said
    Column("authorize_only", Boolean, nullable=False),
    Column("api_base", String(2048), nullable=True),
    Column("updated_at", UtcDateTime(), nullable=False),
)

# The address of a store's processor webhooks (`POST /processors/stripe/events/{key}`): a random
# key rather than the store's name or id, since the address is public (issue 16). Made when the
# store first chooses Stripe and kept when it goes back to the sandbox and returns, so the
# endpoint set up in Stripe's Dashboard keeps working.
processor_endpoints = Table(
    "processor_endpoints",
    metadata,
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), primary_key=True,
           autoincrement=False),
    Column("key", String(64), nullable=False, unique=True),
    Column("created_at", UtcDateTime(), nullable=False),
)

# The processor events a store has applied (issue 16): each event id once, written in the
# transaction of its effect, so a replay or a concurrent second delivery changes nothing.
# `received_at` is real time (the purge's), never a store's test clock.
processor_events = Table(
    "processor_events",
    metadata,
    Column("store_id", IdType, ForeignKey("stores.id", ondelete="CASCADE"), primary_key=True,
           autoincrement=False),
    Column("processor", String(16), primary_key=True),
    Column("event_id", String(255), primary_key=True),
    Column("type", String(100), nullable=False),
    Column("received_at", UtcDateTime(), nullable=False, index=True),
)
