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
