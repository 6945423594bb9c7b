"""Charges keep the `analytics_data` of the checkout whose payment created them (spec 02
Checkout: "copied to the subscription, customer and charge created when the checkout is
processed"). Nullable, no default: every other charge has none, and adding the column
rewrites no row on either database.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26 18:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    op.add_column('charges', sa.Column('analytics_data', JSON, nullable=True))


def downgrade() -> None:
    op.drop_column('charges', 'analytics_data')
