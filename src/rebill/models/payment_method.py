"""Payment methods (decisions §6.1). Endpoints come with the payments issue; addresses
already point at them and customers and addresses can include them."""

from sqlalchemy import Boolean, Column, ForeignKey, String, Table

from .base import IdType, JsonType, id_column, metadata, store_column, timestamps

payment_methods = Table(
    "payment_methods",
    metadata,
    id_column(),
    store_column(),
    Column("customer_id", IdType, ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("billing_address", JsonType, nullable=True),
    Column("is_default", Boolean, nullable=False),
    Column("payment_type", String(32), nullable=False),
    Column("payment_details", JsonType, nullable=True),
    Column("processor_name", String(32), nullable=False),
    Column("processor_customer_token", String(255), nullable=True),
    Column("processor_payment_method_token", String(255), nullable=True),
    Column("status", String(16), nullable=False),
    Column("status_reason", String(255), nullable=True),
    *timestamps(),
    sqlite_autoincrement=True,
)
