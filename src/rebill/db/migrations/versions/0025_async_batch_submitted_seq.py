"""Batches sent for processing in one second ran in id order, not in the order they were sent
(`submitted_at` keeps whole seconds): the order of sending, kept beside it (found by an audit).
Nullable, no default: no row is rewritten; batches waiting at the upgrade go by
`submitted_at` and id, as before.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 19:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('async_batches', sa.Column('submitted_seq', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # Not a batch rebuild: on SQLite that would drop the table's revision triggers (0012).
    op.execute('ALTER TABLE async_batches DROP COLUMN submitted_seq')
