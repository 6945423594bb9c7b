"""The sandbox gateway's own ledger (decisions §6.2): what the "processor" has done, by
idempotency key. It stands where a real processor's records would be: written in a
transaction of its own, never in the billing run's, so a run that crashes after the gateway
answered finds the payment there on its retry instead of taking the money again."""

from sqlalchemy import Column, String, Table, UniqueConstraint

from .base import DecimalText, IdType, UtcDateTime, id_column, metadata

sandbox_payments = Table(
    "sandbox_payments",
    metadata,
    id_column(),
    Column("store_id", IdType, nullable=False, index=True),
    Column("idempotency_key", String(255), nullable=False),
    Column("operation", String(16), nullable=False),  # charge | capture | refund
    Column("reference", String(64), nullable=True),  # the caller's: charge id
    Column("amount", DecimalText(), nullable=False),
    Column("currency", String(3), nullable=False),
    Column("outcome", String(16), nullable=False),  # captured | authorized | failed | refunded
    Column("transaction_id", String(64), nullable=True),
    Column("error_type", String(64), nullable=True),
    Column("error", String(255), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("store_id", "idempotency_key", name="uq_sandbox_payments_key"),
    sqlite_autoincrement=True,
)
