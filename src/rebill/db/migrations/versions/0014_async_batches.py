"""Async batches and their tasks (spec 01/02, decisions §7.7, issue 15).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
