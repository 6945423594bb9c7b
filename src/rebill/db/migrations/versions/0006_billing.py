"""Billing: orders and their items, the sandbox gateway's ledger, and the processing columns
of charges (the method used, when an authorization was made, the claim of a run).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 14:10:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sandbox_payments',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('idempotency_key', sa.String(length=255), nullable=False),
    sa.Column('operation', sa.String(length=16), nullable=False),
    sa.Column('reference', sa.String(length=64), nullable=True),
    sa.Column('amount', sa.String(length=40), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('transaction_id', sa.String(length=64), nullable=True),
    sa.Column('error_type', sa.String(length=64), nullable=True),
    sa.Column('error', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sandbox_payments')),
    sa.UniqueConstraint('store_id', 'idempotency_key', name='uq_sandbox_payments_key'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('sandbox_payments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sandbox_payments_store_id'), ['store_id'], unique=False)

    op.create_table('orders',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('customer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('address_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('charge_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('type', sa.String(length=16), nullable=False),
    sa.Column('is_prepaid', sa.Boolean(), nullable=False),
    sa.Column('sequence', sa.Integer(), nullable=False),
    sa.Column('scheduled_at', sa.Date(), nullable=False),
    sa.Column('processed_at', sa.DateTime(), nullable=True),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('line_items', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('shipping_lines', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('tax_lines', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('discounts', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('billing_address', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('shipping_address', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('order_attributes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('note', sa.String(length=4096), nullable=True),
    sa.Column('tags', sa.String(length=1024), nullable=True),
    sa.Column('taxable', sa.Boolean(), nullable=False),
    sa.Column('subtotal_price', sa.String(length=40), nullable=False),
    sa.Column('total_discounts', sa.String(length=40), nullable=False),
    sa.Column('total_line_items_price', sa.String(length=40), nullable=False),
    sa.Column('total_tax', sa.String(length=40), nullable=False),
    sa.Column('total_shipping', sa.String(length=40), nullable=False),
    sa.Column('total_price', sa.String(length=40), nullable=False),
    sa.Column('total_weight_grams', sa.Integer(), nullable=False),
    sa.Column('external_order_id', sa.String(length=64), nullable=True),
    sa.Column('external_order_name', sa.String(length=64), nullable=True),
    sa.Column('external_order_number', sa.String(length=64), nullable=True),
    sa.Column('error', sa.String(length=1024), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_orders_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_orders')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_orders_customer_id'), ['customer_id'], unique=False)
        batch_op.create_index('ix_orders_store_address', ['store_id', 'address_id'], unique=False)
        batch_op.create_index('ix_orders_store_charge', ['store_id', 'charge_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_orders_store_id'), ['store_id'], unique=False)
        batch_op.create_index('ix_orders_store_status_date', ['store_id', 'status', 'scheduled_at'], unique=False)

    op.create_table('order_items',
    sa.Column('order_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('purchase_item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.ForeignKeyConstraint(['order_id'], ['orders.id'], name=op.f('fk_order_items_order_id_orders'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('order_id', 'purchase_item_id', name=op.f('pk_order_items'))
    )
    with op.batch_alter_table('order_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_order_items_purchase_item_id'), ['purchase_item_id'], unique=False)

    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.add_column(sa.Column('payment_method_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True))
        batch_op.add_column(sa.Column('authorized_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('claimed_by', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('claimed_at', sa.DateTime(), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_column('claimed_at')
        batch_op.drop_column('claimed_by')
        batch_op.drop_column('authorized_at')
        batch_op.drop_column('payment_method_id')

    with op.batch_alter_table('order_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_order_items_purchase_item_id'))

    op.drop_table('order_items')
    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.drop_index('ix_orders_store_status_date')
        batch_op.drop_index(batch_op.f('ix_orders_store_id'))
        batch_op.drop_index('ix_orders_store_charge')
        batch_op.drop_index(batch_op.f('ix_orders_customer_id'))
        batch_op.drop_index('ix_orders_store_address')

    op.drop_table('orders')
    with op.batch_alter_table('sandbox_payments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sandbox_payments_store_id'))

    op.drop_table('sandbox_payments')
