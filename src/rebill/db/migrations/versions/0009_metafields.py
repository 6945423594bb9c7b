"""Metafields (spec 02 Metafield, decisions §7.2, §7.6): merchant data on another record,
unique per (owner, namespace, key).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('metafields',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('owner_resource', sa.String(length=16), nullable=False),
    sa.Column('owner_id', ID, nullable=False),
    sa.Column('namespace', sa.String(length=255), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.Column('value_type', sa.String(length=16), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_metafields_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_metafields')),
    sa.UniqueConstraint('store_id', 'owner_resource', 'owner_id', 'namespace', 'key',
                        name='uq_metafields_owner_key'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('metafields', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_metafields_store_id'), ['store_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('metafields', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_metafields_store_id'))
    op.drop_table('metafields')
