"""Charges: a partial index of the charges claimed right now (few at any moment), so the billing
run can look for abandoned captures and refunds each time it runs without walking a store's
charges (domain/billing/money_back.py ``finish_abandoned``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 17:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

CLAIMED = sa.text("claimed_by IS NOT NULL")


def upgrade() -> None:
    op.create_index('ix_charges_store_claimed', 'charges', ['store_id'], unique=False,
                    postgresql_where=CLAIMED, sqlite_where=CLAIMED)


def downgrade() -> None:
    op.drop_index('ix_charges_store_claimed', table_name='charges')
