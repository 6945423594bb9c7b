"""`idempotency_keys.claim`: the run of the payment claim a keyed request left for the
processor's answer, so that whoever finishes that claim marks the request's key and its repeat
never pays or refunds again (domain/claimed_keys.py).

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28 15:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('idempotency_keys', sa.Column('claim', sa.String(length=64), nullable=True))
    op.create_index(op.f('ix_idempotency_keys_claim'), 'idempotency_keys', ['claim'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_idempotency_keys_claim'), table_name='idempotency_keys')
    op.drop_column('idempotency_keys', 'claim')
