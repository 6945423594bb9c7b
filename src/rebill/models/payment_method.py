"""Payment methods (decisions §6.1, §6.12): the customer's ways to pay; an address may name
one through `payment_method_id`, else its customer's default pays."""

from sqlalchemy import Boolean, Column, ForeignKey, Index, String, Table

from .address import addresses
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
    # NOTE: decisions §6.12, optional on input; a method sent without one names the sandbox.
    Column("processor_name", String(32), nullable=False),
    Column("processor_customer_token", String(255), nullable=True),
    Column("processor_payment_method_token", String(255), nullable=True),
    Column("status", String(16), nullable=False),
    Column("status_reason", String(255), nullable=True),
    *timestamps(),
    sqlite_autoincrement=True,
)

# NOTE: decisions §6.12, one default per customer (migration 0005). Customer reads join their
# default method on it, so a second default would repeat the customer.
_default = payment_methods.c.is_default.is_(True)
Index("uq_payment_methods_default_customer", payment_methods.c.customer_id, unique=True,
      sqlite_where=_default, postgresql_where=_default)

# Declared with payment methods because it serves them: deleting a method looks for the
# addresses naming it, and PostgreSQL's ON DELETE SET NULL would scan every address without it.
Index("ix_addresses_payment_method_id", addresses.c.payment_method_id)
