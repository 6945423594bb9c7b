"""A store's payment processor (issue 16): sandbox or Stripe, with the store's Stripe secret key
and webhook signing secret encrypted (Fernet, REBILL_SECRET_KEY), authorize-only and the API
host. Stores without a row keep the sandbox gateway.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('store_processors',
    sa.Column('store_id', ID, autoincrement=False, nullable=False),
    sa.Column('processor', sa.String(length=16), nullable=False),
    sa.Column('secret_key', sa.Text(), nullable=True),
    sa.Column('webhook_secret', sa.Text(), nullable=True),
    sa.Column('key_mode', sa.String(length=8), nullable=True),
    sa.Column('authorize_only', sa.Boolean(), nullable=False),
    sa.Column('api_base', sa.String(length=2048), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_store_processors_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('store_id', name=op.f('pk_store_processors')),
    )


def downgrade() -> None:
    op.drop_table('store_processors')
