"""Checkouts (spec 02 Checkouts, decisions §7.3, §7.7, issue 15): the `checkouts` table, a
cart with its lines resolved from the catalog, its computed pricing, and the claim of a
payment in flight.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), 'postgresql')
CLAIMED = sa.text("claimed_by IS NOT NULL")


def upgrade() -> None:
    op.create_table('checkouts',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('token', sa.String(length=32), nullable=False),
    sa.Column('email', sa.String(length=255), nullable=True),
    sa.Column('phone', sa.String(length=64), nullable=True),
    sa.Column('note', sa.String(length=4096), nullable=True),
    sa.Column('note_attributes', JSON, nullable=False),
    sa.Column('buyer_accepts_marketing', sa.Boolean(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('discount_code', sa.String(length=255), nullable=True),
    sa.Column('discount_id', ID, nullable=True),
    sa.Column('analytics_data', JSON, nullable=True),
    sa.Column('billing_address', JSON, nullable=True),
    sa.Column('shipping_address', JSON, nullable=True),
    sa.Column('external_checkout_id', sa.String(length=64), nullable=True),
    sa.Column('external_checkout_source', sa.String(length=64), nullable=True),
    sa.Column('external_customer_id', sa.String(length=64), nullable=True),
    sa.Column('line_items', JSON, nullable=False),
    sa.Column('pricing', JSON, nullable=False),
    sa.Column('taxes_included', sa.Boolean(), nullable=False),
    sa.Column('subtotal_price', sa.String(length=40), nullable=False),
    sa.Column('total_discounts', sa.String(length=40), nullable=False),
    sa.Column('total_shipping', sa.String(length=40), nullable=False),
    sa.Column('total_tax', sa.String(length=40), nullable=False),
    sa.Column('total_price', sa.String(length=40), nullable=False),
    sa.Column('payment_processor', sa.String(length=32), nullable=True),
    sa.Column('payment_type', sa.String(length=16), nullable=True),
    sa.Column('payment_token', sa.String(length=255), nullable=True),
    sa.Column('payment_processor_customer_id', sa.String(length=255), nullable=True),
    sa.Column('payment_processor_transaction_id', sa.String(length=128), nullable=True),
    sa.Column('customer_id', ID, nullable=True),
    sa.Column('charge_id', ID, nullable=True),
    sa.Column('completed_at', sa.DateTime(), nullable=True),
    sa.Column('charge_attempts', sa.Integer(), nullable=False),
    sa.Column('claimed_by', sa.String(length=64), nullable=True),
    sa.Column('claimed_at', sa.DateTime(), nullable=True),
    sa.Column('payment', JSON, nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_checkouts_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_checkouts')),
    sa.UniqueConstraint('token', name=op.f('uq_checkouts_token')),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_checkouts_store_id'), 'checkouts', ['store_id'], unique=False)
    op.create_index('ix_checkouts_store_claimed', 'checkouts', ['store_id'], unique=False,
                    postgresql_where=CLAIMED, sqlite_where=CLAIMED)


def downgrade() -> None:
    op.drop_index('ix_checkouts_store_claimed', table_name='checkouts')
    op.drop_index(op.f('ix_checkouts_store_id'), table_name='checkouts')
    op.drop_table('checkouts')
