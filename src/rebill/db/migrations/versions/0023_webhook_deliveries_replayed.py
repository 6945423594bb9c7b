"""A delivery remembers that a replay asked for its current series of attempts, so that every
attempt of the series (the first and its retries) is marked `replay` in the log; the mark was
derived from "no attempt yet in this series, but an earlier one", which held for the first
attempt only. Not null with a server default of 0: existing rows read as never replayed.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27 00:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('webhook_deliveries',
                  sa.Column('replayed', sa.Integer(), nullable=False, server_default=sa.text('0')))
    # A replay not sent yet when the upgrade runs: what the old mark said of it (no attempt in
    # this series, an earlier one logged). Replays already retried cannot be told apart.
    op.execute("UPDATE webhook_deliveries SET replayed = 1 "
               "WHERE status = 'pending' AND attempts = 0 AND last_attempt_at IS NOT NULL")


def downgrade() -> None:
    # Not a batch rebuild, which on SQLite would copy the table: SQLite drops a column in place.
    op.execute('ALTER TABLE webhook_deliveries DROP COLUMN replayed')
