"""A test clock advance holds its store's clock for as long as it walks (a lease in real time,
renewed at every stop): a second advance of the same store meanwhile answers 409 instead of
walking from the same start, which lost one of the two advances' time (found by an audit).
Nullable, no default: no row is rewritten.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27 01:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('stores', sa.Column('clock_moving_until', sa.DateTime(), nullable=True))


def downgrade() -> None:
    # Not a batch rebuild: on SQLite that would drop the table's revision triggers (0012).
    op.execute('ALTER TABLE stores DROP COLUMN clock_moving_until')
