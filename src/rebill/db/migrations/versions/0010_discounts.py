"""Discounts (issue 9): codes unique case-insensitively, discounts applied to one queued
charge, and the uses of a discount by successful charges.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    with op.batch_alter_table('discounts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('code_key', sa.String(length=255), nullable=True))
    op.execute("UPDATE discounts SET code_key = lower(code)")
    with op.batch_alter_table('discounts', schema=None) as batch_op:
        batch_op.alter_column('code_key', existing_type=sa.String(length=255), nullable=False)
        batch_op.drop_constraint('uq_discounts_store_code', type_='unique')
        batch_op.create_unique_constraint('uq_discounts_store_code_key', ['store_id', 'code_key'])

    op.create_table('charge_discounts',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('address_id', ID, nullable=False),
    sa.Column('scheduled_at', sa.Date(), nullable=False),
    sa.Column('discount_id', ID, nullable=False),
    sa.Column('basis', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['address_id'], ['addresses.id'], name=op.f('fk_charge_discounts_address_id_addresses'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['discount_id'], ['discounts.id'],
                            name=op.f('fk_charge_discounts_discount_id_discounts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_charge_discounts_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_charge_discounts')),
    sa.UniqueConstraint('address_id', 'scheduled_at', name='uq_charge_discounts_address_date'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('charge_discounts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_charge_discounts_discount_id'), ['discount_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_charge_discounts_store_id'), ['store_id'], unique=False)

    op.create_table('discount_redemptions',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('discount_id', ID, nullable=False),
    sa.Column('charge_id', ID, nullable=False),
    sa.Column('customer_id', ID, nullable=False),
    sa.Column('address_id', ID, nullable=False),
    sa.Column('via', sa.String(length=8), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['discount_id'], ['discounts.id'],
                            name=op.f('fk_discount_redemptions_discount_id_discounts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_discount_redemptions_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_discount_redemptions')),
    sa.UniqueConstraint('charge_id', name='uq_discount_redemptions_charge'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('discount_redemptions', schema=None) as batch_op:
        batch_op.create_index('ix_discount_redemptions_address_discount', ['address_id', 'discount_id'], unique=False)
        batch_op.create_index('ix_discount_redemptions_discount_customer', ['discount_id', 'customer_id'],
                              unique=False)
        batch_op.create_index(batch_op.f('ix_discount_redemptions_store_id'), ['store_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('discount_redemptions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_discount_redemptions_store_id'))
        batch_op.drop_index('ix_discount_redemptions_discount_customer')
        batch_op.drop_index('ix_discount_redemptions_address_discount')
    op.drop_table('discount_redemptions')
    with op.batch_alter_table('charge_discounts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_charge_discounts_store_id'))
        batch_op.drop_index(batch_op.f('ix_charge_discounts_discount_id'))
    op.drop_table('charge_discounts')
    with op.batch_alter_table('discounts', schema=None) as batch_op:
        batch_op.drop_constraint('uq_discounts_store_code_key', type_='unique')
        batch_op.create_unique_constraint('uq_discounts_store_code', ['store_id', 'code'])
        batch_op.drop_column('code_key')
