"""Stores: the test clock's offset (decisions §6.11). A sandbox store's "now" is the real time
plus this many seconds; it only ever grows.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 13:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('stores', schema=None) as batch_op:
        batch_op.add_column(sa.Column('clock_offset_seconds', sa.BigInteger(), nullable=False,
                                      server_default=sa.text('0')))


def downgrade() -> None:
    with op.batch_alter_table('stores', schema=None) as batch_op:
        batch_op.drop_column('clock_offset_seconds')
