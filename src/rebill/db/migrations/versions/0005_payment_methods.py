"""Payment methods: one default per customer, and an index on the addresses that name one.

The unique partial index holds decisions §6.12 ("a customer's first method becomes the default;
`default: true` on another one moves the default") in the database: customer reads join their
default method, so a second default would repeat the customer. Rows written before it are put
right first: the oldest default of a customer stays, and a customer with methods but no default
gets its oldest one.

Deleting a payment method looks for the addresses that name it (only those block the delete),
and PostgreSQL's ON DELETE SET NULL on `addresses.payment_method_id` would otherwise scan every
address.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

methods = sa.table("payment_methods", sa.column("id", sa.Integer), sa.column("customer_id", sa.Integer),
                   sa.column("is_default", sa.Boolean), sa.column("created_at", sa.DateTime))


def _one_default_each() -> None:
    other = methods.alias("other")
    first_default = (sa.select(sa.func.min(other.c.id))
                     .where(other.c.customer_id == methods.c.customer_id, other.c.is_default.is_(True))
                     .scalar_subquery())
    op.execute(methods.update().where(methods.c.is_default.is_(True), methods.c.id != first_default)
               .values(is_default=False))
    oldest = (sa.select(other.c.id).where(other.c.customer_id == methods.c.customer_id)
              .order_by(other.c.created_at, other.c.id).limit(1).scalar_subquery())
    has_default = sa.exists().where(other.c.customer_id == methods.c.customer_id, other.c.is_default.is_(True))
    op.execute(methods.update().where(~has_default, methods.c.id == oldest).values(is_default=True))


def upgrade() -> None:
    _one_default_each()
    with op.batch_alter_table('payment_methods', schema=None) as batch_op:
        batch_op.create_index('uq_payment_methods_default_customer', ['customer_id'], unique=True,
                              sqlite_where=sa.column('is_default', sa.Boolean).is_(True),
                              postgresql_where=sa.column('is_default', sa.Boolean).is_(True))
    with op.batch_alter_table('addresses', schema=None) as batch_op:
        batch_op.create_index('ix_addresses_payment_method_id', ['payment_method_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('addresses', schema=None) as batch_op:
        batch_op.drop_index('ix_addresses_payment_method_id')
    with op.batch_alter_table('payment_methods', schema=None) as batch_op:
        batch_op.drop_index('uq_payment_methods_default_customer')
